#include "fvi/engine/meanfield_shards.h"

#include <cmath>

#include "fvi/math/array_math.h"

namespace fvi::engine {

namespace {

// Whether every element is finite, in one vectorised pass: x * 0 is 0 for finite x and NaN for
// inf or NaN, and a NaN anywhere makes the sum NaN. (Eigen's isFinite().all() is a scalar loop
// with an early exit: a third of a fused step's own time.)
template <class A>
bool all_finite(const Eigen::ArrayBase<A>& a) {
  return (a * typename A::Scalar(0)).sum() == 0;
}

// Whether q's mean and sd (a shard's, or a block of it) are usable: finite, and sd > 0.
template <class M, class S>
bool usable(const Eigen::ArrayBase<M>& mean, const Eigen::ArrayBase<S>& sd) {
  return all_finite(mean) && all_finite(sd) && (sd.size() == 0 || sd.minCoeff() > 0);
}

}  // namespace

MeanFieldShards::MeanFieldShards(const Eigen::VectorXd& params, const std::optional<Q>& cavity,
                                 const Natural& cavity_natural, const DivergenceSpec& divergence,
                                 const AdamOptions& adam, std::shared_ptr<WorkerPool> pool)
    : divergence_(divergence), pool_(std::move(pool)) {
  const Eigen::Index d = params.size() / 2;
  // Checks the start (finite mean and log sd, positive sd) as from_params does.
  const Q start = Q::from_params(params);
  fused_ = cavity && divergence.kind == DivergenceKind::kAlphaRenyi;
  if (fused_) check_finite("alpha_renyi_divergence", "alpha", divergence.parameter);
  means_[0] = start.mean();
  sds_[0] = start.sd();
  const int n = pool_ ? pool_->size() : 1;
  shards_.resize(size_t(n));
  for (int w = 0; w < n; ++w) {
    Shard& s = shards_[size_t(w)];
    s.begin = d * w / n;
    s.size = d * (w + 1) / n - s.begin;
    s.params.resize(2 * s.size);
    s.params << params.segment(s.begin, s.size), params.segment(d + s.begin, s.size);
    s.adam.emplace(2 * s.size, adam);
    if (cavity) s.cavity = Q(cavity->mean().segment(s.begin, s.size), cavity->log_sd().segment(s.begin, s.size));
    s.cavity_natural = Natural{cavity_natural.eta1.segment(s.begin, s.size), cavity_natural.eta2.segment(s.begin, s.size)};
  }
}

bool MeanFieldShards::publish(const Shard& s) {
  const Eigen::Index n = s.size;
  means_[0].segment(s.begin, n) = s.params.head(n);
  auto sd = sds_[0].segment(s.begin, n).array();
  sd = s.params.tail(n).array().exp();
  return usable(s.params.head(n).array(), sd);
}

Eigen::VectorXd MeanFieldShards::params() const {
  const Eigen::Index d = means_[0].size();
  Eigen::VectorXd p(2 * d);
  for (const Shard& s : shards_) {
    p.segment(s.begin, s.size) = s.params.head(s.size);
    p.segment(d + s.begin, s.size) = s.params.tail(s.size);
  }
  return p;
}

double MeanFieldShards::fused_step(Shard& s, const Eigen::VectorXd& d_mean, const Eigen::VectorXd& d_sd,
                                   bool with_value, bool& finite) {
  using Array = Eigen::Map<Eigen::ArrayXd>;
  using ConstArray = Eigen::Map<const Eigen::ArrayXd>;
  const Eigen::Index n = s.size;
  double* mean = s.params.data();
  double* log_sd = mean + n;
  const Q& p = *s.cavity;
  const double alpha = divergence_.parameter;
  s.adam->begin_step();
  double value = 0;
  double g_mean[kMathBlock], g_log_sd[kMathBlock];
  for (Eigen::Index i = 0; i < n; i += kMathBlock) {
    const Eigen::Index m = std::min(kMathBlock, n - i), at = s.begin + i;
    double* sd = sds_[0].data() + at;  // q's sd now
    value += alpha_renyi_block(m, mean + i, log_sd + i, sd, p.mean().data() + i, p.log_sd().data() + i,
                               p.sd().data() + i, alpha, g_mean, g_log_sd, with_value);
    // params = [mean; log sd]: d/dlog sd = sd .* d/dsd.
    Array gm(g_mean, m), gl(g_log_sd, m);
    gm += ConstArray(d_mean.data() + at, m);
    gl += ConstArray(d_sd.data() + at, m) * ConstArray(sd, m);
    if (!all_finite(gm) || !all_finite(gl)) {
      finite = false;
      return value;
    }
    s.adam->update(i, m, mean + i, g_mean);
    s.adam->update(n + i, m, log_sd + i, g_log_sd);
    Array new_mean(means_[0].data() + at, m), new_sd(sd, m);
    new_mean = ConstArray(mean + i, m);
    new_sd = ConstArray(log_sd + i, m).exp();
    if (!usable(new_mean, new_sd)) {
      finite = false;
      return value;
    }
  }
  return value;
}

double MeanFieldShards::whole_step(Shard& s, const Eigen::VectorXd& d_mean, const Eigen::VectorXd& d_sd,
                                   bool& finite) {
  using Family = GaussianFamily<Q>;
  const Eigen::Index n = s.size;
  const Q q(s.params.head(n), s.params.tail(n));
  const double value = s.cavity ? Family::divergence(q, *s.cavity, divergence_, &s.gradient)
                                : Family::improper_kl(q, s.cavity_natural, &s.gradient);
  s.gradient.head(n) += d_mean.segment(s.begin, n);
  s.gradient.tail(n).array() += d_sd.segment(s.begin, n).array() * q.sd().array();
  if (!s.gradient.allFinite()) {
    finite = false;
    return value;
  }
  s.adam->step(s.params, s.gradient);
  finite = publish(s);
  return value;
}

MeanFieldShards::Step MeanFieldShards::step(const Eigen::VectorXd& d_mean, const Eigen::VectorXd& d_sd,
                                            bool with_value) {
  std::vector<double> values(shards_.size(), 0.0);
  std::vector<char> finite(shards_.size(), 1);
  auto work = [&](int w) {
    if (size_t(w) >= shards_.size()) return;
    Shard& s = shards_[size_t(w)];
    bool ok = true;
    values[size_t(w)] = fused_ ? fused_step(s, d_mean, d_sd, with_value, ok) : whole_step(s, d_mean, d_sd, ok);
    finite[size_t(w)] = ok;
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
  if (!with_value) out.divergence = 0;
  return out;
}

}  // namespace fvi::engine
