#pragma once
// Recovers a log density that is quadratic in the parameters, log f(theta) = h^T theta -
// theta^T Lambda theta / 2 + c, from its gradient h - Lambda theta at a few points, and checks at a
// random point that it really is quadratic. The PVI server reads the prior's natural parameters
// this way (a Gaussian prior is exactly such a density), and a client its likelihood's when the
// update has a closed form (spec 000 §2.6: Gaussian prior, likelihood linear in the parameters
// with known noise, NLL and KL).
#include <functional>
#include <optional>

#include "fvi/eigen_types.h"

namespace fvi::engine {

struct Quadratic {
  Eigen::VectorXd h;                // gradient at 0
  bool diagonal = false;            // probed as diagonal: only lambda_diagonal is set
  Eigen::MatrixXd lambda;           // minus the Hessian, D x D (not diagonal)
  Eigen::VectorXd lambda_diagonal;  // its diagonal (diagonal): D values, for models too large for D x D
  Eigen::MatrixXd full() const { return diagonal ? Eigen::MatrixXd(lambda_diagonal.asDiagonal()) : lambda; }
};

// `gradient(points)` returns the gradient of log f at each column of `points` (D x S -> D x S).
// diagonal = true probes with 3 points (0, 1, random), assuming independent coordinates; otherwise
// D + 2 points. nullopt if the gradient at the random point is not h - Lambda r to ~1e-8.
std::optional<Quadratic> probe_quadratic(Eigen::Index dim, bool diagonal, uint64_t seed,
                                         const std::function<Eigen::MatrixXd(const Eigen::MatrixXd&)>& gradient);

}  // namespace fvi::engine
