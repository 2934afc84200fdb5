#include "fvi/family/log_normal.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::LogNormal;
using fvi::test::check_gradient;

namespace {
LogNormal<> log_normal_example() { return LogNormal<>(Eigen::Vector2d(0.3, -0.5), Eigen::Vector2d(-0.6, -0.1)); }

double density_1d(double theta, double mu, double sigma) {
  // Textbook log-normal density.
  const double pi = std::acos(-1.0);
  const double l = std::log(theta);
  return std::exp(-(l - mu) * (l - mu) / (2 * sigma * sigma)) / (theta * sigma * std::sqrt(2 * pi));
}
}  // namespace

TEST_CASE("log-normal: density, moments and entropy by quadrature over theta > 0", "[family][log_normal]") {
  const auto q = log_normal_example();
  for (int i = 0; i < 2; ++i) {
    const double mu = q.log_space().mean()[i], sigma = q.log_space().sd()[i];
    auto pdf = [&](double t) { return t <= 0 ? 0.0 : density_1d(t, mu, sigma); };
    const double upper = std::exp(mu + 12 * sigma);
    CHECK_THAT(fvi::test::integrate(pdf, 0, upper).value, WithinRel(1.0, 1e-11));
    CHECK_THAT(fvi::test::integrate([&](double t) { return t * pdf(t); }, 0, upper).value,
               WithinRel(q.mean()[i], 1e-11));
    const double m = q.mean()[i];
    CHECK_THAT(fvi::test::integrate([&](double t) { return (t - m) * (t - m) * pdf(t); }, 0, upper).value,
               WithinRel(q.variance()[i], 1e-10));
  }
  const double h = fvi::test::integrate(
                       [&](double t) {
                         const double p = t <= 0 ? 0.0 : density_1d(t, 0.3, std::exp(-0.6));
                         return p > 0 ? -p * std::log(p) : 0.0;
                       },
                       0, std::exp(0.3 + 12 * std::exp(-0.6)))
                       .value +
                   fvi::test::integrate(
                       [&](double t) {
                         const double p = t <= 0 ? 0.0 : density_1d(t, -0.5, std::exp(-0.1));
                         return p > 0 ? -p * std::log(p) : 0.0;
                       },
                       0, std::exp(-0.5 + 12 * std::exp(-0.1)))
                       .value;
  CHECK_THAT(q.entropy(), WithinRel(h, 1e-9));

  const Eigen::MatrixXd eps = fvi::test::fixed_noise(2, 3);
  const Eigen::MatrixXd theta = q.sample(eps);
  for (int s = 0; s < 3; ++s) {
    const double ref = std::log(density_1d(theta(0, s), 0.3, std::exp(-0.6))) +
                       std::log(density_1d(theta(1, s), -0.5, std::exp(-0.1)));
    CHECK_THAT(q.log_density(theta)[s], WithinRel(ref, 1e-12));
  }
}

TEST_CASE("log-normal: score, vjp and STL gradient match finite differences", "[family][log_normal]") {
  const auto q = log_normal_example();
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(2, 4, 0.4);
  const Eigen::VectorXd t0 = q.sample(eps.col(0));
  auto r1 = check_gradient([&](const Eigen::VectorXd& t) { return q.log_density(t)[0]; }, t0, q.score(t0));
  INFO(r1.report());
  CHECK(r1.ok());

  const Eigen::MatrixXd cot = fvi::test::fixed_noise(2, 4, 1.7);
  auto push = [&](const Eigen::VectorXd& p) { return (LogNormal<>::from_params(p).sample(eps).array() * cot.array()).sum(); };
  auto r2 = check_gradient(push, q.params(), q.vjp(eps, cot));
  INFO(r2.report());
  CHECK(r2.ok());

  // STL for a Gamma(2, 3) target on each coordinate: log p = log theta - 3 theta.
  auto objective = [&](const Eigen::VectorXd& p) {
    const Eigen::MatrixXd th = LogNormal<>::from_params(p).sample(eps);
    const Eigen::VectorXd lp = (th.array().log() - 3 * th.array()).colwise().sum().transpose();
    return (lp - q.log_density(th)).mean();
  };
  const Eigen::MatrixXd th = q.sample(eps);
  const Eigen::MatrixXd glp = (th.array().inverse() - 3).matrix();
  auto r3 = check_gradient(objective, q.params(), q.stl_gradient(eps, glp));
  INFO(r3.report());
  CHECK(r3.ok());

  auto r4 = check_gradient([](const Eigen::VectorXd& p) { return LogNormal<>::from_params(p).entropy(); },
                           q.params(), q.entropy_gradient());
  INFO(r4.report());
  CHECK(r4.ok());
}

TEST_CASE("log-normal rejects non-positive values", "[family][log_normal]") {
  const auto q = log_normal_example();
  CHECK_THROWS_WITH(q.log_density(Eigen::Vector2d(1.0, -2.0)), Contains("theta[1] must be positive"));
  CHECK_THROWS_WITH(LogNormal<>(Eigen::Vector2d(0, std::nan("")), Eigen::Vector2d(0, 0)), Contains("mean[1] is NaN"));
}
