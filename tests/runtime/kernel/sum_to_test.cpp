// fvi/kernel/ops.h sum_to: the adjoint of broadcasting sums a gradient down to the shape and draws
// of the value it was broadcast from. Checked against the sums written out element by element,
// for every reduction the emitter asks for (over draws, rows, columns, everything), in both
// scalar types. It had no test of its own (the adjoint checker reaches it through broadcasting).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "fvi/kernel/instances.h"

using namespace fvi::kernel;

namespace {

template <class T>
void check_sum_to(Eigen::Index rows, Eigen::Index cols, Eigen::Index draws, Eigen::Index to_rows, Eigen::Index to_cols,
                  Eigen::Index to_draws, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  Tensor<T> g(rows, cols, draws);
  for (Eigen::Index i = 0; i < g.m.size(); ++i) g.m.data()[i] = T(normal(rng));
  const Tensor<T> out = sum_to(g, to_rows, to_cols, to_draws);
  REQUIRE(out.rows == to_rows);
  REQUIRE(out.cols == to_cols);
  REQUIRE(out.draws == to_draws);
  // Element (r, c) of draw s of g lands on (r or 0, c or 0) of draw s or 0; summed in double.
  Eigen::MatrixXd expected = Eigen::MatrixXd::Zero(to_rows, to_cols * to_draws);
  for (Eigen::Index s = 0; s < draws; ++s)
    for (Eigen::Index c = 0; c < cols; ++c)
      for (Eigen::Index r = 0; r < rows; ++r)
        expected(to_rows == 1 ? 0 : r, (to_draws == 1 ? 0 : s) * to_cols + (to_cols == 1 ? 0 : c)) += double(g.draw(s)(r, c));
  // Each output sums at most rows * cols * draws terms of size ~1: rounding grows with their count.
  const double terms = double(rows * cols * draws) / double(to_rows * to_cols * to_draws);
  const double tolerance = 4 * terms * double(std::numeric_limits<T>::epsilon()) * std::sqrt(terms + 1);
  int wrong = 0;
  for (Eigen::Index i = 0; i < expected.size(); ++i)
    wrong += std::abs(double(out.m.data()[i]) - expected.data()[i]) > tolerance;
  INFO(rows << " x " << cols << ", " << draws << " draws to " << to_rows << " x " << to_cols << ", " << to_draws);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("sum_to sums a broadcast value's gradient back to its shape and draws", "[ops][sum_to]") {
  std::mt19937 rng(5);
  for (Eigen::Index rows : {1, 3, 126, 1031}) {
    for (Eigen::Index draws : {1, 2, 10}) {
      const Eigen::Index cols = 7;
      check_sum_to<double>(rows, cols, draws, rows, cols, 1, rng);  // over the draws
      check_sum_to<float>(rows, cols, draws, rows, cols, 1, rng);
      check_sum_to<double>(rows, cols, draws, rows, cols, draws, rng);  // nothing to sum
      check_sum_to<double>(rows, cols, draws, 1, cols, 1, rng);      // over rows and draws
      check_sum_to<float>(rows, cols, draws, 1, cols, draws, rng);   // over rows
      check_sum_to<double>(rows, cols, draws, rows, 1, 1, rng);      // over columns and draws
      check_sum_to<double>(rows, cols, draws, 1, 1, 1, rng);         // everything
    }
  }
}

TEST_CASE("sum_to over the draws adds them in draw order, as the draw-by-draw sum does", "[ops][sum_to]") {
  // 1 + 2^-24 rounds to 1 in float, twice; (2^-24 + 2^-24) + 1 would not: the order is pinned.
  Tensor<float> g(3000, 1, 3);
  g.m.col(0).setConstant(1.0f);
  g.m.col(1).setConstant(0x1p-24f);
  g.m.col(2).setConstant(0x1p-24f);
  const Tensor<float> out = sum_to(g, 3000, 1, 1);
  for (Eigen::Index i = 0; i < 3000; ++i) CHECK(out.m(i, 0) == 1.0f);
}
