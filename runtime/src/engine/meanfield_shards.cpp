#include "fvi/engine/meanfield_shards.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

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

template <class T>
MeanFieldShards<T>::MeanFieldShards(const Eigen::VectorXd& params, const std::optional<Q>& cavity,
                                    const Natural& cavity_natural, const DivergenceSpec& divergence,
                                    const AdamOptions& adam, std::shared_ptr<WorkerPool> pool)
    : divergence_(divergence), pool_(std::move(pool)) {
  const Eigen::Index d = params.size() / 2;
  // Checks the start (finite mean and log sd, positive sd) as from_params does.
  const Q start = Q::from_params(params);
  fused_ = cavity && divergence.kind == DivergenceKind::kAlphaRenyi;
  if (fused_) check_finite("alpha_renyi_divergence", "alpha", divergence.parameter);
  if constexpr (std::is_same_v<T, double>) {
    means_[0] = start.mean();
    sds_[0] = start.sd();
  } else {  // q starts at its float values, which the kernels then see
    means_[0] = start.mean().template cast<T>();
    sds_[0] = params.tail(d).template cast<T>().array().exp();
  }
  const int n = pool_ ? pool_->size() : 1;
  shards_.resize(size_t(n));
  for (int w = 0; w < n; ++w) {
    Shard& s = shards_[size_t(w)];
    s.begin = d * w / n;
    s.size = d * (w + 1) / n - s.begin;
    s.params.resize(2 * s.size);
    s.params << params.segment(s.begin, s.size).template cast<T>(), params.segment(d + s.begin, s.size).template cast<T>();
    s.adam.emplace(2 * s.size, adam);
    if (fused_) {  // the cavity as fused_step reads it, in T
      s.cavity_mean = cavity->mean().segment(s.begin, s.size).template cast<T>();
      s.cavity_log_sd = cavity->log_sd().segment(s.begin, s.size).template cast<T>();
      s.cavity_sd = cavity->sd().segment(s.begin, s.size).template cast<T>();
    } else if (cavity) {  // as whole_step's divergence takes it
      s.cavity = Q(cavity->mean().segment(s.begin, s.size), cavity->log_sd().segment(s.begin, s.size));
    }
    s.cavity_natural = Natural{cavity_natural.eta1.segment(s.begin, s.size), cavity_natural.eta2.segment(s.begin, s.size)};
  }
}

template <class T>
bool MeanFieldShards<T>::publish(Shard& s) {
  const Eigen::Index n = s.size;
  means_[0].segment(s.begin, n) = s.params.head(n);
  Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> sd(sd_now(s), n);
  sd = s.params.tail(n).array().exp();
  return usable(s.params.head(n).array(), sd);
}

template <class T>
Eigen::VectorXd MeanFieldShards<T>::params() const {
  const Eigen::Index d = means_[0].size();
  Eigen::VectorXd p(2 * d);
  for (const Shard& s : shards_) {
    p.segment(s.begin, s.size) = s.params.head(s.size).template cast<double>();
    p.segment(d + s.begin, s.size) = s.params.tail(s.size).template cast<double>();
  }
  return p;
}

template <class T>
double MeanFieldShards<T>::fused_step(Shard& s, const Terms& d_mean, const Terms& d_sd, bool with_value,
                                      bool& finite) {
  using Array = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  using ConstArray = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  using Loss = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  const Eigen::Index n = s.size;
  T* mean = s.params.data();
  T* log_sd = mean + n;
  T* sd_all = sd_now(s);
  const T alpha = T(divergence_.parameter);
  s.adam->begin_step();
  double value = 0;
  T g_mean[kMathBlock], g_log_sd[kMathBlock];
  for (Eigen::Index i = 0; i < n; i += kMathBlock) {
    const Eigen::Index m = std::min(kMathBlock, n - i), at = s.begin + i;
    T* sd = sd_all + i;  // q's sd now
    value += double(alpha_renyi_block(m, mean + i, log_sd + i, sd, s.cavity_mean.data() + i,
                                      s.cavity_log_sd.data() + i, s.cavity_sd.data() + i, alpha, g_mean, g_log_sd,
                                      with_value));
    // params = [mean; log sd]: d/dlog sd = sd .* d/dsd.
    Array gm(g_mean, m), gl(g_log_sd, m);
    for (const VectorX<T>& term : d_mean) gm += Loss(term.data() + at, m);
    for (const VectorX<T>& term : d_sd) gl += Loss(term.data() + at, m) * ConstArray(sd, m);
    if (!all_finite(gm) || !all_finite(gl)) {
      finite = false;
      return value;
    }
    s.adam->update(i, m, mean + i, g_mean);
    s.adam->update(n + i, m, log_sd + i, g_log_sd);
    Array new_sd(sd, m);
    new_sd = ConstArray(log_sd + i, m).exp();
    Array(means_[0].data() + at, m) = ConstArray(mean + i, m);
    if (!usable(ConstArray(mean + i, m), new_sd)) {
      finite = false;
      return value;
    }
  }
  return value;
}

template <class T>
double MeanFieldShards<T>::whole_step(Shard& s, const Terms& d_mean, const Terms& d_sd, bool& finite) {
  using Family = GaussianFamily<Q>;
  const Eigen::Index n = s.size;
  const Q q(s.params.head(n).template cast<double>(), s.params.tail(n).template cast<double>());
  const double value = s.cavity ? Family::divergence(q, *s.cavity, divergence_, &s.gradient)
                                : Family::improper_kl(q, s.cavity_natural, &s.gradient);
  for (const VectorX<T>& term : d_mean) s.gradient.head(n) += term.segment(s.begin, n).template cast<double>();
  const Eigen::ArrayXd sd = q.sd().array();
  for (const VectorX<T>& term : d_sd)
    s.gradient.tail(n).array() += term.segment(s.begin, n).template cast<double>().array() * sd;
  if (!s.gradient.allFinite()) {
    finite = false;
    return value;
  }
  if constexpr (std::is_same_v<T, double>) {
    s.adam->step(s.params, s.gradient);
  } else {
    s.adam->step(s.params, s.gradient.template cast<T>());
  }
  finite = publish(s);
  return value;
}

template <class T>
typename MeanFieldShards<T>::Step MeanFieldShards<T>::step(const Terms& d_mean, const Terms& d_sd, bool with_value) {
  for (const Terms* terms : {&d_mean, &d_sd})
    for (const VectorX<T>& term : *terms)
      if (term.size() != means_[0].size())
        throw std::invalid_argument("a gradient term of " + std::to_string(term.size()) + " values for " +
                                    std::to_string(means_[0].size()) + " coordinates");
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

template class MeanFieldShards<double>;
template class MeanFieldShards<float>;

}  // namespace fvi::engine
