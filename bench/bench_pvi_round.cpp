// Seconds per server round of PVI / FedGVI in the FashionMNIST setting (issue 5; spec 000 §5.5):
// the bnn_classifier model (784-200-10, mean-field, local reparameterisation) through the real
// engine (fvi::program::PviRounds: the silos on threads, messages packed as for the network), 3
// silos of 20,000 rows of random pixels and labels (the timing does not depend on the values),
// one epoch per client update in batches of 256, 10 draws, gce(0.8) and alpha_renyi(2.5), Adam.
//
// The machine's limit, measured in the same run: the matrix products one round needs (the counted
// flops of bench_bnn, for every batch of every silo) at the best dgemm / sgemm rate of this
// machine on both cores. A round cannot take less than that.
//
//   bench_pvi_round [rows per silo] [rounds]
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench_util.h"
#include "fashion_setting.h"
#include "fvi/program/allocator.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/program/threads.h"

extern "C" const fvi_model* fvi_model_bnn_classifier(void);

namespace {

constexpr Eigen::Index D = 784, H = 200, K = 10, S = 10, kBatch = 256, kSilos = 3;

bench::Data silo_data(Eigen::Index n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> pixel(0, 1);
  Eigen::MatrixXd x(n, D), y(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = pixel(rng);
  for (Eigen::Index i = 0; i < n; ++i) y(i) = double(1 + rng() % K);
  bench::Data data;
  data.add("D", Eigen::MatrixXd::Constant(1, 1, double(D)));
  data.add("H", Eigen::MatrixXd::Constant(1, 1, double(H)));
  data.add("K", Eigen::MatrixXd::Constant(1, 1, double(K)));
  data.add("N", Eigen::MatrixXd::Constant(1, 1, double(n)));
  data.add("x", x);
  data.add("y", y);
  return data;
}

}  // namespace

int main(int argc, char** argv) {
  fvi::program::keep_freed_memory();  // as the generated programs do
  const Eigen::Index n = argc > 1 ? std::atol(argv[1]) : 20000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (argc > 3 || n < kBatch || rounds < 1) {
    std::fprintf(stderr, "usage: bench_pvi_round [rows per silo >= %ld] [rounds >= 1]\n",
                 static_cast<long>(kBatch));
    return 2;
  }
  const fvi_model& model = *fvi_model_bnn_classifier();
  std::vector<bench::Data> silos;
  for (int k = 0; k < kSilos; ++k) silos.push_back(silo_data(n, 10 + k));
  bench::Data public_data;
  public_data.add("D", Eigen::MatrixXd::Constant(1, 1, double(D)));
  public_data.add("H", Eigen::MatrixXd::Constant(1, 1, double(H)));
  public_data.add("K", Eigen::MatrixXd::Constant(1, 1, double(K)));

  const double dpeak = bench::gemm_peak_gflops<double>(), speak = bench::gemm_peak_gflops<float>();
  const Eigen::Index batches = (n + kBatch - 1) / kBatch;
  // bench_bnn's count: layer 1 four products of 2 B D H, layer 2 three of 2 B H K per draw.
  const double flops = double(kSilos) * double(batches) * (4 * 2.0 * kBatch * D * H + 3 * 2.0 * kBatch * H * K * S);
  std::printf("bench_pvi_round: %ld silos x %ld rows, 784-200-10 mean-field BNN, 1 epoch per round, batch %ld, "
              "%ld draws, loss gce(0.8), divergence alpha_renyi(2.5), damping 1/3, Adam lr 0.002, schedule "
              "synchronous (silos on threads)\n",
              long(kSilos), long(n), long(kBatch), long(S));
  std::printf("  machine: best dgemm %.1f GFLOP/s, best sgemm %.1f GFLOP/s; one round's products: %.1f GFLOP\n", dpeak,
              speak, flops / 1e9);

  // As NAME-sim does: one BLAS thread per silo thread.
  fvi::program::set_blas_threads(1);
  for (bool float32 : {true, false}) {
    fvi::engine::PviOptions options = bench::fashion_pvi_options(kBatch, S, 1.0 / kSilos, float32);
    options.schedule = "synchronous", options.server_damping = false;
    using Q = fvi::MeanFieldGaussian<double>;
    fvi::engine::PviServer<Q> server(model, public_data.view(), options.seed);
    std::vector<std::unique_ptr<fvi::engine::PviClient<Q>>> clients;
    std::vector<std::unique_ptr<fvi::program::PviSiloEndpoint<Q>>> endpoints;
    std::vector<fvi::program::SiloEndpoint*> pointers;
    for (int k = 0; k < kSilos; ++k) {
      clients.push_back(std::make_unique<fvi::engine::PviClient<Q>>(model, silos[k].view(), k + 1, options));
      endpoints.push_back(std::make_unique<fvi::program::PviSiloEndpoint<Q>>(*clients.back()));
      pointers.push_back(endpoints.back().get());
    }
    fvi::program::InProcessTransport transport(pointers);
    fvi::program::PviRounds<Q> runner(server, transport, options);
    double best = 1e300;
    for (int r = 1; r <= rounds; ++r) best = std::min(best, bench::seconds([&] { runner.run_round(uint32_t(r)); }));
    const double limit = flops / ((float32 ? speak : dpeak) * 1e9);
    std::printf("  %s: %.2f s per round (best of %d), %.1f GFLOP/s; the products alone at the %s peak: %.2f s (%.0f%% "
                "of the round)\n",
                float32 ? "float32" : "double ", best, rounds, flops / best / 1e9, float32 ? "sgemm" : "dgemm", limit,
                100 * limit / best);
  }
  return 0;
}
