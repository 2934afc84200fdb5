// fvi/kernel/ops_concat.h: append_row / append_col and their adjoints' parts, against the
// elements written out one by one; an operand with one draw is the same at every draw.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "fvi/kernel/instances.h"
#include "product_testing.h"

using namespace fvi::kernel;
using product_testing::random_tensor;

namespace {

// Element (r, c) of draw s, a one-draw tensor the same at every draw.
double at(const Tensor<double>& t, Eigen::Index r, Eigen::Index c, Eigen::Index s) {
  return t.m(r, (t.draws == 1 ? 0 : s) * t.cols + c);
}

}  // namespace

TEST_CASE("concat_rows puts a above b at every draw, broadcasting a one-draw operand", "[kernel][concat]") {
  std::mt19937 rng(3);
  for (auto [a_draws, b_draws] : {std::pair<Eigen::Index, Eigen::Index>{1, 1}, {3, 3}, {1, 3}, {3, 1}}) {
    const Tensor<double> a = random_tensor<double>(2, 4, a_draws, rng), b = random_tensor<double>(3, 4, b_draws, rng);
    const Tensor<double> out = concat_rows(a, b);
    const Eigen::Index draws = std::max(a_draws, b_draws);
    REQUIRE(out.rows == 5);
    REQUIRE(out.cols == 4);
    REQUIRE(out.draws == draws);
    for (Eigen::Index s = 0; s < draws; ++s)
      for (Eigen::Index c = 0; c < 4; ++c) {
        for (Eigen::Index r = 0; r < 2; ++r) CHECK(at(out, r, c, s) == at(a, r, c, s));
        for (Eigen::Index r = 0; r < 3; ++r) CHECK(at(out, 2 + r, c, s) == at(b, r, c, s));
      }
  }
}

TEST_CASE("concat_cols puts a left of b at every draw, broadcasting a one-draw operand", "[kernel][concat]") {
  std::mt19937 rng(4);
  for (auto [a_draws, b_draws] : {std::pair<Eigen::Index, Eigen::Index>{1, 1}, {2, 2}, {1, 2}, {2, 1}}) {
    const Tensor<double> a = random_tensor<double>(3, 1, a_draws, rng), b = random_tensor<double>(3, 2, b_draws, rng);
    const Tensor<double> out = concat_cols(a, b);
    const Eigen::Index draws = std::max(a_draws, b_draws);
    REQUIRE(out.rows == 3);
    REQUIRE(out.cols == 3);
    REQUIRE(out.draws == draws);
    for (Eigen::Index s = 0; s < draws; ++s)
      for (Eigen::Index r = 0; r < 3; ++r) {
        CHECK(at(out, r, 0, s) == at(a, r, 0, s));
        for (Eigen::Index c = 0; c < 2; ++c) CHECK(at(out, r, 1 + c, s) == at(b, r, c, s));
      }
  }
}

TEST_CASE("the parts of a joined gradient are each operand's own rows and columns", "[kernel][concat]") {
  std::mt19937 rng(5);
  const Tensor<double> g = random_tensor<double>(5, 3, 2, rng);
  const Tensor<double> top = concat_rows_part(g, 2, 0), bottom = concat_rows_part(g, 2, 1);
  REQUIRE((top.rows == 2 && bottom.rows == 3 && top.cols == 3 && bottom.draws == 2));
  const Tensor<double> left = concat_cols_part(g, 1, 0), right = concat_cols_part(g, 1, 1);
  REQUIRE((left.cols == 1 && right.cols == 2 && left.rows == 5 && right.draws == 2));
  for (Eigen::Index s = 0; s < 2; ++s)
    for (Eigen::Index r = 0; r < 5; ++r)
      for (Eigen::Index c = 0; c < 3; ++c) {
        CHECK(at(g, r, c, s) == (r < 2 ? at(top, r, c, s) : at(bottom, r - 2, c, s)));
        CHECK(at(g, r, c, s) == (c < 1 ? at(left, r, c, s) : at(right, r, c - 1, s)));
      }
  // Joining the parts again gives g back.
  CHECK(concat_rows(top, bottom).m == g.m);
  CHECK(concat_cols(left, right).m == g.m);
}

TEST_CASE("joins of mismatched shapes and draws are refused", "[kernel][concat]") {
  std::mt19937 rng(6);
  CHECK_THROWS_AS(concat_rows(random_tensor<double>(2, 3, 1, rng), random_tensor<double>(2, 4, 1, rng)), ShapeError);
  CHECK_THROWS_AS(concat_cols(random_tensor<double>(2, 3, 1, rng), random_tensor<double>(3, 3, 1, rng)), ShapeError);
  CHECK_THROWS_AS(concat_rows(random_tensor<double>(2, 3, 2, rng), random_tensor<double>(2, 3, 3, rng)), ShapeError);
  CHECK_THROWS_AS(concat_rows_part(random_tensor<double>(2, 3, 1, rng), 4, 0), ShapeError);
}

TEST_CASE("cumulative_sum runs down a vector and along a row_vector; its adjoint runs back", "[kernel][cumulative_sum]") {
  std::mt19937 rng(7);
  for (auto [rows, cols] : {std::pair<Eigen::Index, Eigen::Index>{4, 1}, {1, 5}, {1, 1}}) {
    const Tensor<double> a = random_tensor<double>(rows, cols, 3, rng);
    const Tensor<double> c = cumulative_sum(a), g = cumulative_sum_grad(a);
    const Eigen::Index n = rows * cols;
    for (Eigen::Index s = 0; s < 3; ++s)
      for (Eigen::Index i = 0; i < n; ++i) {
        double head = 0, tail = 0, size = 0;  // sums written out: elements 0..i and i..n-1
        for (Eigen::Index j = 0; j <= i; ++j) head += a.m.data()[s * n + j];
        for (Eigen::Index j = i; j < n; ++j) tail += a.m.data()[s * n + j];
        for (Eigen::Index j = 0; j < n; ++j) size += std::abs(a.m.data()[s * n + j]);
        // The same terms in another order: within n roundings of the sum of their magnitudes.
        const double rounding = double(n) * std::numeric_limits<double>::epsilon() * size;
        CHECK(c.m.data()[s * n + i] == Approx(head).epsilon(0).margin(rounding));
        CHECK(g.m.data()[s * n + i] == Approx(tail).epsilon(0).margin(rounding));
      }
  }
  CHECK_THROWS_AS(cumulative_sum(random_tensor<double>(2, 2, 1, rng)), ShapeError);
}
