#pragma once
// Reverse KL: D_RKL(q : p) = KL(p || q) (spec 000 §3.2 item 2), the alpha -> 0 limit of the
// alpha-Renyi divergence. Gradients with respect to q (the second argument of the KL):
//   d mu_q = Sigma_q^{-1} (mu_q - mu_p),
//   d Sigma_q = 1/2 [Sigma_q^{-1} - Sigma_q^{-1} (Sigma_p + d d^T) Sigma_q^{-1}],  d = mu_q - mu_p.
#include "fvi/divergence/kl_divergence.h"

namespace fvi {

template <typename T>
T reverse_kl_divergence(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  return kl_divergence(p, q);
}

template <typename T>
DiagDivergenceGradient<T> reverse_kl_divergence_gradient(const MeanFieldGaussian<T>& q,
                                                         const MeanFieldGaussian<T>& p) {
  internal::check_same_dim("reverse_kl_divergence", q, p);
  DiagDivergenceGradient<T> out;
  out.value = kl_divergence(p, q);
  const VectorX<T> d = q.mean() - p.mean();
  const VectorX<T> var_q = q.variance();
  out.d_mean = d.cwiseQuotient(var_q);
  out.d_log_sd = (T(1) - (p.variance() + d.cwiseAbs2()).array() / var_q.array()).matrix();
  return out;
}

template <typename T>
T reverse_kl_divergence(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p) {
  return kl_divergence(p, q);
}

template <typename T>
FullDivergenceGradient<T> reverse_kl_divergence_gradient(const FullRankGaussian<T>& q,
                                                         const FullRankGaussian<T>& p) {
  internal::check_same_dim("reverse_kl_divergence", q, p);
  FullDivergenceGradient<T> out;
  out.value = kl_divergence(p, q);
  const MatrixX<T> prec_q = q.precision();
  const VectorX<T> d = q.mean() - p.mean();
  out.d_mean = prec_q * d;
  const MatrixX<T> inner = p.covariance() + d * d.transpose();
  out.d_cov = T(0.5) * (prec_q - prec_q * inner * prec_q);
  out.d_cov = T(0.5) * (out.d_cov + out.d_cov.transpose()).eval();
  return out;
}

}  // namespace fvi
