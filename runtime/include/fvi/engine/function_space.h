#pragma once
// Seed 001's Primitive A: the linearised function-space KL of Rudner et al. (2021), for a
// mean-field Gaussian q over the global weights. At a context point x the network f(x; theta)
// (C outputs: a likelihood's first distribution argument, the logits of categorical_logit or the
// mean of normal) is replaced by its linearisation about the weights' mean m,
//   f(x; theta) ~ f(x; m) + J_m(x) (theta - m)                              (seed 001 Eq. 14)
// so that q's pushforward at x is N(f(x; m), J_m(x) diag(sigma^2) J_m(x)')   (Eqs. 15, 17)
// and the prior's is the same expression at the prior's mean and variances  (Eq. 18).
// The KL between the two C-dimensional Gaussians is summed over context points (Eq. 26).
//
// J is formed one output at a time by the kernel's backward pass with that output's argument
// seed (docs/kernel-abi.md, "Calls"): C reverse passes per context point, C x P values.
#include <cstdint>

#include "fvi/eigen_types.h"
#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

// N(mean, J diag(variance) J') over C function values: the pushforward of a mean-field Gaussian
// over P weights through the linearised network.
struct LinearisedGaussian {
  Eigen::VectorXd mean;      // f(x; m), C values
  Eigen::MatrixXd jacobian;  // J_m(x), C x P
  Eigen::VectorXd variance;  // the weights' variances, P values

  Eigen::MatrixXd covariance() const;  // C x C
};

// KL(q || p) between two linearised Gaussians at one context point, and its gradient with
// respect to q's function mean f(x; m) and q's weight variances, J_m held fixed (the caller
// chains d_mean through J_m' with the kernel's backward pass to reach m). `jitter` is added to
// both covariances' diagonals: a prior linearised at weights 0 may be singular (a tanh network's
// hidden units are all 0 there, so only the output biases reach f).
struct FunctionSpaceKl {
  double value = 0;
  Eigen::VectorXd d_mean;      // C
  Eigen::VectorXd d_variance;  // P
};
FunctionSpaceKl linearised_kl(const LinearisedGaussian& q, const LinearisedGaussian& prior, double jitter);

// f(x; m) and J_m(x) at row `row` of a likelihood bound to its party's data (a factor that
// reads the global weights only), with the given weight variances.
LinearisedGaussian linearise(BoundFactor& likelihood, int64_t row, const Eigen::VectorXd& mean,
                             const Eigen::VectorXd& variance);

}  // namespace fvi::engine
