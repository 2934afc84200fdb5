#pragma once
// Step-size (learning-rate) schedules for the optimisers, as a function of the step index
// t = 0, 1, 2, ... A double converts implicitly to a constant schedule.
//   constant        lr
//   exponential     lr * rate^(t / steps)
//   step            lr * factor^floor(t / every)
//   inverse_time    lr * (1 + t / tau)^(-kappa)   (Robbins-Monro conditions hold for kappa in (1/2, 1])
//   cosine          min + (lr - min) (1 + cos(pi min(t, total) / total)) / 2
#include <algorithm>
#include <cmath>

#include "fvi/check.h"

namespace fvi {

class StepSizeSchedule {
 public:
  enum class Kind { kConstant, kExponential, kStep, kInverseTime, kCosine };

  StepSizeSchedule(double learning_rate = 1e-3)  // NOLINT: implicit on purpose (constant schedule)
      : kind_(Kind::kConstant), lr_(learning_rate) {
    check_positive("StepSizeSchedule", "learning_rate", lr_);
  }

  static StepSizeSchedule constant(double lr) { return StepSizeSchedule(lr); }
  static StepSizeSchedule exponential(double lr, double rate, double steps) {
    StepSizeSchedule s(lr);
    check_positive("StepSizeSchedule::exponential", "rate", rate);
    check_positive("StepSizeSchedule::exponential", "steps", steps);
    s.kind_ = Kind::kExponential;
    s.a_ = rate;
    s.b_ = steps;
    return s;
  }
  static StepSizeSchedule step(double lr, double factor, long every) {
    StepSizeSchedule s(lr);
    check_positive("StepSizeSchedule::step", "factor", factor);
    check_positive("StepSizeSchedule::step", "every", double(every));
    s.kind_ = Kind::kStep;
    s.a_ = factor;
    s.b_ = double(every);
    return s;
  }
  static StepSizeSchedule inverse_time(double lr, double tau, double kappa) {
    StepSizeSchedule s(lr);
    check_positive("StepSizeSchedule::inverse_time", "tau", tau);
    check_positive("StepSizeSchedule::inverse_time", "kappa", kappa);
    s.kind_ = Kind::kInverseTime;
    s.a_ = tau;
    s.b_ = kappa;
    return s;
  }
  static StepSizeSchedule cosine(double lr, long total_steps, double min_lr = 0) {
    StepSizeSchedule s(lr);
    check_positive("StepSizeSchedule::cosine", "total_steps", double(total_steps));
    check_bounded("StepSizeSchedule::cosine", "min_lr", min_lr, 0.0, lr);
    s.kind_ = Kind::kCosine;
    s.a_ = double(total_steps);
    s.b_ = min_lr;
    return s;
  }

  Kind kind() const { return kind_; }

  double operator()(long t) const {
    if (t < 0) internal::throw_invalid("StepSizeSchedule", "step index must be non-negative");
    const double td = double(t);
    switch (kind_) {
      case Kind::kConstant:
        return lr_;
      case Kind::kExponential:
        return lr_ * std::pow(a_, td / b_);
      case Kind::kStep:
        return lr_ * std::pow(a_, std::floor(td / b_));
      case Kind::kInverseTime:
        return lr_ * std::pow(1 + td / a_, -b_);
      case Kind::kCosine: {
        const double pi = 3.141592653589793238462643383;
        return b_ + (lr_ - b_) * 0.5 * (1 + std::cos(pi * std::min(td, a_) / a_));
      }
    }
    return lr_;
  }

 private:
  Kind kind_;
  double lr_;
  double a_ = 0;
  double b_ = 0;
};

}  // namespace fvi
