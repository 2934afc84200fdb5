#pragma once
// What every benchmark here shares: timing, the machine's own limits measured in the same run
// (a STREAM-style triad for memory bandwidth, the best dgemm / sgemm for arithmetic), and the
// C ABI plumbing for generated kernels.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Dense>

#include "fvi/kernel/abi.h"

namespace bench {

inline double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The best of `repeats` timings (after one warm-up): the figure least disturbed by other work on
// a shared machine.
inline double best_seconds(int repeats, const std::function<void()>& f) {
  f();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) best = std::min(best, seconds(f));
  return best;
}

// The best timing of each of `fs` over `repeats` rounds, each round running them in turn (after one
// warm-up of each): a machine whose speed drifts during the call slows them alike, so their ratios
// hold where figures taken one after the other would not (the backends' side-by-side figures).
inline std::vector<double> best_seconds_interleaved(int repeats, const std::vector<std::function<void()>>& fs) {
  for (const auto& f : fs) f();
  std::vector<double> best(fs.size(), 1e300);
  for (int r = 0; r < repeats; ++r)
    for (size_t i = 0; i < fs.size(); ++i) best[i] = std::min(best[i], seconds(fs[i]));
  return best;
}

// "graph 0.98x, LLVM 1.05x": each table's speed against the first's (the generated C++), from
// their seconds.
inline std::string speeds_against_first(const std::vector<const char*>& names, const std::vector<double>& seconds) {
  std::string out;
  for (size_t i = 1; i < names.size(); ++i) {
    char figure[96];
    std::snprintf(figure, sizeof figure, "%s%s %.2fx", i > 1 ? ", " : "", names[i], seconds[0] / seconds[i]);
    out += figure;
  }
  return out;
}

// STREAM triad a = b + s c over arrays far larger than the last-level cache, on `threads`
// threads (each its own contiguous part): bytes moved / time, counting 3 x 8 bytes per element
// as STREAM does. Returns GB/s.
inline double triad_gbs(int threads, Eigen::Index n = 20'000'000) {
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const double s = 3.0;
  auto part = [&](int t) {
    Eigen::Index lo = n * t / threads, hi = n * (t + 1) / threads;
    for (Eigen::Index i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
  };
  double t = best_seconds(5, [&] {
    std::vector<std::thread> pool;
    for (int k = 1; k < threads; ++k) pool.emplace_back(part, k);
    part(0);
    for (auto& th : pool) th.join();
  });
  volatile double sink = a[n / 2];
  (void)sink;
  return 3.0 * 8.0 * double(n) / t / 1e9;
}

// The best matrix-product rate (GFLOP/s, 2 n^3 flops) over a few square sizes, through Eigen
// with EIGEN_USE_BLAS, i.e. OpenBLAS with its own threads: the arithmetic limit the kernels'
// products can reach.
template <class T>
double gemm_peak_gflops() {
  double best = 0;
  for (int n : {256, 512, 1024, 2048}) {
    using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
    M a = M::Random(n, n), b = M::Random(n, n), c(n, n);
    double t = best_seconds(n >= 2048 ? 2 : 5, [&] { c.noalias() = a * b; });
    best = std::max(best, 2.0 * double(n) * n * n / t / 1e9);
  }
  return best;
}

// A party's data for the ABI: names and tensors (ints as whole-number doubles).
struct Data {
  void add(const std::string& name, Eigen::MatrixXd value) {
    names.push_back(name);
    values.push_back(std::move(value));
  }
  const Eigen::MatrixXd& value(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return values[i];
    throw std::invalid_argument("no data variable " + name);
  }
  const fvi_data& view() {
    pointers.clear();
    tensors.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      pointers.push_back(names[i].c_str());
      tensors.push_back(fvi_tensor{values[i].data(), values[i].rows(), values[i].cols(), 1});
    }
    data = fvi_data{static_cast<int>(names.size()), pointers.data(), tensors.data()};
    return data;
  }
  std::vector<std::string> names;
  std::vector<Eigen::MatrixXd> values;
  std::vector<const char*> pointers;
  std::vector<fvi_tensor> tensors;
  fvi_data data{};
};

// N images of D uniform pixels in [0, 1) (pixels / 255) as `x`, labels uniform on 1..K (the
// models' categorical runs over 1..K) as `y`, and the sizes D, K, N, for a classifier's kernels.
inline Data random_images(Eigen::Index N, Eigen::Index D, Eigen::Index K, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> pixel(0, 1);
  Eigen::MatrixXd x(N, D), y(N, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = pixel(rng);
  for (Eigen::Index i = 0; i < N; ++i) y(i) = double(rng() % K + 1);
  Data data;
  data.add("D", Eigen::MatrixXd::Constant(1, 1, double(D)));
  data.add("K", Eigen::MatrixXd::Constant(1, 1, double(K)));
  data.add("N", Eigen::MatrixXd::Constant(1, 1, double(N)));
  data.add("x", std::move(x));
  data.add("y", std::move(y));
  return data;
}

// Argument `i` (from 1) of the command line as a size in [1, limit], or `fallback` when it is not
// given; anything else (--help included) prints `usage` and exits.
inline Eigen::Index size_argument(int argc, char** argv, int i, Eigen::Index fallback, Eigen::Index limit,
                                  const char* usage) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf("usage: %s %s\n", argv[0], usage);
    std::exit(0);
  }
  if (argc <= i) return fallback;
  const std::string text = argv[i];
  long long value = 0;
  const bool digits = !text.empty() && text.size() <= 12 &&
                      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits) value = std::stoll(text);
  if (!digits || value < 1 || value > limit) {
    std::fprintf(stderr, "%s: argument %d, '%s', is not a whole number from 1 to %lld\nusage: %s %s\n", argv[0], i,
                 text.c_str(), static_cast<long long>(limit), argv[0], usage);
    std::exit(2);
  }
  return Eigen::Index(value);
}

inline void check(int status, const fvi_error& error, const char* what) {
  if (status != 0) {
    std::fprintf(stderr, "%s failed: %s\n", what, error.message);
    std::exit(1);
  }
}

inline int factor_index(const fvi_model* m, int kind) {
  for (int f = 0; f < m->factor_count; ++f)
    if (m->factors[f].kind == kind) return f;
  return -1;
}

}  // namespace bench
