#include "fvi/divergence/wasserstein_barycenter.h"

#include <cmath>
#include <vector>

#include <unsupported/Eigen/MatrixFunctions>
#include <catch2/catch.hpp>

#include "fvi/divergence/wasserstein_distance.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;

namespace {
std::vector<MeanFieldGaussian<>> diag_inputs() {
  return {MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0, 1, 2), Eigen::Vector3d(0.5, 1.0, 2.0)),
          MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(1, -1, 0), Eigen::Vector3d(1.5, 0.2, 0.7)),
          MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(-2, 0, 1), Eigen::Vector3d(0.1, 3.0, 1.1))};
}
std::vector<FullRankGaussian<>> full_inputs() {
  return {FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 1, 2), fvi::test::spd_matrix(3, 0.3, 2.0, 0.1)),
          FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(1, -1, 0), fvi::test::spd_matrix(3, 0.5, 4.0, 1.3)),
          FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(-2, 0, 1), fvi::test::spd_matrix(3, 0.1, 1.0, 2.9))};
}
double objective(const FullRankGaussian<>& b, const std::vector<FullRankGaussian<>>& qs, const Eigen::VectorXd& w) {
  double s = 0;
  for (std::size_t k = 0; k < qs.size(); ++k) s += w[Eigen::Index(k)] * fvi::wasserstein2_squared(b, qs[k]);
  return s;
}
}  // namespace

TEST_CASE("diagonal barycenter equals the fixed-point solution on diagonal inputs (spec 002 §4.4 check 5)",
          "[divergence][barycenter]") {
  const auto diag = diag_inputs();
  const Eigen::Vector3d w(0.2, 0.5, 0.3);
  for (const Eigen::VectorXd& weights : {Eigen::VectorXd(), Eigen::VectorXd(w)}) {
    const auto b = fvi::wasserstein_barycenter(diag, weights);
    std::vector<FullRankGaussian<>> full;
    for (const auto& q : diag) full.emplace_back(q.mean(), q.sd().asDiagonal().toDenseMatrix());
    const auto fb = fvi::wasserstein_barycenter(full, weights);
    CHECK((fb.distribution.mean() - b.mean()).cwiseAbs().maxCoeff() <= 1e-14);
    const Eigen::MatrixXd expected = b.variance().asDiagonal();
    CHECK((fb.distribution.covariance() - expected).cwiseAbs().maxCoeff() <= 1e-13 * expected.maxCoeff());
    // sigma_* = mean of sigma_k (not of variances).
    const Eigen::VectorXd ww = weights.size() ? Eigen::VectorXd(w) : Eigen::VectorXd::Constant(3, 1.0 / 3);
    for (int i = 0; i < 3; ++i) {
      CHECK_THAT(b.sd()[i], WithinRel(ww[0] * diag[0].sd()[i] + ww[1] * diag[1].sd()[i] + ww[2] * diag[2].sd()[i], 1e-14));
    }
  }
}

TEST_CASE("full-covariance barycenter solves Eq. 15 and minimises the summed squared W2", "[divergence][barycenter]") {
  const auto qs = full_inputs();
  const Eigen::Vector3d w(0.2, 0.5, 0.3);
  const auto b = fvi::wasserstein_barycenter(qs, Eigen::VectorXd(w));
  INFO("iterations " << b.iterations << " relative change " << b.relative_change);
  const Eigen::MatrixXd s = b.distribution.covariance();
  // Fixed-point residual of seed 002 Eq. 15 with an independent (Schur) matrix square root.
  const Eigen::MatrixXd rs = s.sqrt();
  Eigen::MatrixXd rhs = Eigen::MatrixXd::Zero(3, 3);
  for (int k = 0; k < 3; ++k) {
    const Eigen::MatrixXd inner = rs * qs[k].covariance() * rs;
    rhs += w[k] * inner.sqrt();
  }
  CHECK((rhs - s).norm() <= 1e-11 * s.norm());
  // First-order optimality: sum_k w_k grad W2^2(b, q_k) = 0; and perturbations do not decrease it.
  Eigen::VectorXd grad = Eigen::VectorXd::Zero(b.distribution.num_params());
  for (int k = 0; k < 3; ++k) {
    const auto g = fvi::wasserstein2_squared_gradient(b.distribution, qs[k]);
    grad += w[k] * b.distribution.params_gradient_from_covariance(g.d_mean, g.d_cov);
  }
  CHECK(grad.cwiseAbs().maxCoeff() <= 1e-10);
  const double f0 = objective(b.distribution, qs, w);
  for (int j = 0; j < b.distribution.num_params(); ++j) {
    for (double h : {-1e-3, 1e-3}) {
      Eigen::VectorXd x = b.distribution.params();
      x[j] += h;
      CHECK(objective(FullRankGaussian<>::from_params(x), qs, w) >= f0);
    }
  }
}

TEST_CASE("structured global barycenter (SFVI-Avg server step)", "[divergence][barycenter]") {
  const auto qs = full_inputs();
  std::vector<fvi::StructuredGlobalGaussian<>> gs;
  for (const auto& q : qs) gs.push_back(fvi::StructuredGlobalGaussian<>::from_mean_covariance(q.mean(), q.covariance()));
  const auto b = fvi::wasserstein_barycenter(gs);
  const auto fb = fvi::wasserstein_barycenter(qs);
  CHECK((b.covariance() - fb.distribution.covariance()).cwiseAbs().maxCoeff() <= 1e-12);
  CHECK(b.correlated());
  std::vector<fvi::StructuredGlobalGaussian<>> diag;
  for (const auto& q : diag_inputs()) diag.emplace_back(q.mean(), q.log_sd());
  const auto bd = fvi::wasserstein_barycenter(diag);
  CHECK_FALSE(bd.correlated());
  CHECK((bd.sd() - fvi::wasserstein_barycenter(diag_inputs()).sd()).cwiseAbs().maxCoeff() <= 1e-15);
}

TEST_CASE("barycenter input errors and non-convergence are reported", "[divergence][barycenter]") {
  CHECK_THROWS_WITH(fvi::wasserstein_barycenter(std::vector<MeanFieldGaussian<>>{}), Contains("no distributions"));
  auto mixed = diag_inputs();
  mixed.push_back(MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0), Eigen::Vector2d(1, 1)));
  CHECK_THROWS_WITH(fvi::wasserstein_barycenter(mixed), Contains("distribution 3 dimension has size 2 but 3"));
  CHECK_THROWS_WITH(fvi::wasserstein_barycenter(diag_inputs(), Eigen::Vector3d(1, -1, 1)), Contains("weight must be non-negative"));
  CHECK_THROWS_WITH(fvi::wasserstein_barycenter(diag_inputs(), Eigen::Vector3d(0, 0, 0)), Contains("weights sum to zero"));
  fvi::BarycenterOptions one_step;
  one_step.max_iterations = 1;
  CHECK_THROWS_AS(fvi::wasserstein_barycenter(full_inputs(), Eigen::VectorXd(), one_step), fvi::ConvergenceError);
}
