#pragma once
// What `fvic report` draws, read from a run's output directory (docs/user-guide.md, "The
// report"): the run's own record (posterior.json's verdict, k-hat, criterion), the model and its
// plan (OUT/model.fvi, OUT/plan.json), the per-round metrics (metrics.csv) and per-silo traffic
// (silos.csv), the posterior table and marginals summarised from draws.csv (histograms, never the
// draws themselves, so a 159k-parameter run's page stays small), and each marginal's prior where
// the model states it with numbers. One JSON document; the page's script (report/page.js) draws
// it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fvic::driver {

struct ReportLimits {
  size_t marginals = 24;      // histograms drawn (the first elements of each variable first)
  size_t table_rows = 500;    // rows of the posterior table
  int bins = 30;              // per histogram
  int prior_points = 120;     // per prior curve
};

// Throws std::runtime_error naming the file when OUT has no draws.csv and no metrics.csv, or a
// file it has cannot be read.
nlohmann::ordered_json collect_report_data(const std::string& out, const ReportLimits& limits = {});

// A prior the model states with numbers, `sigma ~ normal(0, 2.5)`, for the variable's marginal:
// the distribution, its arguments and the variable's declared bounds (NaN: none).
struct StatedPrior {
  std::string variable, distribution;
  std::vector<double> arguments;
  double lower, upper;
};
// The model-block statements `x ~ dist(numbers)` on a whole parameter, from the model's text.
std::vector<StatedPrior> stated_priors(const std::string& model_path);

// The prior's density on `x` (the declared bounds truncate it and renormalise); empty when the
// distribution is not one whose density and tail the runtime has for literal arguments.
std::vector<double> prior_density(const StatedPrior& prior, const std::vector<double>& x);

}  // namespace fvic::driver
