#pragma once
// Mean-field log-normal family for positive parameters: log theta ~ N(mu, diag(sigma^2)),
// sigma = exp(rho). The hyperparameter posteriors and factors of FedSGP are log-normal (spec 003 §3,
// §6: "the variational approximations q(beta) and factors t_k(beta) are also log-normal").
//
// Unconstrained parameters: [mu; rho], the same layout as MeanFieldGaussian on log theta. Natural
// parameters (sufficient statistics log theta and (log theta)^2) and divergences are those of the
// Gaussian on log theta (spec 003 §6: the log-normal KL "equal to the Gaussian KL in log-space");
// use log_space() to get that Gaussian and MeanFieldGaussian's algebra on it.
#include <cmath>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/math/constants.h"

namespace fvi {

template <typename T = double>
class LogNormal {
 public:
  using Scalar = T;
  using Vector = VectorX<T>;
  using Matrix = MatrixX<T>;

  LogNormal() = default;
  LogNormal(Vector log_mean, Vector log_sd) : gaussian_(std::move(log_mean), std::move(log_sd)) {}
  explicit LogNormal(MeanFieldGaussian<T> log_space) : gaussian_(std::move(log_space)) {}

  static LogNormal from_params(const Vector& params) {
    return LogNormal(MeanFieldGaussian<T>::from_params(params));
  }

  Eigen::Index dim() const { return gaussian_.dim(); }
  Eigen::Index num_params() const { return gaussian_.num_params(); }
  Vector params() const { return gaussian_.params(); }
  // The Gaussian of log theta.
  const MeanFieldGaussian<T>& log_space() const { return gaussian_; }

  // E[theta] = exp(mu + sigma^2 / 2); Var[theta] = (exp(sigma^2) - 1) exp(2 mu + sigma^2).
  Vector mean() const { return (gaussian_.mean().array() + T(0.5) * gaussian_.variance().array()).exp().matrix(); }
  Vector variance() const {
    const Vector s2 = gaussian_.variance();
    return ((s2.array().exp() - T(1)) * (T(2) * gaussian_.mean().array() + s2.array()).exp()).matrix();
  }
  Vector median() const { return gaussian_.mean().array().exp().matrix(); }

  // theta = exp(mu + sigma .* eps).
  Matrix sample(const Matrix& eps) const { return gaussian_.sample(eps).array().exp().matrix(); }

  // log q(theta) = log N(log theta; mu, sigma^2) - sum log theta, per column.
  Vector log_density(const Matrix& theta) const {
    check_positive("LogNormal::log_density", "theta", theta);
    const Matrix log_theta = theta.array().log().matrix();
    return gaussian_.log_density(log_theta) - log_theta.colwise().sum().transpose();
  }

  // grad_theta log q(theta) = -((log theta - mu) / sigma^2 + 1) / theta, parameters fixed.
  Matrix score(const Matrix& theta) const {
    check_positive("LogNormal::score", "theta", theta);
    const Matrix log_theta = theta.array().log().matrix();
    return ((gaussian_.score(log_theta).array() - T(1)) / theta.array()).matrix();
  }

  // H = sum (mu + 1/2 log(2 pi e sigma^2)): the Gaussian entropy plus E[log theta].
  T entropy() const { return gaussian_.entropy() + gaussian_.mean().sum(); }
  Vector entropy_gradient() const {
    Vector g(num_params());
    g << Vector::Ones(dim()), Vector::Ones(dim());
    return g;
  }

  // sum_s (d theta_s / dparams)^T g_s: d theta/d mu = theta, d theta/d rho = theta sigma eps.
  Vector vjp(const Matrix& eps, const Matrix& cotangent) const {
    const Matrix theta = sample(eps);
    return gaussian_.vjp(eps, cotangent.cwiseProduct(theta));
  }

  // STL estimate of grad_params E_q[log p(theta) - log q(theta)] (seed 002 Eq. 6).
  Vector stl_gradient(const Matrix& eps, const Matrix& grad_log_p) const {
    const Matrix theta = sample(eps);
    return vjp(eps, grad_log_p - score(theta)) / T(eps.cols());
  }

 private:
  MeanFieldGaussian<T> gaussian_;
};

}  // namespace fvi
