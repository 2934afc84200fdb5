#include "fvi/rng.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/error.h"

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::CounterRng;
using fvi::RngKey;

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[rng]") {
  // Random123 kat_vectors, "philox4x32 10" lines: counter (4 words), key (2 words) -> output.
  using A4 = std::array<std::uint32_t, 4>;
  using A2 = std::array<std::uint32_t, 2>;
  CHECK(fvi::philox4x32_10(A4{0, 0, 0, 0}, A2{0, 0}) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(fvi::philox4x32_10(A4{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, A2{0xffffffff, 0xffffffff}) ==
        A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(fvi::philox4x32_10(A4{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, A2{0xa4093822, 0x299f31d0}) ==
        A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("the documented key/counter layout and Box-Muller conversion", "[rng]") {
  const RngKey key{0x0123456789abcdefull, 5, 9, 2};
  for (std::uint32_t b : {0u, 1u, 77u}) {
    const auto w = fvi::rng_block(key, b);
    // counter = (block, stream, round, party), key = (seed low, seed high).
    CHECK(w == fvi::philox4x32_10({b, 2, 9, 5}, {0x89abcdefu, 0x01234567u}));
    // 53-bit uniforms from word pairs: u1 in (0, 1] from (w0, w1), u2 in [0, 1) from (w2, w3).
    const double u1 = (double((std::uint64_t(w[0] >> 5) << 26) | (w[1] >> 6)) + 1) / 9007199254740992.0;
    const double u2 = double((std::uint64_t(w[2] >> 5) << 26) | (w[3] >> 6)) / 9007199254740992.0;
    const double r = std::sqrt(-2 * std::log(u1)), pi = std::acos(-1.0);
    const auto z = fvi::standard_normal_pair(key, b);
    CHECK_THAT(z[0], WithinAbs(r * std::cos(2 * pi * u2), 1e-15 * (1 + r)));
    CHECK_THAT(z[1], WithinAbs(r * std::sin(2 * pi * u2), 1e-15 * (1 + r)));
  }
}

TEST_CASE("draws depend only on (seed, party, round, stream)", "[rng]") {
  const RngKey key{42, 3, 7, fvi::rng_stream::kLocalNoise};
  CounterRng a(key), b(key);
  const Eigen::MatrixXd da = a.normal(5, 4);
  const Eigen::MatrixXd db = b.normal(5, 4);
  CHECK(da == db);  // bitwise reproducible: same inputs, same bits

  // Any change of the key changes the draws.
  const RngKey others[] = {{43, 3, 7, 2}, {42, 4, 7, 2}, {42, 3, 8, 2}, {42, 3, 7, 1}, {42ull << 32, 3, 7, 2}};
  for (const auto& other : others) {
    CounterRng c(other);
    CHECK((c.normal(5, 4) - da).cwiseAbs().minCoeff() > 0);
  }
}

TEST_CASE("a stream resumes exactly from its block position (checkpoint/restart)", "[rng]") {
  const RngKey key{2024, 0, 11, fvi::rng_stream::kGlobalNoise};
  CounterRng full(key);
  const Eigen::MatrixXd first = full.normal(3, 3);  // 9 normals -> 5 blocks
  const std::uint64_t position = full.block();
  CHECK(position == 5);
  const Eigen::MatrixXd second = full.normal(4, 2);
  CounterRng resumed(key, position);
  CHECK(resumed.normal(4, 2) == second);
}

TEST_CASE("fill_normal is independent of the matrix shape", "[rng]") {
  const RngKey key{7, 1, 0, 0};
  CounterRng a(key), b(key);
  const Eigen::MatrixXd m = a.normal(6, 5);
  const Eigen::VectorXd v = b.normal(30, 1);
  CHECK(Eigen::Map<const Eigen::VectorXd>(m.data(), 30) == v);
  // Element k is normal k of the stream: block k / 2, half k % 2.
  for (std::uint32_t k = 0; k < 30; ++k) {
    CHECK(v[k] == fvi::standard_normal_pair(key, k / 2)[k % 2]);
  }
  // A strided block of a larger matrix receives the same draws and nothing around it changes.
  Eigen::MatrixXd big = Eigen::MatrixXd::Zero(8, 7);
  CounterRng d(key);
  d.fill_normal(big.block(1, 1, 6, 5));
  CHECK(big.block(1, 1, 6, 5) == m);
  CHECK(big.col(0).isZero(0));
  CHECK(big.row(7).isZero(0));
  // float matrices receive the same draws, rounded.
  CounterRng c(key);
  Eigen::MatrixXf f(6, 5);
  c.fill_normal(f);
  CHECK((f.cast<double>() - m).cwiseAbs().maxCoeff() <= 1e-6 * m.cwiseAbs().maxCoeff());
}

TEST_CASE("standard normal draws have the right distribution", "[rng]") {
  const int n = 400000;
  CounterRng rng(RngKey{1, 0, 0, 0});
  const Eigen::VectorXd z = rng.normal(n, 1);
  const double mean = z.mean();
  const double var = (z.array() - mean).square().sum() / (n - 1);
  // Mean ~ N(0, 1/n); variance ~ N(1, 2/n). A 5-sigma band cannot be hit by a correct generator
  // with this fixed seed (and the draws are deterministic), but is hit by any biased one.
  CHECK_THAT(mean, WithinAbs(0.0, 5 / std::sqrt(double(n))));
  CHECK_THAT(var, WithinAbs(1.0, 5 * std::sqrt(2.0 / n)));
  // Kolmogorov-Smirnov against Phi: sqrt(n) D_n < 1.95 is the 0.1% critical value.
  std::vector<double> s(z.data(), z.data() + n);
  std::sort(s.begin(), s.end());
  double d = 0;
  for (int i = 0; i < n; ++i) {
    const double cdf = 0.5 * std::erfc(-s[i] / std::sqrt(2.0));
    d = std::max({d, cdf - double(i) / n, double(i + 1) / n - cdf});
  }
  CHECK(std::sqrt(double(n)) * d < 1.95);
  // Fourth moment: E z^4 = 3, Var z^4 = 96.
  CHECK_THAT(z.array().pow(4).mean(), WithinAbs(3.0, 5 * std::sqrt(96.0 / n)));
}

TEST_CASE("different streams are uncorrelated", "[rng]") {
  const int n = 200000;
  CounterRng a(RngKey{5, 1, 0, 0}), b(RngKey{5, 2, 0, 0});
  const Eigen::VectorXd x = a.normal(n, 1), y = b.normal(n, 1);
  // Sample correlation of independent normals ~ N(0, 1/n).
  CHECK_THAT(x.dot(y) / n, WithinAbs(0.0, 5 / std::sqrt(double(n))));
  // Lag-1 autocorrelation within a stream, likewise.
  CHECK_THAT(x.head(n - 1).dot(x.tail(n - 1)) / n, WithinAbs(0.0, 5 / std::sqrt(double(n))));
}

TEST_CASE("uniforms and uniform integers are uniform", "[rng]") {
  CounterRng rng(RngKey{99, 0, 0, 0});
  const int n = 100000;
  const Eigen::MatrixXd u = rng.uniform(n, 1);
  CHECK(u.minCoeff() >= 0.0);
  CHECK(u.maxCoeff() < 1.0);
  CHECK_THAT(u.mean(), WithinAbs(0.5, 5 * std::sqrt(1.0 / 12 / n)));
  // Chi-square over 7 categories (6 degrees of freedom): 0.1% critical value 22.46.
  const int k = 7;
  std::vector<int> counts(k, 0);
  for (int i = 0; i < 70000; ++i) ++counts[rng.uniform_int(k)];
  double chi2 = 0;
  for (int c : counts) chi2 += (c - 10000.0) * (c - 10000.0) / 10000.0;
  CHECK(chi2 < 22.46);
  // std::shuffle works through the UniformRandomBitGenerator interface.
  std::vector<int> perm(20);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  CHECK(std::set<int>(perm.begin(), perm.end()).size() == 20);
  CHECK_THROWS_AS(rng.uniform_int(0), fvi::InvalidArgument);
}

TEST_CASE("a stream refuses to wrap its 32-bit block counter", "[rng]") {
  CounterRng rng(RngKey{1, 0, 0, 0}, 0xFFFFFFFFull);
  CHECK_NOTHROW(rng.normal());
  CHECK_THROWS_WITH(rng.normal(), Catch::Contains("stream exhausted"));
}
