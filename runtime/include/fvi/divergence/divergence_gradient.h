#pragma once
// Value-and-gradient results shared by the divergences. Gradients are with respect to the FIRST
// argument q (the variational distribution being optimised); the second argument (prior, cavity)
// is held fixed.
#include "fvi/check.h"
#include "fvi/eigen_types.h"

namespace fvi {

// For a MeanFieldGaussian q: d/d mean and d/d log_sd. params_gradient() is laid out like
// MeanFieldGaussian::params(), so it can be added to other gradients and handed to an optimiser.
template <typename T = double>
struct DiagDivergenceGradient {
  T value{};
  VectorX<T> d_mean;
  VectorX<T> d_log_sd;

  VectorX<T> params_gradient() const {
    VectorX<T> g(d_mean.size() + d_log_sd.size());
    g << d_mean, d_log_sd;
    return g;
  }
};

// For a FullRankGaussian q: d/d mean and d/d Sigma, where d_cov is the symmetric matrix with
// dD = tr(d_cov dSigma). Chain to q's parameters with q.params_gradient_from_covariance(d_mean, d_cov).
template <typename T = double>
struct FullDivergenceGradient {
  T value{};
  VectorX<T> d_mean;
  MatrixX<T> d_cov;
};

namespace internal {
template <typename Q, typename P>
void check_same_dim(const char* function, const Q& q, const P& p) {
  check_size(function, "p dimension", p.dim(), q.dim());
}
}  // namespace internal

}  // namespace fvi
