#pragma once
// A silo's side of the server's stopping rule (fvi/optim/convergence.h) on parameters only the
// silo holds: the step size's multiplier the server sets, and a Polyak-Ruppert average of the
// parameters after every step of the rule's current averaging epoch (ConvergenceMonitor::
// averaging_epoch: 0 before averaging starts, one more at each restart). The server states the
// epoch with every iteration's request, so a silo that missed a change catches up at its next one.
#include <cmath>
#include <stdexcept>
#include <string>

#include "fvi/eigen_types.h"

namespace fvi {

class ParameterAverage {
 public:
  // A new epoch restarts the average. Throws on a scale outside (0, 1] or a negative epoch (a
  // hostile or damaged request).
  void set_schedule(double step_scale, long epoch, Eigen::Index size) {
    if (!(step_scale > 0 && step_scale <= 1) || epoch < 0)
      throw std::invalid_argument("a schedule with step scale " + std::to_string(step_scale) + " in averaging epoch " +
                                  std::to_string(epoch));
    step_scale_ = step_scale;
    if (epoch == epoch_) return;
    epoch_ = epoch, count_ = 0, sum_ = Eigen::VectorXd::Zero(size);
  }
  double step_scale() const { return step_scale_; }
  long epoch() const { return epoch_; }
  bool averaging() const { return epoch_ > 0; }
  void add(const Eigen::VectorXd& params) {
    if (!averaging()) return;
    sum_ += params;
    ++count_;
  }
  bool has_average() const { return count_ > 0; }
  Eigen::VectorXd average() const { return sum_ / double(count_); }

  // [step scale, epoch, count, the sum (size values)], and back.
  Eigen::VectorXd state(Eigen::Index size) const {
    Eigen::VectorXd s(3 + size);
    s << step_scale_, double(epoch_), double(count_), count_ > 0 ? sum_ : Eigen::VectorXd::Zero(size);
    return s;
  }
  void restore(const Eigen::VectorXd& s) {
    if (s.size() < 3 || !(s[0] > 0 && s[0] <= 1) || !(s[1] >= 0 && s[1] < 1e15 && s[1] == std::floor(s[1])) ||
        !(s[2] >= 0 && s[2] < 1e15 && s[2] == std::floor(s[2])))
      throw std::invalid_argument("a damaged checkpoint (the averaging schedule)");
    step_scale_ = s[0], epoch_ = long(s[1]), count_ = long(s[2]);
    sum_ = s.tail(s.size() - 3);
  }
  static Eigen::Index state_size(Eigen::Index size) { return 3 + size; }

 private:
  double step_scale_ = 1;
  long epoch_ = 0;
  long count_ = 0;
  Eigen::VectorXd sum_;
};

}  // namespace fvi
