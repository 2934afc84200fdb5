#pragma once
// Early stopping on an objective being minimised (the FedGVI BNN clients stop local training with
// patience 10 on the epoch objective and keep the best model, spec 000 §5.5 [repo]).
// update(value) records one evaluation and returns true when `patience` consecutive evaluations
// have not improved on the best by more than min_delta (absolute, or relative to |best| when
// `relative`). A NaN or infinite objective never counts as an improvement. improved() tells the
// caller to stash the current parameters as the best ones.
#include <cmath>
#include <limits>

#include "fvi/check.h"

namespace fvi {

struct EarlyStoppingOptions {
  long patience = 10;
  double min_delta = 0;
  bool relative = false;
};

class EarlyStopping {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {}) : options_(options) {
    if (options_.patience < 1) internal::throw_invalid("EarlyStopping", "patience must be at least 1");
    check_nonnegative("EarlyStopping", "min_delta", options_.min_delta);
  }

  bool update(double value) {
    const double threshold = options_.relative ? options_.min_delta * std::abs(best_) : options_.min_delta;
    improved_ = std::isfinite(value) && (best_iteration_ < 0 || value < best_ - threshold);
    if (improved_) {
      best_ = value;
      best_iteration_ = iteration_;
      since_best_ = 0;
    } else {
      ++since_best_;
    }
    ++iteration_;
    return should_stop();
  }

  bool should_stop() const { return since_best_ >= options_.patience; }
  bool improved() const { return improved_; }
  double best() const { return best_; }
  long best_iteration() const { return best_iteration_; }  // -1 before any finite value
  long iteration() const { return iteration_; }            // number of updates so far

 private:
  EarlyStoppingOptions options_;
  double best_ = std::numeric_limits<double>::infinity();
  long best_iteration_ = -1;
  long iteration_ = 0;
  long since_best_ = 0;
  bool improved_ = false;
};

}  // namespace fvi
