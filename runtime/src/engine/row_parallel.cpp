#include "fvi/engine/row_parallel.h"

#include <algorithm>

namespace fvi::engine {

RowParallelFactor::RowParallelFactor(const fvi_model& model, int factor, const fvi_data& data, Precision precision,
                                     std::shared_ptr<WorkerPool> pool)
    : pool_(std::move(pool)) {
  const int n = pool_ ? pool_->size() : 1;
  for (int i = 0; i < n; ++i) states_.push_back(std::make_unique<BoundFactor>(model, factor, data, precision));
}

int RowParallelFactor::parts(int64_t count) const {
  if (count < 0) count = rows();
  const int64_t most = std::max<int64_t>(1, count / kMinRowsPerPart);
  return int(std::min<int64_t>(int64_t(states_.size()), most));
}

template <class F>
void RowParallelFactor::for_each_part(int parts, int64_t begin, int64_t count, F f) {
  if (count < 0) begin = 0, count = rows();
  pool_->run([&](int part) {
    if (part >= parts) return;
    const int64_t b = begin + count * part / parts, e = begin + count * (part + 1) / parts;
    f(part, b, e - b);
  });
}

template <class T>
MeanFieldLoss<T> RowParallelFactor::loss_meanfield(const LossSpec& loss, int64_t begin, int64_t count,
                                                   const GroupVectors<T>& means, const GroupVectors<T>& sds,
                                                   int64_t draws, uint64_t noise_key, double scale, bool with_gradient,
                                                   Parts sum) {
  const int n = parts(count);
  if (n == 1)
    return factor_loss_meanfield(*states_[0], loss, begin, count, means, sds, draws, noise_key, scale, with_gradient);
  std::vector<MeanFieldLoss<T>> part(static_cast<size_t>(n));
  for_each_part(n, begin, count, [&](int i, int64_t b, int64_t c) {
    part[i] = factor_loss_meanfield(*states_[i], loss, b, c, means, sds, draws, noise_key, scale, with_gradient);
  });
  MeanFieldLoss<T> out = std::move(part[0]);
  for (int i = 1; i < n; ++i) out.value += part[i].value;
  if (!with_gradient) return out;
  if (sum == Parts::kUnsummed) {
    for (int i = 1; i < n; ++i) out.other_parts.push_back(std::move(part[i].gradient));
    return out;
  }
  // The parts' gradients summed in part order, each worker over its share of the coordinates.
  pool_->run([&](int w) {
    const int workers = pool_->size();
    for (size_t g = 0; g < out.gradient.d_means.size(); ++g) {
      VectorX<T>& dm = out.gradient.d_means[g];
      VectorX<T>& ds = out.gradient.d_sds[g];
      const Eigen::Index b = dm.size() * w / workers, e = dm.size() * (w + 1) / workers;
      for (int i = 1; i < n; ++i) {
        dm.segment(b, e - b) += part[i].gradient.d_means[g].segment(b, e - b);
        ds.segment(b, e - b) += part[i].gradient.d_sds[g].segment(b, e - b);
      }
    }
  });
  return out;
}

template MeanFieldLoss<double> RowParallelFactor::loss_meanfield<double>(const LossSpec&, int64_t, int64_t,
                                                                        const GroupVectors<double>&,
                                                                        const GroupVectors<double>&, int64_t, uint64_t,
                                                                        double, bool, Parts);
template MeanFieldLoss<float> RowParallelFactor::loss_meanfield<float>(const LossSpec&, int64_t, int64_t,
                                                                      const GroupVectors<float>&,
                                                                      const GroupVectors<float>&, int64_t, uint64_t,
                                                                      double, bool, Parts);

FactorLoss RowParallelFactor::loss(const LossSpec& loss, int64_t begin, int64_t count,
                                   const std::vector<Eigen::MatrixXd>& inputs, double scale, bool with_gradient) {
  const int n = parts(count);
  if (n == 1) return factor_loss(*states_[0], loss, begin, count, inputs, scale, with_gradient);
  std::vector<FactorLoss> part(static_cast<size_t>(n));
  for_each_part(n, begin, count, [&](int i, int64_t b, int64_t c) {
    part[i] = factor_loss(*states_[i], loss, b, c, inputs, scale, with_gradient);
  });
  FactorLoss out = std::move(part[0]);
  for (int i = 1; i < n; ++i) {
    out.value += part[i].value;
    for (size_t g = 0; g < out.gradients.size(); ++g) out.gradients[g] += part[i].gradients[g];
  }
  return out;
}

}  // namespace fvi::engine
