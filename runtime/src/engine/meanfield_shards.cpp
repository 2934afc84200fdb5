#include "fvi/engine/meanfield_shards.h"

#include <cmath>

namespace fvi::engine {

MeanFieldShards::MeanFieldShards(const Eigen::VectorXd& params, const std::optional<Q>& cavity,
                                 const Natural& cavity_natural, const DivergenceSpec& divergence,
                                 const AdamOptions& adam, std::shared_ptr<WorkerPool> pool)
    : divergence_(divergence), pool_(std::move(pool)) {
  const Eigen::Index d = params.size() / 2;
  const int n = pool_ ? pool_->size() : 1;
  mean_.resize(d);
  sd_.resize(d);
  shards_.resize(size_t(n));
  for (int w = 0; w < n; ++w) {
    Shard& s = shards_[size_t(w)];
    s.begin = d * w / n;
    s.size = d * (w + 1) / n - s.begin;
    s.params.resize(2 * s.size);
    s.params << params.segment(s.begin, s.size), params.segment(d + s.begin, s.size);
    s.q = Q(s.params.head(s.size), s.params.tail(s.size));
    s.adam.emplace(2 * s.size, adam);
    if (cavity) s.cavity = Q(cavity->mean().segment(s.begin, s.size), cavity->log_sd().segment(s.begin, s.size));
    s.cavity_natural = Natural{cavity_natural.eta1.segment(s.begin, s.size), cavity_natural.eta2.segment(s.begin, s.size)};
    publish(s);
  }
}

void MeanFieldShards::publish(const Shard& s) {
  mean_.segment(s.begin, s.size) = s.q.mean();
  sd_.segment(s.begin, s.size) = s.q.sd();
}

Eigen::VectorXd MeanFieldShards::params() const {
  const Eigen::Index d = mean_.size();
  Eigen::VectorXd p(2 * d);
  for (const Shard& s : shards_) {
    p.segment(s.begin, s.size) = s.params.head(s.size);
    p.segment(d + s.begin, s.size) = s.params.tail(s.size);
  }
  return p;
}

MeanFieldShards::Step MeanFieldShards::step(const Eigen::VectorXd& d_mean, const Eigen::VectorXd& d_sd) {
  using Family = GaussianFamily<Q>;
  std::vector<double> values(shards_.size(), 0.0);
  std::vector<char> finite(shards_.size(), 1);
  auto work = [&](int w) {
    if (size_t(w) >= shards_.size()) return;
    Shard& s = shards_[size_t(w)];
    const Eigen::Index n = s.size;
    values[size_t(w)] = s.cavity ? Family::divergence(s.q, *s.cavity, divergence_, &s.gradient)
                                 : Family::improper_kl(s.q, s.cavity_natural, &s.gradient);
    // params = [mean; log sd]: d/dlog sd = sd .* d/dsd.
    s.gradient.head(n) += d_mean.segment(s.begin, n);
    s.gradient.tail(n).array() += d_sd.segment(s.begin, n).array() * s.q.sd().array();
    if (!s.gradient.allFinite()) {
      finite[size_t(w)] = 0;
      return;
    }
    s.adam->step(s.params, s.gradient);
    s.q = Q(s.params.head(n), s.params.tail(n));
    publish(s);
  };
  if (pool_) {
    pool_->run(work);
  } else {
    work(0);
  }
  Step out;
  for (size_t w = 0; w < shards_.size(); ++w) {
    out.divergence += values[w];
    out.finite = out.finite && finite[w];
  }
  return out;
}

}  // namespace fvi::engine
