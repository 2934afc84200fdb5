#include "fvi/program/sfvi_run.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "fvi/data/readers.h"
#include "fvi/engine/sfvi.h"
#include "fvi/program/output.h"
#include "fvi/program/parallel.h"
#include "fvi/program/predictive.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;
using engine::SfviBroadcast;
using engine::SfviContribution;
using engine::SfviLocalFit;
using engine::SfviServer;
using engine::SfviSilo;
using Global = StructuredGlobalGaussian<double>;

long long bytes_of(const std::vector<double>& message) { return (long long)(message.size() * sizeof(double)); }

// The server and the silos, with every message packed as it would cross the network (an
// in-process transport) and its bytes counted.
class Federation {
 public:
  Federation(SfviServer& server, std::vector<std::unique_ptr<SfviSilo>>& silos, std::vector<double> weights)
      : server_(server), silos_(silos), weights_(std::move(weights)) {}

  long long sent = 0, received = 0;

  // One SFVI iteration (seed 002 Alg. 1). Returns the ELBO estimate.
  double sfvi_iteration(uint32_t t) {
    const std::vector<double> down = engine::pack(server_.broadcast(t));
    std::vector<std::vector<double>> up(silos_.size());
    for_each_silo_in_parallel(int(silos_.size()), [&](int k) {
      up[k] = engine::pack(silos_[k]->contribute(unpack(down), t));
    });
    std::vector<SfviContribution> contributions;
    for (const auto& m : up) {
      contributions.push_back(engine::unpack_contribution(m, params(), server_.hyper_dim()));
      received += bytes_of(m);
    }
    sent += bytes_of(down) * (long long)silos_.size();
    return server_.step(contributions, t);
  }

  // One SFVI-Avg round (seed 002 Alg. 2): local steps with the n / n_j scaling, then averaging.
  void average_round(uint32_t r, long steps) {
    const std::vector<double> down = engine::pack(server_.broadcast(r));
    std::vector<std::vector<double>> up(silos_.size());
    for_each_silo_in_parallel(int(silos_.size()), [&](int k) {
      up[k] = engine::pack(silos_[k]->fit_locally(unpack(down), steps, weights_[k], r));
    });
    std::vector<SfviLocalFit> fits;
    for (const auto& m : up) {
      fits.push_back(engine::unpack_local_fit(m, params(), server_.hyper_dim()));
      received += bytes_of(m);
    }
    sent += bytes_of(down) * (long long)silos_.size();
    server_.average(fits);
  }

  // The ELBO at the current q (server term plus each silo's term, one number each; no step), at
  // fixed noise so that successive values move with q, not with the draws.
  double elbo(long draws) {
    const Eigen::MatrixXd eps = engine::global_noise(evaluation_seed(), 0, server_.global_dim(), draws);
    double total = server_.server_term(eps).elbo_term;
    std::vector<double> terms(silos_.size());
    const SfviBroadcast b = server_.broadcast(0);
    for_each_silo_in_parallel(int(silos_.size()), [&](int k) {
      CounterRng rng(RngKey{evaluation_seed(), uint32_t(k + 1), 0, rng_stream::kUserStream + 11});
      const Eigen::MatrixXd eps_local = rng.normal(silos_[k]->local_dim(), draws);
      terms[k] = silos_[k]->gradient(server_.q(), b.hyper, eps, eps_local, 1, nullptr).elbo_term;
    });
    for (double t : terms) total += t;
    received += (long long)(silos_.size() * sizeof(double));
    return total;
  }

 private:
  SfviBroadcast unpack(const std::vector<double>& m) const {
    return engine::unpack_broadcast(m, params(), server_.hyper_dim());
  }
  Eigen::Index params() const { return server_.q().num_params(); }
  uint64_t evaluation_seed() const { return 0x5f5f5f5fULL; }

  SfviServer& server_;
  std::vector<std::unique_ptr<SfviSilo>>& silos_;
  std::vector<double> weights_;  // n / n_j
};

// The global draws a predictive or an output uses: the global parameters (n x S), and the
// hyperparameters appended as constant rows.
Eigen::MatrixXd global_draws(const Global& q, uint64_t seed, uint32_t stream, long draws) {
  CounterRng rng(RngKey{seed, 0, 0, stream});
  return q.sample(rng.normal(q.dim(), draws));
}

// Writes silo k's local posterior (its marginal given q(Z_G)) to OUT/silo-K/posterior.json:
// written by the silo, and nothing of it reaches the server.
void write_local_posterior(const std::string& dir, const fvi_model& model, const fvi_data& data, const SfviSilo& silo,
                           const Global& global, const PosteriorSummary& summary, long draws, uint64_t seed) {
  const std::vector<VariableLayout> layout = variable_layout(model, "local", data);
  if (layout.empty()) return;
  const auto& q = silo.q();
  CounterRng rng(RngKey{seed, uint32_t(silo.silo()), 0, rng_stream::kUserStream + 3});
  const Eigen::MatrixXd u = global.offset(rng.normal(global.dim(), draws));
  const Eigen::MatrixXd z = q.sample(u, rng.normal(q.dim(), draws));
  // Marginal sd: diag(C Sigma_GG C^T + Sigma_LL), Sigma_GG = K K^T with K = D_G L_G.
  const Eigen::MatrixXd k_global = global.sd().asDiagonal() * global.unit_lower();
  const Eigen::MatrixXd k_local = q.sd().asDiagonal() * q.unit_lower();
  Eigen::VectorXd var = k_local.rowwise().squaredNorm();
  if (q.coupled()) var += (q.coupling() * k_global).rowwise().squaredNorm();
  std::filesystem::create_directories(dir);
  write_posterior_json(dir + "/posterior.json", summary, layout, constrain(layout, z), q.mean(), var.cwiseSqrt());
}

// The global parameters and the hyperparameters as one layout (hyperparameters after the
// globals, reported as point estimates: every draw equal, sd 0).
struct GlobalOutput {
  std::vector<VariableLayout> layout;
  Eigen::MatrixXd draws;  // constrained
  Eigen::VectorXd mean, sd, log_density;
};

GlobalOutput global_output(const fvi_model& model, const fvi_data& data, const Global& q, const Eigen::VectorXd& hyper,
                           long draws, uint64_t seed) {
  GlobalOutput out;
  out.layout = variable_layout(model, "global", data);
  std::vector<VariableLayout> hyper_layout = variable_layout(model, "hyper", data);
  const Eigen::Index n = q.dim(), h = hyper.size();
  for (VariableLayout v : hyper_layout) {
    v.offset += n;
    out.layout.push_back(v);
  }
  CounterRng rng(RngKey{seed, 0, 0, rng_stream::kUserStream + 3});
  const Eigen::MatrixXd eps = rng.normal(n, draws);
  Eigen::MatrixXd u(n + h, draws);
  u.topRows(n) = q.sample(eps);
  u.bottomRows(h) = hyper.replicate(1, draws);
  out.draws = constrain(out.layout, u);
  out.mean.resize(n + h);
  out.mean << q.mean(), hyper;
  out.sd = Eigen::VectorXd::Zero(n + h);
  out.sd.head(n) = q.covariance().diagonal().cwiseSqrt();
  out.log_density = q.log_density(u.topRows(n));
  return out;
}

}  // namespace

int run_sfvi(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
             const SimArguments& args, const std::string& method) {
  data::DataDirectory dir = load_run_data(model, args.data);
  const int S = int(dir.silos.size());
  const engine::SfviOptions options = engine::SfviOptions::from(settings);
  const long rounds = settings.integer("rounds", 10);
  const long warm_start = method == "sfvi" ? settings.integer("warm_start", 0) : 0;
  const long refresh = std::max(1L, settings.integer("refresh", std::max(1L, rounds / 20)));
  const long predictive_draws = 200, elbo_draws = 16;

  const data::DataSet server_data = dir.server.merged(dir.public_data);
  SfviServer server(model, server_data.view(), options);
  std::vector<data::DataSet> silo_data;
  for (int k = 0; k < S; ++k) silo_data.push_back(std::move(dir.silos[k]).merged(dir.public_data));
  // SFVI-Avg and the independent fit evaluate the global priors in each silo.
  const bool global_prior_in_silos = method != "sfvi" || warm_start > 0;
  std::vector<std::unique_ptr<SfviSilo>> silos;
  for (int k = 0; k < S; ++k)
    silos.push_back(std::make_unique<SfviSilo>(model, silo_data[k].view(), k + 1, options, global_prior_in_silos));
  double total_rows = 0;
  for (const auto& s : silos) total_rows += double(std::max<int64_t>(1, s->observations()));
  std::vector<double> weights;  // seed 002 Alg. 2: n / n_j
  for (const auto& s : silos) weights.push_back(total_rows / double(std::max<int64_t>(1, s->observations())));

  // Held-out data: one silo's variables; its likelihood must read the globals only.
  HeldOut held_out;
  if (!args.test.empty()) held_out = load_held_out(model, args.test, dir.public_data);
  engine::BoundFactor* test_likelihood = held_out.likelihood.get();
  if (test_likelihood && (test_likelihood->info().group_count != 1 || test_likelihood->group_name(0) != "global"))
    throw std::invalid_argument("--test: " + test_likelihood->name() +
                                " reads more than the global parameters (local parameters belong to a silo), so "
                                "held-out rows cannot be scored without a silo of their own");

  if (!args.quiet) {
    std::printf("%s: method = %s, family = %s, silos = %d, rounds = %ld%s\n", description.name, method.c_str(),
                settings.name("family", "meanfield").c_str(), S, rounds,
                warm_start ? (", after " + std::to_string(warm_start) + " SFVI-Avg rounds").c_str() : "");
    std::printf("  global parameters %lld, hyperparameters %lld\n", (long long)server.global_dim(),
                (long long)server.hyper_dim());
    for (const auto& s : silos)
      std::printf("  silo %d: %lld observations, %lld local parameters (kept in the silo)\n", s->silo(),
                  (long long)s->observations(), (long long)s->local_dim());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  MetricsWriter metrics(args.output + "/metrics.csv");
  PosteriorSummary summary{description.name, method, S, int(rounds), {}};
  Federation federation(server, silos, weights);
  const auto start = Clock::now();

  // The independent baseline: every silo keeps its own copy of q(Z_G) and theta.
  std::vector<SfviLocalFit> own(S);
  for (auto& f : own) f = {server.q().params(), server.hyper(), 0};

  auto test_metrics = [&](std::vector<std::pair<std::string, double>>& extra) -> std::string {
    if (!test_likelihood) return "";
    PredictiveMetrics pm;
    if (method == "independent") {  // the silos' own posteriors, each scored, then averaged
      pm.accuracy = pm.rmse = 0;
      for (int k = 0; k < S; ++k) {
        const Global q = Global::from_params(own[k].global_params, server.global_dim(), options.correlated_global);
        const PredictiveMetrics m =
            predictive_metrics(*test_likelihood, global_draws(q, options.seed, rng_stream::kUserStream + 2, predictive_draws));
        pm.mean_log_density += m.mean_log_density / S;
        pm.accuracy += m.accuracy / S;
        pm.rmse += m.rmse / S;
      }
    } else {
      pm = predictive_metrics(*test_likelihood,
                              global_draws(server.q(), options.seed, rng_stream::kUserStream + 2, predictive_draws));
    }
    return report_metrics(pm, extra);
  };
  // One progress line and one metrics row.
  long row = 0;
  auto report = [&](const char* label, long r, long of, double elbo) {
    summary.elbo.push_back(elbo);
    std::vector<std::pair<std::string, double>> extra;
    const std::string test_text = test_metrics(extra);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    metrics.row(int(++row), elbo, seconds, federation.sent, federation.received, extra);
    if (!args.quiet) {
      std::printf("%s %6ld/%ld  elbo %.6g  %.2f s  sent %s  received %s%s\n", label, r, of, elbo, seconds,
                  human_bytes(federation.sent).c_str(), human_bytes(federation.received).c_str(), test_text.c_str());
      std::fflush(stdout);
    }
  };

  if (method == "independent") {
    for (long r = 1; r <= rounds; ++r) {
      for_each_silo_in_parallel(S, [&](int k) {
        own[k] = silos[k]->fit_locally({own[k].global_params, own[k].hyper, uint32_t(r)}, options.avg_steps, 1.0,
                                       uint32_t(r));
      });
      if (r % refresh == 0 || r == rounds) {
        double elbo = 0;  // the sum of the silos' own objectives
        for (const auto& f : own) elbo += f.elbo_term;
        report("round", r, rounds, elbo);
      }
    }
  } else {
    const long avg_rounds = method == "sfvi_avg" ? rounds : warm_start;
    for (long r = 1; r <= avg_rounds; ++r) {
      federation.average_round(uint32_t(r), options.avg_steps);
      if (method == "sfvi" || r % refresh == 0 || r == avg_rounds)
        report(method == "sfvi" ? "warm start" : "round", r, avg_rounds, federation.elbo(elbo_draws));
    }
    if (method == "sfvi") {
      double window = 0;
      long in_window = 0;
      for (long t = 1; t <= rounds; ++t) {
        window += federation.sfvi_iteration(uint32_t(t));
        ++in_window;
        if (t % refresh == 0 || t == rounds) {
          report("iteration", t, rounds, window / double(in_window));  // the mean estimate since the last line
          window = 0, in_window = 0;
        }
      }
    }
  }

  // Outputs: the server writes the global posterior; each silo writes its own local posterior.
  const long draws = output_draws(settings, server.global_dim());
  const Global& q = server.q();
  if (method != "independent") {
    const GlobalOutput g = global_output(model, server_data.view(), q, server.hyper(), draws, options.seed);
    write_posterior_json(args.output + "/posterior.json", summary, g.layout, g.draws, g.mean, g.sd);
    write_draws_csv(args.output + "/draws.csv", description.name, g.layout, g.draws, g.log_density, settings.entries());
    if (!args.quiet) print_posterior("the global parameters and hyperparameters", g.layout, g.draws, g.mean, g.sd);
  }
  for (int k = 0; k < S; ++k) {
    const std::string silo_dir = args.output + "/silo-" + std::to_string(k + 1);
    const Global qk = method == "independent"
                          ? Global::from_params(own[k].global_params, server.global_dim(), options.correlated_global)
                          : q;
    write_local_posterior(silo_dir, model, silo_data[k].view(), *silos[k], qk, summary, draws, options.seed);
    if (method == "independent") {
      const GlobalOutput g = global_output(model, silo_data[k].view(), qk, own[k].hyper, draws, options.seed);
      std::filesystem::create_directories(silo_dir);
      write_posterior_json(silo_dir + "/global.json", summary, g.layout, g.draws, g.mean, g.sd);
    }
  }
  if (!args.quiet)
    std::printf("wrote %s/%smetrics.csv%s\n", args.output.c_str(),
                method == "independent" ? "" : "posterior.json, draws.csv, ",
                method == "independent" ? ", silo-K/global.json and silo-K/posterior.json"
                                        : "; local posteriors in silo-K/posterior.json");
  return 0;
}

}  // namespace fvi::program
