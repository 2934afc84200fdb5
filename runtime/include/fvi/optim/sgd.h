#pragma once
// Stochastic gradient descent with (heavy-ball or Nesterov) momentum, in PyTorch's form, which
// the FedGVI competitors use (spec 000 §5.5: SGD with momentum, lr 0.1 / 0.01):
//   b_1 = g_1;  b_t = mu b_{t-1} + (1 - dampening) g_t;   d_t = g_t + mu b_t (Nesterov) or b_t;
//   params <- params - lr_t d_t.
// Minimises; pass -gradient to maximise.
#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/optim/step_size_schedule.h"

namespace fvi {

struct SgdOptions {
  StepSizeSchedule learning_rate = StepSizeSchedule(1e-2);
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

template <typename T = double>
class Sgd {
 public:
  explicit Sgd(Eigen::Index size, SgdOptions options = {}) : options_(options), buffer_(VectorX<T>::Zero(size)) {
    check_bounded("Sgd", "momentum", options_.momentum, 0.0, 1.0);
    check_bounded("Sgd", "dampening", options_.dampening, 0.0, 1.0);
    if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0)) {
      internal::throw_invalid("Sgd", "Nesterov momentum requires momentum > 0 and dampening = 0");
    }
  }

  void step(VectorX<T>& params, const VectorX<T>& gradient) {
    check_size("Sgd::step", "params", params.size(), buffer_.size());
    check_size("Sgd::step", "gradient", gradient.size(), buffer_.size());
    check_finite("Sgd::step", "gradient", gradient);
    const T mu = T(options_.momentum);
    const T lr = T(options_.learning_rate(t_));
    if (mu == T(0)) {
      params -= lr * gradient;
    } else {
      if (t_ == 0) {
        buffer_ = gradient;
      } else {
        buffer_ = mu * buffer_ + (T(1) - T(options_.dampening)) * gradient;
      }
      if (options_.nesterov) {
        params -= lr * (gradient + mu * buffer_);
      } else {
        params -= lr * buffer_;
      }
    }
    ++t_;
  }

  long iteration() const { return t_; }
  const VectorX<T>& momentum_buffer() const { return buffer_; }
  void restore(long iteration, const VectorX<T>& buffer) {
    check_size("Sgd::restore", "buffer", buffer.size(), buffer_.size());
    check_finite("Sgd::restore", "buffer", buffer);
    t_ = iteration;
    buffer_ = buffer;
  }

 private:
  SgdOptions options_;
  long t_ = 0;
  VectorX<T> buffer_;
};

}  // namespace fvi
