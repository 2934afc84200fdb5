#pragma once
// Standard-normal noise drawn inside a kernel (forward_meanfield, docs/kernel-abi.md): the
// engine passes one 64-bit noise key per call and never sees the draws.
//
// Draw j of stream `stream` is a pure function of (key, stream, j), so the noise of an element
// does not depend on how the rows were batched: row r of a product's (rows x cols, S draws)
// noise is element j = (s * cols + c) * total_rows + r, whatever the minibatch. The generator is
// Philox4x32-10 (as fvi/rng.h, same constants; checked against fvi::philox4x32_10 in
// tests/runtime/kernel/noise_test.cpp) with
//     counter = (block index low 32 bits, block index high 32 bits, stream, 0x6E6F6973 "nois")
//     key     = the noise key (64 bits)
// and each block gives four normals by Box-Muller on two pairs of 32-bit uniforms (sin and cos by
// cos_sin_turns below):
//     u1 = (w0 + 1) 2^-32 in (0, 1],  u2 = w1 2^-32  (in float),  z0 = sqrt(-2 log u1) cos(2 pi u2),
//     z1 = sqrt(-2 log u1) sin(2 pi u2), and the same from (w2, w3).
// 32-bit uniforms bound |z| by sqrt(2 log 2^32) = 6.66: a tail of probability 3e-11 is missing,
// far below any Monte Carlo error. Philox runs 8 lanes to an AVX2 register where the machine has
// them, and the Box-Muller step uses Eigen's vectorised float log and one pass for sin and cos
// together.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

namespace noise_detail {

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // Philox4x32 multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
constexpr uint32_t kTag = 0x6E6F6973u;                    // counter word 3: "nois"
// Blocks per call: 32 lanes of 32-bit words are four AVX2 registers per Philox word, enough
// independent work to hide the multiplies' latency (16 lanes ran at a third of the speed).
constexpr int kLanes = 32;

// Philox4x32-10 of the counters (block[i], stream, kTag) for i < kLanes, into w[4][kLanes],
// lane by lane: the definition, and the path for machines without AVX2. GCC vectorises it poorly
// (it widens the 32 x 32 -> 64-bit products to 64-bit lanes): 2.2 ns a normal, against 0.9 for
// philox_lanes_avx2 below, of the 1.8 a normal_lanes call costs (bench/bench_noise.cpp). The
// lanes' blocks need not be consecutive: a call gathers the blocks that several short ranges need
// (NormalWriter).
inline void philox_lanes_portable(const uint64_t block[kLanes], uint32_t stream, uint64_t key, uint32_t w[4][kLanes]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int i = 0; i < kLanes; ++i) {
    const uint64_t b = block[i];
    c0[i] = static_cast<uint32_t>(b);
    c1[i] = static_cast<uint32_t>(b >> 32);
    c2[i] = stream;
    c3[i] = kTag;
  }
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    for (int i = 0; i < kLanes; ++i) {
      uint64_t p0 = uint64_t(c0[i]) * kM0, p1 = uint64_t(c2[i]) * kM1;
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[i] ^ k0;
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[i] ^ k1;
      c1[i] = static_cast<uint32_t>(p1);
      c3[i] = static_cast<uint32_t>(p0);
      c0[i] = n0;
      c2[i] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
  for (int i = 0; i < kLanes; ++i) w[0][i] = c0[i], w[1][i] = c1[i], w[2][i] = c2[i], w[3][i] = c3[i];
}

#ifdef __AVX2__
// The high and low 32 bits of a x m in each of 8 lanes: vpmuludq multiplies the even lanes, so
// the odd lanes are shifted down, multiplied, and the halves blended back into place.
inline __m256i mul_hi_lo(__m256i a, __m256i m, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// philox_lanes_portable, 8 lanes to a register (tests/runtime/kernel/noise_test.cpp checks both
// against fvi::philox4x32_10).
inline void philox_lanes_avx2(const uint64_t block[kLanes], uint32_t stream, uint64_t key, uint32_t w[4][kLanes]) {
  constexpr int kRegisters = kLanes / 8;
  __m256i c0[kRegisters], c1[kRegisters], c2[kRegisters], c3[kRegisters];
  for (int v = 0; v < kRegisters; ++v) {
    alignas(32) uint32_t low[8], high[8];
    for (int i = 0; i < 8; ++i) {
      const uint64_t b = block[8 * v + i];
      low[i] = static_cast<uint32_t>(b);
      high[i] = static_cast<uint32_t>(b >> 32);
    }
    c0[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(low));
    c1[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(high));
    c2[v] = _mm256_set1_epi32(static_cast<int>(stream));
    c3[v] = _mm256_set1_epi32(static_cast<int>(kTag));
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(kM0)), m1 = _mm256_set1_epi32(static_cast<int>(kM1));
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    const __m256i key0 = _mm256_set1_epi32(static_cast<int>(k0)), key1 = _mm256_set1_epi32(static_cast<int>(k1));
    for (int v = 0; v < kRegisters; ++v) {
      __m256i lo0, lo1;
      const __m256i hi0 = mul_hi_lo(c0[v], m0, lo0), hi1 = mul_hi_lo(c2[v], m1, lo1);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[v]), key0);
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[v]), key1);
      c1[v] = lo1;
      c3[v] = lo0;
      c0[v] = n0;
      c2[v] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
  for (int v = 0; v < kRegisters; ++v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w[0][8 * v]), c0[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w[1][8 * v]), c1[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w[2][8 * v]), c2[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w[3][8 * v]), c3[v]);
  }
}
#endif

inline void philox_lanes(const uint64_t block[kLanes], uint32_t stream, uint64_t key, uint32_t w[4][kLanes]) {
#ifdef __AVX2__
  philox_lanes_avx2(block, stream, key, w);
#else
  philox_lanes_portable(block, stream, key, w);
#endif
}

// cos(2 pi u) and sin(2 pi u) for u in [0, 1), 2 * kLanes of them, in one pass that GCC
// vectorises: u is reduced exactly to a number of quarter turns q (0..4) and a remainder
// f = u - q/4 in [-1/8, 1/8] (exact in float: Sterbenz), then the Taylor polynomials of sin and cos
// of x = 2 pi f, |x| <= pi/4, whose truncation (x^11/11!, x^10/10!) is below 3e-8, a quarter of
// float's ulp at 1; the quadrant rotates (cos x, sin x). Eigen's float sin and cos each reduce
// the angle again (about a third of the noise's cost).
inline void cos_sin_turns(const float* u, float* cos_out, float* sin_out) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: (v + kRound) - kRound rounds v to an integer
  for (int i = 0; i < 2 * kLanes; ++i) {
    const float q = (4.0f * u[i] + kRound) - kRound;
    const float x = 6.2831853f * (u[i] - 0.25f * q), x2 = x * x;
    const float sn = x * (1.0f + x2 * (-1.0f / 6 + x2 * (1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880)))));
    const float cs = 1.0f + x2 * (-0.5f + x2 * (1.0f / 24 + x2 * (-1.0f / 720 + x2 * (1.0f / 40320))));
    const int quadrant = int(q) & 3;  // (cos, sin) of x plus quadrant quarter turns
    cos_out[i] = quadrant == 0 ? cs : quadrant == 1 ? -sn : quadrant == 2 ? -cs : sn;
    sin_out[i] = quadrant == 0 ? sn : quadrant == 1 ? cs : quadrant == 2 ? -sn : -cs;
  }
}

// The normals 4 block[i] .. 4 block[i] + 3 of the stream into z[4 i .. 4 i + 3], i < kLanes.
// Box-Muller runs in float whatever T (Eigen vectorises float log, not double's; cos_sin_turns is
// float), and float resolution is far below Monte Carlo error. Every lane goes through the same
// vector instructions, so a block's normals do not depend on the lane or the call it is drawn in.
inline void normal_lanes(const uint64_t block[kLanes], uint32_t stream, uint64_t key, float* z) {
  uint32_t w[4][kLanes];
  philox_lanes(block, stream, key, w);
  using A = Eigen::Array<float, 2 * kLanes, 1>;
  A u1, u2;
  for (int i = 0; i < kLanes; ++i) {
    u1[i] = (float(w[0][i]) + 1.0f) * 0x1p-32f;
    u2[i] = float(w[1][i]) * 0x1p-32f;
    u1[kLanes + i] = (float(w[2][i]) + 1.0f) * 0x1p-32f;
    u2[kLanes + i] = float(w[3][i]) * 0x1p-32f;
  }
  const A r = (-2.0f * u1.min(1.0f).log()).sqrt();
  A c, s;
  cos_sin_turns(u2.data(), c.data(), s.data());
  c *= r;
  s *= r;
  // Block i's normals are (c[i], s[i], c[kLanes + i], s[kLanes + i]).
  for (int i = 0; i < kLanes; ++i) {
    z[4 * i] = c[i];
    z[4 * i + 1] = s[i];
    z[4 * i + 2] = c[kLanes + i];
    z[4 * i + 3] = s[kLanes + i];
  }
}

}  // namespace noise_detail

// Writes ranges of a stream's normals, kLanes blocks to a call. A range that does not start and
// end on a block boundary shares its first and last blocks' calls with other ranges' blocks
// instead of paying a call for a few normals: a minibatch part's 126 rows of a column are 32 or 33
// blocks, and drawn a column at a time they cost two calls half the time (a quarter of the
// network's noise).
template <class T>
class NormalWriter {
 public:
  NormalWriter(uint64_t key, uint32_t stream) : key_(key), stream_(stream) {}
  NormalWriter(const NormalWriter&) = delete;
  NormalWriter& operator=(const NormalWriter&) = delete;

  // Normals j = first .. first + n - 1 into out[0 .. n); written by the time flush() returns.
  void add(uint64_t first, int64_t n, T* out) {
    const uint64_t end = first + static_cast<uint64_t>(std::max<int64_t>(n, 0));
    for (uint64_t j = first; j < end;) {
      // The blocks from j's on, as many as the call has lanes left: one run of consecutive lanes.
      const uint64_t b = j / 4, wanted = (end + 3) / 4 - b;
      const int take = static_cast<int>(std::min<uint64_t>(wanted, noise_detail::kLanes - lanes_));
      const uint64_t stop = std::min(end, 4 * (b + static_cast<uint64_t>(take)));
      runs_[runs_count_++] = Run{out + (j - first), 4 * lanes_ + static_cast<int>(j - 4 * b), static_cast<int>(stop - j)};
      for (int i = 0; i < take; ++i) block_[lanes_ + i] = b + static_cast<uint64_t>(i);
      lanes_ += take;
      j = stop;
      if (lanes_ == noise_detail::kLanes) flush();
    }
  }

  void flush() {
    if (lanes_ == 0) return;
    for (int i = lanes_; i < noise_detail::kLanes; ++i) block_[i] = block_[0];  // idle lanes: any block
    float z[4 * noise_detail::kLanes];
    noise_detail::normal_lanes(block_, stream_, key_, z);
    for (int r = 0; r < runs_count_; ++r) {
      const Run& run = runs_[r];
      for (int t = 0; t < run.count; ++t) run.out[t] = T(z[run.from + t]);
    }
    lanes_ = runs_count_ = 0;
  }

 private:
  struct Run {
    T* out;
    int from, count;  // normals z[from .. from + count) of the call
  };
  uint64_t key_;
  uint32_t stream_;
  int lanes_ = 0, runs_count_ = 0;
  uint64_t block_[noise_detail::kLanes];
  Run runs_[noise_detail::kLanes];  // a run takes at least one lane
};

// Normals j = first .. first + n - 1 of (key, stream) into out[0 .. n).
template <class T>
void normal_range(uint64_t key, uint32_t stream, uint64_t first, int64_t n, T* out) {
  NormalWriter<T> writer(key, stream);
  writer.add(first, n, out);
  writer.flush();
}

// The noise of a (rows x cols, draws) value whose rows are rows [row_begin, row_begin + rows) of
// total_rows: element (r, c, s) is normal (s * cols + c) * total_rows + row_begin + r.
template <class T>
Tensor<T> noise(Eigen::Index rows, Eigen::Index cols, Eigen::Index draws, uint64_t key, uint32_t stream,
                Eigen::Index row_begin, Eigen::Index total_rows) {
  if (row_begin < 0 || row_begin + rows > total_rows) throw ShapeError("noise rows outside the data's rows");
  Tensor<T> out = Tensor<T>::uninitialized(rows, cols, draws);
  NormalWriter<T> writer(key, stream);
  for (Eigen::Index col = 0; col < cols * draws; ++col)
    writer.add(static_cast<uint64_t>(col * total_rows + row_begin), rows, out.m.col(col).data());
  writer.flush();
  return out;
}

}  // namespace fvi::kernel
