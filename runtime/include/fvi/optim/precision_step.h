#pragma once
// A step of a mean-field Gaussian's standard deviations toward their stationary point, as
// variational online Newton does (Khan, Nielsen, Tangkaratt, Lin, Gal and Srivastava 2018, "Fast
// and Scalable Bayesian Deep Learning by Weight-Perturbation in Adam", Eq. 5), in place of a
// gradient step on log sigma.
//
// Why: where the data barely inform a coordinate, its log-sd gradient is mostly noise, and Adam
// (which steps by the gradient's mean over its spread) moves it toward its optimum at a pace set
// by that noise: thousands of iterations. The precision step moves at pace beta whatever the noise.
//
// The ELBO's gradient in log sigma_i is G_i = sigma_i^2 E_q[d^2 log p / dz_i^2] + 1 in
// expectation (Price's theorem, with the entropy's 1), so (1 - G_i) / sigma_i^2 is an unbiased
// estimate of the expected curvature h_i = E_q[-d^2 log p / dz_i^2], and the ELBO is stationary in
// sigma_i where 1 / sigma_i^2 = h_i. A running average of the estimates, lambda_i <- (1 - beta)
// lambda_i + beta h_hat_i, kept whole (a single estimate may be below 0, and bounding each would
// bias the average), gives sigma_i = lambda_i^(-1/2), within bounds on one step's change: sigma_i
// grows by at most (1 - beta)^(-1/2) (also where lambda_i is below 0, a coordinate where log p is
// not concave) and at most halves, so that one draw far in a tail cannot collapse it.
//
// The fixed point is the ELBO's own: the same objective as the gradient step, reached another way.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fvi/eigen_types.h"

namespace fvi {

// log sigma after the step, from log sigma before it and the ELBO's gradient (to be maximised)
// with respect to log sigma at the same q; `precision` is the running average, updated (an empty
// one starts at 1 / sigma^2). beta in (0, 1).
inline Eigen::VectorXd precision_step(Eigen::VectorXd& precision, const Eigen::VectorXd& log_sd,
                                      const Eigen::VectorXd& gradient, double beta) {
  if (log_sd.size() != gradient.size()) throw std::invalid_argument("precision_step: log_sd and gradient sizes differ");
  if (!(beta > 0 && beta < 1)) throw std::invalid_argument("precision_step: beta must be in (0, 1)");
  if (precision.size() == 0) precision = (-2 * log_sd.array()).exp().matrix();
  if (precision.size() != log_sd.size()) throw std::invalid_argument("precision_step: precision and log_sd sizes differ");
  Eigen::VectorXd out(log_sd.size());
  for (Eigen::Index i = 0; i < log_sd.size(); ++i) {
    const double now = std::exp(-2 * log_sd[i]);
    precision[i] = (1 - beta) * precision[i] + beta * (1 - gradient[i]) * now;
    out[i] = -0.5 * std::log(std::clamp(precision[i], (1 - beta) * now, 4 * now));
  }
  return out;
}

}  // namespace fvi
