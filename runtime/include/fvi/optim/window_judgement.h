#pragma once
// Whether windows of averaged q moments have settled: the judgement the stopping rule makes of the
// server's q (fvi/optim/convergence.h) and each SFVI silo makes of its own locals
// (fvi/optim/stationarity_watch.h), written once.
//
// Coordinate by coordinate, in q's sds: a least-squares line through the windows' means gives the
// drift over the span, which must be small even at the top of its confidence interval (slope plus
// two standard errors, over the span, under 2 tol_param: the average then lags the end of the span
// by less than tol_param), and the spread about the line the average's standard error. A slow
// drift hidden in noise (an optimiser crawling along a ridge) keeps the bound wide. The log-sds
// are judged the same way, in their own units: a q whose means have settled while its sds still
// shrink has not converged.
//
// Many coordinates at once (a softmax regression's q has thousands of series): by chance alone
// some of m estimated slopes lie far from zero (with few windows, Student's t on n - 2 degrees of
// freedom, farther still), and a slope read as a single series' drift restarts the average again
// and again. So a slope is a significant drift only beyond the Bonferroni level of the m series
// (two-sided 5% over all of them, on Student's t with n - 2 degrees of freedom, never under
// three standard errors), and by more than tol_param. The bound is not relaxed: it must hold for
// every coordinate, so the average of many needs more windows (or draws) than that of one.
//
// Successive windows are not independent: an optimiser's iterates wander with a correlation time
// that can exceed a window, and the spread about a line then understates both standard errors
// (residuals' lag-1 autocorrelation rho: each variance by (1 + rho) / (1 - rho), for a mean of
// AR(1) values and, asymptotically, for a slope). rho is estimated from the residuals of every
// series of the same kind (means, log-sds) at once, less its expectation for independent windows
// (fitting the line makes residuals negatively correlated: E r1 = -sum_w H[w+1, w] / (n - 2) with H
// the line's hat matrix), and only its lower 2-standard-error bound is allowed for: a few short
// series estimate rho poorly, and noise alone must not hold a run back.
#include <algorithm>
#include <cmath>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/kernel/cdfs.h"

namespace fvi {

struct WindowJudgement {
  bool stationary = true;  // every drift bound under 2 tol_param
  bool drifting = false;   // some coordinate drifts significantly, by more than tol_param
  double drift = 0;        // the largest drift over the span (a mean's in q sds, an sd's relative)
  double standard_error = 0;  // the largest standard error of the average, in the same units
  long drift_at = -1;         // where the largest drift was: coordinate i of the windows' vectors (-1: none)
  bool drift_of_sd = false;   // ... in its sd's series (else its mean's)
  double autocorrelation = 0; // the larger rho allowed for (means', log-sds'), 0 when none
};

// The lag-1 autocorrelation of windows, allowed for in the standard errors: the residuals' pooled
// estimate less its expectation for independent windows, at the lower end of its 2-standard-error
// interval, in [0, 0.9]. `r1_sum` sums each series' lag-1 autocorrelation of residuals, over
// `series` series of n windows each.
inline double allowed_autocorrelation(double r1_sum, long series, long n) {
  if (series <= 0 || n < 5) return 0;  // 3 residual degrees of freedom or more
  const double centre = double(n - 1) / 2;
  double sxx = 0;
  for (long w = 0; w < n; ++w) sxx += (double(w) - centre) * (double(w) - centre);
  double hat = 0;  // sum of H[w + 1, w]
  for (long w = 0; w + 1 < n; ++w) hat += 1.0 / double(n) + (double(w) - centre) * (double(w + 1) - centre) / sxx;
  const double expected = -hat / double(n - 2);
  const double r1 = r1_sum / double(series);
  const double rho = (r1 - expected) / (1 - expected);
  const double se = 1 / std::sqrt(double(series) * double(n - 2));  // independent windows' r1, about
  return std::clamp(rho - 2 * se, 0.0, 0.9);
}

// Student's t's upper quantile on nu degrees of freedom: t with P(T > t) = p, 0 < p < 0.5
// (bisection on the log tail, to 1e-9 relative).
inline double student_t_upper_quantile(double p, double nu) {
  const double log_p = std::log(p);
  double lo = 0, hi = 1e9;
  for (int k = 0; k < 300 && hi - lo > 1e-9 * hi; ++k) {
    const double mid = (lo + hi) / 2;
    (kernel::detail::log_standard_cdf(kernel::detail::CdfFamily::StudentT, -mid, nu) > log_p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

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
  // Each series' line, in the units of tol_param: slope, its standard error, the average's.
  struct Line {
    double slope, se_slope, se_mean;
  };
  std::vector<Line> lines;
  lines.reserve(size_t(2 * d));
  std::vector<double> series(size_t(n), 0.0), residuals(size_t(n), 0.0);
  double r1_sum[2] = {0, 0};  // each kind's (means', log-sds') residual autocorrelations, summed
  long r1_series[2] = {0, 0};
  const auto fit = [&](int kind) {
    double mean = 0;
    for (double v : series) mean += v;
    mean /= double(n);
    double sxy = 0;
    for (long w = 0; w < n; ++w) sxy += (double(w) - centre) * (series[size_t(w)] - mean);
    const double slope = sxy / sxx;
    double residual = 0, spread = 0;
    for (long w = 0; w < n; ++w) {
      const double r = series[size_t(w)] - mean - slope * (double(w) - centre);
      residuals[size_t(w)] = r;
      residual += r * r;
      spread += (series[size_t(w)] - mean) * (series[size_t(w)] - mean);
    }
    if (residual > 0) {
      double lagged = 0;
      for (long w = 0; w + 1 < n; ++w) lagged += residuals[size_t(w)] * residuals[size_t(w + 1)];
      r1_sum[kind] += lagged / residual, ++r1_series[kind];
    }
    lines.push_back({slope, std::sqrt(residual / double(n - 2) / sxx), std::sqrt(spread / double(n - 1) / double(n))});
  };
  for (Eigen::Index i = 0; i < d; ++i) {
    double scale = 0;  // the mean in q's sds, their average over the span
    for (long w = 0; w < n; ++w) scale += windows[size_t(w)].sd[i];
    scale = std::max(scale / double(n), 1e-300);
    for (long w = 0; w < n; ++w) series[size_t(w)] = windows[size_t(w)].mean[i] / scale;
    fit(0);
    for (long w = 0; w < n; ++w) series[size_t(w)] = std::log(std::max(windows[size_t(w)].sd[i], 1e-300));
    fit(1);
  }
  // Lines alternate: a coordinate's mean (even), then its log-sd (odd).
  double inflation[2];
  for (int kind = 0; kind < 2; ++kind) {
    const double rho = allowed_autocorrelation(r1_sum[kind], r1_series[kind], n);
    out.autocorrelation = std::max(out.autocorrelation, rho);
    inflation[kind] = std::sqrt((1 + rho) / (1 - rho));
  }
  for (size_t at = 0; at < lines.size(); ++at) {
    lines[at].se_slope *= inflation[at % 2];
    lines[at].se_mean *= inflation[at % 2];
  }
  const double m = double(lines.size());
  const double significant = std::max(3.0, student_t_upper_quantile(0.025 / m, double(n - 2)));
  for (size_t at = 0; at < lines.size(); ++at) {
    const Line& l = lines[at];
    const double drift = std::abs(l.slope) * double(n - 1);
    const double drift_bound = (std::abs(l.slope) + 2 * l.se_slope) * double(n - 1);
    if (!(drift_bound < 2 * tol_param)) out.stationary = false;
    if (std::abs(l.slope) > significant * l.se_slope && drift > tol_param) out.drifting = true;
    if (out.drift_at < 0 || drift > out.drift) out.drift = drift, out.drift_at = long(at / 2), out.drift_of_sd = at % 2 == 1;
    out.standard_error = std::max(out.standard_error, l.se_mean);
  }
  return out;
}

}  // namespace fvi
