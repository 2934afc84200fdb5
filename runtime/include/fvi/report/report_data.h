#pragma once
// What a run's report draws (`fvic report OUT`, and the page every run writes at its end:
// docs/user-guide.md, "The report"), read from its output directory: the run's own record
// (posterior.json's verdict, k-hat, criterion), the model and its plan (OUT/model.fvi,
// OUT/plan.json), the per-round metrics (metrics.csv) and per-silo traffic (silos.csv), the
// posterior table and marginals summarised from draws.csv (histograms, never the draws
// themselves, so a 159k-parameter run's page stays small), and each marginal's prior where the
// model states it with numbers (the plan's "stated_priors"). One JSON document; the page's script
// (report/page.js) draws it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fvi::report {

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
// The plan's "stated_priors" (the compiler's analysis/stated_priors.h); none when it has none.
std::vector<StatedPrior> stated_priors(const nlohmann::ordered_json& plan);

// Writes OUT/report.html (html_page.h with report/page.js); returns its path. Throws
// std::runtime_error naming what cannot be read or written.
std::string write_report(const std::string& out, const std::string& path = "");

// The prior's density on `x` (the declared bounds truncate it and renormalise); empty when the
// distribution is not one whose density and tail the runtime has for literal arguments.
std::vector<double> prior_density(const StatedPrior& prior, const std::vector<double>& x);

}  // namespace fvi::report
