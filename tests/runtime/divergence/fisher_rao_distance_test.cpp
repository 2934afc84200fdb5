#include "fvi/divergence/fisher_rao_distance.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/quadrature.h"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

namespace {
MeanFieldGaussian<> univariate_q(double m, double s) {
  return MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, m), Eigen::VectorXd::Constant(1, s));
}

// Length of the Fisher-Rao geodesic between (m1, s1) and (m2, s2), integrated numerically. The
// metric ds^2 = (dmu^2 + 2 dsigma^2) / sigma^2 is 2x the hyperbolic half-plane metric in
// (x, y) = (mu / sqrt 2, sigma); geodesics are vertical lines or semicircles centred on y = 0.
fvi::test::QuadratureResult geodesic_length(double m1, double s1, double m2, double s2) {
  const double x1 = m1 / std::sqrt(2.0), x2 = m2 / std::sqrt(2.0);
  if (x1 == x2) {
    return fvi::test::integrate([](double y) { return std::sqrt(2.0) / y; }, std::min(s1, s2), std::max(s1, s2));
  }
  const double c = ((x2 * x2 + s2 * s2) - (x1 * x1 + s1 * s1)) / (2 * (x2 - x1));
  const double t1 = std::atan2(s1, x1 - c), t2 = std::atan2(s2, x2 - c);
  // On the circle x = c + r cos t, y = r sin t: |ds| = sqrt(2) r |dt| / (r sin t).
  return fvi::test::integrate([](double t) { return std::sqrt(2.0) / std::sin(t); }, std::min(t1, t2), std::max(t1, t2));
}
}  // namespace

TEST_CASE("Fisher-Rao distance equals the geodesic length and the half-plane closed form", "[divergence][fisher_rao]") {
  const double cases[][4] = {{0, 1, 0, 2}, {0, 1, 1, 1}, {0.5, 0.3, -1, 2}, {3, 2, 0, 0.5}, {10, 0.1, -10, 0.2}, {0, 1, 1e-4, 1}};
  for (const auto& c : cases) {
    const double d = fvi::fisher_rao_distance(univariate_q(c[0], c[1]), univariate_q(c[2], c[3]));
    const auto len = geodesic_length(c[0], c[1], c[2], c[3]);
    INFO(c[0] << " " << c[1] << " " << c[2] << " " << c[3] << ": closed " << d << " geodesic " << len.value);
    // Quadrature error estimate, plus the rounding of the two end angles (<= 2 eps pi each, times
    // the integrand sqrt 2 / sin t <= sqrt 2 / sin(min angle)), plus rounding relative to the length.
    CHECK_THAT(d, WithinAbs(len.value, 10 * len.error + 1e-14 + 1e-13 * len.value));
    // Hyperbolic distance: sqrt 2 acosh(1 + x), x = ((dm^2 / 2) + ds^2) / (2 s1 s2), evaluated as
    // log1p(x + sqrt(x (2 + x))) to stay accurate when x is tiny.
    const double x = (0.5 * (c[0] - c[2]) * (c[0] - c[2]) + (c[1] - c[3]) * (c[1] - c[3])) / (2 * c[1] * c[3]);
    CHECK_THAT(d, WithinRel(std::sqrt(2.0) * std::log1p(x + std::sqrt(x * (2 + x))), 1e-12));
    // Symmetric.
    CHECK_THAT(fvi::fisher_rao_distance(univariate_q(c[2], c[3]), univariate_q(c[0], c[1])), WithinRel(d, 1e-13));
  }
  // A non-geodesic path (straight line in (mu, sigma)) is longer.
  const double m1 = 0, s1 = 1, m2 = 3, s2 = 0.5;
  const double straight = fvi::test::integrate(
                              [&](double t) {
                                const double s = s1 + t * (s2 - s1);
                                return std::sqrt((m2 - m1) * (m2 - m1) + 2 * (s2 - s1) * (s2 - s1)) / s;
                              },
                              0, 1)
                              .value;
  CHECK(straight > fvi::fisher_rao_distance(univariate_q(m1, s1), univariate_q(m2, s2)));
  CHECK(fvi::fisher_rao_distance(univariate_q(1, 2), univariate_q(1, 2)) == 0);
}

TEST_CASE("Fisher-Rao on the mean-field family and its gradient", "[divergence][fisher_rao]") {
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0.5, -1, 2), Eigen::Vector3d(0.7, 1.3, 0.4));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0, 0.5, 1.5), Eigen::Vector3d(1.1, 0.9, 0.8));
  double ss = 0;
  for (int i = 0; i < 3; ++i) {
    const double di =
        fvi::fisher_rao_distance(univariate_q(q.mean()[i], q.sd()[i]), univariate_q(p.mean()[i], p.sd()[i]));
    ss += di * di;
  }
  CHECK_THAT(fvi::fisher_rao_distance(q, p), WithinRel(std::sqrt(ss), 1e-14));
  auto r = check_gradient([&](const Eigen::VectorXd& x) { return fvi::fisher_rao_distance(MeanFieldGaussian<>::from_params(x), p); },
                          q.params(), fvi::fisher_rao_distance_gradient(q, p).params_gradient());
  INFO(r.report());
  CHECK(r.ok());
  // Close to p (Delta small) the gradient is still accurate.
  const auto near = MeanFieldGaussian<>::from_mean_sd(p.mean().array() + 1e-3, p.sd().array() * 1.001);
  auto rn = check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::fisher_rao_distance(MeanFieldGaussian<>::from_params(x), p); },
      near.params(), fvi::fisher_rao_distance_gradient(near, p).params_gradient(), {16 * 2.2e-16, 0, 10, 1e-6});
  INFO(rn.report());
  CHECK(rn.ok());
  // At q = p: the zero subgradient.
  CHECK(fvi::fisher_rao_distance_gradient(p, p).params_gradient().isZero(0));
}
