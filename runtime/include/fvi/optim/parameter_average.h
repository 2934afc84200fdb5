#pragma once
// A silo's side of the server's stopping rule (fvi/optim/convergence.h) on parameters only the
// silo holds: the step size's multiplier the server sets, and a Polyak-Ruppert average of the
// parameters after every step since the server last said to restart it.
#include <stdexcept>
#include <string>

#include "fvi/eigen_types.h"

namespace fvi {

class ParameterAverage {
 public:
  // Throws on a scale outside (0, 1] (a hostile or damaged request).
  void set_schedule(double step_scale, bool restart, Eigen::Index size) {
    if (!(step_scale > 0 && step_scale <= 1))
      throw std::invalid_argument("a schedule with step scale " + std::to_string(step_scale));
    step_scale_ = step_scale;
    if (restart) averaging_ = true, count_ = 0, sum_ = Eigen::VectorXd::Zero(size);
  }
  double step_scale() const { return step_scale_; }
  bool averaging() const { return averaging_; }
  void add(const Eigen::VectorXd& params) {
    if (!averaging_) return;
    sum_ += params;
    ++count_;
  }
  bool has_average() const { return count_ > 0; }
  Eigen::VectorXd average() const { return sum_ / double(count_); }

  // [step scale, averaging, count, the sum (size values)], and back.
  Eigen::VectorXd state(Eigen::Index size) const {
    Eigen::VectorXd s(3 + size);
    s << step_scale_, double(averaging_), double(count_), count_ > 0 ? sum_ : Eigen::VectorXd::Zero(size);
    return s;
  }
  void restore(const Eigen::VectorXd& s) {
    if (s.size() < 3 || !(s[0] > 0 && s[0] <= 1) || !(s[2] >= 0 && s[2] < 1e15))
      throw std::invalid_argument("a damaged checkpoint (the averaging schedule)");
    step_scale_ = s[0], averaging_ = s[1] != 0, count_ = long(s[2]);
    sum_ = s.tail(s.size() - 3);
  }
  static Eigen::Index state_size(Eigen::Index size) { return 3 + size; }

 private:
  double step_scale_ = 1;
  bool averaging_ = false;
  long count_ = 0;
  Eigen::VectorXd sum_;
};

}  // namespace fvi
