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
void product(Gemm gemm, bool transpose_a, Eigen::Index m, Eigen::Index n, Eigen::Index k, const T* a, Eigen::Index lda,
             const T* b, Eigen::Index ldb, T* c, Eigen::Index ldc) {
  if (m == 0 || n == 0) return;
  // Cleared here and added to by the BLAS (beta = 1), as Eigen's product assignment does: with
  // beta = 0, OpenBLAS clears the result in a pass of its own (?gemm_beta), no faster than memset
  // and for some shapes slower (bench/README.md, 2026-11-24). An empty sum (k = 0) is the zeros.
  if (ldc == m) {
    std::fill(c, c + m * n, T(0));
  } else {
    for (Eigen::Index j = 0; j < n; ++j) std::fill(c + j * ldc, c + j * ldc + m, T(0));
  }
  if (k == 0) return;
  gemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, CblasNoTrans, blas_size(m), blas_size(n), blas_size(k),
       T(1), a, blas_size(lda), b, blas_size(ldb), T(1), c, blas_size(ldc));
}

}  // namespace

void blas_product(bool transpose_a, Eigen::Index m, Eigen::Index n, Eigen::Index k, const double* a, Eigen::Index lda,
                  const double* b, Eigen::Index ldb, double* c, Eigen::Index ldc) {
  product<double>(cblas_dgemm, transpose_a, m, n, k, a, lda, b, ldb, c, ldc);
}

void blas_product(bool transpose_a, Eigen::Index m, Eigen::Index n, Eigen::Index k, const float* a, Eigen::Index lda,
                  const float* b, Eigen::Index ldb, float* c, Eigen::Index ldc) {
  product<float>(cblas_sgemm, transpose_a, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace fvi::kernel
