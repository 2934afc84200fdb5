#include "fvi/loss/gamma_divergence.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;

TEST_CASE("gamma loss is Hung et al.'s plus a constant (seed 000 §3.1 item 3)", "[loss][gamma]") {
  const double p1 = 0.3;
  for (double gamma : {1.2, 1.5, 1.75, 3.0}) {
    const double integral = std::pow(p1, gamma) + std::pow(1 - p1, gamma);
    const double hung = -std::pow(p1, gamma - 1) * gamma / (gamma - 1) / std::pow(integral, (gamma - 1) / gamma);
    const double ours = fvi::gamma_divergence_loss(std::log(p1), std::log(integral), gamma).value;
    CHECK_THAT(ours - fvi::gamma_divergence_loss_offset(gamma), WithinAbs(hung, 1e-14 * gamma / (gamma - 1)));
  }
}

TEST_CASE("gamma loss tends to the NLL as gamma -> 1", "[loss][gamma]") {
  const double p1 = 0.3, l = std::log(p1);
  auto loss = [&](double gamma) {
    return fvi::gamma_divergence_loss(l, std::log(std::pow(p1, gamma) + std::pow(1 - p1, gamma)), gamma).value;
  };
  CHECK(loss(1.0) == -l);
  const double dev = std::abs(loss(1 + 1e-3) + l);
  for (double h : {1e-5, 1e-8}) CHECK_THAT(loss(1 + h), WithinAbs(-l, 2 * dev * h / 1e-3 + 1e-15));
}

TEST_CASE("gamma loss derivatives and domain", "[loss][gamma]") {
  const double gamma = 1.5, l = -1.1, li = -0.2;
  const auto g = fvi::gamma_divergence_loss(l, li, gamma);
  auto r = fvi::test::check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::gamma_divergence_loss(x[0], x[1], gamma).value; },
      Eigen::Vector2d(l, li), Eigen::Vector2d(g.d_loglik, g.d_log_integral));
  INFO(r.report());
  CHECK(r.ok());
  CHECK_THROWS_WITH(fvi::gamma_divergence_loss(l, li, 0.5), Contains("gamma must be >= 1 but is 0.5"));
}
