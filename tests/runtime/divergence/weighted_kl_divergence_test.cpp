#include "fvi/divergence/weighted_kl_divergence.h"

#include <catch2/catch.hpp>

#include "support/divergence_reference.h"
#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

TEST_CASE("weighted KL is (1/w) int q log(q/p), with gradients", "[divergence][weighted_kl]") {
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, 0.4), Eigen::VectorXd::Constant(1, 0.6));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, -0.2), Eigen::VectorXd::Constant(1, 1.4));
  const double w = 2.5;
  const auto integral = fvi::test::kl_integral(0.4, 0.6, -0.2, 1.4);
  CHECK(fvi::test::matches_integral(w * fvi::weighted_kl_divergence(q, p, w), integral));
  auto r = check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::weighted_kl_divergence(MeanFieldGaussian<>::from_params(x), p, w); },
      q.params(), fvi::weighted_kl_divergence_gradient(q, p, w).params_gradient());
  INFO(r.report());
  CHECK(r.ok());

  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0.2, 0.1), fvi::test::spd_matrix(2, 0.3, 1.5));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0, 0.5), fvi::test::spd_matrix(2, 0.8, 2.5, 1.7));
  const auto g = fvi::weighted_kl_divergence_gradient(qc, pc, w);
  CHECK_THAT(g.value, WithinRel(fvi::kl_divergence(qc, pc) / w, 1e-15));
  auto rf = check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::weighted_kl_divergence(FullRankGaussian<>::from_params(x), pc, w); },
      qc.params(), qc.params_gradient_from_covariance(g.d_mean, g.d_cov));
  INFO(rf.report());
  CHECK(rf.ok());

  CHECK_THROWS_WITH(fvi::weighted_kl_divergence(q, p, 0.0), "weighted_kl_divergence: w must be positive but is 0");
  CHECK_THROWS_WITH(fvi::weighted_kl_divergence(q, p, std::nan("")), Contains("w is NaN"));
}
