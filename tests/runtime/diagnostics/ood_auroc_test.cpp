// The OOD AUROC against pair counts worked by hand and against the binormal closed form.
#include "fvi/diagnostics/ood_auroc.h"

#include <cmath>
#include <random>

#include <catch2/catch.hpp>

using fvi::diagnostics::ood_auroc;

TEST_CASE("the OOD AUROC counts the pairs an OOD row wins, ties half", "[ood]") {
  CHECK(ood_auroc({1, 2}, {3, 4}) == 1.0);
  CHECK(ood_auroc({3, 4}, {1, 2}) == 0.0);
  // Pairs (in, out): (1, 2) won, (1, 1) tied, (3, 2) lost, (3, 1) lost: (1 + 0.5) / 4.
  CHECK(ood_auroc({1, 3}, {2, 1}) == Approx(0.375).epsilon(1e-15));
  const std::vector<double> same{0.2, 0.5, 0.5, 0.9};
  CHECK(ood_auroc(same, same) == 0.5);
  CHECK_THROWS_AS(ood_auroc({}, {1}), std::invalid_argument);
  CHECK_THROWS_AS(ood_auroc({1}, {std::nan("")}), std::invalid_argument);
}

TEST_CASE("scores N(0, 1) against N(d, 1) give Phi(d / sqrt 2)", "[ood]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  const int n = 4000;
  for (double d : {0.0, 0.5, 1.5}) {
    std::vector<double> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = normal(rng), out[i] = d + normal(rng);
    const double exact = 0.5 * std::erfc(-d / 2);  // Phi(d / sqrt 2)
    // The AUROC's standard error with 4000 rows a side is at most sqrt((1/4000 + 1/4000) / 12) = 0.0065
    // (Hanley and McNeil 1982 at AUC 0.5, smaller beyond): 0.026 is four of them.
    INFO("d " << d);
    CHECK(std::abs(ood_auroc(in, out) - exact) < 0.026);
  }
}
