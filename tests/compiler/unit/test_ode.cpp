// Stan's ODE solvers (integrate_ode_rk45, ode_rk45 and their kin) run by statement programs with
// the Dormand-Prince pair of fvi/kernel/ode.h: solutions against closed forms, the tape's
// gradient of the discrete solution against the closed form's exact gradient, the tableau's order
// conditions, and the run-time refusals (too many steps, times that do not increase).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fvi/kernel/ode.h"
#include "ir/interpret.h"
#include "pipeline.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace ode_test {

namespace {

using fvic::ir::RealTensor;

struct Built {
  fvic::test::LoadedModel model;
  fvic::ir::Module module = {};
  fvic::ir::Bindings data = {};
};

void build(Built& b, long long draws) {
  INFO(b.model.errors());
  REQUIRE(b.model.ok());
  REQUIRE(fvic::build_ir(*b.model.model, b.module, b.model.diags));
  std::mt19937 rng(5);
  b.data = fvic::test::random_bindings(*b.model.model, b.module, rng, draws);
}

RealTensor column(const std::vector<double>& v) {
  RealTensor t(static_cast<Eigen::Index>(v.size()), 1, 1);
  for (size_t i = 0; i < v.size(); ++i) t.m(static_cast<Eigen::Index>(i), 0) = v[i];
  return t;
}

double normal_lpdf(double y, double mu, double sigma) {
  return -0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow((y - mu) / sigma, 2);
}

// y' = -k y in the array form, with tight tolerances: y(t) = y0 exp(-k t).
const char* const kDecay = R"(functions {
  array[] real decay(real t, array[] real y, array[] real theta, array[] real x_r, array[] int x_i) {
    array[1] real dydt;
    dydt[1] = -theta[1] * y[1];
    return dydt;
  }
}
data {
  int<lower=1> N;
  array[N] real ts;
  array[N] real obs;
}
transformed data {
  array[0] real x_r;
  array[0] int x_i;
}
parameters {
  global real<lower=0> k;
  global real y0;
}
transformed parameters {
  array[N, 1] real z = integrate_ode_rk45(decay, {y0}, 0, ts, {k}, x_r, x_i, 1e-10, 1e-10, 100000);
}
model {
  k ~ normal(1, 1);
  y0 ~ normal(2, 1);
  obs ~ normal(z[:, 1], 0.5);
}
)";

}  // namespace

TEST_CASE("ode: the Dormand-Prince tableau meets the order conditions", "[ode]") {
  namespace ode = fvi::kernel::ode;
  // Each stage's weights sum to its time; the fifth-order weights (the last stage's) meet the
  // conditions up to order 5 checked here (sum b = 1, sum b c = 1/2, sum b c^2 = 1/3, sum b c^3 =
  // 1/4, sum b c^4 = 1/5); the error weights sum to zero (both formulas are consistent).
  for (int i = 1; i < ode::kStages; ++i) {
    double row = 0;
    for (int j = 0; j < i; ++j) row += ode::kA[i][j];
    CHECK(row == Approx(ode::kC[i]).epsilon(1e-14));
  }
  for (int power = 0; power <= 4; ++power) {
    double total = 0;
    for (int j = 0; j < ode::kStages - 1; ++j) total += ode::kA[ode::kStages - 1][j] * std::pow(ode::kC[j], power);
    CHECK(total == Approx(1.0 / (power + 1)).epsilon(1e-14));
  }
  double error = 0;
  for (double e : ode::kE) error += e;
  CHECK(error == Approx(0).margin(1e-15));
  // The step control of Hairer, Norsett and Wanner: 0.9 err^(-1/5), within [0.2, 5].
  CHECK(ode::next_step(1.0, 1.0) == Approx(0.9));
  CHECK(ode::next_step(1.0, 0) == 5);
  CHECK(ode::next_step(1.0, 1e10) == Approx(0.2));
  CHECK(ode::next_step(1.0, std::nan("")) == Approx(0.2));
}

TEST_CASE("ode: integrate_ode_rk45's solution and its gradient against the closed form", "[ode]") {
  Built b{fvic::test::load_text("fvic_test_ode_decay", kDecay)};
  build(b, 3);
  const std::vector<double> ts = {0.25, 0.5, 1.0, 2.0, 3.5};
  const std::vector<double> obs = {1.6, 1.2, 0.9, 0.4, 0.1};
  b.data.data["N"] = RealTensor::constant(double(ts.size()));
  b.data.data["ts"] = column(ts);
  b.data.data["obs"] = column(obs);
  b.data.data["x_r"] = RealTensor(0, 1, 1);  // transformed data built by statements: read with the data
  b.data.data["x_i"] = RealTensor(0, 1, 1);
  RealTensor& g = b.data.inputs.at("global");
  g.m.row(0) << std::log(0.7), std::log(1.3), std::log(0.4);  // k > 0, unconstrained
  g.m.row(1) << 2.1, 1.7, 2.4;

  fvic::ir::Interpreter z(b.module, fvic::test::factor_named(b.module, "quantity_z"));
  const RealTensor& values = z.forward(b.data);
  REQUIRE(values.rows == Eigen::Index(ts.size()));
  const fvic::ir::Factor& factor = fvic::test::factor_named(b.module, "server_density");
  fvic::ir::Interpreter density(b.module, factor);
  const RealTensor& lp = density.forward(b.data);
  std::vector<RealTensor> seeds;  // d(output): 1; any argument's seed: 0
  for (int seed : factor.seeds) {
    const fvic::ir::Node& n = factor.nodes[size_t(seed)];
    const bool output = n.name == "output";
    RealTensor t = RealTensor::zeros_like(
        density.value(output ? factor.output : factor.arguments[size_t(std::stoi(n.name.substr(9)) - 1)]));
    if (output) t.m.setOnes();
    seeds.push_back(t);
  }
  const auto grads = density.backward(b.data, seeds);
  const RealTensor& grad = grads.at("global");
  for (Eigen::Index s = 0; s < g.m.cols(); ++s) {
    const double k = std::exp(g.m(0, s)), y0 = g.m(1, s);
    double want = normal_lpdf(k, 1, 1) + std::log(k) + normal_lpdf(y0, 2, 1);  // + log |dk/du|
    double d_k = -(k - 1), d_y0 = -(y0 - 2);
    for (size_t n = 0; n < ts.size(); ++n) {
      const double y = y0 * std::exp(-k * ts[n]);
      // Tolerances 1e-10: each step's error at most 1e-10 (1 + |y|), a few hundred steps.
      CHECK(values.draw(s)(Eigen::Index(n), 0) == Approx(y).margin(1e-7));
      want += normal_lpdf(obs[n], y, 0.5);
      const double r = (obs[n] - y) / 0.25;  // d/dy of the log density
      d_k += r * (-ts[n] * y);
      d_y0 += r * std::exp(-k * ts[n]);
    }
    CHECK(lp.m(0, s) == Approx(want).margin(1e-6));
    // The tape differentiates the discrete solution, which converges to the exact one with its
    // sensitivities (the method applied to the variational equations): within the same margins.
    CHECK(grad.draw(s)(0, 0) == Approx(d_k * k + 1).margin(1e-5));
    CHECK(grad.draw(s)(1, 0) == Approx(d_y0).margin(1e-5));
  }
}

TEST_CASE("ode: ode_rk45 of vectors with variadic arguments, Stan's default tolerances", "[ode]") {
  // A harmonic oscillator y1' = y2, y2' = -omega^2 y1 (+ a forcing f that is 0 here), from
  // (1, 0): y1 = cos(omega t), y2 = -omega sin(omega t).
  Built b{fvic::test::load_text("fvic_test_ode_oscillator", R"(functions {
  vector oscillator(real t, vector y, real omega, real f) {
    vector[2] dydt;
    dydt[1] = y[2];
    dydt[2] = -omega^2 * y[1] + f;
    return dydt;
  }
}
data {
  int<lower=1> N;
  array[N] real ts;
}
parameters {
  global real<lower=0> omega;
}
transformed parameters {
  array[N] vector[2] y = ode_rk45(oscillator, [1, 0]', 0.0, ts, omega, 0.0);
}
model {
  omega ~ lognormal(0, 0.5);
}
)")};
  build(b, 2);
  std::vector<double> ts;
  for (int n = 1; n <= 12; ++n) ts.push_back(0.5 * n);
  b.data.data["N"] = RealTensor::constant(double(ts.size()));
  b.data.data["ts"] = column(ts);
  RealTensor& g = b.data.inputs.at("global");
  g.m.row(0) << std::log(1.0), std::log(2.5);
  fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
  const RealTensor& values = y.forward(b.data);
  REQUIRE(values.rows == 12);
  REQUIRE(values.cols == 2);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const double omega = std::exp(g.m(0, s));
    for (size_t n = 0; n < ts.size(); ++n) {
      // Tolerances 1e-6 (Stan's): each step's local error under 1e-6 (1 + |y|); over the ~100
      // steps of 6 time units the global error stays within a few 1e-5.
      CHECK(values.draw(s)(Eigen::Index(n), 0) == Approx(std::cos(omega * ts[n])).margin(1e-4));
      CHECK(values.draw(s)(Eigen::Index(n), 1) == Approx(-omega * std::sin(omega * ts[n])).margin(1e-4 * omega));
    }
  }
}

TEST_CASE("ode: too many steps, bad tolerances and times that do not increase are refused when the solve runs", "[ode]") {
  Built b{fvic::test::load_text("fvic_test_ode_limits", R"(functions {
  vector growth(real t, vector y, real r) {
    return r * y;
  }
}
data {
  int<lower=1> N;
  array[N] real ts;
  int steps;
  real tol;
}
parameters {
  global real r;
}
transformed parameters {
  array[N] vector[1] y = ode_rk45_tol(growth, [1]', 0, ts, tol, tol, steps, r);
}
model {
  r ~ normal(0, 1);
}
)")};
  build(b, 1);
  b.data.data["N"] = RealTensor::constant(2);
  b.data.data["ts"] = column({1, 2});
  b.data.data["steps"] = RealTensor::constant(3);
  b.data.data["tol"] = RealTensor::constant(1e-8);
  b.data.inputs.at("global").m(0, 0) = 1.0;
  {
    fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
    CHECK_THROWS_WITH(y.forward(b.data), Catch::Contains("line 16") && Catch::Contains("max_num_steps = 3"));
  }
  b.data.data["steps"] = RealTensor::constant(100000);
  {
    fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
    const RealTensor& v = y.forward(b.data);
    CHECK(v.m(0, 0) == Approx(std::exp(1.0)).epsilon(1e-6));
    CHECK(v.m(1, 0) == Approx(std::exp(2.0)).epsilon(1e-6));
  }
  b.data.data["steps"] = RealTensor::constant(-1);
  {
    fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
    CHECK_THROWS_WITH(y.forward(b.data), Catch::Contains("max_num_steps = -1"));
  }
  b.data.data["steps"] = RealTensor::constant(100000);
  b.data.data["tol"] = RealTensor::constant(-1e-8);
  {
    fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
    CHECK_THROWS_WITH(y.forward(b.data), Catch::Contains("tolerances must be positive"));
  }
  b.data.data["tol"] = RealTensor::constant(1e-8);
  b.data.data["ts"] = column({2, 1});
  {
    fvic::ir::Interpreter y(b.module, fvic::test::factor_named(b.module, "quantity_y"));
    CHECK_THROWS_WITH(y.forward(b.data), Catch::Contains("must increase") && Catch::Contains("time 2 is 1"));
  }
}

}  // namespace ode_test
