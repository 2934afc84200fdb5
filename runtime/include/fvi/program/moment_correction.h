#pragma once
// q's Gaussian moved to the posterior's own mean and covariance where the tail check finds q's
// moments off. The ELBO's q minimises KL(q || p), which puts q inside the posterior: on a scale
// fitted from few groups its sds come out 24-43% short (tests/e2e, random_slopes and raw_hier). The
// Gaussian that matches the posterior's first two moments minimises KL(p || q) instead (the
// moment-matching projection, as expectation propagation's), and the tail check's importance
// sampling estimates exactly those moments. Its proposal is built around q, so where q is far too
// narrow one pass finds only part of the missing spread; the next pass is built around the
// corrected Gaussian, as adaptive importance sampling does (Cappe et al. 2004, population Monte
// Carlo), until a pass finds the moments it was built around (means within 0.1 sd, sds
// within 10%, or three Monte Carlo standard errors where wider) or the sampling no longer holds.
#include <string>

#include "fvi/program/tail_check.h"

namespace fvi::program {

struct MomentCorrection {
  TailCheck check;        // the check of the final q: around q, or around the adopted Gaussian
  bool adopted = false;   // the coordinator now holds N(moments) as its final q
  bool settled = false;   // adopted, and its check found the moments it was built around
  int passes = 0;         // checks after the first, each one exchange of max(T, 4000) draws
  std::string line;       // what the correction did, for stdout ("" when it did nothing)
  double largest_change = 0;  // of an sd, against q's (constrained scale)
  std::string changed;        // whose
};

// The tail check at q's draws `q_draws`; then, where `enabled`, its sampling holds and it finds q
// off by more than issue 26's limits on the declared scale, or warns of an sd narrower than the
// posterior's within them (kNarrowerWarning), up to kMaxMomentPasses more checks,
// each around the Gaussian of the last check's moments. Of q and the Gaussians so checked, the one
// its check finds closest to the posterior on the declared scale is kept: a Gaussian that no check
// confirms (its sampling failed) is not. coordinator.adopt_moments makes it the run's q.
MomentCorrection correct_moments(const ServerDraws& q_draws, Coordinator& coordinator, uint64_t seed, bool enabled);

// S draws of N(m.mean, m.covariance) in q_draws' rows m.varying, the other rows as q_draws' first
// column: ServerDraws of the corrected Gaussian, log_q its log density.
ServerDraws gaussian_draws(const ServerDraws& q_draws, const Moments& m, Eigen::Index S, uint64_t seed);

constexpr int kMaxMomentPasses = 4;
constexpr double kSettledMean = 0.1, kSettledSd = 0.1;  // q sds; relative

}  // namespace fvi::program
