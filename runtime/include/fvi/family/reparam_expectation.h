#pragma once
// Reparameterised Monte Carlo expectation E_q[f(z)] and its gradient with respect to q's
// unconstrained parameters, for any family with sample(eps) and vjp(eps, cotangent)
// (MeanFieldGaussian, FullRankGaussian, StructuredGlobalGaussian, LogNormal):
//   E_q[f] ~ (1/S) sum_s f(z_s),   grad ~ (1/S) sum_s (dz_s/dparams)^T grad f(z_s),   z_s = sample(eps)_s.
// Also returns the Monte Carlo standard error of the value, so callers (and tests) can judge it.
#include <cmath>

#include "fvi/check.h"
#include "fvi/eigen_types.h"

namespace fvi {

template <typename T = double>
struct ReparamEstimate {
  T value{};           // sample mean of f
  T standard_error{};  // sample sd of f / sqrt(S)
  VectorX<T> params_gradient;
};

// f(z, values, grad_z): z is D x S; fill values (S) with f(z_s) and grad_z (D x S) with grad f(z_s).
template <typename Family, typename F>
ReparamEstimate<typename Family::Scalar> reparam_expectation(const Family& q, const MatrixX<typename Family::Scalar>& eps,
                                                             F&& f) {
  using T = typename Family::Scalar;
  if (eps.cols() < 1) internal::throw_invalid("reparam_expectation", "eps has no columns (no draws)");
  const MatrixX<T> z = q.sample(eps);
  VectorX<T> values(eps.cols());
  MatrixX<T> grad(z.rows(), z.cols());
  f(z, values, grad);
  check_finite("reparam_expectation", "f(z)", values);
  check_finite("reparam_expectation", "grad f(z)", grad);
  const T s = T(eps.cols());
  ReparamEstimate<T> out;
  out.value = values.mean();
  out.standard_error =
      eps.cols() > 1 ? std::sqrt((values.array() - out.value).square().sum() / (s - T(1)) / s) : T(0);
  out.params_gradient = q.vjp(eps, grad) / s;
  return out;
}

}  // namespace fvi
