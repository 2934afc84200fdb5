// fvi/kernel/noise.h: the kernels' own noise. Its Philox blocks equal fvi::philox4x32_10 (the
// runtime's reference generator, itself pinned to Random123's test vectors in rng_test.cpp), its
// normals have mean 0 and variance 1 within Monte Carlo error, and element j of a stream is the
// same whichever range it is drawn in (so a minibatch's rows see the full evaluation's noise).
#include <catch2/catch.hpp>

#include <cmath>

#include "fvi/kernel/noise.h"
#include "fvi/rng.h"

using namespace fvi::kernel;

TEST_CASE("noise blocks are Philox4x32-10 of (index, stream, tag) under the key", "[kernel][noise]") {
  const uint64_t key = 0x0123456789ABCDEFull;
  // Consecutive blocks across a 32-bit boundary, then blocks gathered from anywhere.
  const uint64_t first = (uint64_t(7) << 32) + 0xFFFFFFF8u;
  uint64_t consecutive[noise_detail::kLanes], gathered[noise_detail::kLanes];
  for (int i = 0; i < noise_detail::kLanes; ++i) {
    consecutive[i] = first + uint64_t(i);
    gathered[i] = (uint64_t(i) * 0x9E3779B97F4A7C15ull) >> (i % 40);
  }
  auto check_lanes = [&](void (*lanes)(const uint64_t*, uint32_t, uint64_t, uint32_t[4][noise_detail::kLanes]),
                         const uint64_t* blocks) {
    uint32_t w[4][noise_detail::kLanes];
    lanes(blocks, 42, key, w);
    for (int i = 0; i < noise_detail::kLanes; ++i) {
      const uint64_t b = blocks[i];
      auto expected = fvi::philox4x32_10({uint32_t(b), uint32_t(b >> 32), 42u, noise_detail::kTag},
                                         {uint32_t(key), uint32_t(key >> 32)});
      for (int k = 0; k < 4; ++k) CHECK(w[k][i] == expected[k]);
    }
  };
  for (const uint64_t* blocks : {consecutive, gathered}) {
    check_lanes(noise_detail::philox_lanes, blocks);
    check_lanes(noise_detail::philox_lanes_portable, blocks);
#ifdef __AVX2__
    check_lanes(noise_detail::philox_lanes_avx2, blocks);
#endif
  }
}

TEST_CASE("noise is standard normal and does not depend on the range it is drawn in", "[kernel][noise]") {
  const int64_t n = 200000;
  std::vector<double> z(n);
  normal_range<double>(99, 3, 0, n, z.data());
  double mean = 0, m2 = 0, m4 = 0;
  for (double v : z) mean += v;
  mean /= n;
  for (double v : z) m2 += (v - mean) * (v - mean), m4 += std::pow(v - mean, 4);
  m2 /= n - 1;
  m4 /= n;
  // Standard errors of the mean (1/sqrt(n)), variance (sqrt(2/n)) and fourth moment (sqrt(96/n)).
  CHECK(std::abs(mean) <= 5 / std::sqrt(double(n)));
  CHECK(std::abs(m2 - 1) <= 5 * std::sqrt(2.0 / n));
  CHECK(std::abs(m4 - 3) <= 5 * std::sqrt(96.0 / n));
  // Any sub-range of the stream, starting anywhere, gives the same numbers.
  for (int64_t first : {1, 3, 63, 64, 65, 1001}) {
    std::vector<double> part(300);
    normal_range<double>(99, 3, first, 300, part.data());
    for (int i = 0; i < 300; ++i) CHECK(part[i] == z[first + i]);
  }
  // Another stream or key gives other numbers.
  std::vector<double> other(8);
  normal_range<double>(99, 4, 0, 8, other.data());
  CHECK(other[0] != z[0]);
  normal_range<double>(98, 3, 0, 8, other.data());
  CHECK(other[0] != z[0]);
  // A tensor's rows [b, b + r) of total T: element (r, c, s) is normal (s * cols + c) * T + b + r.
  Tensor<double> t = noise<double>(4, 2, 3, 99, 3, 5, 100);
  for (int s = 0; s < 3; ++s)
    for (int c = 0; c < 2; ++c)
      for (int r = 0; r < 4; ++r) CHECK(t.draw(s)(r, c) == z[(s * 2 + c) * 100 + 5 + r]);
  // Columns of a minibatch part that start and end inside blocks (their first and last blocks are
  // drawn in calls shared with other columns): every element is still its normal of the stream.
  for (Eigen::Index begin : {0, 1, 2, 3, 7}) {
    for (Eigen::Index rows : {1, 3, 126, 127, 128, 129}) {
      Tensor<double> u = noise<double>(rows, 7, 3, 99, 3, begin, 1000);
      int wrong = 0;
      for (int s = 0; s < 3; ++s)
        for (int c = 0; c < 7; ++c)
          for (Eigen::Index r = 0; r < rows; ++r) wrong += u.draw(s)(r, c) != z[(s * 7 + c) * 1000 + begin + r];
      INFO("rows " << begin << " .. " << begin + rows);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("noise is Box-Muller of the Philox words, computed again in double", "[kernel][noise]") {
  // Block b of (key, stream) gives normals 4b .. 4b + 3 from its words (w0, w1, w2, w3):
  // sqrt(-2 log u1) (cos, sin)(2 pi u2) of (w0, w1), then of (w2, w3), with u1 = (w + 1) 2^-32 and
  // u2 = w 2^-32 rounded to float as the stream defines them. The kernel computes in float: its
  // radius is within a few float ulps (6.66 x 3e-7) and its angle within 1e-6 rad (2 pi rounded
  // to float, the polynomials' 3e-8), so every normal is within 1e-5 of the double value; a wrong
  // quadrant or sign would be off by O(1).
  const uint64_t key = 0xFEEDFACE12345ull;
  const uint32_t stream = 7;
  const int64_t blocks = 5000;
  std::vector<double> z(4 * blocks);
  normal_range<double>(key, stream, 0, 4 * blocks, z.data());
  double worst = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    auto w = fvi::philox4x32_10({uint32_t(b), uint32_t(uint64_t(b) >> 32), stream, noise_detail::kTag},
                                {uint32_t(key), uint32_t(key >> 32)});
    for (int pair = 0; pair < 2; ++pair) {
      const double u1 = std::min(1.0f, (float(w[2 * pair]) + 1.0f) * 0x1p-32f);
      const double u2 = float(w[2 * pair + 1]) * 0x1p-32f;
      const double r = std::sqrt(-2 * std::log(u1)), theta = 2 * M_PI * u2;
      worst = std::max(worst, std::abs(z[4 * b + 2 * pair] - r * std::cos(theta)));
      worst = std::max(worst, std::abs(z[4 * b + 2 * pair + 1] - r * std::sin(theta)));
    }
  }
  INFO("largest difference " << worst);
  CHECK(worst <= 1e-5);
}
