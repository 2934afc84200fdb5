#pragma once
// Squared 2-Wasserstein distance between Gaussians (Dowson & Landau 1982; the metric behind the
// barycenter of seed 002 Eqs. 14-15):
//   W2^2 = |mu_q - mu_p|^2 + tr(Sigma_q + Sigma_p - 2 (Sigma_p^{1/2} Sigma_q Sigma_p^{1/2})^{1/2})
// Diagonal: |mu_q - mu_p|^2 + |sigma_q - sigma_p|^2. Gradients with respect to q (derived):
// d mu_q = 2 (mu_q - mu_p); diagonal d log sigma_q = 2 (sigma_q - sigma_p) sigma_q; full
// d Sigma_q = I - Sigma_p^{1/2} (Sigma_p^{1/2} Sigma_q Sigma_p^{1/2})^{-1/2} Sigma_p^{1/2}
// (identity minus the optimal transport map from q to p).
#include "fvi/divergence/divergence_gradient.h"
#include "fvi/family/full_rank_gaussian.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/math/symmetric_sqrt.h"

namespace fvi {

template <typename T>
DiagDivergenceGradient<T> wasserstein2_squared_gradient(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  internal::check_same_dim("wasserstein2_squared", q, p);
  DiagDivergenceGradient<T> out;
  const VectorX<T> dm = q.mean() - p.mean();
  const VectorX<T> ds = q.sd() - p.sd();
  out.value = dm.squaredNorm() + ds.squaredNorm();
  out.d_mean = T(2) * dm;
  out.d_log_sd = T(2) * ds.cwiseProduct(q.sd());
  return out;
}

template <typename T>
T wasserstein2_squared(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  return wasserstein2_squared_gradient(q, p).value;
}

template <typename T>
FullDivergenceGradient<T> wasserstein2_squared_gradient(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p) {
  internal::check_same_dim("wasserstein2_squared", q, p);
  const MatrixX<T> sq = q.covariance(), sp = p.covariance();
  const MatrixX<T> root_p = symmetric_sqrt<T>(sp, "wasserstein2_squared");
  MatrixX<T> x = root_p * sq * root_p;
  x = T(0.5) * (x + x.transpose()).eval();
  Eigen::SelfAdjointEigenSolver<MatrixX<T>> eig(x);
  const VectorX<T> l = eig.eigenvalues().cwiseMax(T(0));
  FullDivergenceGradient<T> out;
  const VectorX<T> dm = q.mean() - p.mean();
  out.value = dm.squaredNorm() + sq.trace() + sp.trace() - T(2) * l.cwiseSqrt().sum();
  out.d_mean = T(2) * dm;
  const MatrixX<T> x_inv_sqrt =
      eig.eigenvectors() * l.cwiseSqrt().cwiseInverse().asDiagonal() * eig.eigenvectors().transpose();
  MatrixX<T> transport = root_p * x_inv_sqrt * root_p;
  out.d_cov = MatrixX<T>::Identity(q.dim(), q.dim()) - T(0.5) * (transport + transport.transpose());
  return out;
}

template <typename T>
T wasserstein2_squared(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p) {
  return wasserstein2_squared_gradient(q, p).value;
}

}  // namespace fvi
