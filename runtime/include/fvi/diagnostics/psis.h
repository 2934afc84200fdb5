#pragma once
// Pareto-smoothed importance sampling (PSIS) and its diagnostic k-hat.
//
// Given draws theta_s ~ q and log ratios log r_s = log p(theta_s, data) - log q(theta_s), PSIS
// (Vehtari, Simpson, Gelman, Yao, Gabry, "Pareto smoothed importance sampling", JMLR 2024) fits a
// generalized Pareto distribution to the largest M ratios and replaces them by the fitted
// quantiles. The fitted shape k-hat says how heavy the ratios' right tail is, hence whether q is a
// usable approximation of p (Yao, Vehtari, Simpson, Gelman 2018, "Yes, but did it work?"):
// below 0.5 importance sampling (and q itself) is reliable, above 0.7 it is not.
//
// The choices follow R's loo::psis() (loo 2.5.1) for independent draws (r_eff = 1): tail length
// M = ceil(min(0.2 S, 3 sqrt(S))), the Zhang & Stephens (2009) fit with loo's weakly informative
// prior on k, k-hat = Inf when M < 5 or the tail is flat. Two departures, both where loo gives no
// answer: non-finite log ratios give k-hat = Inf instead of an error, and exactly constant log
// ratios (q proportional to p) give k-hat = -Inf (bounded ratios) where loo reports Inf.
#include <vector>

#include "fvi/eigen_types.h"

namespace fvi::diagnostics {

// Generalized Pareto with location 0: P(X > x) = (1 + k x / sigma)^(-1/k) (k > 0 heavy-tailed).
struct ParetoFit {
  double k = 0, sigma = 0;
};

// Zhang & Stephens (2009) fit of a generalized Pareto to exceedances x >= 0 (any order), as loo's
// gpdfit(min_grid_pts = 30). With the weakly informative prior k is shrunk towards 0.5 by ten
// pseudo-observations. Empty, negative, non-finite or all-zero input gives k = Inf, sigma = NaN.
ParetoFit fit_generalized_pareto(std::vector<double> exceedances, bool weakly_informative_prior = true);

struct PsisResult {
  double khat;                      // Pareto k-hat of the importance ratios (Inf if the tail is too short)
  std::vector<double> log_weights;  // Pareto-smoothed log weights, normalised (log-sum-exp = 0);
                                    // all NaN when a log ratio is non-finite
  long tail_length;                 // M = ceil(min(0.2 S, 3 sqrt(S))), the draws the fit uses (or
                                    // would use: also reported when M < 5 and nothing is fitted)
};

// log_ratios[s] = log p(theta_s, data) - log q(theta_s) for independent draws theta_s ~ q.
PsisResult psis(const std::vector<double>& log_ratios);

// The usual reading: "good" (< 0.5), "usable" (0.5-0.7), "poor" (> 0.7 or NaN).
const char* khat_reading(double khat);

// Self-normalised importance-weighted means sum_s w_s draws(:, s) of draws (dims x S), with
// w = exp(log_weights) normalised here. Throws fvi::InvalidArgument on a size mismatch.
std::vector<double> weighted_means(const Eigen::MatrixXd& draws, const std::vector<double>& log_weights);
// The same weights' sds: sqrt(sum_s w_s (draws(:, s) - weighted mean)^2).
std::vector<double> weighted_sds(const Eigen::MatrixXd& draws, const std::vector<double>& log_weights);

}  // namespace fvi::diagnostics
