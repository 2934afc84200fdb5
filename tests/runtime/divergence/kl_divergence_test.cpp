#include "fvi/divergence/kl_divergence.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/rng.h"
#include "support/divergence_reference.h"
#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

namespace {
MeanFieldGaussian<> mf(Eigen::VectorXd m, Eigen::VectorXd s) { return MeanFieldGaussian<>::from_mean_sd(m, s); }
MeanFieldGaussian<> univariate(double m, double s) {
  return mf(Eigen::VectorXd::Constant(1, m), Eigen::VectorXd::Constant(1, s));
}
}  // namespace

TEST_CASE("KL between univariate Gaussians equals its closed form and a numerical integral", "[divergence][kl]") {
  const double cases[][4] = {{0, 1, 0, 1}, {0.5, 0.3, -1, 2}, {3, 2, 0, 0.5}, {-2, 1e-2, -2.01, 1.2e-2}, {1, 4, 1, 1}};
  for (const auto& c : cases) {
    const double value = fvi::kl_divergence(univariate(c[0], c[1]), univariate(c[2], c[3]));
    // Textbook: log(sp/sq) + (sq^2 + (mq - mp)^2) / (2 sp^2) - 1/2.
    const double textbook = std::log(c[3] / c[1]) + (c[1] * c[1] + (c[0] - c[2]) * (c[0] - c[2])) / (2 * c[3] * c[3]) - 0.5;
    CHECK_THAT(value, WithinAbs(textbook, 1e-14 * std::max(1.0, std::abs(textbook)) * 10));
    const auto integral = fvi::test::kl_integral(c[0], c[1], c[2], c[3]);
    INFO("case " << c[0] << " " << c[1] << " " << c[2] << " " << c[3] << ": closed " << value << " integral "
                 << integral.value << " +- " << integral.error);
    CHECK(fvi::test::matches_integral(value, integral));
  }
}

TEST_CASE("KL: diagonal is a sum over coordinates; full agrees with diagonal and with Monte Carlo", "[divergence][kl]") {
  const auto q = mf(Eigen::Vector3d(0.5, -1, 2), Eigen::Vector3d(0.7, 1.3, 0.4));
  const auto p = mf(Eigen::Vector3d(0, 0.5, 1.5), Eigen::Vector3d(1.1, 0.9, 0.8));
  double sum = 0;
  for (int i = 0; i < 3; ++i) sum += fvi::test::kl_integral(q.mean()[i], q.sd()[i], p.mean()[i], p.sd()[i]).value;
  CHECK_THAT(fvi::kl_divergence(q, p), WithinRel(sum, 1e-11));

  const auto qf = FullRankGaussian<>(q.mean(), q.sd().asDiagonal().toDenseMatrix());
  const auto pf = FullRankGaussian<>(p.mean(), p.sd().asDiagonal().toDenseMatrix());
  CHECK_THAT(fvi::kl_divergence(qf, pf), WithinRel(fvi::kl_divergence(q, p), 1e-13));

  // Correlated: Monte Carlo E_q[log q - log p] with reference densities, within 5 standard errors.
  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.5));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 0.8, 2.5, 1.7));
  fvi::CounterRng rng(fvi::RngKey{3, 0, 0, 0});
  const int n = 100000;
  const Eigen::MatrixXd z = qc.sample(rng.normal(3, n));
  Eigen::VectorXd f(n);
  for (int s = 0; s < n; ++s) {
    f[s] = fvi::test::mvn_logpdf(z.col(s), qc.mean(), qc.covariance()) - fvi::test::mvn_logpdf(z.col(s), pc.mean(), pc.covariance());
  }
  const double se = std::sqrt((f.array() - f.mean()).square().sum() / (n - 1) / n);
  CHECK_THAT(fvi::kl_divergence(qc, pc), WithinAbs(f.mean(), 5 * se));
  // Closed form with determinants and inverses, written out in the test.
  const Eigen::MatrixXd sp = pc.covariance(), sq = qc.covariance();
  const Eigen::VectorXd d = pc.mean() - qc.mean();
  const double direct = 0.5 * ((sp.inverse() * sq).trace() + d.dot(sp.inverse() * d) - 3 + std::log(sp.determinant() / sq.determinant()));
  CHECK_THAT(fvi::kl_divergence(qc, pc), WithinRel(direct, 1e-12));
  CHECK_THAT(fvi::kl_divergence(qc, qc), WithinAbs(0.0, 1e-14));
}

TEST_CASE("KL gradients with respect to q match finite differences", "[divergence][kl]") {
  const auto q = mf(Eigen::Vector3d(0.5, -1, 2), Eigen::Vector3d(0.7, 1.3, 0.4));
  const auto p = mf(Eigen::Vector3d(0, 0.5, 1.5), Eigen::Vector3d(1.1, 0.9, 0.8));
  auto r = check_gradient([&](const Eigen::VectorXd& x) { return fvi::kl_divergence(MeanFieldGaussian<>::from_params(x), p); },
                          q.params(), fvi::kl_divergence_gradient(q, p).params_gradient());
  INFO(r.report());
  CHECK(r.ok());

  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.5));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 0.8, 2.5, 1.7));
  const auto g = fvi::kl_divergence_gradient(qc, pc);
  auto rf = check_gradient([&](const Eigen::VectorXd& x) { return fvi::kl_divergence(FullRankGaussian<>::from_params(x), pc); },
                           qc.params(), qc.params_gradient_from_covariance(g.d_mean, g.d_cov));
  INFO(rf.report());
  CHECK(rf.ok());
}

TEST_CASE("KL: invalid inputs give clear errors", "[divergence][kl]") {
  Eigen::Matrix2d indefinite;
  indefinite << 1, 1.5, 1.5, 1;
  CHECK_THROWS_WITH(fvi::kl_divergence(FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0, 0), Eigen::Matrix2d::Identity()),
                                       FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0, 0), indefinite)),
                    Contains("covariance is not positive definite"));
  CHECK_THROWS_WITH(fvi::kl_divergence(univariate(0, 1), mf(Eigen::Vector2d(0, 0), Eigen::Vector2d(1, 1))),
                    "kl_divergence: p dimension has size 2 but 1 was expected");
  CHECK_THROWS_WITH(univariate(std::nan(""), 1), Contains("mean is NaN"));
}

TEMPLATE_TEST_CASE("KL in float agrees with double to float rounding", "[divergence][kl][float]", float, double) {
  using T = TestType;
  fvi::VectorX<T> mq(2), sq(2), mp(2), sp(2);
  mq << T(0.5), T(-1);
  sq << T(0.7), T(1.3);
  mp << T(0), T(0.5);
  sp << T(1.1), T(0.9);
  const auto q = MeanFieldGaussian<T>::from_mean_sd(mq, sq), p = MeanFieldGaussian<T>::from_mean_sd(mp, sp);
  const double ref = fvi::kl_divergence(mf(mq.template cast<double>(), sq.template cast<double>()),
                                        mf(mp.template cast<double>(), sp.template cast<double>()));
  // Terms of size <= 3, a few dozen roundings.
  CHECK_THAT(double(fvi::kl_divergence(q, p)), WithinAbs(ref, 100 * double(std::numeric_limits<T>::epsilon()) * 3));
}
