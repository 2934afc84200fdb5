#pragma once
// Whether windows of averaged q moments have settled: the judgement the stopping rule makes of the
// server's q (fvi/optim/convergence.h) and each SFVI silo makes of its own locals
// (fvi/optim/stationarity_watch.h), written once.
//
// Coordinate by coordinate, in q's sds: a least-squares line through the windows' means gives the
// drift over the span, which must be small even at the top of its confidence interval (slope plus
// two standard errors, over the span, under 2 tol_param: the average then lags the end of the span
// by less than tol_param), and the spread about the line the average's standard error. A slow
// drift hidden in noise (an optimiser crawling along a ridge) keeps the bound wide; a slope three
// standard errors from zero and over tol_param is a drift. The log-sds are judged the same way, in
// their own units: a q whose means have settled while its sds still shrink has not converged.
#include <algorithm>
#include <cmath>
#include <vector>

#include "fvi/eigen_types.h"

namespace fvi {

struct WindowJudgement {
  bool stationary = true;  // every drift bound under 2 tol_param
  bool drifting = false;   // some coordinate drifts significantly, by more than tol_param
  double drift = 0;        // the largest drift over the span (a mean's in q sds, an sd's relative)
  double standard_error = 0;  // the largest standard error of the average, in the same units
};

// `windows[w].mean` and `.sd`: window w's average of q's means and sds (oldest first, at least 3).
template <class Windows>
WindowJudgement judge_windows(const Windows& windows, double tol_param) {
  WindowJudgement out;
  const long n = long(windows.size());
  if (n < 3) return out;
  const Eigen::Index d = windows[0].mean.size();
  const double centre = double(n - 1) / 2;
  double sxx = 0;
  for (long w = 0; w < n; ++w) sxx += (double(w) - centre) * (double(w) - centre);
  std::vector<double> series(size_t(n), 0.0);
  const auto judge = [&] {  // one series, in the units of tol_param
    double mean = 0;
    for (double v : series) mean += v;
    mean /= double(n);
    double sxy = 0;
    for (long w = 0; w < n; ++w) sxy += (double(w) - centre) * (series[size_t(w)] - mean);
    const double slope = sxy / sxx;
    double residual = 0, spread = 0;
    for (long w = 0; w < n; ++w) {
      const double r = series[size_t(w)] - mean - slope * (double(w) - centre);
      residual += r * r;
      spread += (series[size_t(w)] - mean) * (series[size_t(w)] - mean);
    }
    const double se_slope = std::sqrt(residual / double(n - 2) / sxx);
    const double drift = std::abs(slope) * double(n - 1);
    const double drift_bound = (std::abs(slope) + 2 * se_slope) * double(n - 1);
    if (!(drift_bound < 2 * tol_param)) out.stationary = false;
    if (std::abs(slope) > 3 * se_slope && drift > tol_param) out.drifting = true;
    out.drift = std::max(out.drift, drift);
    out.standard_error = std::max(out.standard_error, std::sqrt(spread / double(n - 1) / double(n)));
  };
  for (Eigen::Index i = 0; i < d; ++i) {
    double scale = 0;  // the mean in q's sds, their average over the span
    for (long w = 0; w < n; ++w) scale += windows[size_t(w)].sd[i];
    scale = std::max(scale / double(n), 1e-300);
    for (long w = 0; w < n; ++w) series[size_t(w)] = windows[size_t(w)].mean[i] / scale;
    judge();
    for (long w = 0; w < n; ++w) series[size_t(w)] = std::log(std::max(windows[size_t(w)].sd[i], 1e-300));
    judge();
  }
  return out;
}

}  // namespace fvi
