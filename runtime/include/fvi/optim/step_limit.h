#pragma once
// A trust region for the means of a Gaussian variational family, in units of its own sds.
//
// Adam's step is about lr in every coordinate whatever the gradient's scale: a mean whose
// posterior sd is 0.001 jitters by 10 sds at lr 0.01, and the stopping rule then needs many
// thousands of decayed steps to average that away (examples/vfl_poisson_multilevel's intercept).
// Bounding each mean's step by kMeanStepInSd of its current marginal sd keeps the jitter inside
// the posterior's own scale, and costs a mean that starts n sds from its optimum at most
// n / kMeanStepInSd steps. The log-sds are scale-free and stay unbounded; the raw entries of a
// Cholesky row are in the units of its sd and get the same bound.
#include <limits>

#include "fvi/eigen_types.h"
#include "fvi/family/joint_gaussian_rows.h"

namespace fvi {

inline constexpr double kMeanStepInSd = 0.5;

// Bounds for a parameter vector of `size` whose first sd.size() entries are means with these sds.
inline Eigen::VectorXd mean_step_limit(Eigen::Index size, const Eigen::VectorXd& sd) {
  Eigen::VectorXd limit = Eigen::VectorXd::Constant(size, std::numeric_limits<double>::infinity());
  limit.head(sd.size()) = kMeanStepInSd * sd;
  return limit;
}

// The same for a JointGaussianRows' parameters at the head of a vector of `size`: the means and
// each row's entries left of the diagonal by that row's marginal sd.
inline Eigen::VectorXd joint_rows_step_limit(Eigen::Index size, const JointGaussianRows& q) {
  const Eigen::VectorXd sd = q.sd();
  Eigen::VectorXd limit = mean_step_limit(size, sd);
  Eigen::Index at = q.dim();
  for (Eigen::Index r = 0; r < q.dim(); ++r) {
    const Eigen::Index left = q.offset() + r;
    limit.segment(at, left).setConstant(kMeanStepInSd * sd[r]);
    at += left + 1;
  }
  return limit;
}

}  // namespace fvi
