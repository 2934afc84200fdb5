#pragma once
// A silo's judgement of the parameters only it holds (an SFVI silo's q of its locals, a vertical
// silo's q of its split block), so that the server's stopping rule, which sees only the server's
// q, does not call a fit converged while a silo's still move. The silo keeps windows of its q's
// means and sds over the averaging phase the server set (the older half dropped at each restart
// of the average, as the server drops its own) and, asked, judges them as the server judges its
// own (fvi/optim/window_judgement.h); only the verdict and two figures leave the silo
// (fvi/program/silo_settling.h). Not in a checkpoint: a resumed silo judges anew.
#include <deque>

#include "fvi/eigen_types.h"
#include "fvi/optim/window_judgement.h"

namespace fvi {

class StationarityWatch {
 public:
  // `window` steps per window (the server's); at most `max_windows` recent windows are judged.
  explicit StationarityWatch(long window = 100, long max_windows = 64) : window_(window), max_windows_(max_windows) {}

  // The server's average restarted: its rule dropped the older half of its windows (a drift) or
  // started averaging. The older half of the windows so far goes too, as on the server; keeping
  // none held vfl_logreg_power's settled blocks back ("not averaged long enough") when the server
  // converged one window after a drop, and averaging then went on to the cap.
  void restart() {
    windows_.erase(windows_.begin(), windows_.begin() + long(windows_.size() / 2));
    count_ = 0;
  }
  // One step's q: means and sds of the parameters (the silo's unconstrained locals).
  void observe(const Eigen::VectorXd& mean, const Eigen::VectorXd& sd) {
    if (count_ == 0) mean_sum_ = Eigen::VectorXd::Zero(mean.size()), sd_sum_ = Eigen::VectorXd::Zero(sd.size());
    mean_sum_ += mean, sd_sum_ += sd;
    if (++count_ < window_) return;
    windows_.push_back({mean_sum_ / double(count_), sd_sum_ / double(count_)});
    if (long(windows_.size()) > max_windows_) windows_.pop_front();
    count_ = 0;
  }
  long windows() const { return long(windows_.size()); }
  // The length of the vectors watched (0 before the first whole window).
  int64_t size() const { return windows_.empty() ? 0 : int64_t(windows_.back().mean.size()); }
  // Fewer than 3 windows: not stationary (nothing to judge yet), drift and error infinite.
  WindowJudgement judge(double tol_param) const {
    if (windows_.size() < 3) return {false, false, kUnknown, kUnknown};
    return judge_windows(windows_, tol_param);
  }

 private:
  static constexpr double kUnknown = 1e300;
  struct Window {
    Eigen::VectorXd mean, sd;
  };
  long window_, max_windows_;
  long count_ = 0;
  Eigen::VectorXd mean_sum_, sd_sum_;
  std::deque<Window> windows_;
};

}  // namespace fvi
