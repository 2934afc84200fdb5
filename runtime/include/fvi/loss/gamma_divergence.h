#pragma once
// Gamma-divergence loss (Hung et al. 2018; seed 000 §3.1 item 3), gamma > 1:
//   L_G^(gamma) = -(1/(gamma-1)) p(y|theta)^(gamma-1) gamma / (int p^gamma)^((gamma-1)/gamma).
// We return L_G + gamma/(gamma-1) (gamma_divergence_loss_offset), constant in theta, which tends
// to the NLL as gamma -> 1. With eps = gamma - 1, l = log p, log I = log int p^gamma:
//   L = -(gamma/eps) expm1(eps (l - log I / gamma)),   E = exp(eps (l - log I / gamma)),
//   dL/dl = -gamma E,  dL/dlogI = E.
// gamma = 1 gives -l + log I = the NLL (log I = 0 there).
#include <cmath>

#include "fvi/check.h"
#include "fvi/loss/loss_term.h"

namespace fvi {

template <typename T>
T gamma_divergence_loss_offset(T gamma) {
  check_finite("gamma_divergence_loss_offset", "gamma", gamma);
  if (!(gamma > T(1))) internal::throw_invalid("gamma_divergence_loss_offset", "gamma must be > 1");
  return gamma / (gamma - T(1));
}

// log_integral = log int p(x|theta)^gamma dx (see power_integral.h).
template <typename T>
LossTerm<T> gamma_divergence_loss(T loglik, T log_integral, T gamma) {
  check_finite("gamma_divergence_loss", "gamma", gamma);
  if (!(gamma >= T(1))) {
    internal::throw_invalid("gamma_divergence_loss", "gamma must be >= 1 but is " + internal::to_string(gamma));
  }
  check_finite("gamma_divergence_loss", "loglik", loglik);
  check_finite("gamma_divergence_loss", "log_integral", log_integral);
  const T eps = gamma - T(1);
  if (eps == T(0)) return {-loglik + log_integral, T(-1), T(1)};
  const T u = eps * (loglik - log_integral / gamma);
  const T e = std::exp(u);
  return {-(gamma / eps) * std::expm1(u), -gamma * e, e};
}

}  // namespace fvi
