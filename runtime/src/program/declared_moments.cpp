#include "fvi/program/declared_moments.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "fvi/program/output.h"
#include "fvi/program/summary.h"

namespace fvi::program {

void normal_quadrature(int n, Eigen::VectorXd& x, Eigen::VectorXd& w) {
  // The Jacobi matrix of the probabilists' Hermite polynomials: He_(k+1) = x He_k - k He_(k-1),
  // orthonormalised, has sqrt(k) beside its zero diagonal; its eigenvalues are the nodes and the
  // squared first components of its eigenvectors the weights (the normal's mass is 1).
  Eigen::MatrixXd J = Eigen::MatrixXd::Zero(n, n);
  for (int k = 1; k < n; ++k) J(k - 1, k) = J(k, k - 1) = std::sqrt(double(k));
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(J);
  x = eigen.eigenvalues();
  w = eigen.eigenvectors().row(0).transpose().array().square();
}

namespace {

constexpr int kNodes = 64;  // lognormal sds to 1e-10 up to q's sd 2 of a log-scale (tested)

bool elementwise_bound(int transform) {
  return transform == FVI_LOWER || transform == FVI_UPPER || transform == FVI_INTERVAL;
}

// E and sd of inv_logit(m + s Z), Z standard normal, by the rule (x, w).
void logit_normal_moments(double m, double s, const Eigen::VectorXd& x, const Eigen::VectorXd& w, double& mean,
                          double& sd) {
  const Eigen::ArrayXd p = 1 / (1 + (-(m + s * x.array())).exp());
  mean = (p * w.array()).sum();
  sd = std::sqrt(std::max(0.0, ((p - mean).square() * w.array()).sum()));
}

}  // namespace

bool interval_gaussian(double mean, double sd, double lower, double upper, double& m, double& s) {
  const double width = upper - lower, p = (mean - lower) / width, target = sd / width;
  if (!(width > 0 && p > 0 && p < 1 && target > 0 && target * target < p * (1 - p))) return false;
  struct Rule {
    Eigen::VectorXd x, w;
  };
  static const Rule rule = [] {
    Rule r;
    normal_quadrature(2 * kNodes, r.x, r.w);
    return r;
  }();
  const Eigen::VectorXd &x = rule.x, &w = rule.w;
  // For each s the mean rises with m from 0 to 1: bisect m. At the m that holds the mean, the sd
  // rises with s from 0 toward the two-point law's bound: bisect s around that.
  auto centred = [&](double scale) {
    double lo = std::log(p / (1 - p)) - 40 - 10 * scale, hi = std::log(p / (1 - p)) + 40 + 10 * scale;
    for (int it = 0; it < 200 && hi - lo > 1e-13 * std::max(1.0, std::abs(lo)); ++it) {
      const double mid = (lo + hi) / 2;
      double e, d;
      logit_normal_moments(mid, scale, x, w, e, d);
      (e < p ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
  };
  double e, d;
  m = centred(kMaxIntervalScale);
  logit_normal_moments(m, kMaxIntervalScale, x, w, e, d);
  if (d < target) return false;
  double lo = 0, hi = kMaxIntervalScale;
  for (int it = 0; it < 200 && hi - lo > 1e-13; ++it) {
    const double mid = (lo + hi) / 2;
    m = centred(mid);
    logit_normal_moments(m, mid, x, w, e, d);
    (d < target ? lo : hi) = mid;
  }
  s = (lo + hi) / 2;
  m = centred(s);
  return std::isfinite(m) && s > 0;
}

DeclaredMoments declared_moments(const ServerDraws& d) {
  const Eigen::MatrixXd& c = d.constrained;
  DeclaredMoments out;
  out.mean = c.rowwise().mean();
  out.sd = row_sds(c);
  Eigen::VectorXd x, w;
  normal_quadrature(kNodes, x, w);
  for (const VariableLayout& v : d.layout) {
    const Eigen::Index n = v.elements();
    if (v.offset + n > d.mean.size() || v.offset + n > d.sd.size() || v.offset + n > c.rows()) continue;
    if (v.transform == FVI_IDENTITY) {
      out.mean.segment(v.offset, n) = d.mean.segment(v.offset, n);
      out.sd.segment(v.offset, n) = d.sd.segment(v.offset, n);
      continue;
    }
    if (!elementwise_bound(v.transform)) continue;
    // Each element's nodes mean_i + sd_i x_k, through the variable's own transform.
    VariableLayout alone = v;
    alone.offset = 0;
    const Eigen::MatrixXd nodes =
        (d.sd.segment(v.offset, n) * x.transpose()).colwise() + d.mean.segment(v.offset, n);
    const Eigen::MatrixXd values = constrain({alone}, nodes);
    const Eigen::VectorXd m = values * w;
    const Eigen::VectorXd var = (values.colwise() - m).array().square().matrix() * w;
    for (Eigen::Index i = 0; i < n; ++i) {
      if (!std::isfinite(m[i]) || !std::isfinite(var[i])) continue;  // the draws' moments stand
      out.mean[v.offset + i] = m[i];
      out.sd[v.offset + i] = std::sqrt(std::max(0.0, var[i]));
    }
  }
  return out;
}

}  // namespace fvi::program
