#include "fvi/optim/early_stopping.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

using Catch::Contains;
using fvi::EarlyStopping;
using fvi::EarlyStoppingOptions;

TEST_CASE("early stopping waits `patience` evaluations without improvement", "[optim][early_stopping]") {
  EarlyStoppingOptions opt;
  opt.patience = 3;
  EarlyStopping es(opt);
  const std::vector<double> objective = {5, 4, 3, 3.5, 3.2, 2.9, 3.0, 3.1, 2.95, 4.0};
  std::vector<bool> stops;
  for (double v : objective) stops.push_back(es.update(v));
  // Best 2.9 at index 5; 3.0, 3.1, 2.95 do not improve -> stop after index 8.
  CHECK(stops == std::vector<bool>{false, false, false, false, false, false, false, false, true, true});
  CHECK(es.best() == 2.9);
  CHECK(es.best_iteration() == 5);
  CHECK(es.iteration() == 10);
}

TEST_CASE("early stopping: min_delta, relative deltas and NaN objectives", "[optim][early_stopping]") {
  EarlyStoppingOptions opt;
  opt.patience = 2;
  opt.min_delta = 0.1;
  EarlyStopping es(opt);
  es.update(10);
  CHECK(es.improved());
  es.update(9.95);  // not better by 0.1
  CHECK_FALSE(es.improved());
  CHECK(es.update(std::nan("")));  // NaN never improves: second miss -> stop
  CHECK(es.best() == 10);

  opt.relative = true;
  opt.min_delta = 0.01;
  EarlyStopping rel(opt);
  rel.update(1000);
  rel.update(995);  // 0.5% better: below the 1% threshold
  CHECK_FALSE(rel.improved());
  rel.update(985);
  CHECK(rel.improved());

  opt.patience = 0;
  CHECK_THROWS_WITH(EarlyStopping(opt), Contains("patience must be at least 1"));
}
