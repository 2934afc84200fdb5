#include "fvi/loss/power_integral.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::test::check_gradient;

TEST_CASE("normal power integral equals the numerical integral of N^c", "[loss][power_integral]") {
  for (double c : {0.5, 1.0, 1.7, 3.0}) {
    for (double sigma : {0.3, 1.0, 2.5}) {
      const auto q = fvi::test::integrate_real_line(
          [&](double x) { return std::exp(c * fvi::test::normal_logpdf(x, 0.7, sigma)); }, 0.7, sigma);
      CHECK_THAT(fvi::normal_log_power_integral(c, sigma).value, WithinAbs(std::log(q.value), 10 * q.error / q.value + 1e-14));
    }
  }
  auto r = check_gradient([](const Eigen::VectorXd& s) { return fvi::normal_log_power_integral(1.7, s[0]).value; },
                          Eigen::VectorXd::Constant(1, 0.8), Eigen::VectorXd::Constant(1, fvi::normal_log_power_integral(1.7, 0.8).derivative));
  CHECK(r.ok());
}

TEST_CASE("discrete power integrals equal their sums, with derivatives", "[loss][power_integral]") {
  const double c = 1.7;
  for (double eta : {-30.0, -2.0, 0.0, 0.4, 25.0}) {
    const double p = 1 / (1 + std::exp(-eta));
    CHECK_THAT(fvi::bernoulli_logit_log_power_integral(c, eta).value,
               WithinAbs(std::log(std::pow(p, c) + std::pow(1 - p, c)), 1e-14));
    auto r = check_gradient([&](const Eigen::VectorXd& x) { return fvi::bernoulli_logit_log_power_integral(c, x[0]).value; },
                            Eigen::VectorXd::Constant(1, eta),
                            Eigen::VectorXd::Constant(1, fvi::bernoulli_logit_log_power_integral(c, eta).derivative));
    INFO(r.report());
    CHECK(r.ok());
  }

  const Eigen::Vector4d logits(0.3, -1.2, 2.0, 0.1);
  const Eigen::Vector4d p = logits.array().exp() / logits.array().exp().sum();
  Eigen::VectorXd grad;
  CHECK_THAT(fvi::categorical_logit_log_power_integral(c, Eigen::VectorXd(logits), &grad),
             WithinRel(std::log(p.array().pow(c).sum()), 1e-14));
  auto rc = check_gradient([&](const Eigen::VectorXd& x) { return fvi::categorical_logit_log_power_integral(c, x); },
                           logits, grad);
  INFO(rc.report());
  CHECK(rc.ok());

  for (double eta : {-5.0, 0.0, 1.3, 4.0}) {
    const double lambda = std::exp(eta);
    double s = 0;
    for (int y = 0; y < 600; ++y) s += std::exp(c * (y * eta - lambda - std::lgamma(y + 1.0)));
    CHECK_THAT(fvi::poisson_log_log_power_integral(c, eta).value, WithinAbs(std::log(s), 1e-13));
    auto r = check_gradient([&](const Eigen::VectorXd& x) { return fvi::poisson_log_log_power_integral(c, x[0]).value; },
                            Eigen::VectorXd::Constant(1, eta),
                            Eigen::VectorXd::Constant(1, fvi::poisson_log_log_power_integral(c, eta).derivative));
    INFO(r.report());
    CHECK(r.ok());
  }
  // c = 1 integrates the distribution itself: log 1 = 0.
  CHECK_THAT(fvi::poisson_log_log_power_integral(1.0, 2.0).value, WithinAbs(0.0, 1e-14));
  CHECK_THAT(fvi::bernoulli_logit_log_power_integral(1.0, 0.7).value, WithinAbs(0.0, 1e-15));
}

TEST_CASE("power integrals reject bad parameters", "[loss][power_integral]") {
  CHECK_THROWS_WITH(fvi::normal_log_power_integral(0.0, 1.0), Contains("c (power) must be positive"));
  CHECK_THROWS_WITH(fvi::normal_log_power_integral(1.5, -1.0), Contains("sigma must be positive"));
  CHECK_THROWS_WITH(fvi::poisson_log_log_power_integral(1.5, std::nan("")), Contains("eta is NaN"));
}
