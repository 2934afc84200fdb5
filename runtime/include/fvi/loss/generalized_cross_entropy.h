#pragma once
// Generalised cross-entropy (Zhang & Sabuncu 2018; seed 000 Eq. 8, spec 000 §3.1 item 5):
//   L_GCE^(delta) = (1 - p(y | theta)^delta) / delta = -expm1(delta l) / delta,  l = log p,
// dL/dl = -p^delta. delta in [0, 1]; delta -> 0 is the NLL (and delta = 0 is exactly the NLL, as in
// the paper's tables). Evaluated with expm1, so it is continuous at delta = 0 to rounding.
#include <cmath>

#include "fvi/check.h"
#include "fvi/loss/loss_term.h"

namespace fvi {

template <typename T>
LossTerm<T> generalized_cross_entropy_loss(T loglik, T delta) {
  check_bounded("generalized_cross_entropy_loss", "delta", delta, T(0), T(1));
  check_finite("generalized_cross_entropy_loss", "loglik", loglik);
  if (delta == T(0)) return {-loglik, T(-1), T(0)};
  return {-std::expm1(delta * loglik) / delta, -std::exp(delta * loglik), T(0)};
}

}  // namespace fvi
