// Pareto-smoothed importance sampling; see fvi/diagnostics/psis.h for the method and its sources.
#include "fvi/diagnostics/psis.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "fvi/error.h"

namespace fvi::diagnostics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Mean of log(1 - theta x_i): the maximum-likelihood shape k for a fixed theta = -k / sigma
// (Zhang & Stephens 2009, §4: for fixed theta the likelihood has this closed-form maximiser in k).
double profile_shape(double theta, const std::vector<double>& x) {
  double sum = 0;
  for (double xi : x) sum += std::log1p(-theta * xi);
  return sum / static_cast<double>(x.size());
}

// Generalized Pareto quantile at probability p: sigma ((1 - p)^(-k) - 1) / k, and its k -> 0
// limit -sigma log(1 - p) (the exponential distribution).
double pareto_quantile(double p, double k, double sigma) {
  const double log_tail = std::log1p(-p);
  if (std::abs(k) < 1e-12) return -sigma * log_tail;
  return sigma * std::expm1(-k * log_tail) / k;
}

double log_sum_exp(const std::vector<double>& v) {
  const double top = *std::max_element(v.begin(), v.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double x : v) sum += std::exp(x - top);
  return top + std::log(sum);
}

}  // namespace

ParetoFit fit_generalized_pareto(std::vector<double> x, bool weakly_informative_prior) {
  const ParetoFit no_fit{kInf, kNaN};
  const std::size_t n = x.size();
  if (n < 2) return no_fit;
  for (double xi : x)
    if (!std::isfinite(xi) || xi < 0) return no_fit;
  std::sort(x.begin(), x.end());
  const double nd = static_cast<double>(n);
  // Zhang & Stephens 2009, §4 (as loo's gpdfit): a grid of m = 30 + floor(sqrt(n)) values of
  // theta = -k / sigma, all below 1 / x_(n), spread by quantiles of a prior scaled by the first
  // quartile x* of the sample.
  const double x_max = x[n - 1];
  const double x_star = x[static_cast<std::size_t>(std::floor(nd / 4 + 0.5)) - 1];
  if (!(x_max > 0) || !(x_star > 0)) return no_fit;
  const int m = 30 + static_cast<int>(std::floor(std::sqrt(nd)));
  constexpr double prior = 3;
  std::vector<double> theta(m), log_lik(m);
  for (int j = 0; j < m; ++j) {
    theta[j] = 1 / x_max + (1 - std::sqrt(m / (j + 0.5))) / prior / x_star;
    // Profile log-likelihood n (log(1/sigma) - k - 1) at k = profile_shape(theta), sigma = -k/theta
    // (Zhang & Stephens 2009, §4, whose k is minus ours). theta = 0 exactly is 0/0: skip it.
    const double k = profile_shape(theta[j], x);
    log_lik[j] = nd * (std::log(-theta[j] / k) - k - 1);
    if (std::isnan(log_lik[j])) log_lik[j] = -kInf;
  }
  // Posterior mean of theta under the grid's prior (Zhang & Stephens 2009, §4: an empirical Bayes
  // estimate, which unlike the MLE always exists).
  const double log_norm = log_sum_exp(log_lik);
  double theta_hat = 0;
  for (int j = 0; j < m; ++j) theta_hat += theta[j] * std::exp(log_lik[j] - log_norm);
  ParetoFit fit;
  fit.k = profile_shape(theta_hat, x);
  fit.sigma = -fit.k / theta_hat;
  // Weakly informative prior: k shrunk towards 0.5 as if by a = 10 extra observations at 0.5
  // (Vehtari et al. 2024, §3; loo's adjust_k_wip). sigma keeps its unadjusted value, as in loo.
  if (weakly_informative_prior) {
    constexpr double a = 10;
    fit.k = (nd * fit.k + a * 0.5) / (nd + a);
  }
  if (std::isnan(fit.k)) return no_fit;
  return fit;
}

PsisResult psis(const std::vector<double>& log_ratios) {
  const std::size_t S = log_ratios.size();
  const double Sd = static_cast<double>(S);
  PsisResult out{kInf, {}, 0};
  // Tail length M = ceil(min(0.2 S, 3 sqrt(S / r_eff))) with r_eff = 1 (Vehtari et al. 2024, §3).
  const long M = static_cast<long>(std::ceil(std::min(0.2 * Sd, 3 * std::sqrt(Sd / 1.0))));
  out.tail_length = M;
  if (S == 0) return out;
  for (double lr : log_ratios) {
    if (!std::isfinite(lr)) {
      out.log_weights.assign(S, kNaN);
      return out;
    }
  }
  // Shift by the maximum so that the largest raw ratio is exp(0) = 1.
  const auto [lo, hi] = std::minmax_element(log_ratios.begin(), log_ratios.end());
  const double top = *hi;
  std::vector<double> lw(S);
  for (std::size_t s = 0; s < S; ++s) lw[s] = log_ratios[s] - top;

  constexpr long kMinTail = 5;  // loo's enough_tail_samples
  // Ratios equal to a millionth (q is p up to float error, as for an exact conjugate posterior):
  // the tail is rounding noise that a fit would read as anything, so they count as constant.
  constexpr double kFlat = 1e-6;
  if (M >= kMinTail && *hi - *lo <= kFlat) {
    // Constant ratios: q is proportional to p, the ratios are bounded and every weight is equal.
    out.khat = -kInf;
  } else if (M >= kMinTail) {
    // Draws sorted by ratio (stable, so ties keep draw order as R's radix sort does); the tail is
    // the M largest, the cutoff the (M+1)-th largest.
    std::vector<std::size_t> order(S);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return lw[a] < lw[b]; });
    const std::size_t first_tail = S - static_cast<std::size_t>(M);
    const double tail_lo = lw[order[first_tail]], tail_hi = lw[order[S - 1]];
    // A flat tail cannot be fitted: k-hat stays Inf and the raw ratios stay (loo's rule).
    if (std::abs(tail_hi - tail_lo) >= std::numeric_limits<double>::epsilon() / 100) {
      const double exp_cutoff = std::exp(lw[order[first_tail - 1]]);
      std::vector<double> exceedances(static_cast<std::size_t>(M));
      for (long z = 0; z < M; ++z) exceedances[z] = std::exp(lw[order[first_tail + z]]) - exp_cutoff;
      const ParetoFit fit = fit_generalized_pareto(exceedances);
      if (std::isfinite(fit.k) && fit.sigma > 0) {
        out.khat = fit.k;
        // The z-th smallest tail ratio becomes the fitted quantile at (z - 1/2) / M above the cutoff
        // (Vehtari et al. 2024, §3, Algorithm 1).
        for (long z = 0; z < M; ++z) {
          const double p = (static_cast<double>(z) + 0.5) / static_cast<double>(M);
          lw[order[first_tail + z]] = std::log(pareto_quantile(p, fit.k, fit.sigma) + exp_cutoff);
        }
      }
    }
  }
  // Truncate at the largest raw ratio (Vehtari et al. 2024, §3, Algorithm 1), then normalise.
  for (double& w : lw) w = std::min(w, 0.0);
  const double log_norm = log_sum_exp(lw);
  for (double& w : lw) w -= log_norm;
  out.log_weights = std::move(lw);
  return out;
}

const char* khat_reading(double khat) {
  // Thresholds of Yao et al. 2018, §2 and Vehtari et al. 2024, §3 (for S of a few thousand).
  if (khat < 0.5) return "good";
  if (khat <= 0.7) return "usable";
  return "poor";
}

std::vector<double> weighted_means(const Eigen::MatrixXd& draws, const std::vector<double>& log_weights) {
  const std::size_t S = log_weights.size();
  if (S == 0 || static_cast<std::size_t>(draws.cols()) != S) {
    throw InvalidArgument("weighted_means: draws has " + std::to_string(draws.cols()) + " columns but " +
                          std::to_string(S) + " log weights were given");
  }
  // Self-normalised importance sampling estimate sum_s w_s h(theta_s) / sum_s w_s (Vehtari et al. 2024, §1).
  const double log_norm = log_sum_exp(log_weights);
  Eigen::VectorXd w(static_cast<Eigen::Index>(S));
  for (std::size_t s = 0; s < S; ++s) w[static_cast<Eigen::Index>(s)] = std::exp(log_weights[s] - log_norm);
  const Eigen::VectorXd mean = draws * w;
  return std::vector<double>(mean.data(), mean.data() + mean.size());
}

std::vector<double> weighted_sds(const Eigen::MatrixXd& draws, const std::vector<double>& log_weights) {
  const std::vector<double> mean = weighted_means(draws, log_weights);  // checks the sizes
  const double log_norm = log_sum_exp(log_weights);
  std::vector<double> sd(mean.size(), 0.0);
  for (Eigen::Index s = 0; s < draws.cols(); ++s) {
    const double w = std::exp(log_weights[static_cast<std::size_t>(s)] - log_norm);
    for (Eigen::Index d = 0; d < draws.rows(); ++d) {
      const double e = draws(d, s) - mean[static_cast<std::size_t>(d)];
      sd[static_cast<std::size_t>(d)] += w * e * e;
    }
  }
  for (double& v : sd) v = std::sqrt(v);
  return sd;
}

}  // namespace fvi::diagnostics
