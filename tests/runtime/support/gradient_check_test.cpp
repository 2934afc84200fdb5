// Tests of the shared finite-difference gradient check (tests/support/gradient_check.h): it must
// accept correct gradients, reject wrong ones, and say which coordinate is wrong.
#include "support/gradient_check.h"

#include <cmath>

#include <catch2/catch.hpp>

using fvi::test::check_gradient;

namespace {
double rosenbrock(const Eigen::VectorXd& x) {
  double s = 0;
  for (Eigen::Index i = 0; i + 1 < x.size(); ++i) {
    s += 100 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1 - x[i], 2);
  }
  return s;
}
Eigen::VectorXd rosenbrock_gradient(const Eigen::VectorXd& x) {
  Eigen::VectorXd g = Eigen::VectorXd::Zero(x.size());
  for (Eigen::Index i = 0; i + 1 < x.size(); ++i) {
    g[i] += -400 * x[i] * (x[i + 1] - x[i] * x[i]) - 2 * (1 - x[i]);
    g[i + 1] += 200 * (x[i + 1] - x[i] * x[i]);
  }
  return g;
}
}  // namespace

TEST_CASE("gradient check accepts exact gradients", "[support][gradient_check]") {
  Eigen::VectorXd x(4);
  x << -1.2, 1.0, 0.3, 2.5;
  const auto r = check_gradient(rosenbrock, x, rosenbrock_gradient(x));
  INFO(r.report());
  CHECK(r.ok());
  // Steep and large-scale functions too: exp(10 x) at x = 2 (f ~ 5e8).
  Eigen::VectorXd y(1);
  y << 2.0;
  const auto e = check_gradient([](const Eigen::VectorXd& v) { return std::exp(10 * v[0]); }, y,
                                Eigen::VectorXd::Constant(1, 10 * std::exp(20.0)));
  INFO(e.report());
  CHECK(e.ok());
}

TEST_CASE("gradient check rejects a gradient that is wrong in one coordinate", "[support][gradient_check]") {
  Eigen::VectorXd x(4);
  x << -1.2, 1.0, 0.3, 2.5;
  Eigen::VectorXd g = rosenbrock_gradient(x);
  // A relative error of 1e-6 in one coordinate must be detected.
  g[2] *= 1 + 1e-6;
  const auto r = check_gradient(rosenbrock, x, g);
  CHECK_FALSE(r.ok());
  CHECK(std::abs(r.analytic[0] - r.numeric[0]) <= r.tolerance[0]);
  CHECK(std::abs(r.analytic[2] - r.numeric[2]) > r.tolerance[2]);
  CHECK(r.report().find("mismatch") != std::string::npos);
}

TEST_CASE("gradient check rejects a gradient of the wrong size", "[support][gradient_check]") {
  Eigen::VectorXd x = Eigen::VectorXd::Ones(3);
  CHECK_FALSE(check_gradient(rosenbrock, x, Eigen::VectorXd::Zero(2)).ok());
}
