#include "fvi/engine/quadratic_probe.h"

#include <cmath>

#include "fvi/rng.h"

namespace fvi::engine {

std::optional<Quadratic> probe_quadratic(Eigen::Index dim, bool diagonal, uint64_t seed,
                                         const std::function<Eigen::MatrixXd(const Eigen::MatrixXd&)>& gradient) {
  const Eigen::Index probes = diagonal ? 2 : dim + 1;
  Eigen::MatrixXd points = Eigen::MatrixXd::Zero(dim, probes + 1);
  if (diagonal) {
    points.col(1).setOnes();
  } else {
    points.middleCols(1, dim).setIdentity();
  }
  CounterRng rng(RngKey{seed, 0, 0, rng_stream::kUserStream + 7});
  points.col(probes) = rng.normal(dim, 1);
  const Eigen::MatrixXd g = gradient(points);
  Quadratic q;
  q.h = g.col(0);
  q.diagonal = diagonal;
  const Eigen::VectorXd r = points.col(probes);
  Eigen::VectorXd predicted, lambda_r_abs;
  if (diagonal) {
    q.lambda_diagonal = q.h - g.col(1);
    predicted = q.h - (q.lambda_diagonal.array() * r.array()).matrix();
    lambda_r_abs = (q.lambda_diagonal.array() * r.array()).abs().matrix();
  } else {
    q.lambda = (-(g.middleCols(1, dim).colwise() - q.h));
    q.lambda = 0.5 * (q.lambda + q.lambda.transpose()).eval();
    predicted = q.h - q.lambda * r;
    lambda_r_abs = q.lambda.cwiseAbs() * r.cwiseAbs();
  }
  // Rounding of sums of D terms of size |h| + |Lambda r|: a relative 1e-8 is far above it and far
  // below any curvature a non-quadratic density shows over a unit step.
  const double scale = 1 + q.h.cwiseAbs().maxCoeff() + lambda_r_abs.maxCoeff();
  if (!((g.col(probes) - predicted).cwiseAbs().maxCoeff() <= 1e-8 * scale)) return std::nullopt;
  return q;
}

}  // namespace fvi::engine
