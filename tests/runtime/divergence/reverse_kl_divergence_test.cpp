#include "fvi/divergence/reverse_kl_divergence.h"

#include <catch2/catch.hpp>

#include "support/divergence_reference.h"
#include "support/gradient_check.h"

using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

TEST_CASE("reverse KL equals int p log(p/q) and its gradients match finite differences", "[divergence][reverse_kl]") {
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.5, -1), Eigen::Vector2d(0.7, 1.3));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0.5), Eigen::Vector2d(1.1, 0.9));
  double integral = 0, error = 0;
  for (int i = 0; i < 2; ++i) {
    const auto r = fvi::test::kl_integral(p.mean()[i], p.sd()[i], q.mean()[i], q.sd()[i]);  // KL(p || q)
    integral += r.value;
    error += r.error;
  }
  CHECK(fvi::test::matches_integral(fvi::reverse_kl_divergence(q, p), {integral, error, 0}));

  auto r = check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::reverse_kl_divergence(MeanFieldGaussian<>::from_params(x), p); },
      q.params(), fvi::reverse_kl_divergence_gradient(q, p).params_gradient());
  INFO(r.report());
  CHECK(r.ok());

  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.5));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 0.8, 2.5, 1.7));
  const auto g = fvi::reverse_kl_divergence_gradient(qc, pc);
  CHECK_THAT(g.value, WithinRel(fvi::kl_divergence(pc, qc), 1e-15));
  auto rf = check_gradient(
      [&](const Eigen::VectorXd& x) { return fvi::reverse_kl_divergence(FullRankGaussian<>::from_params(x), pc); },
      qc.params(), qc.params_gradient_from_covariance(g.d_mean, g.d_cov));
  INFO(rf.report());
  CHECK(rf.ok());
}
