#include "fvi/optim/precision_step.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/rng.h"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::precision_step;

// Named: compiled in one unit with other test files, whose helpers share names.
namespace precision_step_test {

// The target log p(z) = -exp(z) in one coordinate (a Poisson rate's log density without its
// data): under q = N(m, s^2), E_q[-d^2 log p] = E_q[exp(z)] = exp(m + s^2 / 2) and the ELBO in s
// is -exp(m + s^2 / 2) + log s + const, both in closed form.
double elbo_in_sd(double m, double s) { return -std::exp(m + s * s / 2) + std::log(s); }

TEST_CASE("the precision step's curvature estimate is unbiased: (1 - G) / s^2 averages E_q[-d2 log p] (Price)",
          "[optim][precision_step]") {
  const double m = 0.3, s = 0.7;
  fvi::CounterRng rng(fvi::RngKey{11, 0, 0, 0});
  const long draws = 200000;
  const Eigen::MatrixXd eps = rng.normal(1, draws);
  // The standard reparameterised estimate of the ELBO's log-sd gradient, draw by draw: s eps g
  // + 1 (the entropy's), g = d log p / dz = -exp(m + s eps).
  double sum = 0, square = 0;
  // The step's running average with beta = 1 / (d + 1) is the plain mean (the first step's beta
  // is just below 1, which the step requires, and the start 0).
  Eigen::VectorXd average = Eigen::VectorXd::Zero(1);
  for (long d = 0; d < draws; ++d) {
    const double g = -std::exp(m + s * eps(0, d));
    const double gradient = s * eps(0, d) * g + 1;
    const double h = -s * eps(0, d) * g / (s * s);  // Price: E[eps g] / s = E[d2 log p]
    sum += h, square += h * h;
    precision_step(average, Eigen::VectorXd::Constant(1, std::log(s)), Eigen::VectorXd::Constant(1, gradient),
                   d == 0 ? 1 - 1e-15 : 1.0 / double(d + 1));
  }
  const double mean = sum / draws, se = std::sqrt((square / draws - mean * mean) / draws);
  INFO("mean " << mean << ", standard error " << se << ", the step's average " << average[0]);
  CHECK(std::abs(mean - std::exp(m + s * s / 2)) < 4 * se);
  // The step's running average is that mean (no estimate bounded on the way).
  CHECK_THAT(average[0], WithinRel(mean, 1e-9));
}

TEST_CASE("precision steps with the exact expected gradient reach the ELBO's maximum in the sd",
          "[optim][precision_step]") {
  const double m = 0.5;
  // The maximiser by golden-section search on the closed-form ELBO.
  double lo = 1e-3, hi = 3;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  for (int k = 0; k < 200; ++k) {
    const double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
    if (elbo_in_sd(m, a) < elbo_in_sd(m, b)) lo = a;
    else hi = b;
  }
  const double best = (lo + hi) / 2;
  for (double start : {0.01, 1.0, 2.5}) {
    double log_sd = std::log(start), average = std::exp(-2 * log_sd);
    Eigen::VectorXd precision;
    for (int t = 0; t < 400; ++t) {
      const double s = std::exp(log_sd);
      const double expected_gradient = 1 - s * s * std::exp(m + s * s / 2);  // d ELBO / d log s
      const double before = std::exp(-2 * log_sd);
      log_sd = precision_step(precision, Eigen::VectorXd::Constant(1, log_sd),
                              Eigen::VectorXd::Constant(1, expected_gradient), 0.1)[0];
      // Each step: lambda <- 0.9 lambda + 0.1 E[-d2 log p], and 1 / sigma^2 that within the bounds.
      average = 0.9 * average + 0.1 * std::exp(m + s * s / 2);
      REQUIRE_THAT(precision[0], WithinRel(average, 1e-12));
      REQUIRE_THAT(std::exp(-2 * log_sd), WithinRel(std::clamp(average, 0.9 * before, 4 * before), 1e-12));
    }
    INFO("from sd " << start);
    CHECK_THAT(std::exp(log_sd), WithinRel(best, 1e-8));
  }
}

TEST_CASE("the precision step is bounded: sigma grows by at most (1 - beta)^(-1/2) and at most halves",
          "[optim][precision_step]") {
  const Eigen::VectorXd log_sd = Eigen::Vector3d(0.0, std::log(0.2), std::log(5.0));
  // A gradient far above 1 (curvature estimate below 0), far below (a huge curvature), and 1
  // (curvature 0).
  const Eigen::VectorXd gradient = Eigen::Vector3d(50.0, -1e9, 1.0);
  Eigen::VectorXd precision;
  const Eigen::VectorXd after = precision_step(precision, log_sd, gradient, 0.2);
  CHECK_THAT(after[0] - log_sd[0], WithinAbs(-0.5 * std::log(0.8), 1e-14));
  CHECK_THAT(after[1] - log_sd[1], WithinAbs(-std::log(2.0), 1e-14));
  CHECK_THAT(after[2] - log_sd[2], WithinAbs(-0.5 * std::log(0.8), 1e-14));
  // The average itself is not bounded: below 0 for the first coordinate.
  CHECK_THAT(precision[0], WithinRel(0.8 + 0.2 * (1 - 50.0), 1e-14));
  CHECK_THROWS_WITH(precision_step(precision, log_sd, gradient, 1.0), Catch::Contains("beta"));
  CHECK_THROWS_WITH(precision_step(precision, log_sd, Eigen::VectorXd::Ones(2), 0.5), Catch::Contains("sizes"));
}

}  // namespace precision_step_test
