// fvi/kernel/fused.h: a fused chain computes what the unfused operations compute, for every way
// an operand broadcasts (whole, a column across columns, a row down the rows, a scalar, one draw
// across draws), over one block or many, and into reused buffers.
#include <catch2/catch.hpp>

#include <limits>
#include <random>

#include "fvi/kernel/instances.h"
#include "product_testing.h"

using namespace fvi::kernel;
using product_testing::random_tensor;

namespace {

void check_equal(const Tensor<double>& got, const Tensor<double>& want) {
  REQUIRE(got.rows == want.rows);
  REQUIRE(got.cols == want.cols);
  REQUIRE(got.draws == want.draws);
  const double scale = std::max(1.0, want.m.cwiseAbs().maxCoeff());
  CHECK((got.m - want.m).cwiseAbs().maxCoeff() <= 8 * std::numeric_limits<double>::epsilon() * scale);
}

// The chain  n0 = x * row;  n1 = n0 + column;  n2 = relu(n1);  n3 = normal_lpdf(n2 | mu, sigma);
// n4 = d n3 / d n2 seeded with seed;  n5 = n4 - n1.  n1, n3 and n5 are used outside (written).
void check_chain(Eigen::Index r, Eigen::Index c, Eigen::Index S, std::mt19937& rng, Tensor<double>& n1,
                 Tensor<double>& n3, Tensor<double>& n5) {
  INFO(r << " x " << c << ", " << S << " draws");
  Tensor<double> x = random_tensor<double>(r, c, S, rng), row = random_tensor<double>(1, c, S, rng);
  Tensor<double> column = random_tensor<double>(r, 1, 1, rng);
  Tensor<double> mu = Tensor<double>::constant(0.3), sigma = random_tensor<double>(1, 1, S, rng);
  Tensor<double> seed = random_tensor<double>(r, c, S, rng);
  sigma.m = sigma.m.cwiseAbs().array() + 0.5;
  fused<double>({&x, &row, &column, &mu, &sigma, &seed}, {&n1, &n3, &n5}, {-1, 0, -1, 1, -1, 2},
                [&](const FusedBlock<double>& b) {
                  b.node(0) = b.leaf(0) * b.leaf(1);
                  b.node(1) = b.value(0) + b.leaf(2);
                  unary_block<double>(UnaryFn::relu, b.node_ptr[1], b.n, b.node_ptr[2]);
                  lpdf_block<double>("normal", {b.node_ptr[2], b.leaf_ptr[3], b.leaf_ptr[4]}, b.n, b.node_ptr[3]);
                  lpdf_vjp_block<double>("normal", 0, b.leaf_ptr[5], {b.node_ptr[2], b.leaf_ptr[3], b.leaf_ptr[4]}, b.n,
                                         b.node_ptr[4]);
                  b.node(5) = b.value(4) - b.value(1);
                });
  Tensor<double> u1 = add(mul(x, row), column), u2 = unary("relu", u1);
  Tensor<double> u3 = lpdf<double>("normal", {&u2, &mu, &sigma});
  Tensor<double> u5 = sub(lpdf_vjp<double>("normal", 0, seed, {&u2, &mu, &sigma}), u1);
  check_equal(n1, u1);
  check_equal(n3, u3);
  check_equal(n5, u5);
}

}  // namespace

TEST_CASE("a fused chain equals its unfused operations, buffers reused across shapes", "[kernel][fused]") {
  std::mt19937 rng(5);
  Tensor<double> n1, n3, n5;
  check_chain(3, 4, 2, rng, n1, n3, n5);          // one block per column
  check_chain(2500, 3, 1, rng, n1, n3, n5);       // several blocks per column, one draw
  check_chain(1500, 60, 2, rng, n1, n3, n5);      // many columns, several blocks each
  check_chain(1, 1, 3, rng, n1, n3, n5);          // scalars
}

TEST_CASE("a fused chain of whole and scalar operands runs over each draw as one column", "[kernel][fused]") {
  std::mt19937 rng(6);
  for (Eigen::Index r : {5, 700}) {
    Tensor<double> y = random_tensor<double>(r, 300, 1, rng), eta = random_tensor<double>(r, 300, 4, rng);
    Tensor<double> b = random_tensor<double>(1, 1, 4, rng);
    Tensor<double> lp;
    fused<double>({&eta, &b, &y}, {&lp}, {-1, 0}, [&](const FusedBlock<double>& blk) {
      blk.node(0) = blk.leaf(0) + blk.leaf(1);
      unary_derivative_block<double>(UnaryFn::log1p_exp, blk.node_ptr[0], blk.node_ptr[0], blk.n, blk.node_ptr[1]);
    });
    Tensor<double> sum = add(eta, b);
    check_equal(lp, unary_derivative("log1p_exp", sum, sum));
    (void)y;
  }
}

TEST_CASE("bernoulli_logit's fused log density and partial equal the unfused ones", "[kernel][fused]") {
  std::mt19937 rng(7);
  Tensor<double> y(4000, 1, 1), eta = random_tensor<double>(4000, 1, 3, rng), g = random_tensor<double>(4000, 1, 3, rng);
  for (Eigen::Index i = 0; i < y.rows; ++i) y.m(i, 0) = double(rng() % 2);
  eta.m *= 30.0;  // both tails of log1p_exp
  Tensor<double> lp, d;
  fused<double>({&y, &eta, &g}, {&lp, &d}, {0, 1}, [&](const FusedBlock<double>& b) {
    lpdf_block<double>("bernoulli_logit", {b.leaf_ptr[0], b.leaf_ptr[1]}, b.n, b.node_ptr[0]);
    lpdf_vjp_block<double>("bernoulli_logit", 1, b.leaf_ptr[2], {b.leaf_ptr[0], b.leaf_ptr[1]}, b.n, b.node_ptr[1]);
  });
  check_equal(lp, lpdf<double>("bernoulli_logit", {&y, &eta}));
  check_equal(d, lpdf_vjp<double>("bernoulli_logit", 1, g, {&y, &eta}));
}

// relu' and safe_sqrt' run as plain loops with bitwise selects (unary_derivative_array): the
// values of the plain comparisons, at zero of either sign, infinities, NaN, denormals and the
// largest numbers, in both precisions.
template <class T>
void check_positive_selects() {
  using L = std::numeric_limits<T>;
  const std::vector<T> v = {T(0), -T(0), T(1), T(-1), L::infinity(), -L::infinity(), L::quiet_NaN(),
                            -L::quiet_NaN(), L::denorm_min(), -L::denorm_min(), L::max(), L::lowest(),
                            L::min(), T(1e-30), T(-2.5), T(3.75)};
  const Eigen::Index n = Eigen::Index(v.size());
  std::vector<T> relu_d(v.size()), sqrt_d(v.size());
  unary_derivative_array<T>(UnaryFn::relu, v.data(), v.data(), n, relu_d.data());
  unary_derivative_array<T>(UnaryFn::safe_sqrt, v.data(), v.data(), n, sqrt_d.data());
  for (size_t i = 0; i < v.size(); ++i) {
    INFO("x = " << v[i]);
    CHECK(relu_d[i] == (v[i] > 0 ? T(1) : T(0)));
    if (v[i] > 0) CHECK(sqrt_d[i] == T(0.5) / v[i]);
    else CHECK(sqrt_d[i] == T(0));
  }
  // Through the fused block and the unfused tensor operation alike.
  std::vector<T> block(v.size());
  unary_derivative_block<T>(UnaryFn::relu, v.data(), v.data(), n, block.data());
  CHECK(block == relu_d);
}

TEST_CASE("relu' and safe_sqrt' by bitwise selects equal the plain comparisons", "[kernel][fused]") {
  check_positive_selects<double>();
  check_positive_selects<float>();
  Tensor<double> x(3, 1, 1);
  x.m << -1, 0, 2;
  Tensor<double> d = unary_derivative("relu", x, x);
  CHECK(d.m(0, 0) == 0);
  CHECK(d.m(1, 0) == 0);
  CHECK(d.m(2, 0) == 1);
}
