#include "fvi/report/report_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "fvi/kernel/distributions.h"
#include "fvi/program/draws_csv.h"
#include "fvi/program/summary.h"
#include "fvi/report/html_page.h"

namespace fvi::report {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A number for the page: JSON has no NaN or infinity, so those become null.
ordered_json number(double x) { return std::isfinite(x) ? ordered_json(x) : ordered_json(nullptr); }

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  return text.str();
}

// A CSV file of numbers with a header (metrics.csv, silos.csv): {"columns": [...], "rows": [[...]]}.
// A field that is not a number is null.
ordered_json read_numeric_csv(const fs::path& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  std::string line;
  ordered_json columns = ordered_json::array(), rows = ordered_json::array();
  const auto next_line = [&] {  // a file saved with CRLF line ends reads as one without
    if (!std::getline(f, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  if (next_line()) {
    std::stringstream header(line);
    for (std::string name; std::getline(header, name, ',');) columns.push_back(name);
  }
  while (next_line()) {
    if (line.empty()) continue;
    ordered_json row = ordered_json::array();
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) {
      char* end = nullptr;
      const double x = std::strtod(field.c_str(), &end);
      row.push_back(end != field.c_str() && *end == '\0' ? number(x) : ordered_json(nullptr));
    }
    rows.push_back(std::move(row));
  }
  return {{"columns", columns}, {"rows", rows}};
}

// Which of draws.csv's columns get a histogram: the first elements of every variable in turn
// (beta[1], sigma, beta[2], ...), so that each variable shows before any shows many.
std::vector<size_t> marginal_columns(const std::vector<std::string>& names, size_t limit) {
  std::vector<std::string> variables;
  std::vector<std::vector<size_t>> columns;
  for (size_t c = 0; c < names.size(); ++c) {
    const std::string variable = names[c].substr(0, names[c].find('.'));
    auto at = std::find(variables.begin(), variables.end(), variable);
    if (at == variables.end()) variables.push_back(variable), columns.emplace_back(), at = variables.end() - 1;
    columns[size_t(at - variables.begin())].push_back(c);
  }
  std::vector<size_t> chosen;
  for (size_t depth = 0; chosen.size() < limit; ++depth) {
    bool any = false;
    for (const std::vector<size_t>& v : columns)
      if (depth < v.size() && chosen.size() < limit) chosen.push_back(v[depth]), any = true;
    if (!any) break;
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

const StatedPrior* prior_of(const std::vector<StatedPrior>& priors, const std::string& column) {
  const std::string variable = column.substr(0, column.find('.'));
  for (const StatedPrior& p : priors)
    if (p.variable == variable) return &p;
  return nullptr;
}

// One marginal: a histogram of the draws, the 5%, 50% and 95% quantiles (R's type 7), the mean,
// and the stated prior's density over the histogram's range.
ordered_json marginal(const std::string& name, const std::vector<double>& draws, const StatedPrior* prior,
                      const ReportLimits& limits) {
  std::vector<double> sorted;
  for (double x : draws)
    if (std::isfinite(x)) sorted.push_back(x);
  std::sort(sorted.begin(), sorted.end());
  ordered_json m = {{"name", name}};
  if (sorted.empty()) return m;
  const double lo = sorted.front(), hi = sorted.back();
  const fvi::program::SummaryRow row = fvi::program::summarise(name, draws);
  m["mean"] = number(row.mean);
  m["q5"] = number(row.q5), m["q50"] = number(row.median), m["q95"] = number(row.q95);
  ordered_json bins = ordered_json::array();
  if (hi > lo) {
    const double width = (hi - lo) / limits.bins;
    std::vector<long> count(size_t(limits.bins), 0);
    for (double x : sorted) count[std::min(size_t(limits.bins) - 1, size_t((x - lo) / width))]++;
    // Densities, so that a prior's density shares the axis.
    for (int b = 0; b < limits.bins; ++b)
      bins.push_back({{"x0", lo + b * width}, {"x1", lo + (b + 1) * width},
                      {"density", double(count[size_t(b)]) / (double(sorted.size()) * width)}});
  } else {
    bins.push_back({{"x0", lo}, {"x1", lo}, {"density", nullptr}});  // a point estimate
  }
  m["bins"] = bins;
  if (prior && hi > lo) {
    std::vector<double> x(size_t(limits.prior_points));
    const double pad = 0.25 * (hi - lo);
    for (size_t i = 0; i < x.size(); ++i) x[i] = lo - pad + (hi - lo + 2 * pad) * double(i) / double(x.size() - 1);
    const std::vector<double> density = prior_density(*prior, x);
    if (!density.empty()) {
      ordered_json curve = ordered_json::array();
      for (size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(density[i])) curve.push_back({{"x", x[i]}, {"density", density[i]}});
      std::ostringstream text;
      text << prior->distribution << '(';
      for (size_t a = 0; a < prior->arguments.size(); ++a) text << (a ? ", " : "") << prior->arguments[a];
      text << ')';
      m["prior"] = {{"text", text.str()}, {"curve", curve}};
    }
  }
  return m;
}

}  // namespace

std::vector<StatedPrior> stated_priors(const ordered_json& plan) {
  std::vector<StatedPrior> priors;
  if (!plan.is_object() || !plan.contains("stated_priors") || !plan["stated_priors"].is_array()) return priors;
  const auto value = [](const ordered_json& x) { return x.is_number() ? x.get<double>() : kNaN; };
  for (const ordered_json& p : plan["stated_priors"]) {
    if (!p.is_object() || !p.value("variable", ordered_json()).is_string() ||
        !p.value("distribution", ordered_json()).is_string() || !p.value("arguments", ordered_json()).is_array())
      continue;  // not what the compiler writes: no prior drawn rather than a wrong one
    StatedPrior s{p["variable"], p["distribution"], {}, value(p.value("lower", ordered_json())),
                  value(p.value("upper", ordered_json()))};
    for (const ordered_json& a : p["arguments"]) s.arguments.push_back(value(a));
    priors.push_back(std::move(s));
  }
  return priors;
}

std::vector<double> prior_density(const StatedPrior& prior, const std::vector<double>& x) {
  using Array = Eigen::Array<double, Eigen::Dynamic, Eigen::Dynamic>;
  static const std::vector<std::string> with_tails = {"normal",   "student_t", "cauchy",     "logistic",
                                                      "double_exponential", "lognormal", "exponential"};
  static const std::vector<std::string> positive = {"gamma", "inv_gamma", "lognormal", "exponential"};
  static const std::vector<std::string> arity2 = {"normal", "cauchy", "logistic", "double_exponential",
                                                   "lognormal", "gamma", "inv_gamma", "beta", "uniform"};
  const std::string& d = prior.distribution;
  const size_t arity = d == "student_t" ? 3 : d == "exponential" ? 1 : 2;
  const bool known = d == "student_t" || d == "exponential" ||
                     std::find(arity2.begin(), arity2.end(), d) != arity2.end();
  if (!known || prior.arguments.size() != arity) return {};
  const auto evaluate = [&](const std::string& name, const std::vector<double>& at) {
    std::vector<Array> v{Eigen::Map<const Array>(at.data(), Eigen::Index(at.size()), 1)};
    for (double a : prior.arguments) v.push_back(Array::Constant(Eigen::Index(at.size()), 1, a));
    const Array out = fvi::kernel::detail::scalar_lpdf<double>(name, v);
    return std::vector<double>(out.data(), out.data() + out.size());
  };
  // The declared bounds truncate the prior (Stan's semantics): renormalise by the mass between
  // them where they cut the distribution's own support.
  const bool has_lower = std::isfinite(prior.lower), has_upper = std::isfinite(prior.upper);
  const bool support_positive = std::find(positive.begin(), positive.end(), d) != positive.end();
  const bool lower_is_support = (support_positive && prior.lower == 0) || (d == "beta" && prior.lower == 0) ||
                                (d == "uniform" && prior.lower <= prior.arguments[0]);
  const bool upper_is_support = (d == "beta" && prior.upper == 1) || (d == "uniform" && prior.upper >= prior.arguments[1]);
  double log_mass = 0;
  const bool cut_lower = has_lower && !lower_is_support, cut_upper = has_upper && !upper_is_support;
  if (cut_lower || cut_upper) {
    if (std::find(with_tails.begin(), with_tails.end(), d) == with_tails.end()) return {};
    const double below = cut_lower ? std::exp(evaluate(d + "_lcdf", {prior.lower})[0]) : 0;
    const double up_to = cut_upper ? std::exp(evaluate(d + "_lcdf", {prior.upper})[0]) : 1;
    if (!(up_to > below)) return {};
    log_mass = std::log(up_to - below);
  }
  std::vector<double> density = evaluate(d, x);
  for (size_t i = 0; i < x.size(); ++i) {
    const bool outside = (has_lower && x[i] < prior.lower) || (has_upper && x[i] > prior.upper) ||
                         (support_positive && x[i] <= 0) || (d == "beta" && (x[i] <= 0 || x[i] >= 1)) ||
                         (d == "uniform" && (x[i] < prior.arguments[0] || x[i] > prior.arguments[1]));
    density[i] = outside ? 0.0 : std::exp(density[i] - log_mass);
  }
  return density;
}

ordered_json collect_report_data(const std::string& out, const ReportLimits& limits) {
  const fs::path dir(out);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(out + " is not a directory (fvic report OUT takes a run's output directory)");
  const bool has_draws = fs::exists(dir / "draws.csv", ec), has_metrics = fs::exists(dir / "metrics.csv", ec);
  if (!has_draws && !has_metrics)
    throw std::runtime_error(out + " holds neither draws.csv nor metrics.csv: not a run's output directory");

  ordered_json data = {{"directory", fs::absolute(dir, ec).string()}};
  if (fs::exists(dir / "posterior.json", ec)) {
    ordered_json posterior;
    try {
      posterior = ordered_json::parse(read_text(dir / "posterior.json"));
    } catch (const std::exception& e) {
      throw std::runtime_error((dir / "posterior.json").string() + ": " + e.what());
    }
    posterior.erase("variables");  // the table below has them, from the draws
    data["run"] = posterior;
  }
  if (fs::exists(dir / "model.fvi", ec)) data["model_source"] = read_text(dir / "model.fvi");
  if (fs::exists(dir / "plan.json", ec)) {
    try {
      data["plan"] = ordered_json::parse(read_text(dir / "plan.json"));
    } catch (const std::exception& e) {
      throw std::runtime_error((dir / "plan.json").string() + ": " + e.what());
    }
  }
  if (has_metrics) data["metrics"] = read_numeric_csv(dir / "metrics.csv");
  if (fs::exists(dir / "silos.csv", ec)) data["silos"] = read_numeric_csv(dir / "silos.csv");

  if (has_draws) {
    const fvi::program::DrawsTable table = fvi::program::read_draws_csv((dir / "draws.csv").string());
    ordered_json settings = ordered_json::array(), facts = ordered_json::object();
    for (const auto& [key, value] : table.comments) {
      if (key.rfind("fvic_set_", 0) == 0) settings.push_back({key.substr(9), value});
      else if (key.rfind("fvic_", 0) == 0) facts[key.substr(5)] = value;
    }
    data["settings"] = settings;
    data["facts"] = facts;
    data["draws"] = table.draws();
    std::vector<std::string> names;
    std::vector<size_t> columns;
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const std::string& name = table.columns[c];
      if (name.size() > 2 && name.compare(name.size() - 2, 2, "__") == 0) continue;  // lp__, log_p__, log_g__
      names.push_back(name), columns.push_back(c);
    }
    ordered_json rows = ordered_json::array();
    for (size_t i = 0; i < names.size() && i < limits.table_rows; ++i) {
      const fvi::program::SummaryRow r =
          fvi::program::summarise(fvi::program::posterior_name(names[i]), table.values[columns[i]]);
      rows.push_back({r.variable, number(r.mean), number(r.median), number(r.sd), number(r.mad), number(r.q5),
                      number(r.q95)});
    }
    data["summary"] = {{"columns", {"variable", "mean", "median", "sd", "mad", "q5", "q95"}},
                       {"rows", rows},
                       {"elements", names.size()}};
    // A silo's folder (OUT/silo-K) reads the run's plan beside it.
    const fs::path plan = fs::absolute(dir, ec).parent_path() / "plan.json";
    std::vector<StatedPrior> priors;
    if (data.contains("plan")) {
      priors = stated_priors(data["plan"]);
    } else if (dir.filename().string().rfind("silo-", 0) == 0 && fs::exists(plan, ec)) {
      try {
        priors = stated_priors(ordered_json::parse(read_text(plan)));
      } catch (const std::exception&) {
      }  // the run's own page names a broken plan.json; a silo's page goes without its priors
    }
    ordered_json marginals = ordered_json::array();
    for (size_t i : marginal_columns(names, limits.marginals))
      marginals.push_back(marginal(fvi::program::posterior_name(names[i]), table.values[columns[i]],
                                   prior_of(priors, names[i]), limits));
    data["marginals"] = marginals;
  }
  ordered_json silo_dirs = ordered_json::array();
  std::vector<std::string> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("silo-", 0) == 0) found.push_back(e.path().filename());
  std::sort(found.begin(), found.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  for (const std::string& f : found) silo_dirs.push_back(f);
  data["silo_directories"] = silo_dirs;
  return data;
}

}  // namespace fvi::report

namespace fvi::report {

std::string write_report(const std::string& out, const std::string& path) {
  const ordered_json data = collect_report_data(out);
  std::string title = "fvic report";
  if (data.contains("run") && data["run"].contains("model") && data["run"]["model"].is_string())
    title = data["run"]["model"].get<std::string>() + ": " + title;
  const std::string page = html_page(title, data.dump(), "page.js");
  const std::string where = path.empty() ? (fs::path(out) / "report.html").string() : path;
  std::ofstream f(where, std::ios::binary);
  f << page;
  if (!f) throw std::runtime_error("cannot write " + where);
  return where;
}

}  // namespace fvi::report
