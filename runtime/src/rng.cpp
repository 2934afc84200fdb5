#include "fvi/rng.h"

#include <cmath>
#include <string>

#include "fvi/error.h"

namespace fvi {
namespace {

constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u;  // Salmon et al. 2011, Philox4x32 multipliers
constexpr std::uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments
constexpr std::uint32_t kPhiloxW1 = 0xBB67AE85u;
constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kTwoPow53Inv = 1.0 / 9007199254740992.0;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}

inline std::array<std::uint32_t, 4> philox_round(const std::array<std::uint32_t, 4>& c,
                                                 const std::array<std::uint32_t, 2>& k) {
  std::uint32_t hi0, lo0, hi1, lo1;
  mulhilo(kPhiloxM0, c[0], hi0, lo0);
  mulhilo(kPhiloxM1, c[2], hi1, lo1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

// 53-bit uniform from two words: in [0, 1).
inline double uniform53(std::uint32_t a, std::uint32_t b) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(a >> 5) << 26) | (b >> 6);
  return static_cast<double>(bits) * kTwoPow53Inv;
}

// 53-bit uniform in (0, 1]: safe for log.
inline double uniform53_open0(std::uint32_t a, std::uint32_t b) {
  const std::uint64_t bits = (static_cast<std::uint64_t>(a >> 5) << 26) | (b >> 6);
  return static_cast<double>(bits + 1) * kTwoPow53Inv;
}

std::uint32_t checked_block(std::uint64_t block) {
  if (block > 0xFFFFFFFFull) {
    throw InvalidArgument("CounterRng: stream exhausted (more than 2^32 blocks drawn from one (seed, party, round, "
                          "stream); use another stream or round)");
  }
  return static_cast<std::uint32_t>(block);
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    counter = philox_round(counter, key);
  }
  return counter;
}

std::array<std::uint32_t, 4> rng_block(const RngKey& key, std::uint32_t block) {
  return philox4x32_10({block, key.stream, key.round, key.party},
                       {static_cast<std::uint32_t>(key.seed), static_cast<std::uint32_t>(key.seed >> 32)});
}

std::array<double, 2> standard_normal_pair(const RngKey& key, std::uint32_t block) {
  const auto w = rng_block(key, block);
  const double u1 = uniform53_open0(w[0], w[1]);
  const double u2 = uniform53(w[2], w[3]);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = kTwoPi * u2;
  return {r * std::cos(theta), r * std::sin(theta)};
}

CounterRng::CounterRng(const RngKey& key, std::uint64_t first_block) : key_(key), next_block_(first_block) {}

std::uint32_t CounterRng::take_block() {
  buffered_ = 0;
  const std::uint32_t b = checked_block(next_block_);
  ++next_block_;
  return b;
}

CounterRng::result_type CounterRng::operator()() {
  if (buffered_ == 0) {
    buffer_ = rng_block(key_, take_block());
    buffered_ = 4;
  }
  return buffer_[4 - buffered_--];
}

double CounterRng::uniform() {
  const auto w = rng_block(key_, take_block());
  return uniform53(w[0], w[1]);
}

double CounterRng::normal() { return standard_normal_pair(key_, take_block())[0]; }

std::uint64_t CounterRng::uniform_int(std::uint64_t n) {
  if (n == 0) throw InvalidArgument("CounterRng::uniform_int: n must be positive");
  // Reject the lowest (2^64 mod n) values of a 64-bit word; the rest splits evenly into n classes.
  const std::uint64_t threshold = (0 - n) % n;
  for (;;) {
    const std::uint64_t hi = (*this)();
    const std::uint64_t lo = (*this)();
    const std::uint64_t x = (hi << 32) | lo;
    if (x >= threshold) return x % n;
  }
}

namespace {
// Column-major fill of a possibly strided matrix, two normals per block.
template <typename Scalar>
void fill_normal_impl(Eigen::Ref<Eigen::Matrix<Scalar, Eigen::Dynamic, Eigen::Dynamic>> out, const RngKey& key,
                      std::uint64_t& next_block) {
  const Eigen::Index rows = out.rows(), n = out.size();
  if (n == 0) return;
  Scalar* data = out.data();
  const Eigen::Index stride = out.outerStride();
  Eigen::Index k = 0;
  while (k < n) {
    const auto z = standard_normal_pair(key, checked_block(next_block));
    ++next_block;
    for (int t = 0; t < 2 && k < n; ++t, ++k) {
      const Eigen::Index j = k / rows, i = k - j * rows;
      data[j * stride + i] = static_cast<Scalar>(z[t]);
    }
  }
}
}  // namespace

void CounterRng::fill_normal(Eigen::Ref<Eigen::MatrixXd> out) {
  buffered_ = 0;
  fill_normal_impl<double>(out, key_, next_block_);
}

void CounterRng::fill_normal(Eigen::Ref<Eigen::MatrixXf> out) {
  buffered_ = 0;
  fill_normal_impl<float>(out, key_, next_block_);
}

Eigen::MatrixXd CounterRng::normal(Eigen::Index rows, Eigen::Index cols) {
  Eigen::MatrixXd out(rows, cols);
  fill_normal(out);
  return out;
}

Eigen::MatrixXd CounterRng::uniform(Eigen::Index rows, Eigen::Index cols) {
  Eigen::MatrixXd out(rows, cols);
  const Eigen::Index n = out.size();
  Eigen::Index k = 0;
  while (k < n) {
    const auto w = rng_block(key_, take_block());
    out(k % rows, k / rows) = uniform53(w[0], w[1]);
    ++k;
    if (k < n) {
      out(k % rows, k / rows) = uniform53(w[2], w[3]);
      ++k;
    }
  }
  return out;
}

}  // namespace fvi
