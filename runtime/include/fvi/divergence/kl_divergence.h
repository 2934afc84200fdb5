#pragma once
// KL(q || p) between Gaussians (spec 000 §3.2 item 1; standard closed form):
//   KL = 1/2 [ tr(Sigma_p^{-1} Sigma_q) + (mu_p - mu_q)^T Sigma_p^{-1} (mu_p - mu_q) - D
//              + log det Sigma_p - log det Sigma_q ]
// Gradients with respect to q: d mu_q = Sigma_p^{-1}(mu_q - mu_p), d Sigma_q = 1/2 (Sigma_p^{-1} - Sigma_q^{-1}).
#include <cmath>

#include "fvi/divergence/divergence_gradient.h"
#include "fvi/family/full_rank_gaussian.h"
#include "fvi/family/mean_field_gaussian.h"

namespace fvi {

template <typename T>
DiagDivergenceGradient<T> kl_divergence_gradient(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  internal::check_same_dim("kl_divergence", q, p);
  DiagDivergenceGradient<T> out;
  const VectorX<T> delta = q.log_sd() - p.log_sd();                // log(sigma_q / sigma_p)
  const VectorX<T> r_minus_1 = (T(2) * delta.array()).unaryExpr([](T x) { return std::expm1(x); }).matrix();
  const VectorX<T> d = q.mean() - p.mean();
  const VectorX<T> var_p = p.variance();
  // r - 1 - log r with r = sigma_q^2 / sigma_p^2, written as expm1(2 delta) - 2 delta.
  out.value = T(0.5) * ((r_minus_1 - T(2) * delta).array() + d.array().square() / var_p.array()).sum();
  out.d_mean = d.cwiseQuotient(var_p);
  out.d_log_sd = r_minus_1;
  return out;
}

template <typename T>
T kl_divergence(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  return kl_divergence_gradient(q, p).value;
}

template <typename T>
T kl_divergence(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p) {
  internal::check_same_dim("kl_divergence", q, p);
  const auto lp = p.chol().template triangularView<Eigen::Lower>();
  const MatrixX<T> m = lp.solve(q.chol());  // L_p^{-1} L_q, lower triangular
  const VectorX<T> w = lp.solve(q.mean() - p.mean());
  return T(0.5) * (m.squaredNorm() + w.squaredNorm() - T(q.dim())) - m.diagonal().array().log().sum();
}

template <typename T>
FullDivergenceGradient<T> kl_divergence_gradient(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p) {
  FullDivergenceGradient<T> out;
  out.value = kl_divergence(q, p);
  const MatrixX<T> prec_p = p.precision();
  out.d_mean = prec_p * (q.mean() - p.mean());
  out.d_cov = T(0.5) * (prec_p - q.precision());
  return out;
}

}  // namespace fvi
