#include "fvi/optim/sgd.h"

#include <cmath>

#include <catch2/catch.hpp>

using Catch::Contains;
using Catch::Matchers::WithinRel;
using fvi::Sgd;
using fvi::SgdOptions;

TEST_CASE("SGD with momentum: closed form under a constant gradient", "[optim][sgd]") {
  const double lr = 0.1, mu = 0.9, g = 2.0;
  for (bool nesterov : {false, true}) {
    SgdOptions opt;
    opt.learning_rate = lr;
    opt.momentum = mu;
    opt.nesterov = nesterov;
    Sgd<> sgd(1, opt);
    Eigen::VectorXd x = Eigen::VectorXd::Zero(1);
    double expected = 0;
    for (int t = 1; t <= 30; ++t) {
      sgd.step(x, Eigen::VectorXd::Constant(1, g));
      const double buffer = g * (1 - std::pow(mu, t)) / (1 - mu);  // b_t = g sum_{k<t} mu^k
      expected -= lr * (nesterov ? g + mu * buffer : buffer);
      CHECK_THAT(x[0], WithinRel(expected, 1e-13));
    }
  }
}

TEST_CASE("heavy-ball SGD on a quadratic follows the linear recurrence", "[optim][sgd]") {
  // f = a x^2 / 2: x_{t+1} = x_t - lr b_{t+1}, b_{t+1} = mu b_t + a x_t  => a 2x2 linear map.
  const double a = 3.0, lr = 0.05, mu = 0.8;
  SgdOptions opt;
  opt.learning_rate = lr;
  opt.momentum = mu;
  Sgd<> sgd(1, opt);
  Eigen::VectorXd x = Eigen::VectorXd::Constant(1, 1.0);
  for (int t = 0; t < 200; ++t) sgd.step(x, Eigen::VectorXd::Constant(1, a * x[0]));
  Eigen::Matrix2d m;  // state (x, b) -> (x - lr (mu b + a x), mu b + a x)
  m << 1 - lr * a, -lr * mu, a, mu;
  Eigen::Vector2d s(1.0, 0.0);  // b_0 = 0 reproduces b_1 = g_1
  for (int t = 0; t < 200; ++t) s = m * s;
  // Rounding: a few ulps of the O(1) state per step, not amplified (spectral radius < 1):
  // absolute error <= 200 steps x ~4 eps.
  CHECK_THAT(x[0], Catch::Matchers::WithinAbs(s[0], 200 * 4 * 2.3e-16));
  // Complex eigenvalues of modulus sqrt(mu) = 0.894: |x_200| ~ C 0.894^200 = C 2e-10.
  CHECK(std::abs(m.eigenvalues()[0]) < 0.9);
  CHECK(std::abs(x[0]) < 1e-6);
}

TEST_CASE("SGD options are validated", "[optim][sgd]") {
  SgdOptions opt;
  opt.nesterov = true;
  CHECK_THROWS_WITH(Sgd<>(2, opt), Contains("Nesterov momentum requires momentum > 0"));
  opt.nesterov = false;
  opt.momentum = 1.5;
  CHECK_THROWS_WITH(Sgd<>(2, opt), Contains("momentum must be in [0, 1]"));
  Sgd<> sgd(2);
  Eigen::VectorXd x = Eigen::Vector2d(1, 1);
  CHECK_THROWS_WITH(sgd.step(x, Eigen::Vector2d(std::nan(""), 0)), "Sgd::step: gradient[0] is NaN");
}
