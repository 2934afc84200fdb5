#pragma once
// A PVI client's local optimisation of a mean-field q, split by coordinates between the workers of
// a pool. Every mean-field divergence (fvi/divergence/) and Adam act coordinate by coordinate, so
// worker w owns the coordinates [begin_w, begin_w + size_w): its slice of q's parameters
// [mean; log sd], of Adam's moments and of the cavity. A step is one fork: each worker computes
// its slice of the divergence's gradient, adds it to the loss's, steps Adam and rebuilds its
// slice of q. The result is the unsplit computation's, coordinate for coordinate; only the
// divergence's value is summed in another order.
//
// This is the rest of a client step besides the kernels (fvi/engine/row_parallel.h splits those by
// rows): on a network's 159k weights it was a third of a step when it ran on one thread.
#include <memory>
#include <optional>
#include <vector>

#include "fvi/engine/gaussian_family.h"
#include "fvi/engine/worker_pool.h"
#include "fvi/optim/adam.h"

namespace fvi::engine {

class MeanFieldShards {
 public:
  using Q = MeanFieldGaussian<double>;
  using Natural = DiagGaussianNatural<double>;

  // Starts at `params` ([mean; log sd]). The divergence is `divergence` to `cavity` when it is
  // proper, else KL up to a constant to the improper `cavity_natural`
  // (GaussianFamily::improper_kl). `pool` may be null: one shard.
  MeanFieldShards(const Eigen::VectorXd& params, const std::optional<Q>& cavity, const Natural& cavity_natural,
                  const DivergenceSpec& divergence, const AdamOptions& adam, std::shared_ptr<WorkerPool> pool);

  // q's mean and sd now: what the kernels take.
  const Eigen::VectorXd& mean() const { return mean_; }
  const Eigen::VectorXd& sd() const { return sd_; }
  // q's parameters now, [mean; log sd].
  Eigen::VectorXd params() const;

  struct Step {
    double divergence = 0;  // D(q : cavity) at q before the step
    bool finite = true;     // false: a gradient was not finite, and that shard did not move
  };
  // At the current q: the divergence, its gradient added to the loss's (`d_mean`, `d_sd`: with
  // respect to q's mean and sd), then one Adam step on [mean; log sd].
  Step step(const Eigen::VectorXd& d_mean, const Eigen::VectorXd& d_sd);

 private:
  struct Shard {
    Eigen::Index begin = 0, size = 0;
    Eigen::VectorXd params;  // [mean; log sd] of the shard's coordinates
    Q q;                     // at params
    std::optional<Adam<double>> adam;
    std::optional<Q> cavity;
    Natural cavity_natural;
    Eigen::VectorXd gradient;
  };
  void publish(const Shard& s);  // the shard's q into mean_ and sd_

  DivergenceSpec divergence_;
  std::shared_ptr<WorkerPool> pool_;
  std::vector<Shard> shards_;
  Eigen::VectorXd mean_, sd_;
};

}  // namespace fvi::engine
