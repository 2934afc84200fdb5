#pragma once
// Adam (Kingma & Ba 2015, Algorithm 1), with PyTorch's defaults, which the FedGVI experiments use
// (spec 000 §5.5: "Adam, lr 0.0005, other settings at PyTorch defaults"); SFVI uses optax Adam
// (spec 002 §2.3). Minimises: params <- params - lr_t m_hat / (sqrt(v_hat) + eps), with
// m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t). To maximise an ELBO, pass -gradient.
// The state (t, m, v) can be saved and restored for checkpoints.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/optim/step_size_schedule.h"

namespace fvi {

struct AdamOptions {
  StepSizeSchedule learning_rate = StepSizeSchedule(1e-3);
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // false: plain gradient steps, params <- params - lr_t g (SGD without momentum; the FedAvg and
  // FedVEM clients of spec 001 §5), through the same blocked and bounded update.
  bool moments = true;
};

template <typename T = double>
class Adam {
 public:
  explicit Adam(Eigen::Index size, AdamOptions options = {})
      : options_(options), m_(VectorX<T>::Zero(size)), v_(VectorX<T>::Zero(size)) {
    check_bounded("Adam", "beta1", options_.beta1, 0.0, 1.0 - 1e-16);
    check_bounded("Adam", "beta2", options_.beta2, 0.0, 1.0 - 1e-16);
    check_positive("Adam", "epsilon", options_.epsilon);
  }

  // One step on `params` given the gradient of the objective to minimise. A non-finite gradient
  // throws (and leaves params and state untouched).
  void step(VectorX<T>& params, const VectorX<T>& gradient) {
    check_size("Adam::step", "params", params.size(), m_.size());
    check_size("Adam::step", "gradient", gradient.size(), m_.size());
    check_finite("Adam::step", "gradient", gradient);
    begin_step();
    // In blocks that stay in the first-level cache: the three updates are one pass over memory
    // (a network's 318k parameters, m and v do not fit in the second level).
    constexpr Eigen::Index kBlock = 1024;
    for (Eigen::Index i = 0; i < m_.size(); i += kBlock) {
      const Eigen::Index n = std::min(kBlock, m_.size() - i);
      update(i, n, params.data() + i, gradient.data() + i);
    }
  }

  // The same step in pieces, for a caller that computes the gradient block by block and updates
  // each block while it is in cache (fvi/engine/meanfield_shards.h): begin_step() once, then
  // update() on disjoint ranges that cover every coordinate. The caller checks that the gradient
  // is finite. params and gradient point at coordinates [offset, offset + n).
  void begin_step() {
    ++t_;
    const double c1 = 1 - std::pow(options_.beta1, double(t_)), c2 = 1 - std::pow(options_.beta2, double(t_));
    // PyTorch's arithmetic: lr m_hat / (sqrt(v_hat) + eps) as (lr / c1) m / (sqrt(v) / sqrt(c2) + eps),
    // one division and one square root per coordinate.
    step_size_ = T(scale_ * options_.learning_rate(t_ - 1) / (options_.moments ? c1 : 1.0));
    inv_sqrt_c2_ = T(1 / std::sqrt(c2));
  }
  void update(Eigen::Index offset, Eigen::Index n, T* params, const T* gradient) {
    const T b1 = T(options_.beta1), b2 = T(options_.beta2), eps = T(options_.epsilon);
    auto m = m_.segment(offset, n).array(), v = v_.segment(offset, n).array();
    const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> g(gradient, n);
    auto p = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(params, n);
    if (!options_.moments) {
      if (limit_.size() == 0) p -= step_size_ * g;
      else p -= (step_size_ * g).max(-T(scale_) * limit_.segment(offset, n).array()).min(T(scale_) * limit_.segment(offset, n).array());
      return;
    }
    m = b1 * m + (T(1) - b1) * g;
    v = b2 * v + (T(1) - b2) * g.square();
    if (limit_.size() == 0) {
      p -= step_size_ * m / (v.sqrt() * inv_sqrt_c2_ + eps);
      return;
    }
    const auto bound = T(scale_) * limit_.segment(offset, n).array();
    p -= (step_size_ * m / (v.sqrt() * inv_sqrt_c2_ + eps)).max(-bound).min(bound);
  }

  // Bounds |step_i| by scale * limit[i] from the next step on (a trust region per coordinate:
  // a Gaussian's mean moves at most a fraction of its sd; fvi/optim/step_limit.h). Infinity: no
  // bound; an empty vector removes every bound.
  void set_step_limit(VectorX<T> limit) {
    if (limit.size() != 0) check_size("Adam::set_step_limit", "limit", limit.size(), m_.size());
    for (Eigen::Index i = 0; i < limit.size(); ++i) {
      if (!(limit[i] > 0)) throw std::domain_error("Adam::set_step_limit: limit[" + std::to_string(i) + "] is not positive");
    }
    limit_ = std::move(limit);
  }

  // Multiplies every later step size (a stopping rule's decay; 1 by default).
  void set_scale(double scale) { scale_ = scale; }

  long iteration() const { return t_; }
  const VectorX<T>& first_moment() const { return m_; }
  const VectorX<T>& second_moment() const { return v_; }

  // Restore a checkpointed state.
  void restore(long iteration, const VectorX<T>& m, const VectorX<T>& v) {
    check_size("Adam::restore", "m", m.size(), m_.size());
    check_size("Adam::restore", "v", v.size(), v_.size());
    check_finite("Adam::restore", "m", m);
    check_nonnegative("Adam::restore", "iteration", double(iteration));
    for (Eigen::Index i = 0; i < v.size(); ++i) check_nonnegative("Adam::restore", "v", double(v[i]));
    t_ = iteration;
    m_ = m;
    v_ = v;
  }
  void reset() {
    t_ = 0;
    m_.setZero();
    v_.setZero();
  }

 private:
  AdamOptions options_;
  long t_ = 0;
  T step_size_ = T(0), inv_sqrt_c2_ = T(1);  // lr / (1 - beta1^t) and 1 / sqrt(1 - beta2^t), this step
  double scale_ = 1;
  VectorX<T> limit_;  // per-coordinate bound on |step| at scale 1 (empty: none)
  VectorX<T> m_;
  VectorX<T> v_;
};

}  // namespace fvi
