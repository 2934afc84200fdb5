#include "fvi/program/pvi_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "fvi/engine/pvi.h"
#include "fvi/program/output.h"
#include "fvi/data/readers.h"
#include "fvi/data/validate.h"
#include "fvi/program/predictive.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;

std::string human_bytes(long long b) {
  char buf[32];
  if (b < 10 * 1024) std::snprintf(buf, sizeof buf, "%lld B", b);
  else if (b < 10 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.1f kB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.1f MB", b / 1048576.0);
  return buf;
}

// Draws written to draws.csv: output_draws, or by default 1000 (CmdStan's) but no more than keep
// the file near 10 million values (a 784-200-10 network has 159,010 parameters), and at least 10.
long output_draws(const engine::Settings& settings, Eigen::Index parameters) {
  if (settings.has("output_draws")) return settings.integer("output_draws", 1000);
  return std::max(10L, std::min(1000L, long(10000000 / std::max<Eigen::Index>(1, parameters))));
}

template <class Q>
int run(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
        const SimArguments& args) {
  using Server = engine::PviServer<Q>;
  using Client = engine::PviClient<Q>;
  // Every party's data is read and checked against the declarations before anything runs.
  data::DataDirectory dir = data::load_data_directory(args.data);
  if (!model.data_table) throw std::runtime_error("these kernels carry no data table; rebuild with fvic build");
  data::validate_or_throw(*model.data_table, dir);
  const int S = int(dir.silos.size());
  if (S == 0) throw data::DataError(args.data + ": no silo data (silo-1.json, silo-1.csv or silo-1/) was found");
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

  // Held-out data: one silo's variables, checked like a silo's.
  std::optional<data::DataSet> test_data;
  std::unique_ptr<engine::BoundFactor> test_likelihood;
  if (!args.test.empty()) {
    data::DataSet test = data::load_test_data(args.test);
    data::Problems problems;
    data::validate_party(*model.data_table, data::Party::Silo, test, dir.public_data, problems);
    if (!problems.empty()) throw data::DataError(problems.text());
    test_data = std::move(test).merged(dir.public_data);
    for (int f = 0; f < model.factor_count && !test_likelihood; ++f)
      if (model.factors[f].kind == FVI_LIKELIHOOD && model.factors[f].owner == FVI_SILO)
        test_likelihood = std::make_unique<engine::BoundFactor>(model, f, test_data->view(), options.precision);
  }

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
      extra.push_back({"test_log_density", pm.mean_log_density});
      char buf[128];
      std::snprintf(buf, sizeof buf, "  test lpd %.4f", pm.mean_log_density);
      test_text = buf;
      if (pm.accuracy >= 0) {
        extra.push_back({"test_accuracy", pm.accuracy});
        std::snprintf(buf, sizeof buf, "  accuracy %.4f", pm.accuracy);
        test_text += buf;
      }
      if (pm.rmse >= 0) {
        extra.push_back({"test_rmse", pm.rmse});
        std::snprintf(buf, sizeof buf, "  rmse %.4f", pm.rmse);
        test_text += buf;
      }
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
    std::printf("posterior (mean, sd) of the global parameters:\n");
    const Eigen::VectorXd sd = engine::GaussianFamily<Q>::sd(q);
    for (const VariableLayout& v : layout) {
      const int64_t shown = std::min<int64_t>(v.elements(), 8);
      for (int64_t e = 0; e < shown; ++e) {
        const int64_t k = v.offset + e;
        const double m = v.transform == FVI_IDENTITY ? q.mean()[k] : x.row(k).mean();
        const double s = v.transform == FVI_IDENTITY ? sd[k] : std::sqrt((x.row(k).array() - m).square().mean());
        std::printf("  %s%s  %10.4f  %9.4f\n", v.name.c_str(),
                    v.dims.empty() ? "" : ("[" + std::to_string(e + 1) + "]").c_str(), m, s);
      }
      if (shown < v.elements()) std::printf("  %s: %lld more in posterior.json\n", v.name.c_str(), (long long)(v.elements() - shown));
    }
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
