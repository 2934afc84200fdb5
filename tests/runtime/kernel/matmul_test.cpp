// fvi/kernel/ops.h matmul and its two adjoints on kernel tensors equal element-by-element loops,
// for every combination of draws (either side varying with the draw or not; an adjoint summed to
// one draw or kept per draw), for products small enough for Eigen's coefficient-based path and
// large enough for the BLAS (Eigen's threshold, m + n + k >= 20), in double and float.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "fvi/kernel/instances.h"
#include "product_testing.h"

using namespace fvi::kernel;
using product_testing::check_close;
using product_testing::random_tensor;

namespace {

// Element (i, j) of draw s of a tensor (a tensor of one draw is the same for every draw).
template <class T>
double at(const Tensor<T>& t, Eigen::Index i, Eigen::Index j, Eigen::Index s) {
  return double(t.m(i, (t.draws == 1 ? 0 : s) * t.cols + j));
}

template <class T>
void check_matmul(Eigen::Index R, Eigen::Index K, Eigen::Index C, Eigen::Index S, std::mt19937& rng) {
  for (Eigen::Index a_draws : {Eigen::Index(1), S})
    for (Eigen::Index b_draws : {Eigen::Index(1), S}) {
      INFO(R << " x " << K << " times " << K << " x " << C << ", draws " << a_draws << " and " << b_draws);
      const Tensor<T> a = random_tensor<T>(R, K, a_draws, rng), b = random_tensor<T>(K, C, b_draws, rng);
      const Eigen::Index draws = std::max(a_draws, b_draws);
      const Tensor<T> out = matmul(a, b);
      REQUIRE(out.rows == R);
      REQUIRE(out.cols == C);
      REQUIRE(out.draws == draws);
      for (Eigen::Index s = 0; s < draws; ++s)
        for (Eigen::Index i = 0; i < R; ++i)
          for (Eigen::Index j = 0; j < C; ++j) {
            double want = 0, magnitude = 0;
            for (Eigen::Index k = 0; k < K; ++k) {
              const double term = at(a, i, k, s) * at(b, k, j, s);
              want += term, magnitude += std::abs(term);
            }
            check_close<T>(at(out, i, j, s), want, magnitude, K);
          }

      // The adjoints for a gradient g of the product: g b' for a, a' g for b, each summed over
      // the draws when its operand has one.
      const Tensor<T> g = random_tensor<T>(R, C, draws, rng);
      const Tensor<T> ga = matmul_grad_left(g, b, a_draws);
      REQUIRE(ga.rows == R);
      REQUIRE(ga.cols == K);
      REQUIRE(ga.draws == a_draws);
      for (Eigen::Index t = 0; t < a_draws; ++t)
        for (Eigen::Index i = 0; i < R; ++i)
          for (Eigen::Index k = 0; k < K; ++k) {
            double want = 0, magnitude = 0;
            for (Eigen::Index s = 0; s < draws; ++s) {
              if (a_draws > 1 && s != t) continue;
              for (Eigen::Index j = 0; j < C; ++j) {
                const double term = at(g, i, j, s) * at(b, k, j, s);
                want += term, magnitude += std::abs(term);
              }
            }
            check_close<T>(at(ga, i, k, t), want, magnitude, C * draws);
          }
      const Tensor<T> gb = matmul_grad_right(a, g, b_draws);
      REQUIRE(gb.rows == K);
      REQUIRE(gb.cols == C);
      REQUIRE(gb.draws == b_draws);
      for (Eigen::Index t = 0; t < b_draws; ++t)
        for (Eigen::Index k = 0; k < K; ++k)
          for (Eigen::Index j = 0; j < C; ++j) {
            double want = 0, magnitude = 0;
            for (Eigen::Index s = 0; s < draws; ++s) {
              if (b_draws > 1 && s != t) continue;
              for (Eigen::Index i = 0; i < R; ++i) {
                const double term = at(a, i, k, s) * at(g, i, j, s);
                want += term, magnitude += std::abs(term);
              }
            }
            check_close<T>(at(gb, k, j, t), want, magnitude, R * draws);
          }
    }
}

template <class T>
void check_all_sizes(std::mt19937& rng) {
  check_matmul<T>(3, 4, 2, 3, rng);     // 3 + 4 + 2 < 20: Eigen's coefficient-based product
  check_matmul<T>(1, 5, 1, 2, rng);     // a dot product per draw
  check_matmul<T>(37, 11, 5, 4, rng);   // the BLAS
  check_matmul<T>(64, 30, 1, 3, rng);   // a matrix times a vector per draw, through the BLAS
  check_matmul<T>(4, 0, 3, 2, rng);     // an empty sum: zeros
}

}  // namespace

TEST_CASE("products of kernel tensors and their adjoints equal the loops, for every draw combination",
          "[ops][matmul]") {
  std::mt19937 rng(11);
  check_all_sizes<double>(rng);
  check_all_sizes<float>(rng);
}

TEST_CASE("products of kernel tensors of mismatched shapes or draws are refused", "[ops][matmul]") {
  std::mt19937 rng(12);
  CHECK_THROWS_AS(matmul(random_tensor<double>(3, 4, 1, rng), random_tensor<double>(5, 2, 1, rng)), ShapeError);
  CHECK_THROWS_AS(matmul(random_tensor<double>(3, 4, 2, rng), random_tensor<double>(4, 2, 3, rng)), ShapeError);
  // An adjoint has one draw (summed) or the gradient's draws (each written whole), nothing else.
  const Tensor<double> g = random_tensor<double>(3, 2, 3, rng);
  CHECK_THROWS_AS(matmul_grad_left(g, random_tensor<double>(4, 2, 3, rng), 2), ShapeError);
  CHECK_THROWS_AS(matmul_grad_right(random_tensor<double>(3, 4, 3, rng), g, 2), ShapeError);
}
