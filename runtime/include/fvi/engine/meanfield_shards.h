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
// rows): on a network's 159k weights it was a third of a step when it ran on one thread. It is a
// few operations per coordinate on a dozen arrays, so it runs at memory speed: T is the scalar q's
// parameters, Adam's moments and the cavity are kept in, float for `precision = float32` (as the
// reference code trains), which halves the bytes a step moves. q's mean and sd are published in T
// for the kernels (float: forward_meanfield_f32), and the loss's gradient comes back in T.
#include <memory>
#include <optional>
#include <vector>

#include "fvi/engine/bound_factor.h"
#include "fvi/engine/gaussian_family.h"
#include "fvi/engine/worker_pool.h"
#include "fvi/optim/adam.h"

namespace fvi::engine {

template <class T>
class MeanFieldShards {
 public:
  using Q = MeanFieldGaussian<double>;
  using Natural = DiagGaussianNatural<double>;

  // Starts at `params` ([mean; log sd]). The divergence is `divergence` to `cavity` when it is
  // proper, else KL up to a constant to the improper `cavity_natural`
  // (GaussianFamily::improper_kl). `pool` may be null: one shard.
  MeanFieldShards(const Eigen::VectorXd& params, const std::optional<Q>& cavity, const Natural& cavity_natural,
                  const DivergenceSpec& divergence, const AdamOptions& adam, std::shared_ptr<WorkerPool> pool);

  // q's mean and sd now, as the kernels take them (one vector per group: here the one group).
  const GroupVectors<T>& means() const { return means_; }
  const GroupVectors<T>& sds() const { return sds_; }
  // q's parameters now, [mean; log sd].
  Eigen::VectorXd params() const;

  struct Step {
    double divergence = 0;  // D(q : cavity) at q before the step (0 when not asked)
    bool finite = true;     // false: a gradient or the new q was not finite; q is then unusable
  };
  // At the current q: the divergence (its value only `with_value`), its gradient added to the
  // loss's, then one Adam step on [mean; log sd]. The loss's gradient with respect to q's mean
  // and sd is the sum of the terms `d_mean` and `d_sd` (one per likelihood and part of its rows,
  // possibly none), added up here a block at a time rather than in a pass of their own.
  using Terms = std::vector<VectorX<T>>;
  Step step(const Terms& d_mean, const Terms& d_sd, bool with_value = true);
  // Multiplies the step size of every later step by `scale` (Adam::set_scale).
  void set_step_scale(double scale) {
    for (Shard& s : shards_) s.adam->set_scale(scale);
  }

 private:
  struct Shard {
    Eigen::Index begin = 0, size = 0;
    VectorX<T> params;  // [mean; log sd] of the shard's coordinates
    std::optional<Adam<T>> adam;
    std::optional<Q> cavity;                           // whole_step's
    VectorX<T> cavity_mean, cavity_log_sd, cavity_sd;  // fused_step's, in T
    Natural cavity_natural;
    Eigen::VectorXd gradient;  // whole_step's
  };
  // q's sd now at the shard's coordinates.
  T* sd_now(Shard& s) { return sds_[0].data() + s.begin; }
  // alpha-Renyi to a proper cavity: the divergence's gradient, the loss's and Adam fused, a block
  // of coordinates at a time while it is in cache.
  double fused_step(Shard& s, const Terms& d_mean, const Terms& d_sd, bool with_value, bool& finite);
  // Any other divergence: one pass per stage over the shard.
  double whole_step(Shard& s, const Terms& d_mean, const Terms& d_sd, bool& finite);
  // The shard's q at its params into means_ and sds_; false if an sd is not finite and positive.
  bool publish(Shard& s);

  DivergenceSpec divergence_;
  bool fused_ = false;
  std::shared_ptr<WorkerPool> pool_;
  std::vector<Shard> shards_;
  GroupVectors<T> means_{1}, sds_{1};  // q's mean and sd, written shard by shard
};

extern template class MeanFieldShards<double>;
extern template class MeanFieldShards<float>;

}  // namespace fvi::engine
