#pragma once
// The loss of one likelihood factor over a block of rows, averaged over Monte Carlo draws, and its
// gradient with respect to the factor's input groups: what every stochastic engine minimises.
//
//   value = scale * (1/S) sum_s sum_{i in rows} L(y_i | theta_s)
//
// L is the NLL or a robust loss of FedGVI (seed 000 §3.1). The NLL and GCE need only the
// per-row log density the kernel returns (GCE: L = (1 - p^delta)/delta, dL/dl = -p^delta). The
// density-power and gamma losses also need the likelihood's power integral, which the runtime
// computes from the distribution's arguments (kernel ABI `arguments`), for the distributions
// fvi/loss/likelihood_loss.h covers.
#include <string>
#include <vector>

#include "fvi/engine/bound_factor.h"
#include "fvi/loss/robust_loss.h"

namespace fvi::engine {

struct FactorLoss {
  double value = 0;
  std::vector<Eigen::MatrixXd> gradients;  // one per input group, size x S (empty if not asked)
};

FactorLoss factor_loss(BoundFactor& factor, const LossSpec& loss, int64_t begin, int64_t count,
                       const std::vector<Eigen::MatrixXd>& inputs, double scale, bool with_gradient);

// The same for a mean-field Gaussian family through the kernel's local reparameterisation
// (BoundFactor::forward_meanfield): gradients with respect to each group's mean and sd, q and
// its gradient in T (double, or float for an engine keeping q in float).
template <class T>
struct MeanFieldLoss {
  double value = 0;
  MeanFieldGradient<T> gradient;  // empty if not asked
  // RowParallelFactor::loss_meanfield with Parts::kUnsummed: the other parts' gradients, which
  // the caller adds to `gradient` in a pass of its own (MeanFieldShards::step).
  std::vector<MeanFieldGradient<T>> other_parts;
};
template <class T>
MeanFieldLoss<T> factor_loss_meanfield(BoundFactor& factor, const LossSpec& loss, int64_t begin, int64_t count,
                                       const GroupVectors<T>& means, const GroupVectors<T>& sds, int64_t draws,
                                       uint64_t noise_key, double scale, bool with_gradient);

// Whether `loss` can be evaluated for a likelihood of `distribution` (robust losses that need a
// power integral exist for bernoulli_logit, categorical_logit, poisson_log and normal).
bool loss_supported(const LossSpec& loss, const std::string& distribution);

}  // namespace fvi::engine
