// Images (fvi/kernel/ops_conv.h): conv2d against worked examples and against its definition as a
// sum over channels and kernel offsets written here loop by loop; its two adjoints and pooling's
// against the adjoint identity <g, f(v)> = <f'(g), v> (each map is linear in the operand, max
// pooling given where the maxima are); shapes that do not fit are refused.
#include "fvi/kernel/ops.h"

#include <catch2/catch.hpp>
#include <random>

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace conv_test {

using fvi::kernel::ConvGeometry;
using fvi::kernel::PoolGeometry;
using fvi::kernel::Tensor;
using T = Tensor<double>;

namespace {

T random_tensor(Eigen::Index rows, Eigen::Index cols, Eigen::Index draws, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  T t(rows, cols, draws);
  for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = normal(rng);
  return t;
}

double inner(const T& a, const T& b) { return (a.m.array() * b.m.array()).sum(); }

// y[n, co, i, j] = sum over c, a, b of w[co, c, a, b] x[n, c, i + a - p, j + b - p] (0 outside).
T direct_conv(const T& x, const T& w, const ConvGeometry& g) {
  const Eigen::Index Ho = g.height + 2 * g.padding - g.kernel + 1, Wo = g.width + 2 * g.padding - g.kernel + 1;
  const Eigen::Index draws = std::max(x.draws, w.draws);
  T y(x.rows, w.rows * Ho * Wo, draws);
  for (Eigen::Index s = 0; s < draws; ++s)
    for (Eigen::Index n = 0; n < x.rows; ++n)
      for (Eigen::Index co = 0; co < w.rows; ++co)
        for (Eigen::Index i = 0; i < Ho; ++i)
          for (Eigen::Index j = 0; j < Wo; ++j) {
            double total = 0;
            for (Eigen::Index c = 0; c < g.channels; ++c)
              for (Eigen::Index a = 0; a < g.kernel; ++a)
                for (Eigen::Index b = 0; b < g.kernel; ++b) {
                  const Eigen::Index si = i + a - g.padding, sj = j + b - g.padding;
                  if (si < 0 || sj < 0 || si >= g.height || sj >= g.width) continue;
                  total += w.draw(s)(co, (c * g.kernel + a) * g.kernel + b) *
                           x.draw(s)(n, (c * g.height + si) * g.width + sj);
                }
            y.draw(s)(n, (co * Ho + i) * Wo + j) = total;
          }
  return y;
}

}  // namespace

TEST_CASE("conv2d: a worked example", "[conv]") {
  // One 3 x 3 image 1..9 (row by row) and the 2 x 2 kernel [1 0; 0 -1]: x(i, j) - x(i+1, j+1) = -4.
  T x(1, 9, 1);
  for (int i = 0; i < 9; ++i) x.m(0, i) = i + 1;
  T w(1, 4, 1);
  w.m << 1, 0, 0, -1;
  const T y = fvi::kernel::conv2d(x, w, ConvGeometry{1, 3, 3, 2, 0});
  REQUIRE(y.cols == 4);
  for (int q = 0; q < 4; ++q) CHECK(y.m(0, q) == -4);
  // Padded by 1, the same kernel at the corner (0, 0) reads 0 - x(0, 0) = -1, at (3, 3) x(2, 2) = 9.
  const T padded = fvi::kernel::conv2d(x, w, ConvGeometry{1, 3, 3, 2, 1});
  REQUIRE(padded.cols == 16);
  CHECK(padded.m(0, 0) == -1);
  CHECK(padded.m(0, 15) == 9);
  CHECK(padded.m(0, 5) == 1 - 5);  // output (1, 1) reads x(0, 0) - x(1, 1)
}

TEST_CASE("conv2d equals its definition, with padding, channels and draws", "[conv]") {
  const ConvGeometry g{2, 5, 4, 3, 1};  // 2 channels of 5 x 4 (not square: rows and columns apart)
  for (auto [x_draws, w_draws] : {std::pair<Eigen::Index, Eigen::Index>{1, 3}, {3, 3}, {3, 1}, {1, 1}}) {
    INFO("x draws " << x_draws << ", w draws " << w_draws);
    const T x = random_tensor(4, 2 * 5 * 4, x_draws, 1), w = random_tensor(3, 2 * 3 * 3, w_draws, 2);
    const T y = fvi::kernel::conv2d(x, w, g), expected = direct_conv(x, w, g);
    REQUIRE(y.rows == expected.rows);
    REQUIRE(y.cols == expected.cols);
    REQUIRE(y.draws == expected.draws);
    CHECK((y.m - expected.m).cwiseAbs().maxCoeff() < 1e-12);
  }
}

TEST_CASE("conv2d's adjoints satisfy <g, conv(x, w)> = <x's adjoint, x> = <w's adjoint, w>", "[conv]") {
  const ConvGeometry g{3, 4, 5, 2, 1};
  for (auto [x_draws, w_draws] : {std::pair<Eigen::Index, Eigen::Index>{1, 4}, {4, 4}, {4, 1}}) {
    INFO("x draws " << x_draws << ", w draws " << w_draws);
    const T x = random_tensor(3, 3 * 4 * 5, x_draws, 3), w = random_tensor(2, 3 * 2 * 2, w_draws, 4);
    const T y = direct_conv(x, w, g);
    const T seed = random_tensor(y.rows, y.cols, y.draws, 5);
    const double value = inner(seed, y);
    const T dx = fvi::kernel::conv2d_grad_input(seed, w, x.draws, g);
    const T dw = fvi::kernel::conv2d_grad_weight(x, seed, w.draws, g);
    REQUIRE(dx.draws == x.draws);
    REQUIRE(dw.draws == w.draws);
    // Summed over draws where the operand has one: the identity holds for the sum.
    CHECK(inner(dx, x) == Approx(value).epsilon(1e-12));
    CHECK(inner(dw, w) == Approx(value).epsilon(1e-12));
  }
}

TEST_CASE("pooling: worked examples and the adjoint identity", "[conv]") {
  // One 4 x 4 image 1..16 row by row: 2 x 2 maxima 6 8 14 16, means 3.5 5.5 11.5 13.5.
  T x(1, 16, 1);
  for (int i = 0; i < 16; ++i) x.m(0, i) = i + 1;
  const PoolGeometry g{1, 4, 4, 2};
  const T mx = fvi::kernel::pool2d("max", x, g), av = fvi::kernel::pool2d("avg", x, g);
  REQUIRE(mx.cols == 4);
  CHECK(mx.m(0, 0) == 6);
  CHECK(mx.m(0, 1) == 8);
  CHECK(mx.m(0, 2) == 14);
  CHECK(mx.m(0, 3) == 16);
  CHECK(av.m(0, 0) == 3.5);
  CHECK(av.m(0, 3) == 13.5);

  const PoolGeometry h{2, 6, 4, 2};
  const T images = random_tensor(3, 2 * 6 * 4, 2, 6), v = random_tensor(3, 2 * 6 * 4, 2, 7);
  const T seed = random_tensor(3, 2 * 3 * 2, 2, 8);
  for (const char* kind : {"max", "avg"}) {
    INFO(kind);
    const T grad = fvi::kernel::pool2d_grad(kind, images, seed, h);
    const T along = std::string(kind) == "max" ? fvi::kernel::max_pool2d_select(images, v, h)
                                               : fvi::kernel::pool2d(kind, v, h);
    CHECK(inner(seed, along) == Approx(inner(grad, v)).epsilon(1e-12));
  }
  // Max pooling selects x itself where x is largest.
  const T self = fvi::kernel::max_pool2d_select(images, images, h), pooled = fvi::kernel::pool2d("max", images, h);
  CHECK((self.m - pooled.m).cwiseAbs().maxCoeff() == 0);
}

TEST_CASE("conv2d and pooling refuse shapes that do not fit", "[conv]") {
  const T x = random_tensor(2, 16, 1, 9), w = random_tensor(2, 9, 1, 10);
  CHECK_THROWS_AS(fvi::kernel::conv2d(x, w, ConvGeometry{1, 4, 5, 3, 0}), fvi::kernel::ShapeError);  // 20 pixels
  CHECK_THROWS_AS(fvi::kernel::conv2d(x, w, ConvGeometry{1, 4, 4, 2, 0}), fvi::kernel::ShapeError);  // 4 weights
  CHECK_THROWS_AS(fvi::kernel::conv2d(x, w, ConvGeometry{1, 4, 4, 7, 1}), fvi::kernel::ShapeError);  // too large
  CHECK_THROWS_AS(fvi::kernel::pool2d("max", x, PoolGeometry{1, 4, 4, 3}), fvi::kernel::ShapeError);  // no tiling
  CHECK_THROWS_AS(fvi::kernel::pool2d("sum", x, PoolGeometry{1, 4, 4, 2}), fvi::kernel::ShapeError);
}

}  // namespace conv_test
