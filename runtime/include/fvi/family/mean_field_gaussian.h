#pragma once
// Mean-field (diagonal) Gaussian variational family q(z) = N(z; mu, diag(sigma^2)), sigma = exp(rho).
//
// Unconstrained parameters, in this order: [mu (D); rho = log sigma (D)] (the sigma = exp(rho)
// parameterisation of spec 002 §5 and of the FedGVI code, spec 000 §6). Reparameterised sampling
// z = mu + sigma .* eps (spec 002 §2.5 with L = I), batched: eps and z are D x S, one draw per
// column. Gradients follow the sticking-the-landing (STL) estimator of seed 002 Eq. 6: the score
// term is dropped by holding the variational parameters fixed inside log q.
#include <cmath>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/math/constants.h"

namespace fvi {

template <typename T = double>
class MeanFieldGaussian {
 public:
  using Scalar = T;
  using Vector = VectorX<T>;
  using Matrix = MatrixX<T>;

  MeanFieldGaussian() = default;

  // Checks that both vectors are finite, of equal size, and that exp(log_sd) is finite and > 0.
  MeanFieldGaussian(Vector mean, Vector log_sd) : mean_(std::move(mean)), log_sd_(std::move(log_sd)) {
    check_size("MeanFieldGaussian", "log_sd", log_sd_.size(), mean_.size());
    check_finite("MeanFieldGaussian", "mean", mean_);
    check_finite("MeanFieldGaussian", "log_sd", log_sd_);
    sd_ = log_sd_.array().exp().matrix();
    check_positive("MeanFieldGaussian", "exp(log_sd)", sd_);
  }

  static MeanFieldGaussian from_mean_sd(const Vector& mean, const Vector& sd) {
    check_positive("MeanFieldGaussian::from_mean_sd", "sd", sd);
    return MeanFieldGaussian(mean, sd.array().log().matrix());
  }

  // params = [mean; log_sd].
  static MeanFieldGaussian from_params(const Vector& params) {
    if (params.size() % 2 != 0) {
      internal::throw_invalid("MeanFieldGaussian::from_params", "params has odd size " + std::to_string(params.size()));
    }
    const Eigen::Index d = params.size() / 2;
    return MeanFieldGaussian(params.head(d), params.tail(d));
  }

  Eigen::Index dim() const { return mean_.size(); }
  Eigen::Index num_params() const { return 2 * dim(); }
  const Vector& mean() const { return mean_; }
  const Vector& log_sd() const { return log_sd_; }
  const Vector& sd() const { return sd_; }
  Vector variance() const { return sd_.array().square().matrix(); }
  Vector params() const {
    Vector p(num_params());
    p << mean_, log_sd_;
    return p;
  }

  // z = mu + sigma .* eps, column by column.
  Matrix sample(const Matrix& eps) const {
    check_size("MeanFieldGaussian::sample", "eps rows", eps.rows(), dim());
    return (eps.array().colwise() * sd_.array()).colwise() + mean_.array();
  }

  // log q(z_s) for each column s.
  Vector log_density(const Matrix& z) const {
    check_size("MeanFieldGaussian::log_density", "z rows", z.rows(), dim());
    const T constant = -T(0.5) * T(dim()) * T(kLog2Pi) - log_sd_.sum();
    const auto u = (z.array().colwise() - mean_.array()).colwise() / sd_.array();
    return (constant - T(0.5) * u.square().colwise().sum()).matrix().transpose();
  }

  // grad_z log q(z) with the parameters held fixed: -(z - mu) / sigma^2.
  Matrix score(const Matrix& z) const {
    check_size("MeanFieldGaussian::score", "z rows", z.rows(), dim());
    return -((z.array().colwise() - mean_.array()).colwise() / variance().array()).matrix();
  }

  // H[q] = D/2 log(2 pi e) + sum log sigma.
  T entropy() const { return T(0.5) * T(dim()) * (T(kLog2Pi) + T(1)) + log_sd_.sum(); }
  Vector entropy_gradient() const {
    Vector g(num_params());
    g << Vector::Zero(dim()), Vector::Ones(dim());
    return g;
  }

  // Vector-Jacobian product of the sampling map summed over draws:
  // sum_s (dz_s/dparams)^T g_s, with dz/dmu = I and dz/drho = diag(sigma .* eps).
  Vector vjp(const Matrix& eps, const Matrix& cotangent) const {
    check_size("MeanFieldGaussian::vjp", "eps rows", eps.rows(), dim());
    check_size("MeanFieldGaussian::vjp", "cotangent rows", cotangent.rows(), dim());
    check_size("MeanFieldGaussian::vjp", "cotangent cols", cotangent.cols(), eps.cols());
    Vector g(num_params());
    g.head(dim()) = cotangent.rowwise().sum();
    g.tail(dim()) = (cotangent.array() * eps.array()).rowwise().sum().matrix().cwiseProduct(sd_);
    return g;
  }

  // STL estimate of grad_params E_q[log p(z) - log q(z)] from S draws (seed 002 Eq. 6):
  // (1/S) sum_s (dz_s/dparams)^T (grad log p(z_s) - grad_z log q(z_s)), z_s = sample(eps)_s.
  Vector stl_gradient(const Matrix& eps, const Matrix& grad_log_p) const {
    const Matrix z = sample(eps);
    return vjp(eps, grad_log_p - score(z)) / T(eps.cols());
  }

 private:
  Vector mean_;
  Vector log_sd_;
  Vector sd_;
};

}  // namespace fvi
