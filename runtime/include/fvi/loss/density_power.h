#pragma once
// Density-power (beta-divergence) loss (Ghosh & Basu 2016; seed 000 §3.1 item 2):
//   L_B^(beta) = -(1/beta) p(y|theta)^beta + (1/(1+beta)) int p(x|theta)^(1+beta) dx.
// We return L_B + 1/beta - 1/(1+beta) (density_power_loss_offset), a constant in theta, so the GVI
// posterior and all gradients are unchanged, and the loss tends to the NLL as beta -> 0:
//   L = -expm1(beta l) / beta + expm1(log I) / (1 + beta),   l = log p(y|theta), log I = log int p^(1+beta)
//   dL/dl = -p^beta,  dL/dlogI = I / (1 + beta).
// (The FedGVI code's Knoblauch parametrisation beta_K equals beta + 1 here, spec 000 §3.1 item 2.)
// beta = 0 is exactly the NLL (log I = 0 there).
#include <cmath>

#include "fvi/check.h"
#include "fvi/loss/loss_term.h"

namespace fvi {

// The constant added to the Ghosh-Basu form: ours = L_B + offset.
template <typename T>
T density_power_loss_offset(T beta) {
  check_positive("density_power_loss_offset", "beta", beta);
  return T(1) / beta - T(1) / (T(1) + beta);
}

// log_integral = log int p(x|theta)^(1 + beta) dx (see power_integral.h).
template <typename T>
LossTerm<T> density_power_loss(T loglik, T log_integral, T beta) {
  check_nonnegative("density_power_loss", "beta", beta);
  check_finite("density_power_loss", "loglik", loglik);
  check_finite("density_power_loss", "log_integral", log_integral);
  const T integral_term = std::expm1(log_integral) / (T(1) + beta);
  const T d_integral = std::exp(log_integral) / (T(1) + beta);
  if (beta == T(0)) return {-loglik + integral_term, T(-1), d_integral};
  return {-std::expm1(beta * loglik) / beta + integral_term, -std::exp(beta * loglik), d_integral};
}

}  // namespace fvi
