// A silo's threads (fvi/engine/worker_pool.h, fvi/engine/row_parallel.h): the pool runs every
// task once and hands back failures; a block of rows split between kernel states gives one call's
// loss and gradients, the parts' sums differing only by the order of additions; and a PVI client
// update on two threads equals the update on one.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "fvi/engine/factor_loss.h"
#include "fvi/engine/pvi.h"
#include "fvi/engine/row_parallel.h"
#include "fvi/engine/worker_pool.h"
#include "abi_data.h"

extern "C" const fvi_model* fvi_model_robust_logreg(void);

namespace {

using fvi::engine::BoundFactor;
using fvi::engine::RowParallelFactor;
using fvi::engine::WorkerPool;
using fvic::test::Data;
using fvic::test::factor_named;
using fvic::test::logreg_data;

// Summing n terms in another order moves the sum by at most about n eps times the sum of their
// magnitudes; `scale` is that magnitude (the loss of a row is O(1) here, its gradient O(|x|)).
void check_close(double a, double b, double n, double scale) {
  CHECK(std::abs(a - b) <= 4 * n * 2.2e-16 * scale);
}

// The client of the PVI tests below: alpha-Renyi(1.5) to the cavity, two epochs of 3 minibatches
// of 100 rows (each split in two parts of 50 rows on two threads), 4 draws.
fvi::engine::PviOptions small_pvi_options() {
  fvi::engine::PviOptions options;
  options.divergence = {fvi::engine::DivergenceKind::kAlphaRenyi, 1.5};
  options.epochs = 2;
  options.batch_size = 100;
  options.mc_samples = 4;
  return options;
}

}  // namespace

TEST_CASE("a worker pool runs each task once, on its own thread, and hands back the first failure",
          "[engine][threads]") {
  WorkerPool pool(3);
  REQUIRE(pool.size() == 3);
  for (int round = 0; round < 50; ++round) {
    std::vector<int> runs(3, 0);
    std::vector<std::thread::id> ids(3);
    pool.run([&](int i) {
      ++runs[size_t(i)];
      ids[size_t(i)] = std::this_thread::get_id();
    });
    CHECK(runs == std::vector<int>{1, 1, 1});
    CHECK(ids[0] == std::this_thread::get_id());  // task 0 runs on the caller
    CHECK(std::set<std::thread::id>(ids.begin(), ids.end()).size() == 3);
  }
  // Tasks 1 and 2 throw: the lowest-numbered failure comes back, after every task has ended.
  std::atomic<int> finished{0};
  try {
    pool.run([&](int i) {
      finished++;
      if (i > 0) throw std::runtime_error("task " + std::to_string(i));
    });
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "task 1");
  }
  CHECK(finished == 3);
  // The pool still works after a failure; a pool of one runs inline.
  int sum = 0;
  pool.run([&](int i) {
    if (i == 0) sum += 1;
  });
  CHECK(sum == 1);
  WorkerPool one(1);
  std::thread::id id;
  one.run([&](int) { id = std::this_thread::get_id(); });
  CHECK(id == std::this_thread::get_id());
}

TEST_CASE("a worker pool hands over every fork, back to back and after blocking", "[engine][threads]") {
  // Workers wait for the next fork by spinning, then block once the pool has been idle for
  // kSpin: forks back to back (every handover by spinning), and forks after idling past kSpin
  // (every handover by the condition variable), each run exactly once by every worker.
  WorkerPool pool(2);
  std::vector<long> runs(2, 0);
  const auto fork = [&] { pool.run([&](int i) { ++runs[size_t(i)]; }); };
  for (int k = 0; k < 20000; ++k) fork();
  CHECK(runs == std::vector<long>{20000, 20000});
  for (int k = 0; k < 5; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // 6 x kSpin: the worker blocks
    fork();
  }
  CHECK(runs == std::vector<long>{20005, 20005});
}

TEST_CASE("rows split between kernel states give one call's loss and gradients, to rounding", "[engine][threads]") {
  std::mt19937_64 rng(21);
  const int n = 300, d = 3, S = 4;
  Data data = logreg_data(n, d, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  const int lik = factor_named(model, "likelihood_y");
  BoundFactor one(model, lik, data.abi());
  auto pool = std::make_shared<WorkerPool>(3);
  RowParallelFactor split(model, lik, data.abi(), fvi::engine::Precision::kFloat64, pool);
  REQUIRE(split.rows() == n);
  Eigen::VectorXd mean(d + 1), sd(d + 1);
  std::normal_distribution<double> normal;
  for (int i = 0; i <= d; ++i) mean[i] = normal(rng), sd[i] = 0.2 + 0.3 * std::abs(normal(rng));
  Eigen::MatrixXd theta(d + 1, S);
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = normal(rng);
  // (begin, count): three parts, two parts (70 rows: at least 32 per part), one part (40 rows),
  // and all rows (count < 0).
  const std::vector<std::pair<int64_t, int64_t>> blocks{{10, 250}, {5, 70}, {100, 40}, {0, -1}};
  for (const fvi::LossSpec& loss : {fvi::LossSpec::nll(), fvi::LossSpec::generalized_cross_entropy(0.8),
                                    fvi::LossSpec::density_power(0.7)}) {
    for (const auto& [begin, count] : blocks) {
      INFO(loss.name() << ", rows " << begin << " + " << count);
      const double rows = double(count < 0 ? n : count);
      const double scale = 1.3;
      const auto a = fvi::engine::factor_loss_meanfield<double>(one, loss, begin, count, {mean}, {sd}, S, 99, scale, true);
      const auto b = split.loss_meanfield<double>(loss, begin, count, {mean}, {sd}, S, 99, scale, true);
      check_close(a.value, b.value, rows, scale * rows * 10);
      for (int i = 0; i <= d; ++i) {
        check_close(a.gradient.d_means[0][i], b.gradient.d_means[0][i], rows, scale * rows * 10);
        check_close(a.gradient.d_sds[0][i], b.gradient.d_sds[0][i], rows, scale * rows * 10);
      }
      if (count == 40) CHECK(a.value == b.value);  // not split: the same call
      // Unsummed, the parts' gradients add up to the summed one (the parts: 3, 2, 1, 3).
      const auto u = split.loss_meanfield<double>(loss, begin, count, {mean}, {sd}, S, 99, scale, true,
                                                  RowParallelFactor::Parts::kUnsummed);
      CHECK(u.other_parts.size() == (count == 250 || count < 0 ? 2u : count == 70 ? 1u : 0u));
      Eigen::VectorXd um = u.gradient.d_means[0], us = u.gradient.d_sds[0];
      for (const auto& part : u.other_parts) um += part.d_means[0], us += part.d_sds[0];
      for (int i = 0; i <= d; ++i) {
        CHECK(um[i] == b.gradient.d_means[0][i]);  // the same parts, added in the same order
        CHECK(us[i] == b.gradient.d_sds[0][i]);
      }
      const auto fa = fvi::engine::factor_loss(one, loss, begin, count, {theta}, scale, true);
      const auto fb = split.loss(loss, begin, count, {theta}, scale, true);
      check_close(fa.value, fb.value, rows, scale * rows * 10);
      for (Eigen::Index i = 0; i < theta.size(); ++i)
        check_close(fa.gradients[0].data()[i], fb.gradients[0].data()[i], rows, scale * rows * 10);
    }
  }
  // A different noise key gives a different loss: the comparison above is not vacuous.
  const auto a = split.loss_meanfield<double>(fvi::LossSpec::nll(), 0, -1, {mean}, {sd}, S, 99, 1.0, false);
  const auto b = split.loss_meanfield<double>(fvi::LossSpec::nll(), 0, -1, {mean}, {sd}, S, 98, 1.0, false);
  CHECK(std::abs(a.value - b.value) > 1e-6 * std::abs(a.value));
}

TEST_CASE("a PVI client update on two threads equals the update on one", "[engine][threads]") {
  std::mt19937_64 rng(22);
  const int n = 300, d = 3;
  Data data = logreg_data(n, d, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  using Q = fvi::MeanFieldGaussian<double>;
  fvi::engine::PviOptions options = small_pvi_options();
  options.loss = fvi::LossSpec::density_power(0.7);
  options.damping = 0.5;
  options.lr = 0.05;
  fvi::engine::PviServer<Q> server(model, data.abi(), options.seed);
  std::vector<fvi::DiagGaussianNatural<double>> deltas;
  for (int threads : {1, 2}) {
    options.threads = threads;
    fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
    const auto u = client.update(server.posterior(), 1);
    CHECK(u.steps == 6);
    deltas.push_back(u.delta);
  }
  // The parts' sums differ from one call's in the last bits; six Adam steps carry that along
  // without amplifying it beyond a few orders of magnitude.
  const double scale = deltas[0].eta1.cwiseAbs().maxCoeff() + deltas[0].eta2.cwiseAbs().maxCoeff();
  CHECK((deltas[0].eta1 - deltas[1].eta1).cwiseAbs().maxCoeff() <= 1e-10 * scale);
  CHECK((deltas[0].eta2 - deltas[1].eta2).cwiseAbs().maxCoeff() <= 1e-10 * scale);
  // The update moved q: Adam moves a mean by about lr per step, so eta1 = mean / sd^2 by about
  // damping x lr / 10^2 = 2.5e-4 at the prior's sd of 10.
  CHECK(deltas[0].eta1.cwiseAbs().maxCoeff() > 1e-4);
}

TEST_CASE("a float32 PVI client update agrees with the float64 one", "[engine][threads][float]") {
  // precision = float32 computes the kernels in float and keeps q and Adam's moments in float
  // (MeanFieldShards<float>): alpha-Renyi through the fused step, KL through the whole-shard one.
  std::mt19937_64 rng(24);
  Data data = logreg_data(300, 3, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  using Q = fvi::MeanFieldGaussian<double>;
  fvi::engine::PviOptions options = small_pvi_options();
  options.damping = 0.5;
  options.lr = 0.05;
  fvi::engine::PviServer<Q> server(model, data.abi(), options.seed);
  for (auto divergence : {fvi::engine::DivergenceKind::kAlphaRenyi, fvi::engine::DivergenceKind::kKl}) {
    options.divergence.kind = divergence;
    for (int threads : {1, 2}) {
      options.threads = threads;
      std::vector<fvi::DiagGaussianNatural<double>> deltas;
      for (auto precision : {fvi::engine::Precision::kFloat64, fvi::engine::Precision::kFloat32}) {
        options.precision = precision;
        fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
        deltas.push_back(client.update(server.posterior(), 1).delta);
      }
      // Float's rounding (6e-8) in 100-row sums and Adam's normalised steps, carried through six
      // steps of lr 0.05 into q's parameters: well below 1e-4 of the delta's scale. Dropping or
      // doubling a step would move the delta by O(lr / 10^2) = 5e-4, a quarter of its scale here.
      const double scale = deltas[0].eta1.cwiseAbs().maxCoeff() + deltas[0].eta2.cwiseAbs().maxCoeff();
      INFO("threads " << threads << ", divergence " << int(divergence) << ", scale " << scale);
      CHECK((deltas[0].eta1 - deltas[1].eta1).cwiseAbs().maxCoeff() <= 1e-4 * scale);
      CHECK((deltas[0].eta2 - deltas[1].eta2).cwiseAbs().maxCoeff() <= 1e-4 * scale);
      CHECK((deltas[0].eta1 - deltas[1].eta1).cwiseAbs().maxCoeff() > 0);  // float did run
    }
  }
}

TEST_CASE("a PVI client whose steps overflow says so, on one thread and on two", "[engine][threads]") {
  std::mt19937_64 rng(23);
  Data data = logreg_data(300, 3, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  using Q = fvi::MeanFieldGaussian<double>;
  fvi::engine::PviOptions options = small_pvi_options();
  // Adam moves each coordinate by about lr a step: log sd jumps by 1e300, so sd = exp(log sd)
  // overflows to inf at the first step (or the means make the logits overflow at the next).
  options.lr = 1e300;
  fvi::engine::PviServer<Q> server(model, data.abi(), options.seed);
  for (int threads : {1, 2}) {
    options.threads = threads;
    fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
    CHECK_THROWS_WITH(client.update(server.posterior(), 1), Catch::Contains("not finite"));
  }
}
