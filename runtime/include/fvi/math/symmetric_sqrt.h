#pragma once
// Square root and inverse square root of a symmetric positive (semi)definite matrix through its
// eigendecomposition M = V diag(l) V^T: M^{1/2} = V diag(sqrt l) V^T. Used by the 2-Wasserstein
// distance and barycenter (seed 002 Eq. 15).
#include <cmath>
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"

namespace fvi {

// Eigenvalues below -(D eps max|l|) are an error (the matrix is not PSD); smaller negative ones are
// rounding and are set to zero.
template <typename T>
MatrixX<T> symmetric_sqrt(const MatrixX<T>& m, const char* function = "symmetric_sqrt") {
  check_finite(function, "matrix", m);
  check_symmetric(function, "matrix", m);
  Eigen::SelfAdjointEigenSolver<MatrixX<T>> eig(m);
  VectorX<T> l = eig.eigenvalues();
  const T tol = T(m.rows()) * Eigen::NumTraits<T>::epsilon() * l.cwiseAbs().maxCoeff();
  if (l.minCoeff() < -tol) {
    internal::throw_invalid(function, "matrix is not positive semi-definite (eigenvalue " +
                                          internal::to_string(l.minCoeff()) + ")");
  }
  l = l.cwiseMax(T(0)).cwiseSqrt();
  return eig.eigenvectors() * l.asDiagonal() * eig.eigenvectors().transpose();
}

template <typename T>
MatrixX<T> symmetric_inverse_sqrt(const MatrixX<T>& m, const char* function = "symmetric_inverse_sqrt") {
  check_finite(function, "matrix", m);
  check_symmetric(function, "matrix", m);
  Eigen::SelfAdjointEigenSolver<MatrixX<T>> eig(m);
  const VectorX<T> l = eig.eigenvalues();
  if (!(l.minCoeff() > 0)) {
    internal::throw_invalid(function, "matrix is not positive definite (eigenvalue " +
                                          internal::to_string(l.minCoeff()) + ")");
  }
  return eig.eigenvectors() * l.cwiseSqrt().cwiseInverse().asDiagonal() * eig.eigenvectors().transpose();
}

}  // namespace fvi
