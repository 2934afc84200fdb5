#include "fvi/divergence/wasserstein_distance.h"

#include <cmath>

#include <unsupported/Eigen/MatrixFunctions>
#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

TEST_CASE("W2 between univariate Gaussians equals the quantile-coupling integral", "[divergence][wasserstein]") {
  // W2^2 = int_0^1 (F_q^{-1}(u) - F_p^{-1}(u))^2 du = int (dm + ds z)^2 phi(z) dz  (u = Phi(z)).
  const double mq = 0.4, sq = 0.6, mp = -0.5, sp = 1.7;
  const auto integral = fvi::test::integrate_real_line(
      [&](double z) { return std::pow((mq - mp) + (sq - sp) * z, 2) * std::exp(fvi::test::normal_logpdf(z, 0, 1)); }, 0, 1);
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, mq), Eigen::VectorXd::Constant(1, sq));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, mp), Eigen::VectorXd::Constant(1, sp));
  CHECK_THAT(fvi::wasserstein2_squared(q, p), WithinAbs(integral.value, 10 * integral.error + 1e-14));
}

TEST_CASE("W2 full covariance: closed form with an independent matrix square root, and gradients", "[divergence][wasserstein]") {
  const auto q = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.5));
  const auto p = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 0.8, 2.5, 1.7));
  const Eigen::MatrixXd sq = q.covariance(), sp = p.covariance();
  // Eigen's unsupported MatrixFunctions sqrt (Schur-based), and the roles of q and p swapped.
  const Eigen::MatrixXd rq = sq.sqrt();
  const Eigen::MatrixXd inner = rq * sp * rq;
  const double direct = (q.mean() - p.mean()).squaredNorm() + sq.trace() + sp.trace() - 2 * inner.sqrt().trace();
  CHECK_THAT(fvi::wasserstein2_squared(q, p), WithinRel(direct, 1e-12));
  CHECK_THAT(fvi::wasserstein2_squared(q, q), WithinAbs(0.0, 1e-13));

  const auto g = fvi::wasserstein2_squared_gradient(q, p);
  auto r = check_gradient([&](const Eigen::VectorXd& x) { return fvi::wasserstein2_squared(FullRankGaussian<>::from_params(x), p); },
                          q.params(), q.params_gradient_from_covariance(g.d_mean, g.d_cov));
  INFO(r.report());
  CHECK(r.ok());

  const auto qd = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.5, -1), Eigen::Vector2d(0.7, 1.3));
  const auto pd = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0.5), Eigen::Vector2d(1.1, 0.9));
  const FullRankGaussian<> qf(qd.mean(), qd.sd().asDiagonal().toDenseMatrix());
  const FullRankGaussian<> pf(pd.mean(), pd.sd().asDiagonal().toDenseMatrix());
  CHECK_THAT(fvi::wasserstein2_squared(qf, pf), WithinRel(fvi::wasserstein2_squared(qd, pd), 1e-13));
  auto rd = check_gradient([&](const Eigen::VectorXd& x) { return fvi::wasserstein2_squared(MeanFieldGaussian<>::from_params(x), pd); },
                           qd.params(), fvi::wasserstein2_squared_gradient(qd, pd).params_gradient());
  INFO(rd.report());
  CHECK(rd.ok());
}
