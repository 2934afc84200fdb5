#pragma once
// Result types of the losses that replace the per-observation negative log likelihood (FedGVI,
// spec 000 §3.1).
//
// Losses are written as functions of the observation's log likelihood l = log p(y | theta) and, for
// the density-power and gamma losses, of log I = log int p(x | theta)^c dx (the likelihood's power
// integral, see power_integral.h). A LossTerm carries the value and the partial derivatives
// dL/dl and dL/dlogI; a generated kernel chains them with its own adjoints of l and log I with
// respect to the linear predictor or the parameters:
//     dL/dtheta = d_loglik * dl/dtheta + d_log_integral * dlogI/dtheta.
#include "fvi/eigen_types.h"

namespace fvi {

template <typename T = double>
struct LossTerm {
  T value{};
  T d_loglik{};       // dL / d log p(y | theta)
  T d_log_integral{};  // dL / d log int p^c (zero for NLL and GCE)
};

// E_q[loss] and its gradient with respect to a mean-field q's (mean, log sd).
template <typename T = double>
struct ExpectedLoss {
  T value{};
  VectorX<T> d_mean;
  VectorX<T> d_log_sd;

  VectorX<T> params_gradient() const {
    VectorX<T> g(d_mean.size() + d_log_sd.size());
    g << d_mean, d_log_sd;
    return g;
  }
};

}  // namespace fvi
