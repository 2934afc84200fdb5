#include "fvi/family/mean_field_gaussian.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "fvi/rng.h"
#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

namespace {
MeanFieldGaussian<> mean_field_example() {
  Eigen::Vector3d mean(0.5, -1.0, 2.0), log_sd(-0.3, 0.2, 0.7);
  return MeanFieldGaussian<>(mean, log_sd);
}
}  // namespace

TEST_CASE("mean-field Gaussian: sampling, density and entropy", "[family][mean_field]") {
  const auto q = mean_field_example();
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 4);
  const Eigen::MatrixXd z = q.sample(eps);
  const Eigen::VectorXd lq = q.log_density(z);
  for (int s = 0; s < 4; ++s) {
    double ref = 0;
    for (int i = 0; i < 3; ++i) {
      CHECK_THAT(z(i, s), WithinRel(q.mean()[i] + std::exp(q.log_sd()[i]) * eps(i, s), 1e-15));
      ref += fvi::test::normal_logpdf(z(i, s), q.mean()[i], std::exp(q.log_sd()[i]));
    }
    CHECK_THAT(lq[s], WithinRel(ref, 1e-13));
  }
  // Entropy = sum over coordinates of -int q log q (independent 1-D quadrature).
  double h = 0;
  for (int i = 0; i < 3; ++i) {
    const double m = q.mean()[i], sd = q.sd()[i];
    h += fvi::test::integrate_real_line(
             [&](double x) {
               const double l = fvi::test::normal_logpdf(x, m, sd);
               return -std::exp(l) * l;
             },
             m, sd)
             .value;
  }
  CHECK_THAT(q.entropy(), WithinRel(h, 1e-11));
  // Normalisation in each coordinate.
  const auto mass = fvi::test::integrate_real_line(
      [&](double x) { return std::exp(fvi::test::normal_logpdf(x, q.mean()[1], q.sd()[1])); }, 0, 1);
  CHECK_THAT(mass.value, WithinRel(1.0, 1e-12));
}

TEST_CASE("mean-field Gaussian: score, vjp and entropy gradient match finite differences",
          "[family][mean_field]") {
  const auto q = mean_field_example();
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 1, 0.4);
  const Eigen::VectorXd z0 = q.sample(eps);
  auto logq = [&](const Eigen::VectorXd& z) { return q.log_density(z)[0]; };
  auto r1 = check_gradient(logq, z0, q.score(z0));
  INFO(r1.report());
  CHECK(r1.ok());

  const Eigen::MatrixXd eps5 = fvi::test::fixed_noise(3, 5, 1.1);
  const Eigen::MatrixXd cot = fvi::test::fixed_noise(3, 5, 2.7);
  auto pushforward = [&](const Eigen::VectorXd& p) {
    return (MeanFieldGaussian<>::from_params(p).sample(eps5).array() * cot.array()).sum();
  };
  auto r2 = check_gradient(pushforward, q.params(), q.vjp(eps5, cot));
  INFO(r2.report());
  CHECK(r2.ok());

  auto entropy = [](const Eigen::VectorXd& p) { return MeanFieldGaussian<>::from_params(p).entropy(); };
  auto r3 = check_gradient(entropy, q.params(), q.entropy_gradient());
  INFO(r3.report());
  CHECK(r3.ok());
}

TEST_CASE("mean-field Gaussian: STL gradient", "[family][mean_field][stl]") {
  const auto q = mean_field_example();
  // Target p = N(m_p, diag(s_p^2)).
  const Eigen::Vector3d mp(1.0, 0.0, -1.0), sp(0.5, 2.0, 1.5);
  auto grad_log_p = [&](const Eigen::MatrixXd& z) {
    return Eigen::MatrixXd(-((z.colwise() - mp).array().colwise() / sp.array().square()));
  };
  auto log_p = [&](const Eigen::MatrixXd& z) {
    return Eigen::VectorXd(-0.5 * ((z.colwise() - mp).array().colwise() / sp.array()).square().colwise().sum().transpose());
  };

  SECTION("equals the gradient of the single-sample objective with q's parameters frozen in log q") {
    const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 6, 0.9);
    const Eigen::VectorXd p0 = q.params();
    auto objective = [&](const Eigen::VectorXd& p) {
      const Eigen::MatrixXd z = MeanFieldGaussian<>::from_params(p).sample(eps);
      return (log_p(z) - q.log_density(z)).mean();  // log q at the frozen parameters p0 (seed 002 Eq. 6)
    };
    const Eigen::MatrixXd z = q.sample(eps);
    auto r = check_gradient(objective, p0, q.stl_gradient(eps, grad_log_p(z)));
    INFO(r.report());
    CHECK(r.ok());
  }

  SECTION("sticks the landing: zero variance (exactly zero) when q equals the target") {
    const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 7, 0.2);
    const Eigen::MatrixXd z = q.sample(eps);
    const Eigen::VectorXd g = q.stl_gradient(eps, q.score(z));
    CHECK(g.cwiseAbs().maxCoeff() <= 1e-14);
  }

  SECTION("is unbiased for the gradient of -KL(q || p)") {
    const int s = 20000;
    fvi::CounterRng rng(fvi::RngKey{17, 0, 0, 0});
    const Eigen::MatrixXd eps = rng.normal(3, s);
    const Eigen::MatrixXd z = q.sample(eps);
    const Eigen::MatrixXd gz = grad_log_p(z) - q.score(z);
    // Per-draw gradients, for the Monte Carlo standard error.
    Eigen::MatrixXd per_draw(6, s);
    for (int k = 0; k < s; ++k) per_draw.col(k) = q.vjp(eps.col(k), gz.col(k));
    const Eigen::VectorXd mean = per_draw.rowwise().mean();
    const Eigen::VectorXd se =
        ((per_draw.colwise() - mean).array().square().rowwise().sum() / (s - 1)).sqrt().matrix() / std::sqrt(double(s));
    CHECK((mean - q.stl_gradient(eps, grad_log_p(z))).cwiseAbs().maxCoeff() <= 1e-12 * (1 + mean.cwiseAbs().maxCoeff()));
    // -d KL(q||p)/d mu = (m_p - mu) / s_p^2 ; -d KL/d log sigma = 1 - sigma^2 / s_p^2 (textbook).
    Eigen::VectorXd exact(6);
    exact.head(3) = (mp - q.mean()).cwiseQuotient(sp.cwiseAbs2());
    exact.tail(3) = (1 - q.variance().cwiseQuotient(sp.cwiseAbs2()).array()).matrix();
    for (int i = 0; i < 6; ++i) CHECK_THAT(mean[i], WithinAbs(exact[i], 5 * se[i]));
  }
}

TEST_CASE("mean-field Gaussian rejects invalid parameters with a clear message", "[family][mean_field]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(MeanFieldGaussian<>(Eigen::Vector2d(0, nan), Eigen::Vector2d(0, 0)),
                    "MeanFieldGaussian: mean[1] is NaN");
  CHECK_THROWS_WITH(MeanFieldGaussian<>(Eigen::Vector2d(0, 0), Eigen::Vector3d(0, 0, 0)), Contains("log_sd has size 3"));
  CHECK_THROWS_WITH(MeanFieldGaussian<>(Eigen::Vector2d(0, 0), Eigen::Vector2d(0, 1000)),
                    "MeanFieldGaussian: exp(log_sd)[1] is inf");
  CHECK_THROWS_WITH(MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0), Eigen::Vector2d(1, -1)),
                    Contains("sd[1] must be positive"));
  CHECK_THROWS_WITH(mean_field_example().sample(Eigen::MatrixXd::Zero(2, 3)), Contains("eps rows has size 2 but 3"));
}

TEMPLATE_TEST_CASE("mean-field Gaussian works in float and double", "[family][mean_field][float]", float, double) {
  using T = TestType;
  fvi::VectorX<T> mean(3), log_sd(3);
  mean << T(0.5), T(-1), T(2);
  log_sd << T(-0.3), T(0.2), T(0.7);
  const MeanFieldGaussian<T> q(mean, log_sd);
  const Eigen::MatrixXd eps_d = fvi::test::fixed_noise(3, 4);
  const fvi::MatrixX<T> eps = eps_d.cast<T>();
  const auto reference = mean_field_example();
  const Eigen::VectorXd lq_ref = reference.log_density(reference.sample(eps_d));
  const Eigen::VectorXd lq = q.log_density(q.sample(eps)).template cast<double>();
  // A few roundings per term, each relative eps_T, on terms of size <= |log q| + D log(2 pi).
  const double tol = 64 * double(std::numeric_limits<T>::epsilon()) * (lq_ref.cwiseAbs().maxCoeff() + 6);
  for (int s = 0; s < 4; ++s) CHECK_THAT(lq[s], WithinAbs(lq_ref[s], tol));
  CHECK_THAT(double(q.entropy()), WithinAbs(reference.entropy(), tol));
}
