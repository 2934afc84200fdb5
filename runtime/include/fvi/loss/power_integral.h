#pragma once
// log int p(x | theta)^c dx for the likelihoods the robust losses support, with the derivative with
// respect to the likelihood's own parameter (the term the density-power and gamma losses need,
// seed 000 §3.1 items 2-3; "closed form for Gaussian, sum over classes for categorical/Bernoulli",
// spec 000 §7). c > 0.
//
//   normal(mu, sigma):      (2 pi sigma^2)^{-(c-1)/2} c^{-1/2}   (spec 000 §3.1, independent of mu)
//   bernoulli_logit(eta):   sigma(eta)^c + sigma(-eta)^c
//   categorical_logit(a):   sum_k softmax(a)_k^c
//   poisson_log(eta):       sum_{y>=0} Poisson(y; e^eta)^c  (summed outward from the mode until the
//                           terms are below 1e-20 of the largest)
#include <cmath>
#include <limits>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/math/constants.h"

namespace fvi {

template <typename T = double>
struct LogPowerIntegral {
  T value{};
  T derivative{};  // with respect to the scalar parameter (sigma, or the log-odds / log-rate eta)
};

namespace internal {

// log sigmoid(x) without overflow.
template <typename T>
T log_inv_logit(T x) {
  return x >= T(0) ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

template <typename T>
T inv_logit(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T>
void check_power(const char* fn, T c) {
  check_positive(fn, "c (power)", c);
}

}  // namespace internal

template <typename T>
LogPowerIntegral<T> normal_log_power_integral(T c, T sigma) {
  internal::check_power("normal_log_power_integral", c);
  check_positive("normal_log_power_integral", "sigma", sigma);
  const T value = -T(0.5) * (c - T(1)) * (T(kLog2Pi) + T(2) * std::log(sigma)) - T(0.5) * std::log(c);
  return {value, -(c - T(1)) / sigma};
}

template <typename T>
LogPowerIntegral<T> bernoulli_logit_log_power_integral(T c, T eta) {
  internal::check_power("bernoulli_logit_log_power_integral", c);
  check_finite("bernoulli_logit_log_power_integral", "eta", eta);
  const T a = c * internal::log_inv_logit(eta), b = c * internal::log_inv_logit(-eta);
  const T m = std::max(a, b);
  const T value = m + std::log(std::exp(a - m) + std::exp(b - m));
  const T w1 = std::exp(a - value), w0 = std::exp(b - value);
  // d/deta log sigma(eta) = sigma(-eta); d/deta log sigma(-eta) = -sigma(eta).
  return {value, c * (w1 * internal::inv_logit(-eta) - w0 * internal::inv_logit(eta))};
}

// Returns log sum_k softmax(logits)_k^c; if gradient != nullptr it receives
// d/dlogits = c (softmax(c logits) - softmax(logits)).
template <typename T>
T categorical_logit_log_power_integral(T c, const VectorX<T>& logits, VectorX<T>* gradient = nullptr) {
  internal::check_power("categorical_logit_log_power_integral", c);
  check_finite("categorical_logit_log_power_integral", "logits", logits);
  if (logits.size() == 0) internal::throw_invalid("categorical_logit_log_power_integral", "logits is empty");
  const T m = logits.maxCoeff();
  const VectorX<T> p = (logits.array() - m).exp().matrix();
  const T lse = m + std::log(p.sum());
  const VectorX<T> cl = (c * (logits.array() - m)).matrix();
  const T cm = cl.maxCoeff();
  const VectorX<T> q = (cl.array() - cm).exp().matrix();
  const T lse_c = c * m + cm + std::log(q.sum());
  if (gradient) *gradient = c * (q / q.sum() - p / p.sum());
  return lse_c - c * lse;
}

template <typename T>
LogPowerIntegral<T> poisson_log_log_power_integral(T c, T eta) {
  const char* fn = "poisson_log_log_power_integral";
  internal::check_power(fn, c);
  check_finite(fn, "eta", eta);
  const T lambda = std::exp(eta);
  if (!(lambda < T(1e12))) internal::throw_invalid(fn, "rate exp(eta) = " + internal::to_string(lambda) + " is too large");
  auto term = [&](T y) { return c * (y * eta - lambda - std::lgamma(y + T(1))); };
  const T mode = std::floor(lambda);
  const T top = term(mode);
  const T cutoff = top + std::log(T(1e-20));
  // Accumulate sum exp(t - top) and sum (y - lambda) exp(t - top).
  T s = 0, sd = 0;
  for (T y = mode; y >= T(0); y -= T(1)) {
    const T t = term(y);
    if (t < cutoff) break;
    const T e = std::exp(t - top);
    s += e;
    sd += (y - lambda) * e;
  }
  for (T y = mode + T(1);; y += T(1)) {
    const T t = term(y);
    if (t < cutoff) break;
    const T e = std::exp(t - top);
    s += e;
    sd += (y - lambda) * e;
  }
  // d/deta c (y eta - e^eta) = c (y - lambda).
  return {top + std::log(s), c * sd / s};
}

}  // namespace fvi
