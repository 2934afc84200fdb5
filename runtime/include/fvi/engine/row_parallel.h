#pragma once
// A likelihood factor bound once per worker of a pool, so that the loss of a block of rows
// (fvi/engine/factor_loss.h) is computed in contiguous parts side by side, each part by its own
// kernel state, and the parts' losses and gradients summed in a fixed order. Every loss is a sum
// over rows and the kernels' noise is a function of the row (docs/kernel-abi.md), so the parts
// compute exactly the terms one call would: the sum differs from one call's by rounding only.
//
// Each worker runs its part's products single-threaded (the programs set the BLAS to one thread,
// fvi/program/threads.h): one fork per step instead of OpenBLAS's workers spinning between every
// product while the elementwise work (noise, fused loops, the loss) runs on one core.
#include <memory>
#include <vector>

#include "fvi/engine/bound_factor.h"
#include "fvi/engine/factor_loss.h"
#include "fvi/engine/worker_pool.h"

namespace fvi::engine {

class RowParallelFactor {
 public:
  // `pool` may be null (one part, one kernel state). With a pool of n workers the factor binds
  // n kernel states: with precision = float32 each holds its own float copy of the data.
  RowParallelFactor(const fvi_model& model, int factor, const fvi_data& data, Precision precision,
                    std::shared_ptr<WorkerPool> pool);

  // The first kernel state: for calls that are not split (probes, arguments).
  BoundFactor& bound() { return *states_[0]; }
  const BoundFactor& bound() const { return *states_[0]; }
  int64_t rows() const { return states_[0]->rows(); }

  // Whether loss_meanfield sums the parts' gradients, or leaves all but the first in
  // MeanFieldLoss::other_parts for a caller that passes over the coordinates anyway.
  enum class Parts { kSummed, kUnsummed };
  // factor_loss_meanfield / factor_loss over rows [begin, begin + count) (count < 0: all rows).
  // q and its gradient in T (double, or float: BoundFactor::forward_meanfield).
  template <class T>
  MeanFieldLoss<T> loss_meanfield(const LossSpec& loss, int64_t begin, int64_t count, const GroupVectors<T>& means,
                                  const GroupVectors<T>& sds, int64_t draws, uint64_t noise_key, double scale,
                                  bool with_gradient, Parts sum = Parts::kSummed);
  FactorLoss loss(const LossSpec& loss, int64_t begin, int64_t count, const std::vector<Eigen::MatrixXd>& inputs,
                  double scale, bool with_gradient);

  // Blocks of fewer rows than this per worker are not split: the fork would cost more than it saves.
  static constexpr int64_t kMinRowsPerPart = 32;

 private:
  int parts(int64_t count) const;
  // Runs f(part, begin, count) for each part of [begin, begin + count), side by side.
  template <class F>
  void for_each_part(int parts, int64_t begin, int64_t count, F f);

  std::vector<std::unique_ptr<BoundFactor>> states_;
  std::shared_ptr<WorkerPool> pool_;
};

}  // namespace fvi::engine
