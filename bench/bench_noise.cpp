// Benchmark of the kernels' standard-normal noise (fvi/kernel/noise.h), the figures its comments
// and bench/README.md quote: nanoseconds a normal
//   - Philox4x32-10 alone, 32 lanes a call: the AVX2 path the kernels use and the portable one;
//   - one call of normal_lanes (Philox, then Box-Muller in float): 128 normals;
//   - noise<float>() of a minibatch part as bnn_classifier draws it (126 or 128 rows x 200
//     columns x 10 draws of a 20,000-row column), rows starting on and off a Philox block.
// Beside them, the machine's limit for writing them: a float a normal at the STREAM-style triad's
// rate measured in the same run (the noise is computed, not moved: it is far from that limit).
// Each figure is the best of many repeats, on one thread.
//
//   bench_noise
#include <cstdio>

#include "bench_util.h"
#include "fvi/kernel/noise.h"

namespace {

using namespace fvi::kernel::noise_detail;

constexpr int kCalls = 10000;  // calls of kLanes blocks (4 kLanes normals each) a repeat

template <class Philox>
double philox_ns(Philox philox) {
  uint64_t block[kLanes];
  uint32_t w[4][kLanes];
  volatile uint32_t sink = 0;
  const double t = bench::best_seconds(20, [&] {
    for (int c = 0; c < kCalls; ++c) {
      for (int i = 0; i < kLanes; ++i) block[i] = uint64_t(c) * kLanes + uint64_t(i);
      philox(block, 3u, 7u, w);
      sink = sink + w[1][5];
    }
  });
  return 1e9 * t / (double(kCalls) * 4 * kLanes);
}

double normal_lanes_ns() {
  uint64_t block[kLanes];
  float z[4 * kLanes];
  volatile float sink = 0;
  const double t = bench::best_seconds(20, [&] {
    for (int c = 0; c < kCalls; ++c) {
      for (int i = 0; i < kLanes; ++i) block[i] = uint64_t(c) * kLanes + uint64_t(i);
      normal_lanes(block, 3u, 7u, z);
      sink = sink + z[5];
    }
  });
  return 1e9 * t / (double(kCalls) * 4 * kLanes);
}

// noise<float> of `rows` x 200 x 10 starting at row `first` of 20,000 (a part of a minibatch).
double part_ns(Eigen::Index rows, Eigen::Index first) {
  volatile float sink = 0;
  uint64_t key = 1;
  const double t = bench::best_seconds(200, [&] {
    const auto z = fvi::kernel::noise<float>(rows, 200, 10, key++, 3u, first, 20000);
    sink = sink + z.m(0, 0);
  });
  return 1e9 * t / double(rows * 200 * 10);
}

}  // namespace

int main() {
  const double triad = bench::triad_gbs(1);
  std::printf("standard-normal noise (fvi/kernel/noise.h), one thread\n");
  std::printf("  machine: STREAM triad %.1f GB/s on one thread: writing a float takes %.3f ns at that rate\n", triad,
              4.0 / triad);
#ifdef __AVX2__
  std::printf("  Philox4x32-10, AVX2 (the kernels' path): %.3f ns a normal\n", philox_ns(philox_lanes_avx2));
#endif
  std::printf("  Philox4x32-10, portable:                 %.3f ns a normal\n", philox_ns(philox_lanes_portable));
  std::printf("  normal_lanes (Philox + Box-Muller):      %.3f ns a normal\n", normal_lanes_ns());
  for (const auto& [rows, first] : {std::pair<Eigen::Index, Eigen::Index>{128, 256}, {126, 256}, {126, 257}, {126, 259}})
    std::printf("  noise<float>, %ld rows from row %ld, 200 columns, 10 draws: %.3f ns a normal\n", long(rows),
                long(first), part_ns(rows, first));
  return 0;
}
