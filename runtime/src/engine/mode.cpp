#include "fvi/engine/mode.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>

namespace fvi::engine {
namespace {

// log p and its gradient at every column of z: one call of f, its answer's shape checked.
void answer(const LogDensityBatchFn& f, const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
  f(z, lp, g);
  if (lp.size() != z.cols() || g.rows() != z.rows() || g.cols() != z.cols())
    throw std::logic_error("a log density's batch answered " + std::to_string(lp.size()) + " values for " +
                           std::to_string(z.cols()) + " points");
}

// answer(), counted in m.
void evaluate(const LogDensityBatchFn& f, const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g, Mode& m) {
  answer(f, z, lp, g);
  ++m.batches;
  m.evaluations += z.cols();
}

Eigen::MatrixXd curvature_at(const LogDensityBatchFn& log_p, const Eigen::VectorXd& z, Mode& m) {
  const Eigen::MatrixXd h = central_curvature(log_p, z);
  m.evaluations += 2 * z.size();
  ++m.batches;
  return h;
}

LogDensityBatchFn batched(const LogDensityFn& f) {
  return [&f](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
    lp.resize(z.cols());
    g.resize(z.rows(), z.cols());
    Eigen::VectorXd gi(z.rows());
    for (Eigen::Index c = 0; c < z.cols(); ++c) {
      lp[c] = f(z.col(c), gi);
      g.col(c) = gi;
    }
  };
}

}  // namespace

Eigen::MatrixXd central_curvature(const LogDensityBatchFn& log_p, const Eigen::VectorXd& z) {
  const Eigen::Index n = z.size();
  Eigen::MatrixXd points = z.replicate(1, 2 * n);
  Eigen::VectorXd steps(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    steps[i] = 1e-5 * (1 + std::fabs(z[i]));
    points(i, 2 * i) += steps[i];
    points(i, 2 * i + 1) -= steps[i];
  }
  Eigen::VectorXd lp;
  Eigen::MatrixXd g;
  answer(log_p, points, lp, g);
  Eigen::MatrixXd h(n, n);
  for (Eigen::Index i = 0; i < n; ++i) h.col(i) = -(g.col(2 * i) - g.col(2 * i + 1)) / (2 * steps[i]);
  return 0.5 * (h + h.transpose());
}


Mode find_mode(const LogDensityFn& log_p, const Eigen::VectorXd& start, long max_steps) {
  return find_mode(batched(log_p), start, max_steps);
}

Modes find_modes(const LogDensityFn& log_p, const std::vector<Eigen::VectorXd>& starts, long max_steps) {
  return find_modes(batched(log_p), starts, max_steps);
}

Mode find_mode(const LogDensityBatchFn& log_p, const Eigen::VectorXd& start, long max_steps,
               const std::vector<Eigen::Index>& bounded) {
  Mode m;
  m.at = start;
  Eigen::VectorXd g(start.size()), trial_g(start.size());
  Eigen::VectorXd lps;
  Eigen::MatrixXd gs;
  evaluate(log_p, start, lps, gs, m);
  double lp = lps[0];
  g = gs.col(0);
  m.log_p = lp;
  if (!std::isfinite(lp) || !g.allFinite()) {
    m.why = "log p or its gradient is not finite at the start";
    m.finite_start = false;
    return m;
  }
  double damping = 0;  // Levenberg: solve (C + damping I) d = g
  const Eigen::Index n = start.size();
  for (long step = 0; step < max_steps; ++step) {
    m.curvature = curvature_at(log_p, m.at, m);
    // Converged: the gradient is negligible against the curvature's scale (the Newton step is
    // under 1e-6 of a Laplace sd in every direction).
    double newton_in_sds = INFINITY;
    Eigen::LLT<Eigen::MatrixXd> exact(m.curvature);
    if (exact.info() == Eigen::Success) {
      const Eigen::VectorXd newton = exact.solve(g);
      const Eigen::VectorXd sd = exact.solve(Eigen::MatrixXd::Identity(n, n)).diagonal().cwiseMax(0).cwiseSqrt();
      newton_in_sds = (newton.array().abs() / sd.array().max(1e-300)).maxCoeff();
      if (newton_in_sds <= 1e-6) {
        m.found = true;
        return m;
      }
    }
    bool moved = false;
    for (int attempt = 0; attempt < 60 && !moved; ++attempt) {
      const Eigen::MatrixXd damped = m.curvature + damping * Eigen::MatrixXd::Identity(n, n);
      Eigen::LLT<Eigen::MatrixXd> llt(damped);
      if (llt.info() != Eigen::Success) {
        damping = std::max(1e-8 * (1 + m.curvature.diagonal().cwiseAbs().maxCoeff()), 10 * damping);
        continue;
      }
      const Eigen::VectorXd trial = m.at + llt.solve(g);
      // A trial outside where the model is defined (a covariance matrix that is not positive
      // definite at an extreme length scale) is a step refused, as one of log p -inf is.
      double trial_lp;
      try {
        evaluate(log_p, trial, lps, gs, m);
        trial_lp = lps[0];
        trial_g = gs.col(0);
      } catch (const ModeSearchAborted&) {
        throw;
      } catch (const std::exception&) {
        trial_lp = NAN;
        ++m.evaluations;
      }
      // Strictly higher: under heavy damping the step shrinks to nothing, and a log p merely equal
      // (an ODE solve's rounding floor) would count as progress until max_steps ran out.
      if (std::isfinite(trial_lp) && trial_g.allFinite() && trial_lp > lp) {
        m.at = trial;
        lp = m.log_p = trial_lp;
        g = trial_g;
        damping /= 10;
        moved = true;
      } else {
        damping = std::max(1e-8 * (1 + m.curvature.diagonal().cwiseAbs().maxCoeff()), 10 * damping);
      }
    }
    for (Eigen::Index i : bounded)
      if (moved && std::fabs(m.at[i]) > kBoundedCoordinateLimit) {
        const std::string limit = std::to_string(int(kBoundedCoordinateLimit));
        m.why = "log p still rises as unconstrained coordinate " + std::to_string(i) + " (a bounded parameter's) runs past +-" +
                limit + ", within e^-" + limit + " of its bound or e^" + limit + " from it: no mode inside (a hierarchical "
                "scale's log joint grows without limit as the scale goes to 0)";
        m.ran_to_bound = true;
        return m;
      }
    if (!moved) {
      // At the floor of floating-point precision, a step of 1e-3 sd is the mode for any purpose.
      m.found = newton_in_sds <= 1e-3;
      if (!m.found) m.why = "no step from the last point increases log p";
      return m;
    }
  }
  m.curvature = curvature_at(log_p, m.at, m);
  m.why = "not converged in " + std::to_string(max_steps) + " Newton steps";
  return m;
}

Modes find_modes(const LogDensityBatchFn& log_p, const std::vector<Eigen::VectorXd>& starts, long max_steps,
                 const std::vector<Eigen::Index>& bounded) {
  Modes out;
  std::vector<Mode> found;
  for (const Eigen::VectorXd& start : starts) {
    Mode m = find_mode(log_p, start, max_steps, bounded);
    ++out.starts;
    out.best.evaluations += m.evaluations;
    out.best.batches += m.batches;
    const bool unbounded_above = m.ran_to_bound;  // the model's log p, from any start: no other tried
    if (m.found) found.push_back(std::move(m));
    else if (found.empty() && out.starts == 1) out.best.why = m.why, out.best.finite_start = m.finite_start;
    if (unbounded_above) break;
  }
  if (found.empty()) return out;
  std::sort(found.begin(), found.end(), [](const Mode& a, const Mode& b) { return a.log_p > b.log_p; });
  // Laplace sds of a mode: the square roots of the inverse curvature's diagonal.
  auto sds = [](const Mode& m) -> Eigen::VectorXd {
    Eigen::LLT<Eigen::MatrixXd> llt(m.curvature);
    if (llt.info() != Eigen::Success) return Eigen::VectorXd::Constant(m.at.size(), INFINITY);
    return llt.solve(Eigen::MatrixXd::Identity(m.at.size(), m.at.size())).diagonal().cwiseMax(0).cwiseSqrt();
  };
  std::vector<const Mode*> separate;
  for (const Mode& m : found) {
    bool same = false;
    for (const Mode* s : separate) {
      const Eigen::VectorXd scale = sds(*s).cwiseMax(sds(m));
      same = same || ((m.at - s->at).array().abs() <= 3 * scale.array()).all();
    }
    if (!same) separate.push_back(&m);
  }
  const long evaluations = out.best.evaluations, batches = out.best.batches;
  out.best = found.front();
  out.best.evaluations = evaluations;
  out.best.batches = batches;
  for (const Mode* m : separate) out.separate_log_p.push_back(m->log_p);
  return out;
}

}  // namespace fvi::engine
