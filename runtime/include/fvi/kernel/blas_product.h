#pragma once
// A matrix product through the BLAS with column-major operands at any leading dimension: a block
// of a data matrix's rows is read in place at the data's stride (fvi/kernel/ops.h row_block).
// The result is cleared and the BLAS adds to it, as Eigen's products do (blas_product.cpp says
// why not beta = 0).
#include <Eigen/Core>

namespace fvi::kernel {

// c (m x n, ldc) = op(a) * b, op(a) = a (m x k, lda) or, with transpose_a, a' (a is k x m, lda);
// b is k x n (ldb).
void blas_product(bool transpose_a, Eigen::Index m, Eigen::Index n, Eigen::Index k, const double* a, Eigen::Index lda,
                  const double* b, Eigen::Index ldb, double* c, Eigen::Index ldc);
void blas_product(bool transpose_a, Eigen::Index m, Eigen::Index n, Eigen::Index k, const float* a, Eigen::Index lda,
                  const float* b, Eigen::Index ldb, float* c, Eigen::Index ldc);

}  // namespace fvi::kernel
