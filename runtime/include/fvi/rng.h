#pragma once
// Counter-based random numbers whose draws depend only on (seed, party, round, stream, index).
//
// The generator is Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as
// 1, 2, 3", SC'11). A block of four 32-bit words is a pure function of a 128-bit counter and a
// 64-bit key; we use
//     key     = seed (64 bits)
//     counter = (block index, stream, round, party)   (32 bits each)
// so the mapping from (seed, party, round, stream, block) to bits is injective: two parties, two
// rounds or two streams never share a block, and a run restarted at round r reproduces the draws of
// round r without replaying rounds 0..r-1. Party 0 is the server, party k the k-th silo.
//
// Normal draws use Box-Muller on two 53-bit uniforms per block, so block b gives standard normals
// 2b and 2b+1 of its stream. fill_normal fills a matrix in column-major order starting at a fresh
// block, so a D x S matrix of draws equals the first D*S normals of the stream from that block on,
// whatever the matrix shape. Bit-for-bit equality across machines requires the same libm (log,
// sin, cos); within one build it is exact.
#include <array>
#include <cstdint>

#include <Eigen/Dense>

namespace fvi {

// One Philox4x32-10 block (Random123's philox4x32_R with R = 10).
std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> counter, std::array<std::uint32_t, 2> key);

// Well-known stream identifiers; engines may use any other value from kUserStream on.
namespace rng_stream {
constexpr std::uint32_t kGlobalNoise = 1;  // eps_G, drawn by the server (spec 002 §2.3, Alg. 1 step 1)
constexpr std::uint32_t kLocalNoise = 2;   // eps_{L_j}, drawn by silo j (Alg. 1 step 4)
constexpr std::uint32_t kMinibatch = 3;    // minibatch indices
constexpr std::uint32_t kInitialisation = 4;
constexpr std::uint32_t kAuxiliaryNoise = 5;  // tau_k behind silo k's auxiliary z_k (seed 004 Eq. 9-10)
constexpr std::uint32_t kJointNoise = 6;  // eps of a joint family across parties, drawn alike by every party (issue 36)
constexpr std::uint32_t kClientSampling = 7;  // the silos asked in a round (clients_per_round)
constexpr std::uint32_t kContextPoints = 8;  // a function-space prior's context points (seed 001 App. E.1)
constexpr std::uint32_t kUserStream = 1000;
}  // namespace rng_stream

struct RngKey {
  std::uint64_t seed = 0;
  std::uint32_t party = 0;
  std::uint32_t round = 0;
  std::uint32_t stream = 0;
};

// The b-th block of four 32-bit words of the stream `key`.
std::array<std::uint32_t, 4> rng_block(const RngKey& key, std::uint32_t block);

// The two standard normals of block b (Box-Muller).
std::array<double, 2> standard_normal_pair(const RngKey& key, std::uint32_t block);

// A stream of draws with a position. Satisfies UniformRandomBitGenerator (32-bit words), so it
// works with std::shuffle and friends. The position is (block, word within the block); a generator
// constructed with CounterRng(key, g.block()) continues exactly where g would after finishing its
// current block — this is how a checkpoint stores and resumes a stream.
class CounterRng {
 public:
  using result_type = std::uint32_t;

  explicit CounterRng(const RngKey& key, std::uint64_t first_block = 0);

  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return 0xFFFFFFFFu; }
  result_type operator()();  // next 32-bit word

  double uniform();                         // in [0, 1), 53 random bits, from a fresh block
  double normal();                          // one standard normal, from a fresh block
  std::uint64_t uniform_int(std::uint64_t n);  // uniform on {0, ..., n-1}, unbiased (rejection)

  // Standard normals in column-major order from a fresh block (ceil(size/2) blocks).
  void fill_normal(Eigen::Ref<Eigen::MatrixXd> out);
  void fill_normal(Eigen::Ref<Eigen::MatrixXf> out);
  Eigen::MatrixXd normal(Eigen::Index rows, Eigen::Index cols);
  // Uniforms on [0, 1) in column-major order, one per block word pair (2 per block).
  Eigen::MatrixXd uniform(Eigen::Index rows, Eigen::Index cols);

  const RngKey& key() const { return key_; }
  // The first block not yet (fully or partly) consumed.
  std::uint64_t block() const { return next_block_; }

 private:
  std::uint32_t take_block();  // returns the index of a fresh block and advances

  RngKey key_;
  std::uint64_t next_block_;
  std::array<std::uint32_t, 4> buffer_{};
  int buffered_ = 0;  // words of buffer_ not yet returned by operator()
};

}  // namespace fvi
