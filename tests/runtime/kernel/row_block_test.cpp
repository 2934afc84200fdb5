// fvi/kernel/ops.h row_block: products with rows [begin, begin + count) of a data matrix, read in
// place, equal the same products computed element by element from those rows; the adjoint of
// the right operand likewise, its draws summed when the operand has one. Rows outside the data
// and mismatched shapes are refused.
#include <catch2/catch.hpp>

#include <limits>
#include <random>

#include "fvi/kernel/instances.h"
#include "product_testing.h"

using namespace fvi::kernel;
using product_testing::check_close;
using product_testing::random_tensor;

namespace {

template <class T>
void check_products(std::mt19937& rng) {
  const Eigen::Index N = 37, D = 5, C = 3, S = 4;
  const Tensor<T> x = random_tensor<T>(N, D, 1, rng), b = random_tensor<T>(D, C, S, rng);
  for (auto [begin, count] : {std::pair<int64_t, int64_t>{0, -1}, {0, N}, {3, 11}, {N - 1, 1}, {5, 0}}) {
    INFO("rows " << begin << " + " << count);
    const RowBlock<T> rows = row_block(x, begin, count);
    const Eigen::Index n = count < 0 ? N : count, first = count < 0 ? 0 : begin;
    REQUIRE(rows.rows == n);
    REQUIRE(rows.cols == D);

    const Tensor<T> product = matmul(rows, b);
    REQUIRE(product.rows == n);
    REQUIRE(product.cols == C);
    REQUIRE(product.draws == S);
    for (Eigen::Index s = 0; s < S; ++s)
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index c = 0; c < C; ++c) {
          double want = 0, magnitude = 0;
          for (Eigen::Index d = 0; d < D; ++d) {
            const double term = double(x.m(first + i, d)) * double(b.m(d, s * C + c));
            want += term, magnitude += std::abs(term);
          }
          check_close<T>(double(product.m(i, s * C + c)), want, magnitude, D);
        }

    // The adjoint of b: rows' * g for each draw, or summed over the draws for a b of one draw.
    const Tensor<T> g = random_tensor<T>(n, C, S, rng);
    for (Eigen::Index b_draws : {S, Eigen::Index(1)}) {
      INFO("b has " << b_draws << " draws");
      const Tensor<T> grad = matmul_grad_right(rows, g, b_draws);
      REQUIRE(grad.rows == D);
      REQUIRE(grad.cols == C);
      REQUIRE(grad.draws == b_draws);
      for (Eigen::Index d = 0; d < D; ++d)
        for (Eigen::Index c = 0; c < C; ++c)
          for (Eigen::Index t = 0; t < b_draws; ++t) {
            double want = 0, magnitude = 0;
            for (Eigen::Index s = 0; s < S; ++s) {
              if (b_draws == S && s != t) continue;
              for (Eigen::Index i = 0; i < n; ++i) {
                const double term = double(x.m(first + i, d)) * double(g.m(i, s * C + c));
                want += term, magnitude += std::abs(term);
              }
            }
            check_close<T>(double(grad.m(d, t * C + c)), want, magnitude, n * S);
          }
    }
  }
}

}  // namespace

TEST_CASE("products with a block of a data matrix's rows read in place equal the loops", "[ops][rows]") {
  std::mt19937 rng(7);
  check_products<double>(rng);
  check_products<float>(rng);
}

TEST_CASE("a block of rows outside the data, or of the wrong shape, is refused", "[ops][rows]") {
  std::mt19937 rng(8);
  const Tensor<double> x = random_tensor<double>(10, 4, 1, rng);
  CHECK_THROWS_AS(row_block(x, 8, 3), std::out_of_range);
  CHECK_THROWS_AS(row_block(x, -1, 2), std::out_of_range);
  CHECK_THROWS_AS(row_block(random_tensor<double>(10, 4, 2, rng), 0, 2), ShapeError);  // varies with the draw
  const RowBlock<double> rows = row_block(x, 2, 5);
  CHECK_THROWS_AS(matmul(rows, random_tensor<double>(3, 2, 1, rng)), ShapeError);
  CHECK_THROWS_AS(matmul_grad_right(rows, random_tensor<double>(4, 2, 1, rng), 1), ShapeError);
  CHECK_THROWS_AS(matmul_grad_right(rows, random_tensor<double>(5, 2, 3, rng), 2), ShapeError);  // 3 draws into 2
}
