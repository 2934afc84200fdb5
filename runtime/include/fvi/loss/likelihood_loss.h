#pragma once
// Robust losses (robust_loss.h) for the likelihoods of the FedGVI and SFVI experiments, as
// functions of the likelihood's linear predictor, with the derivative with respect to it — what a
// generated kernel for `y ~ bernoulli_logit(eta)` etc. calls in place of the log density, before
// chaining d loss / d eta into its own adjoints. Each returns the summed loss over observations.
//
//   bernoulli_logit  y in {0, 1},     l = y log sigma(eta) + (1 - y) log sigma(-eta), dl/deta = y - sigma(eta)
//   poisson_log      y in {0, 1, ..}, l = y eta - e^eta - log y!,                     dl/deta = y - e^eta
//   categorical_logit y in {0..K-1} (0-based: the emitter subtracts 1 from Stan's 1-based
//                    categories); logits N x K, one row per observation; dl/dlogits = e_y - softmax
//   normal           l = log N(y; mu, sigma), with derivatives for mu and sigma
// The power integrals and their derivatives come from power_integral.h.
#include <cmath>
#include <limits>
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/loss/power_integral.h"
#include "fvi/loss/robust_loss.h"
#include "fvi/math/constants.h"

namespace fvi {
namespace internal {

template <typename IntVector>
void check_outcomes(const char* fn, const IntVector& y, Eigen::Index n, long lo, long hi) {
  check_size(fn, "y", Eigen::Index(y.size()), n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const long v = static_cast<long>(y[i]);
    if (v < lo || v > hi) {
      throw_invalid(fn, "y[" + std::to_string(i) + "] = " + std::to_string(v) + " is outside [" + std::to_string(lo) +
                            ", " + (hi == std::numeric_limits<long>::max() ? std::string("inf") : std::to_string(hi)) +
                            "]");
    }
  }
}

}  // namespace internal

// sum_i L(y_i | eta_i); d_eta (if given) receives dL/deta_i.
template <typename T, typename IntVector>
T bernoulli_logit_loss(const LossSpec& spec, const IntVector& y, const VectorX<T>& eta, VectorX<T>* d_eta = nullptr) {
  const char* fn = "bernoulli_logit_loss";
  internal::check_outcomes(fn, y, eta.size(), 0, 1);
  check_finite(fn, "eta", eta);
  if (d_eta) d_eta->resize(eta.size());
  T total = 0;
  for (Eigen::Index i = 0; i < eta.size(); ++i) {
    const T e = eta[i];
    const T loglik = y[i] ? internal::log_inv_logit(e) : internal::log_inv_logit(-e);
    LogPowerIntegral<T> li{};
    if (spec.needs_integral()) li = bernoulli_logit_log_power_integral(T(spec.integral_power()), e);
    const LossTerm<T> l = evaluate_loss(spec, loglik, li.value);
    total += l.value;
    if (d_eta) (*d_eta)[i] = l.d_loglik * (T(y[i]) - internal::inv_logit(e)) + l.d_log_integral * li.derivative;
  }
  return total;
}

template <typename T, typename IntVector>
T poisson_log_loss(const LossSpec& spec, const IntVector& y, const VectorX<T>& eta, VectorX<T>* d_eta = nullptr) {
  const char* fn = "poisson_log_loss";
  internal::check_outcomes(fn, y, eta.size(), 0, std::numeric_limits<long>::max());
  check_finite(fn, "eta", eta);
  if (d_eta) d_eta->resize(eta.size());
  T total = 0;
  for (Eigen::Index i = 0; i < eta.size(); ++i) {
    const T lambda = std::exp(eta[i]);
    const T yi = T(y[i]);
    const T loglik = yi * eta[i] - lambda - std::lgamma(yi + T(1));
    LogPowerIntegral<T> li{};
    if (spec.needs_integral()) li = poisson_log_log_power_integral(T(spec.integral_power()), eta[i]);
    const LossTerm<T> l = evaluate_loss(spec, loglik, li.value);
    total += l.value;
    if (d_eta) (*d_eta)[i] = l.d_loglik * (yi - lambda) + l.d_log_integral * li.derivative;
  }
  return total;
}

// logits: N x K; d_logits (if given) receives N x K.
template <typename T, typename IntVector>
T categorical_logit_loss(const LossSpec& spec, const IntVector& y, const MatrixX<T>& logits,
                         MatrixX<T>* d_logits = nullptr) {
  const char* fn = "categorical_logit_loss";
  internal::check_outcomes(fn, y, logits.rows(), 0, long(logits.cols()) - 1);
  check_finite(fn, "logits", logits);
  if (d_logits) d_logits->resize(logits.rows(), logits.cols());
  T total = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const VectorX<T> a = logits.row(i).transpose();
    const T m = a.maxCoeff();
    const VectorX<T> e = (a.array() - m).exp().matrix();
    const T lse = m + std::log(e.sum());
    const T loglik = a[Eigen::Index(y[i])] - lse;
    T log_integral = 0;
    VectorX<T> d_integral;
    if (spec.needs_integral()) {
      log_integral = categorical_logit_log_power_integral(T(spec.integral_power()), a, &d_integral);
    }
    const LossTerm<T> l = evaluate_loss(spec, loglik, log_integral);
    total += l.value;
    if (d_logits) {
      VectorX<T> dl = -e / e.sum();
      dl[Eigen::Index(y[i])] += T(1);
      VectorX<T> g = l.d_loglik * dl;
      if (spec.needs_integral()) g += l.d_log_integral * d_integral;
      d_logits->row(i) = g.transpose();
    }
  }
  return total;
}

// Normal observations y_i ~ N(mu_i, sigma): d_mu (N) and d_sigma (scalar) if given.
template <typename T>
T normal_loss(const LossSpec& spec, const VectorX<T>& y, const VectorX<T>& mu, T sigma, VectorX<T>* d_mu = nullptr,
              T* d_sigma = nullptr) {
  const char* fn = "normal_loss";
  check_size(fn, "mu", mu.size(), y.size());
  check_finite(fn, "y", y);
  check_finite(fn, "mu", mu);
  check_positive(fn, "sigma", sigma);
  LogPowerIntegral<T> li{};
  if (spec.needs_integral()) li = normal_log_power_integral(T(spec.integral_power()), sigma);
  if (d_mu) d_mu->resize(y.size());
  T total = 0, ds = 0;
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    const T z = (y[i] - mu[i]) / sigma;
    const T loglik = -T(0.5) * z * z - std::log(sigma) - T(0.5) * T(kLog2Pi);
    const LossTerm<T> l = evaluate_loss(spec, loglik, li.value);
    total += l.value;
    if (d_mu) (*d_mu)[i] = l.d_loglik * z / sigma;
    ds += l.d_loglik * (z * z - T(1)) / sigma + l.d_log_integral * li.derivative;
  }
  if (d_sigma) *d_sigma = ds;
  return total;
}

}  // namespace fvi
