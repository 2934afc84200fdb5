#include "fvi/program/pvi_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "fvi/engine/pvi.h"
#include "fvi/program/output.h"
#include "fvi/data/readers.h"
#include "fvi/program/predictive.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;

template <class Q>
int run(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
        const SimArguments& args) {
  using Server = engine::PviServer<Q>;
  using Client = engine::PviClient<Q>;
  // Every party's data is read and checked against the declarations before anything runs.
  data::DataDirectory dir = load_run_data(model, args.data);
  const int S = int(dir.silos.size());
  const engine::PviOptions options = engine::PviOptions::from(settings, S);
  const long rounds = settings.integer("rounds", 10);
  const std::string schedule = settings.name("schedule", "synchronous");
  const long predictive_draws = 200;

  const data::DataSet server_data = dir.server.merged(dir.public_data);
  Server server(model, server_data.view(), options.seed);
  std::vector<data::DataSet> silo_data;
  std::vector<std::unique_ptr<Client>> clients;
  for (int k = 0; k < S; ++k) silo_data.push_back(std::move(dir.silos[k]).merged(dir.public_data));
  for (int k = 0; k < S; ++k) clients.push_back(std::make_unique<Client>(model, silo_data[k].view(), k + 1, options));
  const std::vector<VariableLayout> layout = variable_layout(model, "global", server_data.view());

  HeldOut held_out;
  if (!args.test.empty()) held_out = load_held_out(model, args.test, dir.public_data, options.precision);
  engine::BoundFactor* test_likelihood = held_out.likelihood.get();

  if (!args.quiet) {
    std::printf("%s: method = pvi, family = %s, silos = %d, rounds = %ld, schedule = %s\n", description.name,
                engine::GaussianFamily<Q>::name(), S, rounds, schedule.c_str());
    std::printf("  loss = %s, divergence = %s, damping = %g\n", options.loss.name().c_str(),
                options.divergence.name().c_str(), options.damping);
    for (int k = 0; k < S; ++k)
      std::printf("  silo %d: %lld observations, %s\n", k + 1, (long long)clients[k]->observations(),
                  clients[k]->closed_form() ? "closed-form update" : "stochastic optimisation");
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  MetricsWriter metrics(args.output + "/metrics.csv");
  PosteriorSummary summary{description.name, "pvi", S, int(rounds), {}};
  const auto start = Clock::now();
  std::vector<Client*> client_ptrs;
  for (auto& c : clients) client_ptrs.push_back(c.get());
  PviRounds<Q> rounds_runner(server, client_ptrs, schedule);

  for (long r = 1; r <= rounds; ++r) {
    const uint32_t round = uint32_t(r);
    Traffic traffic = rounds_runner.run_round(round);
    const double elbo = rounds_runner.elbo(traffic);
    const long long sent = traffic.sent, received = traffic.received;
    summary.elbo.push_back(elbo);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

    std::vector<std::pair<std::string, double>> extra;
    std::string test_text;
    if (test_likelihood) {
      CounterRng rng(RngKey{options.seed, 0, 0, rng_stream::kUserStream + 2});  // the same draws every round
      const Q q = server.distribution();
      const PredictiveMetrics pm = predictive_metrics(*test_likelihood, q.sample(rng.normal(q.dim(), predictive_draws)));
      test_text = report_metrics(pm, extra);
    }
    metrics.row(int(r), elbo, seconds, sent, received, extra);
    if (!args.quiet) {
      std::printf("round %3ld/%ld  elbo %.6g  %.2f s  sent %s  received %s%s\n", r, rounds, elbo, seconds,
                  human_bytes(sent).c_str(), human_bytes(received).c_str(), test_text.c_str());
      std::fflush(stdout);
    }
  }

  const Q q = server.distribution();
  CounterRng rng(RngKey{options.seed, 0, 0, rng_stream::kUserStream + 3});
  const Eigen::MatrixXd eps = rng.normal(q.dim(), output_draws(settings, q.dim()));
  const Eigen::MatrixXd u = q.sample(eps);
  const Eigen::MatrixXd x = constrain(layout, u);
  write_posterior_json(args.output + "/posterior.json", summary, layout, x, q.mean(), engine::GaussianFamily<Q>::sd(q));
  write_draws_csv(args.output + "/draws.csv", description.name, layout, x, q.log_density(u), settings.entries());
  if (!args.quiet) {
    print_posterior("the global parameters", layout, x, q.mean(), engine::GaussianFamily<Q>::sd(q));
    std::printf("wrote %s/posterior.json, draws.csv, metrics.csv\n", args.output.c_str());
  }
  return 0;
}

}  // namespace

int run_pvi(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
            const SimArguments& args) {
  const std::string family = settings.name("family", "meanfield");
  if (family == "fullrank") return run<FullRankGaussian<double>>(model, description, settings, args);
  if (family == "meanfield") return run<MeanFieldGaussian<double>>(model, description, settings, args);
  throw std::invalid_argument("family = " + family + " is not a PVI family (meanfield or fullrank)");
}

}  // namespace fvi::program
