#include "fvi/program/moment_correction.h"

#include <cmath>
#include <algorithm>
#include <cstdio>

#include "fvi/program/output.h"
#include "fvi/rng.h"

namespace fvi::program {

ServerDraws gaussian_draws(const ServerDraws& d, const Moments& m, Eigen::Index S, uint64_t seed) {
  const Eigen::Index k = m.mean.size();
  const Eigen::LLT<Eigen::MatrixXd> llt(m.covariance);
  if (llt.info() != Eigen::Success) throw std::invalid_argument("gaussian_draws: a covariance that is not positive definite");
  const Eigen::MatrixXd L = llt.matrixL();
  CounterRng rng(RngKey{seed, 0, 0, rng_stream::kUserStream + 31});
  const Eigen::MatrixXd eps = rng.normal(k, S);
  const Eigen::MatrixXd z = (L * eps).colwise() + m.mean;
  ServerDraws out = d;
  out.unconstrained = d.unconstrained.col(0).replicate(1, S);
  for (Eigen::Index i = 0; i < k; ++i) {
    const Eigen::Index row = m.varying[size_t(i)];
    out.unconstrained.row(row) = z.row(i);
    out.mean[row] = m.mean[i];
    out.sd[row] = std::sqrt(m.covariance(i, i));
  }
  out.constrained = constrain(d.layout, out.unconstrained);
  const double log_norm = -0.5 * double(k) * std::log(2 * M_PI) - L.diagonal().array().log().sum();
  out.log_q = (-0.5 * eps.colwise().squaredNorm().transpose().array() + log_norm).matrix();
  return out;
}

namespace {

bool positive_definite(const Eigen::MatrixXd& c) {
  return c.allFinite() && Eigen::LLT<Eigen::MatrixXd>(c).info() == Eigen::Success;
}

// The largest relative change of a marginal sd from `from`'s draws to `to`'s, written scale.
void largest_sd_change(const ServerDraws& from, const ServerDraws& to, double& change, std::string& name) {
  auto sd = [](const Eigen::MatrixXd& c) {
    const Eigen::VectorXd mean = c.rowwise().mean();
    return Eigen::VectorXd(((c.colwise() - mean).array().square().rowwise().sum() / double(c.cols() - 1)).sqrt());
  };
  const Eigen::VectorXd a = sd(from.constrained), b = sd(to.constrained);
  for (const VariableLayout& layout : from.layout) {
    const std::vector<std::string> names = element_names(layout);
    for (Eigen::Index j = 0; j < layout.elements() && size_t(j) < names.size(); ++j) {
      const Eigen::Index i = layout.offset + j;
      if (i >= a.size() || !(a[i] > 0)) continue;
      const double c = b[i] / a[i] - 1;
      if (std::abs(c) > std::abs(change)) change = c, name = names[size_t(j)];
    }
  }
}

}  // namespace

MomentCorrection correct_moments(const ServerDraws& d, Coordinator& coordinator, uint64_t seed, bool enabled) {
  MomentCorrection out;
  out.check = tail_check(d, coordinator, seed);
  // Only where the check's sampling holds and finds q off by more than a user would accept: a q
  // whose moments the check confirms is the ELBO's optimum, and stays.
  if (!enabled || !out.check.reliable || out.check.moments_hold || !positive_definite(out.check.posterior.covariance))
    return out;
  const Eigen::Index S = d.unconstrained.cols();
  Moments current = out.check.posterior;
  for (int pass = 1; pass <= kMaxMomentPasses; ++pass) {
    const ServerDraws around = gaussian_draws(d, current, S, seed + uint64_t(pass));
    TailCheck next = tail_check(around, coordinator, seed + uint64_t(pass), &current);
    out.passes = pass;
    if (!next.reliable) break;  // `current` came from a pass whose sampling held; this one's did not
    out.check = next;
    // This pass finds the moments it was built around, on the scale they are matched on, to about
    // twice an sd's Monte Carlo error at the check's least ESS (1 / sqrt(2 * 200) = 5%). (On the
    // declared scale a Gaussian of a skewed log-scale's right mean and sd has the wrong sd there:
    // the check's own figures say so, and the run with them.)
    double shift = 0, change = 0;
    for (Eigen::Index i = 0; i < current.mean.size(); ++i) {
      const double sd = std::sqrt(current.covariance(i, i));
      shift = std::max(shift, std::abs(next.posterior.mean[i] - current.mean[i]) / sd);
      change = std::max(change, std::abs(std::sqrt(next.posterior.covariance(i, i)) / sd - 1));
    }
    if (shift <= kSettledMean && change <= kSettledSd) {
      out.settled = true;
      break;
    }
    if (!positive_definite(next.posterior.covariance)) break;
    current = next.posterior;
  }
  if (!coordinator.adopt_moments(d, current.varying, current.mean, current.covariance)) return out;
  out.adopted = true;
  largest_sd_change(d, gaussian_draws(d, current, S, seed + 100), out.largest_change, out.changed);
  char text[512];
  std::snprintf(text, sizeof text,
                "moments corrected: q (the ELBO's optimum) is replaced by the Gaussian of the posterior's mean and "
                "covariance on the unconstrained scale, as importance sampling from a heavier-tailed proposal "
                "estimates them (%d pass%s after the first%s); sds change at most %+.0f%% (%s) against the ELBO's q; "
                "correct_moments = off keeps it",
                out.passes, out.passes == 1 ? "" : "es",
                out.settled ? ", the last finding the moments it was built around" : ", still moving", 100 * out.largest_change,
                out.changed.c_str());
  out.line = text;
  return out;
}

}  // namespace fvi::program
