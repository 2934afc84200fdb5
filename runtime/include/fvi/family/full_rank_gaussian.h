#pragma once
// Full-rank Gaussian variational family q(z) = N(z; mu, L L^T), L lower triangular with positive
// diagonal (the Cholesky factor of the covariance).
//
// Unconstrained parameters, in this order: [mu (D); the lower triangle of L in column-major order
// (D(D+1)/2 entries), with each diagonal entry stored as log L_ii]. Sampling z = mu + L eps, eps and
// z D x S. Gradients are STL (seed 002 Eq. 6). Divergences report gradients with respect to the
// covariance; params_gradient_from_covariance chains them to the unconstrained parameters.
#include <cmath>
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/math/constants.h"

namespace fvi {

template <typename T = double>
class FullRankGaussian {
 public:
  using Scalar = T;
  using Vector = VectorX<T>;
  using Matrix = MatrixX<T>;

  FullRankGaussian() = default;

  // chol must be a valid Cholesky factor: lower triangular, finite, positive diagonal.
  FullRankGaussian(Vector mean, Matrix chol) : mean_(std::move(mean)), chol_(std::move(chol)) {
    check_finite("FullRankGaussian", "mean", mean_);
    check_size("FullRankGaussian", "chol rows", chol_.rows(), mean_.size());
    check_cholesky_factor("FullRankGaussian", "chol", chol_);
  }

  // Checks that the covariance is finite, symmetric and positive definite.
  static FullRankGaussian from_mean_covariance(const Vector& mean, const Matrix& covariance) {
    check_size("FullRankGaussian::from_mean_covariance", "covariance rows", covariance.rows(), mean.size());
    const auto llt = check_positive_definite("FullRankGaussian::from_mean_covariance", "covariance", covariance);
    return FullRankGaussian(mean, Matrix(llt.matrixL()));
  }

  static Eigen::Index dim_from_num_params(Eigen::Index n) {
    // n = D + D(D+1)/2  <=>  D^2 + 3D - 2n = 0.
    const auto d = static_cast<Eigen::Index>(std::llround((-3.0 + std::sqrt(9.0 + 8.0 * double(n))) / 2.0));
    if (d < 0 || d + d * (d + 1) / 2 != n) {
      internal::throw_invalid("FullRankGaussian::from_params",
                              "params has size " + std::to_string(n) + ", which is not D + D(D+1)/2 for any D");
    }
    return d;
  }

  static FullRankGaussian from_params(const Vector& params) {
    check_finite("FullRankGaussian::from_params", "params", params);
    const Eigen::Index d = dim_from_num_params(params.size());
    Matrix l = Matrix::Zero(d, d);
    Eigen::Index k = d;
    for (Eigen::Index j = 0; j < d; ++j) {
      for (Eigen::Index i = j; i < d; ++i, ++k) {
        l(i, j) = (i == j) ? T(std::exp(params[k])) : params[k];
      }
    }
    return FullRankGaussian(params.head(d), l);
  }

  Eigen::Index dim() const { return mean_.size(); }
  Eigen::Index num_params() const { return dim() + dim() * (dim() + 1) / 2; }
  const Vector& mean() const { return mean_; }
  const Matrix& chol() const { return chol_; }
  Matrix covariance() const { return chol_ * chol_.transpose(); }
  Matrix precision() const {
    const Matrix linv = chol_.template triangularView<Eigen::Lower>().solve(Matrix::Identity(dim(), dim()));
    return linv.transpose() * linv;
  }
  T log_det_covariance() const { return T(2) * chol_.diagonal().array().log().sum(); }

  Vector params() const {
    Vector p(num_params());
    p.head(dim()) = mean_;
    Eigen::Index k = dim();
    for (Eigen::Index j = 0; j < dim(); ++j) {
      for (Eigen::Index i = j; i < dim(); ++i, ++k) {
        p[k] = (i == j) ? T(std::log(chol_(i, i))) : chol_(i, j);
      }
    }
    return p;
  }

  Matrix sample(const Matrix& eps) const {
    check_size("FullRankGaussian::sample", "eps rows", eps.rows(), dim());
    return (chol_.template triangularView<Eigen::Lower>() * eps).colwise() + mean_;
  }

  Vector log_density(const Matrix& z) const {
    check_size("FullRankGaussian::log_density", "z rows", z.rows(), dim());
    const Matrix u = chol_.template triangularView<Eigen::Lower>().solve(z.colwise() - mean_);
    const T constant = -T(0.5) * T(dim()) * T(kLog2Pi) - T(0.5) * log_det_covariance();
    return (constant - T(0.5) * u.colwise().squaredNorm().array()).matrix().transpose();
  }

  // grad_z log q(z) = -Sigma^{-1} (z - mu), parameters held fixed.
  Matrix score(const Matrix& z) const {
    check_size("FullRankGaussian::score", "z rows", z.rows(), dim());
    const Matrix u = chol_.template triangularView<Eigen::Lower>().solve(z.colwise() - mean_);
    return -chol_.transpose().template triangularView<Eigen::Upper>().solve(u);
  }

  T entropy() const { return T(0.5) * T(dim()) * (T(kLog2Pi) + T(1)) + T(0.5) * log_det_covariance(); }
  Vector entropy_gradient() const {
    return params_gradient(Vector::Zero(dim()), Matrix(chol_.diagonal().cwiseInverse().asDiagonal()));
  }

  // Gradient with respect to the unconstrained parameters from d f/d mu and d f/d L (only the lower
  // triangle of d_chol is read).
  Vector params_gradient(const Vector& d_mean, const Matrix& d_chol) const {
    check_size("FullRankGaussian::params_gradient", "d_mean", d_mean.size(), dim());
    check_size("FullRankGaussian::params_gradient", "d_chol rows", d_chol.rows(), dim());
    Vector g(num_params());
    g.head(dim()) = d_mean;
    Eigen::Index k = dim();
    for (Eigen::Index j = 0; j < dim(); ++j) {
      for (Eigen::Index i = j; i < dim(); ++i, ++k) {
        g[k] = (i == j) ? d_chol(i, i) * chol_(i, i) : d_chol(i, j);
      }
    }
    return g;
  }

  // From d f/d Sigma, where df = tr(d_cov^T dSigma) over symmetric dSigma: d f/d L = (G + G^T) L.
  Vector params_gradient_from_covariance(const Vector& d_mean, const Matrix& d_cov) const {
    check_size("FullRankGaussian::params_gradient_from_covariance", "d_cov rows", d_cov.rows(), dim());
    const Matrix d_chol = (d_cov + d_cov.transpose()) * chol_;
    return params_gradient(d_mean, d_chol);
  }

  // sum_s (dz_s/dparams)^T g_s with dz/dmu = I, dz/dL = g eps^T (lower triangle).
  Vector vjp(const Matrix& eps, const Matrix& cotangent) const {
    check_size("FullRankGaussian::vjp", "eps rows", eps.rows(), dim());
    check_size("FullRankGaussian::vjp", "cotangent rows", cotangent.rows(), dim());
    check_size("FullRankGaussian::vjp", "cotangent cols", cotangent.cols(), eps.cols());
    return params_gradient(cotangent.rowwise().sum(), cotangent * eps.transpose());
  }

  // STL estimate of grad_params E_q[log p - log q] (seed 002 Eq. 6), averaged over the S columns.
  Vector stl_gradient(const Matrix& eps, const Matrix& grad_log_p) const {
    const Matrix z = sample(eps);
    return vjp(eps, grad_log_p - score(z)) / T(eps.cols());
  }

 private:
  Vector mean_;
  Matrix chol_;
};

}  // namespace fvi
