#include "fvi/kernel/blas_product.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace fvi::kernel {

namespace {

// The BLAS takes 32-bit sizes.
blasint blas_size(Eigen::Index n) {
  if (n < 0 || n > std::numeric_limits<blasint>::max()) throw std::length_error("a matrix too large for the BLAS");
  return static_cast<blasint>(n);
}

template <class T, class Gemm>
void product(Gemm gemm, bool transpose_a, bool transpose_b, Eigen::Index m, Eigen::Index n, Eigen::Index k, const T* a, Eigen::Index lda,
             const T* b, Eigen::Index ldb, T* c, Eigen::Index ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: the BLAS would leave c as it was
    for (Eigen::Index j = 0; j < n; ++j) std::fill(c + j * ldc, c + j * ldc + m, T(0));
    return;
  }
  gemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, blas_size(m), blas_size(n), blas_size(k),
       T(1), a, blas_size(lda), b, blas_size(ldb), T(0), c, blas_size(ldc));
}

}  // namespace

void blas_product(bool transpose_a, bool transpose_b, Eigen::Index m, Eigen::Index n, Eigen::Index k, const double* a,
                  Eigen::Index lda, const double* b, Eigen::Index ldb, double* c, Eigen::Index ldc) {
  product<double>(cblas_dgemm, transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc);
}

void blas_product(bool transpose_a, bool transpose_b, Eigen::Index m, Eigen::Index n, Eigen::Index k, const float* a,
                  Eigen::Index lda, const float* b, Eigen::Index ldb, float* c, Eigen::Index ldc) {
  product<float>(cblas_sgemm, transpose_a, transpose_b, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace fvi::kernel
