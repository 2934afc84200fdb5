#pragma once
// The stopping rule and the final estimate of a stochastic variational fit, shared by every
// method through the server loop.
//
// Steps are grouped in windows. While optimising, a window's mean objective is compared with the
// previous one's: the objective has plateaued when the change is below tol relative to it or
// within two standard errors of the windows' noise (Stan's ADVI compares relative changes only,
// which a noisy estimate can pass or fail by chance), twice in a row (`plateaus`). Then the averaging phase
// starts: the step size decays as 1/sqrt(1 + w/4) over its windows w (floor 0.3), and the
// parameters are averaged over its windows (Polyak-Ruppert), so that the estimate is not one
// jittering iterate. The fit has converged when, over at least eight averaging windows, the
// means of q show no trend (a line through the windows' means drifts less than 2 tol_param
// posterior sds over the span, at the top of its 95% interval) and their average is precise (its
// standard error below tol_param sds): the reported means are then off the optimum by Monte Carlo
// error only. The log-sds are judged the same way, in their own units (the sds move less than
// 2 tol_param relative over the span). Where the trend is significant (three standard errors,
// over tol_param), the older half is dropped, the step size goes back to full, and averaging goes on. Where averaging
// has gone on for half of max_average_windows windows without converging, the steps' Monte Carlo noise
// is what holds it back (or reads as drift): the draws per gradient double (mc_factor, up to
// max_mc_factor) and the average starts again.
#include <string>
#include <utility>
#include <vector>

#include "fvi/eigen_types.h"

namespace fvi {

// The most the stopping rule may multiply mc_samples by (ConvergenceOptions::max_mc_factor); a
// silo accepts no more draws per gradient than this times its own setting.
constexpr long kMaxMcFactor = 16;

struct ConvergenceOptions {
  long window = 100;         // steps per window
  double tol = 1e-4;         // relative change of the window-mean objective (plateau)
  double tol_param = 0.05;   // drift and precision of the averaged means, in q's sds
  long plateaus = 2;  // flat windows in a row that end the optimising phase
  long min_average_windows = 8;
  long max_average_windows = 64;  // older windows leave the average beyond this
  long max_mc_factor = 1;         // > 1: the rule may multiply mc_samples up to this (a power of 2)
};

class ConvergenceMonitor {
 public:
  explicit ConvergenceMonitor(ConvergenceOptions options = {});

  // One step: its objective estimate (NaN: none), q's mean and sd on the unconstrained scale
  // (what the rule measures moves by), and the parameters it averages (may be empty: nothing is
  // averaged, the final estimate is the last iterate).
  void observe(double objective, const Eigen::VectorXd& mean, const Eigen::VectorXd& sd,
               const Eigen::VectorXd& params);

  bool converged() const { return converged_; }
  // The server's q has converged but parameters it does not see have not (`why`: what still
  // moves, e.g. a silo's locals): averaging goes on, and the next window is judged again.
  void hold(std::string why) {
    converged_ = false;
    held_ = std::move(why);
  }
  double tol_param() const { return options_.tol_param; }
  double tol() const { return options_.tol; }
  bool averaging() const { return averaging_; }
  // Counts the starts of the average (the phase's start, then each drop of a drifting half):
  // parties averaging their own parameters restart when it changes.
  long averaging_epoch() const { return epoch_; }
  // The step size's multiplier for the next step.
  double step_scale() const;
  // The average of the parameters over the averaging windows (empty before any).
  Eigen::VectorXd average() const;
  long averaged_steps() const { return long(averages_.size()) * options_.window; }
  // The multiplier of mc_samples the rule asks for (1, 2, 4, ... up to max_mc_factor).
  long mc_factor() const { return mc_factor_; }

  // The criterion's values for the verdict: the last relative change of the objective, the
  // largest drift over the averaged span and the largest standard error of the average (a mean's
  // in q's sds, an sd's relative to itself).
  double relative_change() const { return relative_change_; }
  double drift() const { return drift_; }
  // Where the largest drift was: coordinate i of the means observed (-1: not judged yet), and
  // whether it was its sd's (observe's `sd`) series rather than its mean's.
  long drift_at() const { return drift_at_; }
  bool drift_of_sd() const { return drift_of_sd_; }
  double precision() const { return precision_; }
  // "converged after N iterations (...)" or "NOT converged after N iterations: ..."
  // `moving`, where given, names the coordinate that moved most ("b[6]'s mean") in a verdict of
  // means still moving. `more_steps` is the advice for a longer run ("a larger max_rounds"; under
  // `--set rounds=N`, which fixes the steps, a larger rounds).
  std::string verdict(long steps, const char* unit, const std::string& moving = "",
                      const char* more_steps = "a larger max_rounds") const;

  // Everything observe() depends on, for a checkpoint, and back (throws if it does not fit).
  std::vector<double> state() const;
  void restore(const std::vector<double>& state);

 private:
  struct Window {
    Eigen::VectorXd mean, sd, params;
  };
  void close_window();
  void judge_averages();

  ConvergenceOptions options_;
  // The window being filled.
  long count_ = 0, objective_count_ = 0;
  double objective_sum_ = 0, objective_square_ = 0;
  Eigen::VectorXd mean_sum_, sd_sum_, params_sum_;
  // The windows closed.
  bool has_previous_ = false;
  double previous_objective_ = 0, previous_se_ = 0;
  long plateaus_ = 0;
  bool averaging_ = false, converged_ = false;
  long averaging_windows_ = 0;  // since the averaging phase began (for the step size)
  long epoch_ = 0;
  long mc_factor_ = 1;
  long windows_since_mc_ = 0;  // averaging windows since the draws last changed
  std::vector<Window> averages_;
  double relative_change_ = -1, drift_ = -1, precision_ = -1;
  long drift_at_ = -1;
  bool drift_of_sd_ = false;
  // The windows' lag-1 autocorrelation the last judgement allowed for (window_judgement.h), for the
  // verdict; not in the state: a restored monitor's next judgement sets it.
  double autocorrelation_ = 0;
  std::string held_;  // why the last converged judgement was held (not in a checkpoint: asked again)
  // observe() was given no means and sds: the rule judges the objective alone (what the silos
  // judge, hold() says), and the verdict does not speak of q's moments.
  bool objective_only_ = false;
};

}  // namespace fvi
