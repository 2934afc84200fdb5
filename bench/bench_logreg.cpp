// Benchmark (issue 3): logistic regression log density and gradient through the generated kernels
// of examples/acceptance/robust_logreg.fvi (y ~ bernoulli_logit(x * w + b)), N = 100,000 rows,
// D = 100, S = 16 draws: one forward (per-row log densities for every draw) and one backward
// (gradient of their sum with respect to the 101 x 16 draws) over all rows, through the C ABI.
//
// Achieved bandwidth counts the bytes the computation cannot avoid: x read once by each pass
// (forward and backward are separate calls), y, the N x S output written, and the N x S seed read.
// It is printed beside a STREAM-style triad measured in the same run (target: at least 50%), and
// beside the ceiling the two matrix products (x w forward, x' g backward: 2 N D S flops each) put
// on it at the best dgemm / sgemm rate of the same run: no kernel can beat that rate.
//
// A second figure runs the same forward + backward as the engine does on a silo
// (fvi::engine::RowParallelFactor::loss, the negative log likelihood): the rows split between one
// kernel state per core, each part's products single-threaded, the parts' gradients summed; and
// the mean-field pass (forward_meanfield / backward_meanfield, S = 16 draws) over every row, split
// the same way.
//
// Each figure is measured for the generated C++ kernels, the graph backend's and the LLVM
// backend's (issue 28: at least 0.9x as fast as the C++), in the same run, the three timed in
// turn, and their speeds against the C++'s printed.
//
//   bench_logreg [N D S]
#include <cstdlib>
#include <memory>
#include <random>

#include "bench_util.h"
#include "kernel_tables.h"
#include "fvi/engine/row_parallel.h"
#include "fvi/program/allocator.h"
#include "fvi/program/threads.h"

extern "C" const fvi_model* fvi_model_robust_logreg(void);

namespace {

struct Result {
  double seconds, forward, gbs;
};

// One likelihood state of a table, bound to the data, with its inputs and outputs.
struct Likelihood {
  Likelihood(const fvi_model* model, const fvi_data& data, Eigen::Index N, Eigen::Index D, Eigen::Index S, bool float32)
      : m(model), theta(0.1 * Eigen::MatrixXd::Random(D + 1, S)), grad(D + 1, S), seed(Eigen::MatrixXd::Ones(N, S)) {
    fvi_error error{};
    const int lik = bench::factor_index(m, FVI_LIKELIHOOD);
    state = float32 ? m->create_float32(lik, &data, &error) : m->create(lik, &data, &error);
    if (!state) bench::check(1, error, "create");
  }
  ~Likelihood() { m->destroy(state); }
  Likelihood(const Likelihood&) = delete;
  Likelihood& operator=(const Likelihood&) = delete;
  void forward() {
    fvi_tensor in{theta.data(), theta.rows(), 1, theta.cols()}, out{};
    fvi_error error{};
    bench::check(m->forward(state, 0, -1, &in, &out, &error), error, "forward");
  }
  void backward() {
    fvi_tensor g{grad.data(), grad.rows(), 1, grad.cols()}, sd{seed.data(), seed.rows(), 1, seed.cols()};
    const fvi_tensor* seeds[2] = {&sd, nullptr};
    fvi_error error{};
    bench::check(m->backward(state, seeds, &g, &error), error, "backward");
  }
  const fvi_model* m;
  void* state = nullptr;
  Eigen::MatrixXd theta, grad, seed;
};

// One forward and one backward over all rows for every table, the tables timed in turn.
std::vector<Result> run(const std::vector<const fvi_model*>& tables, const fvi_data& data, Eigen::Index N,
                        Eigen::Index D, Eigen::Index S, bool float32, double x_bytes) {
  std::vector<std::unique_ptr<Likelihood>> states;
  std::vector<std::function<void()>> forwards, backwards;
  for (const fvi_model* m : tables) {
    states.push_back(std::make_unique<Likelihood>(m, data, N, D, S, float32));
    Likelihood* l = states.back().get();
    forwards.push_back([l] { l->forward(); });
    backwards.push_back([l] { l->backward(); });
  }
  const std::vector<double> forward = bench::best_seconds_interleaved(10, forwards);
  const std::vector<double> backward = bench::best_seconds_interleaved(10, backwards);
  std::vector<Result> out;
  for (size_t i = 0; i < tables.size(); ++i) {
    const double t = forward[i] + backward[i];
    const double bytes = 2 * x_bytes + double(N) * 8 + 2.0 * double(N * S) * 8;
    out.push_back({t, forward[i], bytes / t / 1e9});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  fvi::program::keep_freed_memory();  // as the programs do
  const char* usage = "[rows, default 100000] [columns, default 100] [draws, default 16]";
  Eigen::Index N = bench::size_argument(argc, argv, 1, 100000, 100'000'000, usage),
               D = bench::size_argument(argc, argv, 2, 100, 100'000, usage),
               S = bench::size_argument(argc, argv, 3, 16, 100'000, usage);
  if (N > 1'000'000'000 / D) {
    std::fprintf(stderr, "%s: rows x columns above 10^9 values\n", argv[0]);
    return 2;
  }
  std::mt19937 rng(1);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(N, D), y(N, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (Eigen::Index i = 0; i < N; ++i) y(i) = double(rng() % 2);
  bench::Data data;
  data.add("D", Eigen::MatrixXd::Constant(1, 1, double(D)));
  data.add("N", Eigen::MatrixXd::Constant(1, 1, double(N)));
  data.add("x", x);
  data.add("y", y);
  const fvi_data& view = data.view();
  const bench::KernelTables kernels =
      bench::kernel_tables(fvi_model_robust_logreg(), FVI_SOURCE_DIR "/examples/acceptance/robust_logreg.fvi");

  double triad1 = bench::triad_gbs(1), triad2 = bench::triad_gbs(2);
  double triad = std::max(triad1, triad2);
  double dpeak = bench::gemm_peak_gflops<double>(), speak = bench::gemm_peak_gflops<float>();
  std::printf("logistic regression log density + gradient, N = %ld, D = %ld, S = %ld draws\n", long(N), long(D), long(S));
  std::printf("  machine: STREAM triad %.1f GB/s (1 thread %.1f, 2 threads %.1f); best dgemm %.1f, sgemm %.1f GFLOP/s\n",
              triad, triad1, triad2, dpeak, speak);
  const double product_flops = 2 * 2.0 * double(N) * double(D) * double(S);
  // The two products as OpenBLAS runs them at this shape (tall and 16 wide), outside any kernel.
  auto products_seconds = [&](auto scalar) {
    using M = Eigen::Matrix<decltype(scalar), Eigen::Dynamic, Eigen::Dynamic>;
    M xs = x.cast<decltype(scalar)>(), w = M::Random(D, S), g = M::Random(N, S), out(N, S), gw(D, S);
    return bench::best_seconds(5, [&] { out.noalias() = xs * w; }) + bench::best_seconds(5, [&] { gw.noalias() = xs.transpose() * g; });
  };
  auto report = [&](const char* what, const Result& r, double peak, double products, const char* note) {
    double floor = product_flops / (peak * 1e9), bytes = r.gbs * r.seconds;  // GB moved
    std::printf("%s: %.2f ms per forward + backward (forward %.2f ms), %.1f GB/s = %.0f%% of the triad%s\n", what,
                1e3 * r.seconds, 1e3 * r.forward, r.gbs, 100 * r.gbs / triad, note);
    std::printf("           the products alone take >= %.2f ms at the best gemm rate (ceiling %.0f%% of the triad), "
                "%.2f ms as OpenBLAS runs them at this shape (ceiling %.1f GB/s = %.0f%%)\n",
                1e3 * floor, 100 * bytes / floor / triad, 1e3 * products, bytes / products, 100 * bytes / products / triad);
  };
  std::vector<const char*> names;
  std::vector<const fvi_model*> tables;
  for (const auto& [backend, m] : kernels.tables) names.push_back(backend), tables.push_back(m);
  for (bool float32 : {false, true}) {
    const std::vector<Result> results = run(tables, view, N, D, S, float32, double(N * D) * (float32 ? 4 : 8));
    const double products = float32 ? products_seconds(0.0f) : products_seconds(0.0);
    std::vector<double> times;
    for (size_t i = 0; i < tables.size(); ++i) {
      std::printf("  %s, %s", names[i], float32 ? "float32" : "double");
      report("", results[i], float32 ? speak : dpeak, products, float32 ? " (x held as float)" : "");
      times.push_back(results[i].seconds);
    }
    std::printf("  speed against the generated C++ (timed in turn): %s\n",
                bench::speeds_against_first(names, times).c_str());
  }

  const int threads = fvi::program::machine_threads();
  fvi::program::set_blas_threads(1);
  auto pool = std::make_shared<fvi::engine::WorkerPool>(threads);
  for (bool float32 : {false, true}) {
    const auto precision = float32 ? fvi::engine::Precision::kFloat32 : fvi::engine::Precision::kFloat64;
    std::vector<std::unique_ptr<fvi::engine::RowParallelFactor>> factors;
    for (const fvi_model* m : tables)
      factors.push_back(std::make_unique<fvi::engine::RowParallelFactor>(*m, bench::factor_index(m, FVI_LIKELIHOOD),
                                                                         view, precision, pool));
    const std::vector<Eigen::MatrixXd> theta{0.1 * Eigen::MatrixXd::Random(D + 1, S)};
    // The mean-field pass (local reparameterisation: x mu and x^2 sd^2, then the noise) over every
    // row, as a full-batch PVI client runs it. Not a target: x^2 is bound once with the data.
    // q as the client keeps it: in float for float32.
    const fvi::engine::GroupVectors<double> means{0.1 * Eigen::VectorXd::Random(D + 1)};
    const fvi::engine::GroupVectors<double> sds{Eigen::VectorXd::Constant(D + 1, 0.05)};
    const fvi::engine::GroupVectors<float> means_f{means[0].cast<float>()}, sds_f{sds[0].cast<float>()};
    uint64_t key = 1;
    std::vector<std::function<void()>> losses, meanfield;
    for (auto& factor : factors) {
      fvi::engine::RowParallelFactor* f = factor.get();
      losses.push_back([&theta, f] { f->loss(fvi::LossSpec::nll(), 0, -1, theta, 1.0, true); });
      meanfield.push_back([&, f] {
        if (float32) f->loss_meanfield(fvi::LossSpec::nll(), 0, -1, means_f, sds_f, S, key++, 1.0, true);
        else f->loss_meanfield(fvi::LossSpec::nll(), 0, -1, means, sds, S, key++, 1.0, true);
      });
    }
    const std::vector<double> t = bench::best_seconds_interleaved(10, losses);
    const std::vector<double> tm = bench::best_seconds_interleaved(10, meanfield);
    for (size_t i = 0; i < tables.size(); ++i) {
      const double x_bytes = double(N * D) * (float32 ? 4 : 8);
      const double gbs = (2 * x_bytes + double(N) * 8 + 2.0 * double(N * S) * 8) / t[i] / 1e9;
      std::printf("  %s, %s, rows split between %d threads (RowParallelFactor::loss): %.2f ms per forward + backward, "
                  "%.1f GB/s = %.0f%% of the triad\n", names[i], float32 ? "float32" : "double ", threads, 1e3 * t[i],
                  gbs, 100 * gbs / triad);
    }
    std::printf("  speed against the generated C++ (timed in turn): %s\n", bench::speeds_against_first(names, t).c_str());
    for (size_t i = 0; i < tables.size(); ++i)
      std::printf("  %s, %s, mean-field pass over every row, rows split the same way "
                  "(RowParallelFactor::loss_meanfield): %.2f ms per forward + backward\n",
                  names[i], float32 ? "float32" : "double ", 1e3 * tm[i]);
    std::printf("  speed against the generated C++ (timed in turn): %s\n", bench::speeds_against_first(names, tm).c_str());
  }
  return 0;
}
