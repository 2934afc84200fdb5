#pragma once
// A matrix product written straight into its result by the BLAS (beta = 0). Eigen's product
// assignment zero-fills the result and then asks the BLAS to add to it: one more pass over an
// N x S result per call, which for the products of a large data matrix costs as much as a fused
// elementwise loop. Column-major operands with leading dimensions (a block of a data matrix's rows
// is read at the data's stride).
#include <Eigen/Core>

namespace fvi::kernel {

// c (m x n, ldc) = op(a) * op(b): op(a) = a (m x k, lda) or, with transpose_a, a' (a is k x m,
// lda); op(b) = b (k x n, ldb) or, with transpose_b, b' (b is n x k, ldb).
void blas_product(bool transpose_a, bool transpose_b, Eigen::Index m, Eigen::Index n, Eigen::Index k, const double* a,
                  Eigen::Index lda, const double* b, Eigen::Index ldb, double* c, Eigen::Index ldc);
void blas_product(bool transpose_a, bool transpose_b, Eigen::Index m, Eigen::Index n, Eigen::Index k, const float* a,
                  Eigen::Index lda, const float* b, Eigen::Index ldb, float* c, Eigen::Index ldc);

}  // namespace fvi::kernel
