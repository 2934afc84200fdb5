// What a run's report reads (fvi/report/report_data.h): the priors the compiler finds stated with
// numbers (analysis/stated_priors.h) and their densities against the distributions' formulas
// written out here, and the marginals' histograms, quantiles and choice of elements against a
// directory of draws made here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "analysis/stated_priors.h"
#include "fvi/report/report_data.h"
#include "pipeline.h"

namespace {

namespace fs = std::filesystem;
using fvi::report::StatedPrior;
constexpr double kPi = 3.14159265358979323846;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("fvic-report-test-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

// The trapezoid rule on an even grid of [a, b].
template <class F>
double integrate(F f, double a, double b, int n = 200000) {
  double h = (b - a) / n, sum = 0.5 * (f(a) + f(b));
  for (int i = 1; i < n; ++i) sum += f(a + i * h);
  return sum * h;
}

double density_at(const StatedPrior& p, double x) { return fvi::report::prior_density(p, {x}).at(0); }

}  // namespace

TEST_CASE("report: a stated prior's density, truncated by the declared bounds", "[report]") {
  SECTION("normal(1, 2.5) on real<lower=0>: the density over P(X > 0)") {
    const StatedPrior p{"sigma", "normal", {1, 2.5}, 0, kNaN};
    // P(X > 0) = Phi(1 / 2.5) by erfc.
    const double mass = 0.5 * std::erfc(-(1 / 2.5) / std::sqrt(2.0));
    for (double x : {0.01, 0.5, 1.0, 3.0, 7.5}) {
      const double z = (x - 1) / 2.5, expected = std::exp(-0.5 * z * z) / (2.5 * std::sqrt(2 * kPi)) / mass;
      CHECK(density_at(p, x) == Approx(expected).epsilon(1e-12));
    }
    CHECK(density_at(p, -0.1) == 0);
    CHECK(integrate([&](double x) { return density_at(p, x); }, 0, 40, 20000) == Approx(1).epsilon(1e-6));
  }
  SECTION("cauchy(0, 2) on real<lower=0>: the half-Cauchy") {
    const StatedPrior p{"tau", "cauchy", {0, 2}, 0, kNaN};
    for (double x : {0.1, 1.0, 10.0})
      CHECK(density_at(p, x) == Approx(2 / (kPi * 2 * (1 + (x / 2) * (x / 2)))).epsilon(1e-12));
  }
  SECTION("a bound at the edge of the support changes nothing: gamma(2, 0.5), beta(2, 3)") {
    const StatedPrior g{"s", "gamma", {2, 0.5}, 0, kNaN};
    for (double x : {0.2, 2.0, 9.0}) CHECK(density_at(g, x) == Approx(0.25 * x * std::exp(-0.5 * x)).epsilon(1e-12));
    const StatedPrior b{"p", "beta", {2, 3}, 0, 1};
    for (double x : {0.1, 0.5, 0.9}) CHECK(density_at(b, x) == Approx(12 * x * (1 - x) * (1 - x)).epsilon(1e-12));
    CHECK(density_at(b, 1.2) == 0);
  }
  SECTION("student_t(3, 0, 1) between -1 and 2 integrates to 1") {
    const StatedPrior t{"x", "student_t", {3, 0, 1}, -1, 2};
    CHECK(integrate([&](double x) { return density_at(t, x); }, -1, 2, 20000) == Approx(1).epsilon(1e-7));
  }
  SECTION("what cannot be normalised is not drawn") {
    CHECK(fvi::report::prior_density({"s", "gamma", {2, 0.5}, 1, kNaN}, {1.5}).empty());  // no gamma CDF here
    CHECK(fvi::report::prior_density({"s", "normal", {0}, kNaN, kNaN}, {0.0}).empty());   // wrong arity
    CHECK(fvi::report::prior_density({"s", "wishart", {1, 2}, kNaN, kNaN}, {0.0}).empty());
  }
}

TEST_CASE("report: the priors a model states with numbers", "[report]") {
  const fs::path dir = scratch("priors");
  write(dir / "m.fvi",
        "data { int N; vector[N] y; }\n"
        "parameters { global real mu; global real<lower=0> sigma; global vector[3] w;\n"
        "  global real<lower=0.5, upper=4> nu; global real<lower=0> s2; }\n"
        "model {\n  mu ~ normal(-1, 2.5);\n  sigma ~ cauchy(0, 2);\n  w ~ normal(mu, 1);\n  nu ~ gamma(2, 0.1);\n"
        "  s2 ~ exponential(1);\n  y ~ normal(mu, sigma);\n}\n");
  std::string error;
  std::optional<fvic::FrontEnd> f = fvic::run_front_end((dir / "m.fvi").string(), true, error);
  REQUIRE(f);
  REQUIRE(!f->diags->has_errors());
  // Through the plan's JSON, as a run's report reads it.
  const nlohmann::ordered_json plan = {{"stated_priors", fvic::stated_priors_json(*f->program)}};
  const std::vector<StatedPrior> priors = fvi::report::stated_priors(plan);
  std::vector<std::string> names;
  for (const StatedPrior& p : priors) names.push_back(p.variable);
  CHECK(names == std::vector<std::string>{"mu", "sigma", "nu", "s2"});  // w's arguments are not numbers; y is data
  REQUIRE(priors.size() == 4);
  CHECK(priors[0].distribution == "normal");
  CHECK(priors[0].arguments == std::vector<double>{-1, 2.5});
  CHECK(std::isnan(priors[0].lower));
  CHECK(priors[2].lower == 0.5);
  CHECK(priors[2].upper == 4);
  fs::remove_all(dir);
}

TEST_CASE("report: marginals summarised from draws.csv, the metrics and the silos' traffic", "[report]") {
  const fs::path dir = scratch("out");
  // 40 elements of w and a scalar b, 400 draws: b's are known numbers.
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(2.0, 0.5);
  std::vector<double> b;
  std::ofstream draws(dir / "draws.csv");
  draws << "# model = m\n# method = variational\n#     output_samples = 400\n# fvic_method = pvi\n# fvic_set_lr = 0.05\n";
  draws << "lp__,log_p__,log_g__";
  for (int k = 1; k <= 40; ++k) draws << ",w." << k;
  draws << ",b\n0,0,0";
  for (int k = 0; k <= 40; ++k) draws << ",0";
  draws << '\n';
  for (int s = 0; s < 400; ++s) {
    draws << "0,-1,-1";
    for (int k = 1; k <= 40; ++k) draws << ',' << k + 0.01 * s;
    b.push_back(normal(rng));
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", b.back());
    draws << ',' << text << '\n';
  }
  draws.close();
  write(dir / "metrics.csv", "round,elbo,seconds,bytes_sent,bytes_received\n1,-10.5,0.1,100,50\n2,-9,0.2,200,100\n");
  write(dir / "silos.csv", "round,silo,bytes_sent,bytes_received,missing_replies\n1,1,50,25,0\n1,2,50,25,1\n");
  write(dir / "plan.json", R"({"model": "m", "stated_priors": [{"variable": "w", "distribution": "normal",
      "arguments": [0, 10], "lower": null, "upper": null}, {"variable": "b", "distribution": "normal",
      "arguments": [0, 1], "lower": null, "upper": null}]})");
  write(dir / "model.fvi", "parameters { vector[40] w; real b; }\nmodel { w ~ normal(0, 10); b ~ normal(0, 1); }\n");
  fs::create_directories(dir / "silo-2");
  fs::create_directories(dir / "silo-10");

  fvi::report::ReportLimits limits;
  limits.marginals = 4;
  limits.table_rows = 10;
  const nlohmann::ordered_json data = fvi::report::collect_report_data(dir.string(), limits);

  // The first elements of each variable in turn, in draws.csv's order: w[1], w[2], w[3], b.
  std::vector<std::string> names;
  for (const auto& m : data["marginals"]) names.push_back(m["name"]);
  CHECK(names == std::vector<std::string>{"w[1]", "w[2]", "w[3]", "b"});
  const auto& mb = data["marginals"][3];
  // The histogram is a density: its areas sum to 1.
  double area = 0;
  for (const auto& bin : mb["bins"]) area += bin["density"].get<double>() * (bin["x1"].get<double>() - bin["x0"].get<double>());
  CHECK(area == Approx(1).epsilon(1e-12));
  CHECK(mb["bins"].size() == size_t(limits.bins));
  // R's type-7 quantiles and the mean, computed here.
  std::vector<double> sorted = b;
  std::sort(sorted.begin(), sorted.end());
  const auto type7 = [&](double p) {
    const double h = (sorted.size() - 1) * p;
    const size_t lo = size_t(std::floor(h));
    return sorted[lo] + (h - double(lo)) * (sorted[std::min(lo + 1, sorted.size() - 1)] - sorted[lo]);
  };
  double mean = 0;
  for (double x : b) mean += x / double(b.size());
  CHECK(mb["q5"].get<double>() == Approx(type7(0.05)).epsilon(1e-12));
  CHECK(mb["q95"].get<double>() == Approx(type7(0.95)).epsilon(1e-12));
  CHECK(mb["mean"].get<double>() == Approx(mean).epsilon(1e-12));
  CHECK(mb["prior"]["text"] == "normal(0, 1)");
  // The table: 10 rows of 41 elements; the settings and facts from the comments.
  CHECK(data["summary"]["rows"].size() == 10);
  CHECK(data["summary"]["elements"] == 41);
  CHECK(data["settings"][0][0] == "lr");
  CHECK(data["facts"]["method"] == "pvi");
  CHECK(data["metrics"]["rows"][1][1].get<double>() == -9);
  CHECK(data["silos"]["rows"][1][4].get<double>() == 1);
  CHECK(data["silo_directories"] == nlohmann::ordered_json::array({"silo-2", "silo-10"}));
  CHECK(data["model_source"].get<std::string>().rfind("parameters", 0) == 0);

  // Not a run's directory, and a broken posterior.json: named.
  const fs::path empty = scratch("empty");
  CHECK_THROWS_WITH(fvi::report::collect_report_data(empty.string()), Catch::Contains("neither draws.csv nor metrics.csv"));
  write(dir / "posterior.json", "{\"model\": ");
  CHECK_THROWS_WITH(fvi::report::collect_report_data(dir.string()), Catch::Contains("posterior.json"));
  fs::remove_all(dir);
  fs::remove_all(empty);
}
