#include "fvi/optim/convergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "fvi/optim/window_judgement.h"

namespace fvi {

ConvergenceMonitor::ConvergenceMonitor(ConvergenceOptions options) : options_(options) {
  if (options_.window < 1) throw std::invalid_argument("the convergence window must be at least 1 step");
  if (!(options_.tol > 0) || !(options_.tol_param > 0))
    throw std::invalid_argument("the convergence tolerances must be positive");
  options_.min_average_windows = std::max(3L, options_.min_average_windows);
  options_.plateaus = std::max(1L, options_.plateaus);
  options_.max_average_windows = std::max(options_.min_average_windows, options_.max_average_windows);
  options_.max_mc_factor = std::max(1L, options_.max_mc_factor);
}

void ConvergenceMonitor::observe(double objective, const Eigen::VectorXd& mean, const Eigen::VectorXd& sd,
                                 const Eigen::VectorXd& params) {
  objective_only_ = mean.size() == 0;
  if (count_ == 0) {
    mean_sum_ = Eigen::VectorXd::Zero(mean.size());
    sd_sum_ = Eigen::VectorXd::Zero(sd.size());
    params_sum_ = Eigen::VectorXd::Zero(params.size());
  }
  if (mean.size() != mean_sum_.size() || sd.size() != mean.size() || params.size() != params_sum_.size())
    throw std::invalid_argument("the convergence monitor was given vectors of another size");
  if (std::isfinite(objective)) {
    objective_sum_ += objective;
    objective_square_ += objective * objective;
    ++objective_count_;
  }
  mean_sum_ += mean;
  sd_sum_ += sd;
  params_sum_ += params;
  if (++count_ == options_.window) close_window();
}

void ConvergenceMonitor::close_window() {
  const double n = double(count_);
  Window w{mean_sum_ / n, sd_sum_ / n, params_sum_ / n};
  count_ = 0;
  if (objective_count_ > 0) {
    const double m = objective_sum_ / double(objective_count_);
    const double var = objective_count_ > 1 ? std::max(0.0, (objective_square_ / double(objective_count_) - m * m) *
                                                                 double(objective_count_) / double(objective_count_ - 1))
                                            : 0.0;
    const double se = std::sqrt(var / double(objective_count_));
    if (has_previous_) {
      const double change = std::abs(m - previous_objective_);
      relative_change_ = change / std::max(std::abs(m), 1e-300);
      const bool flat = relative_change_ < options_.tol || change < 2 * std::sqrt(se * se + previous_se_ * previous_se_);
      plateaus_ = flat ? plateaus_ + 1 : 0;
    }
    has_previous_ = true;
    previous_objective_ = m, previous_se_ = se;
  }
  objective_sum_ = objective_square_ = 0;
  objective_count_ = 0;
  if (!averaging_) {
    if (plateaus_ >= options_.plateaus) averaging_ = true, ++epoch_;  // the next window is the first averaged one
    return;
  }
  ++averaging_windows_;
  averages_.push_back(std::move(w));
  if (long(averages_.size()) > options_.max_average_windows) averages_.erase(averages_.begin());
  judge_averages();
}

// The averaged windows judged (fvi/optim/window_judgement.h): converged when stationary and
// precise; a significant drift drops the older half.
void ConvergenceMonitor::judge_averages() {
  const long n = long(averages_.size());
  if (n < 3) return;
  const WindowJudgement j = judge_windows(averages_, options_.tol_param);
  held_.clear();
  drift_ = j.drift;
  drift_at_ = j.drift_at, drift_of_sd_ = j.drift_of_sd;
  precision_ = j.standard_error;
  autocorrelation_ = j.autocorrelation;
  if (j.stationary && j.standard_error < options_.tol_param && n >= options_.min_average_windows) {
    converged_ = true;
  } else if (++windows_since_mc_ >= options_.max_average_windows / 2 && mc_factor_ * 2 <= options_.max_mc_factor) {
    // Averaging as long as the average holds without converging: the noise of the steps keeps
    // the means from settling (or reads as drift). Less noise per step, and average again.
    mc_factor_ *= 2;
    windows_since_mc_ = 0;
    averages_.clear();
    ++epoch_;
    averaging_windows_ = 0;
  } else if (j.drifting && n >= 4) {
    // The older half was still moving: drop it, and take full steps again until it settles.
    averages_.erase(averages_.begin(), averages_.begin() + n / 2);
    ++epoch_;
    averaging_windows_ = 0;
  }
}

double ConvergenceMonitor::step_scale() const {
  if (!averaging_) return 1.0;
  return std::max(0.3, 1.0 / std::sqrt(1.0 + double(averaging_windows_) / 4.0));  // since the last drift
}

Eigen::VectorXd ConvergenceMonitor::average() const {
  if (averages_.empty()) return {};
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(averages_[0].params.size());
  for (const Window& w : averages_) sum += w.params;
  return sum / double(averages_.size());
}

std::string ConvergenceMonitor::verdict(long steps, const char* unit, const std::string& moving,
                                        const char* more_steps) const {
  char text[1024];
  // Where the windows were correlated, the standard errors allowed for it: say by how much.
  char correlated[96] = "";
  if (autocorrelation_ > 0)
    std::snprintf(correlated, sizeof correlated, ", windows' autocorrelation %.2f allowed for", autocorrelation_);
  if (converged_ && objective_only_) {
    std::snprintf(text, sizeof text, "converged after %ld %s (relative objective change %.2g; the last %ld %s averaged)",
                  steps, unit, relative_change_, averaged_steps(), unit);
  } else if (converged_) {
    std::snprintf(text, sizeof text,
                  "converged after %ld %s (relative objective change %.2g; the last %ld %s averaged: drift %.3f, "
                  "standard error %.3f < %g%s; means in q sds, sds relative)",
                  steps, unit, relative_change_, averaged_steps(), unit, drift_, precision_, options_.tol_param,
                  correlated);
    if (mc_factor_ > 1) {
      const size_t used = std::strlen(text);
      std::snprintf(text + used, sizeof text - used, "; mc_samples x%ld by the rule", mc_factor_);
    }
  } else if (!held_.empty() && objective_only_) {
    std::snprintf(text, sizeof text,
                  "NOT converged after %ld %s: the objective levelled off (the last %ld %s averaged), but %s. Try %s.",
                  steps, unit, averaged_steps(), unit, held_.c_str(), more_steps);
  } else if (!held_.empty()) {
    std::snprintf(text, sizeof text,
                  "NOT converged after %ld %s: the server's q settled (the last %ld %s averaged: drift %.3f, standard "
                  "error %.3f < %g), but %s. Try %s.",
                  steps, unit, averaged_steps(), unit, drift_, precision_, options_.tol_param, held_.c_str(), more_steps);
  } else if (!averaging_ && relative_change_ < 0) {
    // No two windows' objectives to compare: too few steps, or no finite estimate in them.
    if (steps < 2 * options_.window)
      std::snprintf(text, sizeof text,
                    "NOT converged after %ld %s: too few to judge (the rule compares the mean objective of one window "
                    "of %ld %s with the next). Try %s.",
                    steps, unit, options_.window, unit, more_steps);
    else
      std::snprintf(text, sizeof text,
                    "NOT converged after %ld %s: no two windows of %ld %s had a finite estimate of the objective to "
                    "compare.",
                    steps, unit, options_.window, unit);
  } else if (!averaging_) {
    std::snprintf(text, sizeof text,
                  "NOT converged after %ld %s: the objective was still changing (relative change %.2g per %ld %s). "
                  "Try %s, a larger lr, or more mc_samples.",
                  steps, unit, relative_change_, options_.window, unit, more_steps);
  } else if (drift_ < 0) {
    // Averaging began, but too few windows for a judgement.
    std::snprintf(text, sizeof text,
                  "NOT converged after %ld %s: the objective has levelled off, and averaging had just begun (%ld %s "
                  "averaged; the rule judges the average over at least %ld windows of %ld). Try %s.",
                  steps, unit, averaged_steps(), unit, options_.min_average_windows, options_.window, more_steps);
  } else {
    // A steady trend (well above the average's noise) under an objective that no longer changes
    // (the last window was flat): q's means crawling along a ridge that the data barely
    // determine, or its sds still settling (spreads the data barely inform, or a hyperparameter
    // they follow).
    const bool steady = drift_ > 3 * precision_ && plateaus_ > 0;
    const std::string advice =
        !steady ? "Try " + std::string(more_steps) + " or more mc_samples."
        : !drift_of_sd_
            ? "The objective has levelled off while the means keep moving one way: a ridge, where parameters trade "
              "off and the data barely tell them apart; where the means stop along it depends on the seed and the "
              "iterations. Try a tighter prior on the parameters that trade off, or a model that identifies them; " +
                  std::string(more_steps) + "."
            : "The objective has levelled off while q's sds keep changing one way: spreads the data barely inform, "
              "settling slowly (or following a hyperparameter that still moves). Try " +
                  std::string(more_steps) + ", or a tighter prior on those parameters.";
    std::snprintf(text, sizeof text,
                  "NOT converged after %ld %s: the averaged q still moved %.3f (%sstandard error %.3f%s; tol_param %g; "
                  "means in q sds, sds relative%s). %s",
                  steps, unit, drift_, moving.empty() ? "" : (moving + "; ").c_str(), precision_, correlated,
                  options_.tol_param,
                  mc_factor_ > 1 ? (", with mc_samples x" + std::to_string(mc_factor_) + " by the rule").c_str() : "",
                  advice.c_str());
  }
  return text;
}

std::vector<double> ConvergenceMonitor::state() const {
  std::vector<double> s{double(count_),           double(objective_count_), objective_sum_,   objective_square_,
                        double(has_previous_),    previous_objective_,      previous_se_,     double(plateaus_),
                        double(averaging_),       double(converged_),       double(averaging_windows_),
                        relative_change_,         drift_,                   precision_,       double(mean_sum_.size()),
                        double(params_sum_.size()), double(averages_.size()), double(epoch_),
                        double(mc_factor_),        double(windows_since_mc_), double(drift_at_),
                        double(drift_of_sd_)};
  auto append = [&](const Eigen::VectorXd& v) { s.insert(s.end(), v.data(), v.data() + v.size()); };
  append(mean_sum_), append(sd_sum_), append(params_sum_);
  for (const Window& w : averages_) append(w.mean), append(w.sd), append(w.params);
  return s;
}

void ConvergenceMonitor::restore(const std::vector<double>& s) {
  constexpr size_t kHead = 22;
  auto bad = [] { return std::invalid_argument("a damaged convergence state"); };
  if (s.size() < kHead) throw bad();
  const double dm = s[14], dp = s[15], windows = s[16];
  if (!(dm >= 0 && dm <= 1e9 && dp >= 0 && dp <= 1e9 && windows >= 0 && windows <= 1e6)) throw bad();
  const size_t m = size_t(dm), p = size_t(dp), n = size_t(windows);
  if (s.size() != kHead + (2 * m + p) * (n + 1)) throw bad();
  count_ = long(s[0]), objective_count_ = long(s[1]), objective_sum_ = s[2], objective_square_ = s[3];
  has_previous_ = s[4] != 0, previous_objective_ = s[5], previous_se_ = s[6], plateaus_ = long(s[7]);
  averaging_ = s[8] != 0, converged_ = s[9] != 0, averaging_windows_ = long(s[10]);
  const double mc = s[18], since = s[19];
  if (!(mc >= 1 && mc <= double(options_.max_mc_factor) && mc == std::floor(mc))) throw bad();
  if (!(since >= 0 && since <= 1e9)) throw bad();
  windows_since_mc_ = long(since);
  if (!(s[20] >= -1 && s[20] <= dm && s[20] == std::floor(s[20]) && (s[21] == 0 || s[21] == 1))) throw bad();
  drift_at_ = long(s[20]), drift_of_sd_ = s[21] != 0;
  relative_change_ = s[11], drift_ = s[12], precision_ = s[13], epoch_ = long(s[17]), mc_factor_ = long(mc);
  const double* at = s.data() + kHead;
  auto take = [&](size_t size) {
    Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(at, Eigen::Index(size));
    at += size;
    return v;
  };
  mean_sum_ = take(m), sd_sum_ = take(m), params_sum_ = take(p);
  averages_.clear();
  for (size_t w = 0; w < n; ++w) {
    Window x;
    x.mean = take(m), x.sd = take(m), x.params = take(p);
    averages_.push_back(std::move(x));
  }
}

}  // namespace fvi
