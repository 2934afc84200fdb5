#pragma once
// Weighted KL, (1/w) KL(q || p) with w > 0 (spec 000 §3.2 items 1 and 4; seed 000 §3.3). By
// seed 000 Lemma B.1 this is equivalent to multiplying the loss by w.
#include <string>

#include "fvi/divergence/kl_divergence.h"

namespace fvi {

template <typename Q>
auto weighted_kl_divergence(const Q& q, const Q& p, typename Q::Scalar w) {
  check_positive("weighted_kl_divergence", "w", w);
  return kl_divergence(q, p) / w;
}

template <typename Q>
auto weighted_kl_divergence_gradient(const Q& q, const Q& p, typename Q::Scalar w) {
  check_positive("weighted_kl_divergence", "w", w);
  auto out = kl_divergence_gradient(q, p);
  out.value /= w;
  out.d_mean /= w;
  if constexpr (std::is_same<decltype(out), DiagDivergenceGradient<typename Q::Scalar>>::value) {
    out.d_log_sd /= w;
  } else {
    out.d_cov /= w;
  }
  return out;
}

}  // namespace fvi
