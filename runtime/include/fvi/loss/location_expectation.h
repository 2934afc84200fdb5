#pragma once
// Closed-form expectations of the robust losses under a mean-field Gaussian q for the Gaussian
// location model p(x | theta) = N(x; theta, sigma^2 I_d) (spec 000 §3.1, "Expectations under
// Gaussian q"; the FedGVI code's expectation_div_loss_1d). With V_j = sigma^2 + c s_j^2:
//   E_q[p(x|theta)^c] = prod_j (2 pi sigma^2)^{-c/2} sqrt(sigma^2 / V_j) exp(-c (x_j - m_j)^2 / (2 V_j))
//   E_q[-log p]       = sum_j ((x_j - m_j)^2 + s_j^2) / (2 sigma^2) + d/2 log(2 pi sigma^2)
// and the power integrals int p^c are constant in theta (power_integral.h), so
//   GCE(delta):    (1 - E p^delta) / delta
//   DP(beta):      (1 - E p^beta) / beta + (I_{1+beta} - 1) / (1 + beta)
//   gamma(gamma):  (gamma/eps) (1 - E p^eps  I_gamma^{-eps/gamma}),  eps = gamma - 1
// (the same constants as robust_loss.h, so each tends to E_q[NLL] at its limit). Gradients are with
// respect to q's (mean, log sd).
#include <cmath>

#include "fvi/check.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/loss/loss_term.h"
#include "fvi/loss/power_integral.h"
#include "fvi/loss/robust_loss.h"
#include "fvi/math/constants.h"

namespace fvi {
namespace internal {

// log E_q[N(x; theta, sigma^2 I)^c] and its gradient.
template <typename T>
ExpectedLoss<T> log_expected_power(const VectorX<T>& x, const MeanFieldGaussian<T>& q, T sigma, T c) {
  const T s2 = sigma * sigma;
  const VectorX<T> var = q.variance();
  const VectorX<T> v = (s2 + c * var.array()).matrix();
  const VectorX<T> r = x - q.mean();
  ExpectedLoss<T> out;
  // 1/2 log(sigma^2 / V) = -1/2 log1p(c s^2 / sigma^2): no cancellation for small c.
  const VectorX<T> half_log_ratio =
      (-T(0.5) * (c * var.array() / s2).unaryExpr([](T u) { return std::log1p(u); })).matrix();
  out.value = (-T(0.5) * c * (T(kLog2Pi) + T(2) * std::log(sigma)) + half_log_ratio.array() -
               c * r.array().square() / (T(2) * v.array()))
                  .sum();
  out.d_mean = (c * r.array() / v.array()).matrix();
  out.d_log_sd = (c * var.array() * (c * r.array().square() / v.array() - T(1)) / v.array()).matrix();
  return out;
}

}  // namespace internal

template <typename T>
ExpectedLoss<T> expected_location_loss(const LossSpec& spec, const VectorArg<T>& x, const MeanFieldGaussian<T>& q,
                                       T sigma) {
  const char* fn = "expected_location_loss";
  check_size(fn, "x", x.size(), q.dim());
  check_finite(fn, "x", x);
  check_positive(fn, "sigma", sigma);
  spec.validate();
  const T s2 = sigma * sigma;
  const T par = T(spec.parameter);
  ExpectedLoss<T> out;
  auto expected_nll = [&]() {
    const VectorX<T> r = x - q.mean();
    ExpectedLoss<T> e;
    e.value = (r.squaredNorm() + q.variance().sum()) / (T(2) * s2) + T(0.5) * T(x.size()) * (T(kLog2Pi) + std::log(s2));
    e.d_mean = -r / s2;
    e.d_log_sd = q.variance() / s2;
    return e;
  };
  // -(k / c) expm1(log E + shift) with gradient -(k / c) exp(log E + shift) grad log E.
  auto scaled = [&](T c, T k, T shift) {
    const ExpectedLoss<T> le = internal::log_expected_power(x, q, sigma, c);
    const T u = le.value + shift;
    ExpectedLoss<T> e;
    e.value = -(k / c) * std::expm1(u);
    e.d_mean = -(k / c) * std::exp(u) * le.d_mean;
    e.d_log_sd = -(k / c) * std::exp(u) * le.d_log_sd;
    return e;
  };
  switch (spec.kind) {
    case LossKind::kNegativeLogLikelihood:
      return expected_nll();
    case LossKind::kGeneralizedCrossEntropy:
      if (par == T(0)) return expected_nll();
      return scaled(par, T(1), T(0));
    case LossKind::kDensityPower: {
      // int p^(1+beta) over x in R^d: d times the 1-D log integral.
      const T log_i = T(x.size()) * normal_log_power_integral(T(1) + par, sigma).value;
      out = par == T(0) ? expected_nll() : scaled(par, T(1), T(0));
      out.value += std::expm1(log_i) / (T(1) + par);
      return out;
    }
    case LossKind::kGamma: {
      if (par == T(1)) return expected_nll();
      const T eps = par - T(1);
      const T log_i = T(x.size()) * normal_log_power_integral(par, sigma).value;
      return scaled(eps, par, -(eps / par) * log_i);
    }
  }
  internal::throw_invalid(fn, "unknown loss kind");
}

}  // namespace fvi
