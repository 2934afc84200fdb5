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
#include <memory>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/rng.h"

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

// The function-space KL at every row of `context` (a likelihood bound to the context points),
// summed (seed 001 Eq. 26), with its gradient with respect to q's weight means and variances:
// d_mean = sum_x J_m(x)' dKL/df(x; m), the Jacobian held fixed where it enters the covariance
// (as in d_variance). The prior is the linearisation at `prior_mean`, `prior_variance` (Eq. 18).
struct WeightSpaceGradient {
  double value = 0;
  Eigen::VectorXd d_mean, d_variance;  // P each
};
WeightSpaceGradient function_space_kl(BoundFactor& context, const Eigen::VectorXd& mean,
                                      const Eigen::VectorXd& variance, const Eigen::VectorXd& prior_mean,
                                      const Eigen::VectorXd& prior_variance, double jitter);

// Seed 001 App. E.1's context points: each local step, `count` rows drawn at random from the
// silo's own data, each real value moved by independent U[-noise, noise] noise; they stay on the
// silo. The likelihood is bound to them as to a silo's data of `count` rows: the silo data
// declared with that row count as their first dimension are cut to the drawn rows, the count's
// own scalar set to `count`; every other value is the silo's.
class ContextPoints {
 public:
  // `data`: the silo's data with the public data, which must outlive this object; `rows`: the
  // likelihood's row count there (its bound factor knows it). `count` >= 1 and `noise` >= 0 come
  // from the checked keys context_points and context_noise (stdlib/inference_keys.cpp). Throws
  // ModelError naming why when the likelihood's rows are not those of one silo size (nothing to
  // draw context points from).
  ContextPoints(const fvi_model& model, int factor, const fvi_data& data, int64_t rows, long count, double noise);
  // Fresh context points from `rng`; the likelihood bound to them.
  BoundFactor& draw(CounterRng& rng);
  long count() const { return count_; }
  // The silo data cut to the drawn rows (their names), for messages and tests.
  const std::vector<std::string>& row_variables() const { return row_names_; }

 private:
  struct RowVariable {
    int index;     // in the data
    bool integer;  // no noise on whole numbers (labels, counts)
    // The silo's values, read in place: the data outlive this object, as they outlive the
    // kernels bound to them (the silo's client holds both).
    const double* values;
    int64_t cols;
  };
  const fvi_model* model_;
  int factor_;
  long count_;
  double noise_;
  int64_t rows_;
  int size_index_ = -1;  // the row count's scalar in the data
  std::vector<RowVariable> row_variables_;
  std::vector<std::string> row_names_;
  std::vector<const char*> names_;
  std::vector<fvi_tensor> tensors_;  // the data as the context factor sees it
  std::vector<Eigen::MatrixXd> drawn_;  // storage of the cut tensors (and the count)
  std::unique_ptr<BoundFactor> bound_;
};

}  // namespace fvi::engine
