#pragma once
// Whether q's tails are as heavy as the posterior's: a check k-hat cannot make. k-hat reads the
// importance ratios p / q at q's own draws, and a q whose tails are too light rarely draws where
// the posterior's missing mass lies (a weakly identified direction with a Cauchy prior: q's sd a
// quarter of the posterior's, k-hat 0.5-0.6). Here the posterior's moments are estimated by
// importance sampling from a defensive proposal g with heavier tails than q's, the balance mixture
// of the Gaussian N(m, S) and the Student-t_3(m, S) of q's draws' mean and covariance (Owen and
// Zhou 2000; Hesterberg 1995), and set against q's: a Gaussian posterior gives q's moments back
// within Monte Carlo error, a heavier one a larger sd, or ratios p / g heavy even for g.
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fvi/program/output.h"
#include "fvi/program/server_loop.h"

namespace fvi::program {

// A Gaussian over some rows of ServerDraws::unconstrained (the parameters q varies): a proposal's
// centre and scale, or the posterior's mean and covariance as importance sampling estimates them.
struct Moments {
  std::vector<Eigen::Index> varying;  // the rows, in order
  Eigen::VectorXd mean;
  Eigen::MatrixXd covariance;
};

struct TailCheck {
  std::string line;     // what the check found, for stdout ("" when it was not made)
  std::string warning;  // q off by more than issue 26's limits, or narrower by over kNarrowerWarning
  // The check's own importance sampling holds (k-hat <= 0.7, ESS >= 200) and its moments agree
  // with q's (means within 0.25 q sd, sds within 20%): q's moments stand even where q's own
  // k-hat, which its lighter tails raise, is over 0.7.
  bool moments_hold = false;
  double khat = 0, ess = 0, worst_mean = 0, worst_sd = 0;
  double width = 1;     // the proposal's scale over q's: 2 where the check was made again wider
  std::string sd_name;  // whose sd changes most
  // The check's importance sampling holds (k-hat <= 0.7, ESS >= 200), so `posterior` estimates the
  // posterior's moments on the unconstrained scale within Monte Carlo error.
  bool reliable = false;
  Moments posterior;
  // Its estimate of the posterior's mean and sd on the declared scale, one per row of the draws'
  // `constrained` (where moments were estimated).
  std::vector<double> declared_mean, declared_sd;
};

// The check at g's draws, their log p (and each silo's log q of its locals) from `coordinator`'s
// closing exchange. Made when the method takes the server's draws in its closing exchange, and
// q's varying parameters are at most kTailCheckMaxParameters, with 20 draws per parameter (so
// that the covariance of q's draws is q's within about 20% in every direction). g's draws are as
// many as q's, and at least kTailCheckMinDraws.
// `around`: g is built around these moments rather than q's draws' own (moment_correction.h: the
// check of a corrected q); q_draws are then draws of N(around).
TailCheck tail_check(const ServerDraws& q_draws, Coordinator& coordinator, uint64_t seed,
                     const Moments* around = nullptr);

// Where a party other than the server holds some of q's parameters (a vertical model's split
// blocks), the coordinator makes the check itself (Coordinator::check_tails) from these pieces.
// The same proposal: the balance mixture of N(m, L L') and t_3(m, L L'), one draw z = m + a_s L eps_s
// with a_s = tail_scales(key, S)[s], which every party computes alike from the key; its log density
// at a draw whose whitened distance |a_s eps_s|^2 is d2, in k dimensions, with log det L log_det.
Eigen::VectorXd tail_scales(uint64_t key, Eigen::Index draws);
double log_tail_proposal(double d2, double k, double log_det);

// What a check found, and whose: the largest move of a mean (in q sds) and change of an sd
// (relative), their elements' names, and that sd's two values (q's and the check's).
struct TailFigures {
  double khat = 0, ess = 0, worst_mean = 0, worst_sd = 0, sd_from = 0, sd_to = 0;
  std::string mean_name, sd_name;
  Eigen::Index mean_row = -1, sd_row = -1;  // their rows in the layout add_tail_figures read
};
// The check's line and, beyond issue 26's limits, its warning, from its figures (posterior left
// empty: the caller's, where it estimated the moments).
TailCheck tail_verdict(const TailFigures& f);
// The figures of one party's elements: importance-weighted moments (weighted_means, _sds of the
// proposal's draws on the declared scale) against q's own (declared_moments), over the elements of
// `layout` that q varies (a positive sd, and q's draws `q_draws` not all equal), merged into `f`
// where larger.
void add_tail_figures(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& q_draws, const Eigen::VectorXd& q_mean,
                      const Eigen::VectorXd& q_sd, const std::vector<double>& mean_w, const std::vector<double>& sd_w,
                      TailFigures& f);

// What a mean off the posterior's with every sd close means, and what to try: the tail check's
// warning and the PSIS reweighting's (server_loop.cpp) both end with it.
constexpr const char* kMeanOffCause =
    "q's mean is off the posterior's, short of the optimum along a direction the data barely identify (a ridge: "
    "predictors far from 0 or strongly correlated), or the posterior is skewed there. Read the means with that "
    "margin, or try standardised or centred predictors.";

constexpr long kTailCheckMaxParameters = 50;
// Within the limits, an sd this much narrower than the check's is still a warning (tail_check.cpp).
constexpr double kNarrowerWarning = 0.1;
constexpr long kTailCheckMinDraws = 4000;

}  // namespace fvi::program
