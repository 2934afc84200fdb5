#pragma once
// Fisher-Rao distance between univariate Gaussians (spec 000 §3.2 item 5, with the digest's
// correction of the printed Delta, following Nielsen 2023):
//   D_FR(q : p) = sqrt(2) log((1 + Delta) / (1 - Delta)),
//   Delta^2 = ((mu_p - mu_q)^2 + 2 (sigma_p - sigma_q)^2) / ((mu_p - mu_q)^2 + 2 (sigma_p + sigma_q)^2).
// Evaluated as sqrt(2) [2 log1p(Delta) - log(1 - Delta^2)], taking log(1 - Delta^2) as log1p(-Delta^2)
// for small Delta and as log(8 sigma_p sigma_q / den) (1 - Delta^2 without cancellation) for Delta
// near 1, so it stays accurate both for nearby and for far-apart distributions.
//
// For mean-field Gaussians the Fisher metric of a product of independent coordinates is the sum of
// the coordinate metrics, so the distance on the diagonal family is sqrt(sum_i D_FR,i^2) (derived).
// That is the distance within the mean-field family, not within all Gaussians (no closed form there).
//
// The distance is not differentiable where q = p (like |x| at 0); the gradient there is the zero
// subgradient.
#include <cmath>

#include "fvi/divergence/divergence_gradient.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/math/constants.h"

namespace fvi {
namespace internal {

// One coordinate: value and derivatives with respect to mu_q and log sigma_q.
template <typename T>
void fisher_rao_1d(T mu_q, T sd_q, T mu_p, T sd_p, T& value, T& d_mu, T& d_log_sd) {
  const T dm = mu_q - mu_p;
  const T num = dm * dm + T(2) * (sd_p - sd_q) * (sd_p - sd_q);
  const T den = dm * dm + T(2) * (sd_p + sd_q) * (sd_p + sd_q);
  const T delta2 = num / den;
  const T delta = std::sqrt(delta2);
  // log(1 - Delta^2): log1p(-Delta^2) when Delta is small, log(8 sigma_p sigma_q / den) near 1.
  const T log_one_minus_delta2 = delta2 < T(0.5) ? std::log1p(-delta2) : std::log(T(8) * sd_p * sd_q / den);
  value = T(kSqrt2) * (T(2) * std::log1p(delta) - log_one_minus_delta2);
  if (delta == T(0)) {
    d_mu = T(0);
    d_log_sd = T(0);
    return;
  }
  // dFR/dx = sqrt(2) (num' den - num den') / (8 sigma_p sigma_q Delta den).
  const T scale = T(kSqrt2) / (T(8) * sd_p * sd_q * delta * den);
  // d/d mu_q: num' = den' = 2 dm, so num' den - num den' = 2 dm (den - num) = 16 dm sigma_p sigma_q.
  d_mu = scale * T(16) * dm * sd_p * sd_q;
  // d/d sigma_q: num' = 4 (sigma_q - sigma_p), den' = 4 (sigma_p + sigma_q).
  const T d_sd = scale * T(4) * ((sd_q - sd_p) * den - num * (sd_p + sd_q));
  d_log_sd = d_sd * sd_q;
}

}  // namespace internal

template <typename T>
DiagDivergenceGradient<T> fisher_rao_distance_gradient(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  internal::check_same_dim("fisher_rao_distance", q, p);
  DiagDivergenceGradient<T> out;
  out.d_mean.resize(q.dim());
  out.d_log_sd.resize(q.dim());
  VectorX<T> values(q.dim());
  for (Eigen::Index i = 0; i < q.dim(); ++i) {
    internal::fisher_rao_1d(q.mean()[i], q.sd()[i], p.mean()[i], p.sd()[i], values[i], out.d_mean[i],
                            out.d_log_sd[i]);
  }
  out.value = values.norm();
  if (out.value > T(0)) {
    // d sqrt(sum v_i^2) = sum (v_i / D) dv_i.
    const VectorX<T> weight = values / out.value;
    out.d_mean = out.d_mean.cwiseProduct(weight);
    out.d_log_sd = out.d_log_sd.cwiseProduct(weight);
  } else {
    out.d_mean.setZero();
    out.d_log_sd.setZero();
  }
  return out;
}

template <typename T>
T fisher_rao_distance(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p) {
  return fisher_rao_distance_gradient(q, p).value;
}

}  // namespace fvi
