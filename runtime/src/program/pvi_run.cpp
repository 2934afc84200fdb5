#include "fvi/program/pvi_run.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "fvi/engine/pvi.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/output.h"
#include "fvi/program/predictive.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;

template <class Q>
class PviSiloHost : public SiloHost {
 public:
  PviSiloHost(const fvi_model& model, const engine::Settings& settings, data::DataSet data, int silo, int silos,
              int threads)
      : data_(std::move(data)),
        client_(model, data_.view(), silo, options(settings, silos, threads)),
        endpoint_(client_),
        silo_(silo) {}
  SiloEndpoint& endpoint() override { return endpoint_; }
  static engine::PviOptions options(const engine::Settings& settings, int silos, int threads) {
    engine::PviOptions o = engine::PviOptions::from(settings, silos);
    o.threads = threads;
    return o;
  }
  std::string describe() const override {
    return "silo " + std::to_string(silo_) + ": " + std::to_string(client_.observations()) + " observations, " +
           (client_.closed_form() ? "closed-form update" : "stochastic optimisation");
  }

 private:
  data::DataSet data_;
  engine::PviClient<Q> client_;
  PviSiloEndpoint<Q> endpoint_;
  int silo_;
};

template <class Q>
int serve(ServerRun& run) {
  using Server = engine::PviServer<Q>;
  const engine::Settings& settings = run.settings;
  const SimArguments& args = run.args;
  const int S = run.transport.silos();
  const engine::PviOptions options = engine::PviOptions::from(settings, S);
  const long rounds = settings.integer("rounds", 10);
  const std::string schedule = settings.name("schedule", "synchronous");
  const long predictive_draws = 200;

  Server server(run.model, run.server_data.view(), options.seed);
  const std::vector<VariableLayout> layout = variable_layout(run.model, "global", run.server_data.view());
  HeldOut held_out;
  if (!args.test.empty()) held_out = load_held_out(run.model, args.test, run.public_data, options.precision);
  engine::BoundFactor* test_likelihood = held_out.likelihood.get();

  if (!args.quiet) {
    std::printf("%s: method = pvi, family = %s, silos = %d, rounds = %ld, schedule = %s\n", run.description.name,
                engine::GaussianFamily<Q>::name(), S, rounds, schedule.c_str());
    std::printf("  loss = %s, divergence = %s, damping = %g\n", options.loss.name().c_str(),
                options.divergence.name().c_str(), options.damping);
    for (const std::string& line : run.silo_lines) std::printf("  %s\n", line.c_str());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  PviRounds<Q> rounds_runner(server, run.transport, schedule);
  PosteriorSummary summary{run.description.name, "pvi", S, int(rounds), {}};
  // The checkpoint's bookkeeping: [seconds so far, the ELBO of every round so far].
  long first = 1;
  double seconds_before = 0;
  CheckpointRecord record;
  if (run.resume && !run.checkpoint.empty() && load_checkpoint(run.checkpoint, "pvi-server", record)) {
    rounds_runner.restore(record.state);
    run.transport.restore_traffic(record.traffic);
    first = long(record.round) + 1;
    if (!record.extra.empty()) seconds_before = record.extra[0];
    summary.elbo.assign(record.extra.begin() + (record.extra.empty() ? 0 : 1), record.extra.end());
    if (!args.quiet) std::printf("resumed from %s after round %u\n", run.checkpoint.c_str(), record.round);
  }
  MetricsWriter metrics(args.output + "/metrics.csv", first > 1);
  const auto start = Clock::now();
  for (long r = first; r <= rounds; ++r) {
    const uint32_t round = uint32_t(r);
    rounds_runner.run_round(round);
    const double elbo = rounds_runner.elbo(round);
    const long long sent = run.transport.total_sent(), received = run.transport.total_received();
    summary.elbo.push_back(elbo);
    const double seconds = seconds_before + std::chrono::duration<double>(Clock::now() - start).count();

    std::vector<std::pair<std::string, double>> extra;
    std::string test_text;
    if (test_likelihood) {
      CounterRng rng(RngKey{options.seed, 0, 0, rng_stream::kUserStream + 2});  // the same draws every round
      const Q q = server.distribution();
      const PredictiveMetrics pm = predictive_metrics(*test_likelihood, q.sample(rng.normal(q.dim(), predictive_draws)));
      test_text = report_metrics(pm, extra);
    }
    metrics.row(int(r), elbo, seconds, sent, received, extra);
    if (!run.checkpoint.empty()) {
      record.kind = "pvi-server";
      record.round = round;
      record.state = rounds_runner.state();
      record.traffic = run.transport.traffic_counts();
      record.extra = {seconds};
      record.extra.insert(record.extra.end(), summary.elbo.begin(), summary.elbo.end());
      save_checkpoint(run.checkpoint, record);
    }
    if (!args.quiet) {
      const int missing = rounds_runner.missing_terms();
      std::printf("round %3ld/%ld  elbo %.6g%s  %.2f s  sent %s  received %s%s\n", r, rounds, elbo,
                  missing_note(missing, "silo terms").c_str(), seconds,
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
  write_draws_csv(args.output + "/draws.csv", run.description.name, layout, x, q.log_density(u), settings.entries());
  if (!args.quiet) {
    print_posterior("the global parameters", layout, x, q.mean(), engine::GaussianFamily<Q>::sd(q));
    std::printf("wrote %s/posterior.json, draws.csv, metrics.csv\n", args.output.c_str());
  }
  return 0;
}

bool full_rank(const engine::Settings& settings) {
  const std::string family = settings.name("family", "meanfield");
  if (family == "fullrank") return true;
  if (family == "meanfield") return false;
  throw std::invalid_argument("family = " + family + " is not a PVI family (meanfield or fullrank)");
}

}  // namespace

int serve_pvi(ServerRun& run) {
  return full_rank(run.settings) ? serve<FullRankGaussian<double>>(run) : serve<MeanFieldGaussian<double>>(run);
}

std::unique_ptr<SiloHost> pvi_silo_host(const fvi_model& model, const engine::Settings& settings, data::DataSet data,
                                        int silo, int silos, int threads) {
  if (full_rank(settings))
    return std::make_unique<PviSiloHost<FullRankGaussian<double>>>(model, settings, std::move(data), silo, silos, threads);
  return std::make_unique<PviSiloHost<MeanFieldGaussian<double>>>(model, settings, std::move(data), silo, silos, threads);
}

}  // namespace fvi::program
