#include "fvi/loss/density_power.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("density power loss is Ghosh-Basu plus a constant (seed 000 §3.1 item 2)", "[loss][density_power]") {
  // Bernoulli with p(y=1) = 0.3, observing y = 1.
  const double p1 = 0.3;
  for (double beta : {0.1, 0.5, 0.7, 2.0}) {
    const double integral = std::pow(p1, 1 + beta) + std::pow(1 - p1, 1 + beta);
    const double ghosh_basu = -std::pow(p1, beta) / beta + integral / (1 + beta);
    const auto l = fvi::density_power_loss(std::log(p1), std::log(integral), beta);
    CHECK_THAT(l.value - fvi::density_power_loss_offset(beta), WithinAbs(ghosh_basu, 1e-14 * (1 + 1 / beta)));
    // The FedGVI logistic code's form: (1+b) * ghosh_basu = sum_y p^{1+b} - ((1+b)/b) p^b.
    CHECK_THAT((1 + beta) * ghosh_basu, WithinRel(integral - (1 + beta) / beta * std::pow(p1, beta), 1e-13));
  }
}

TEST_CASE("density power loss tends to the NLL as beta -> 0", "[loss][density_power]") {
  const double p1 = 0.3;
  const double l = std::log(p1);
  const double entropy = -(p1 * std::log(p1) + (1 - p1) * std::log(1 - p1));
  auto loss = [&](double beta) {
    const double log_i = std::log(std::pow(p1, 1 + beta) + std::pow(1 - p1, 1 + beta));
    return fvi::density_power_loss(l, log_i, beta).value;
  };
  CHECK(loss(0.0) == -l);
  // L(beta) = NLL + beta (-l^2/2 - H) + O(beta^2) (derived: d/dbeta log int p^{1+beta} = -H at 0).
  const double slope = -l * l / 2 - entropy;
  const double dev3 = std::abs((loss(1e-3) - (-l)) / 1e-3 - slope);
  CHECK(dev3 < 1e-2);  // O(beta) with an O(1) constant
  for (double beta : {1e-5, 1e-7}) {
    // The first-order error shrinks linearly; rounding of the O(1) loss is ~1e-16 / beta.
    CHECK_THAT((loss(beta) - (-l)) / beta, WithinAbs(slope, 2 * dev3 * beta / 1e-3 + 1e-15 / beta));
  }
}

TEST_CASE("density power loss derivatives", "[loss][density_power]") {
  const double beta = 0.7, l = -1.1, li = -0.4;
  const auto g = fvi::density_power_loss(l, li, beta);
  auto r = fvi::test::check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::density_power_loss(x[0], x[1], beta).value; }, Eigen::Vector2d(l, li),
      Eigen::Vector2d(g.d_loglik, g.d_log_integral));
  INFO(r.report());
  CHECK(r.ok());
  CHECK_THROWS_WITH(fvi::density_power_loss(l, li, -0.1), Contains("beta must be non-negative"));
}
