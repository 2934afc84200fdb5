#pragma once
// L_NLL = -log p(y | theta) (seed 000 §3.1 item 1).
#include "fvi/check.h"
#include "fvi/loss/loss_term.h"

namespace fvi {

template <typename T>
LossTerm<T> nll_loss(T loglik) {
  return {-loglik, T(-1), T(0)};
}

}  // namespace fvi
