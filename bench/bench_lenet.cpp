// Benchmark (issue 30) of LeNet-5 (examples/fashion_bnn/lenet5.fvi: conv 1->6 5x5 pad 2, max pool,
// conv 6->16 5x5, max pool, dense 400-120-84-10) through its generated kernels as the engine runs
// them (fvi::engine::RowParallelFactor::loss_meanfield: the rows split between one kernel state
// per core), mean-field q, S = 4 draws, loss nll, float32 and double:
//
// (a) one batch of 64 rows, forward + backward: achieved GFLOP/s against the best sgemm / dgemm
//     measured in the same run. Counted flops are the products the computation needs, per draw:
//     forward 2 B (784*6*25 + 100*16*150 + 400*120 + 120*84 + 84*10); backward the first
//     convolution's weight adjoint once (its images are data) and every other layer's two
//     adjoints. No layer is locally reparameterised (a convolution's positions share weights; the
//     dense layers read sampled activations), so every product is per draw. im2col, pooling, the
//     activations and the noise are not counted.
// (b) one client epoch of a FashionMNIST silo: 20,000 rows in batches of 64, the kernels and the
//     loss of every batch (the optimiser's update of q's 123,412 numbers per batch is not
//     included: bench_bnn's (c) measures a whole client update).
//
//   bench_lenet [rows]
#include <cmath>
#include <cstdlib>

#include "bench_util.h"
#include "fvi/engine/row_parallel.h"
#include "fvi/loss/likelihood_loss.h"
#include "fvi/program/allocator.h"
#include "fvi/program/threads.h"

extern "C" const fvi_model* fvi_model_lenet5(void);

namespace {

constexpr Eigen::Index D = 784, K = 10, B = 64, S = 4;
constexpr Eigen::Index P = 6 * 25 + 6 + 16 * 150 + 16 + 400 * 120 + 120 + 120 * 84 + 84 + 84 * K + K;

double flops_per_batch(Eigen::Index rows) {
  const double conv1 = 784.0 * 6 * 25, rest = 100.0 * 16 * 150 + 400.0 * 120 + 120.0 * 84 + 84.0 * K;
  return 2.0 * double(rows) * double(S) * (conv1 + rest + conv1 + 2 * rest);
}

}  // namespace

int main(int argc, char** argv) {
  fvi::program::keep_freed_memory();  // as the generated programs do
  const Eigen::Index N = bench::size_argument(argc, argv, 1, 20000, 10'000'000, "[rows, default 20000]");
  bench::Data data = bench::random_images(N, D, K, 3);
  const fvi_data& view = data.view();
  const fvi_model* m = fvi_model_lenet5();
  const fvi::LossSpec nll = fvi::LossSpec::nll();

  const double dpeak = bench::gemm_peak_gflops<double>(), speak = bench::gemm_peak_gflops<float>();
  const int threads = fvi::program::machine_threads();
  std::printf("lenet5 (61,706 weights), mean-field, S = %ld draws, loss nll\n", long(S));
  std::printf("  machine: best dgemm %.1f GFLOP/s, best sgemm %.1f GFLOP/s (OpenBLAS, %d threads)\n", dpeak, speak,
              threads);

  fvi::program::set_blas_threads(1);
  auto pool = std::make_shared<fvi::engine::WorkerPool>(threads);
  const Eigen::VectorXd mean = 0.1 * Eigen::VectorXd::Random(P), sd = Eigen::VectorXd::Constant(P, 0.0316);
  for (bool float32 : {true, false}) {
    const auto precision = float32 ? fvi::engine::Precision::kFloat32 : fvi::engine::Precision::kFloat64;
    fvi::engine::RowParallelFactor factor(*m, bench::factor_index(m, FVI_LIKELIHOOD), view, precision, pool);
    const fvi::engine::GroupVectors<double> means{mean}, sds{sd};
    const fvi::engine::GroupVectors<float> means_f{mean.cast<float>()}, sds_f{sd.cast<float>()};
    uint64_t key = 1;
    auto batch = [&](int64_t begin, int64_t rows) {
      if (float32) factor.loss_meanfield(nll, begin, rows, means_f, sds_f, S, key++, 1.0, true);
      else factor.loss_meanfield(nll, begin, rows, means, sds, S, key++, 1.0, true);
    };
    const double peak = float32 ? speak : dpeak;
    const char* name = float32 ? "float32" : "double ";
    const double t = bench::best_seconds(10, [&] { batch(0, B); });
    const double gflops = flops_per_batch(B) / t / 1e9;
    std::printf("  (a) %s batch of %ld rows: %.2f ms forward + backward, %.2f GFLOP/s = %.1f%% of the best %s\n", name,
                long(B), 1e3 * t, gflops, 100 * gflops / peak, float32 ? "sgemm" : "dgemm");
    const double epoch = bench::best_seconds(2, [&] {
      for (int64_t begin = 0; begin < N; begin += B) batch(begin, std::min<int64_t>(B, N - begin));
    });
    std::printf("  (b) %s epoch of %ld rows in batches of %ld: %.2f s (%.2f GFLOP/s)\n", name, long(N), long(B), epoch,
                flops_per_batch(N) / epoch / 1e9);
  }
  return 0;
}
