#pragma once
// The FashionMNIST client setting of issue 5 (spec 000 §5.5), as bench_bnn (c) and
// bench_pvi_round run it: loss gce(0.8), divergence alpha_renyi(2.5) to the cavity, one epoch per
// client update in minibatches of `batch` rows with `draws` draws, Adam lr 0.002 on the cosine
// schedule, a first update started at sd 0.0316.
#include "fvi/engine/pvi.h"

namespace bench {

inline fvi::engine::PviOptions fashion_pvi_options(long batch, long draws, double damping, bool float32) {
  fvi::engine::PviOptions options;
  options.loss = fvi::LossSpec::generalized_cross_entropy(0.8);
  options.divergence = {fvi::engine::DivergenceKind::kAlphaRenyi, 2.5};
  options.damping = damping;
  options.epochs = 1;
  options.batch_size = batch;
  options.mc_samples = draws;
  options.lr = 0.002;
  options.init_sd = 0.0316;
  options.precision = float32 ? fvi::engine::Precision::kFloat32 : fvi::engine::Precision::kFloat64;
  return options;
}

}  // namespace bench
