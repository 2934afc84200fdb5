#include "fvi/program/sfvi_run.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "fvi/data/readers.h"
#include "fvi/engine/sfvi.h"
#include "fvi/program/checkpoint.h"
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

constexpr uint64_t kEvaluationSeed = 0x5f5f5f5fULL;  // the ELBO's fixed noise (its own stream)

// The server's side of the exchanges (seed 002 Algs. 1-2) over a Transport. A silo missing from
// an iteration contributes nothing to it: the server steps on the gradients that arrived
// (docs/deployment.md, "Dropouts").
class Federation {
 public:
  Federation(SfviServer& server, Transport& transport) : server_(server), transport_(transport) {}

  // Each silo's rows (for SFVI-Avg's n / n_j).
  std::vector<double> sizes() {
    std::vector<double> n(transport_.silos(), 1.0);
    Exchange x;
    x.phase = Phase::kSfviSizes;
    x.request = [](int) { return Message{}; };
    x.reply = [&](int k, Message& m) {
      std::string reason = check_reply(m, 1);
      if (reason.empty() && m[0] < 0) reason = "a negative number of rows";
      if (reason.empty()) n[k] = std::max(1.0, m[0]);
      return reason;
    };
    transport_.exchange(x);
    return n;
  }

  // One SFVI iteration (seed 002 Alg. 1). Returns the ELBO estimate.
  double sfvi_iteration(uint32_t t) {
    const Message down = engine::pack(server_.broadcast(t));
    std::vector<SfviContribution> contributions;
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(t, Phase::kSfviContribute, [&](int) { return down; }, up,
                                          engine::pack(SfviContribution{Eigen::VectorXd::Zero(params()),
                                                                        Eigen::VectorXd::Zero(server_.hyper_dim()), 0})
                                              .size());
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) contributions.push_back(engine::unpack_contribution(up[k], params(), server_.hyper_dim()));
    return server_.step(contributions, t);
  }

  // One SFVI-Avg round (seed 002 Alg. 2): local steps with the n / n_j scaling, then averaging
  // of the fits that arrived.
  void average_round(uint32_t r, long steps, const std::vector<double>& weights) {
    const Message broadcast = engine::pack(server_.broadcast(r));
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(
        r, Phase::kSfviFitLocally,
        [&](int k) {
          Message m{double(steps), weights[k], 0.0};
          m.insert(m.end(), broadcast.begin(), broadcast.end());
          return m;
        },
        up, size_t(params() + server_.hyper_dim() + 1));
    std::vector<SfviLocalFit> fits;
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) fits.push_back(engine::unpack_local_fit(up[k], params(), server_.hyper_dim()));
    if (!fits.empty()) server_.average(fits);
  }

  // The independent baseline: each silo takes `steps` steps from its own previous fit (the
  // broadcast is its starting point in round 1) and reports it, for the progress lines only.
  void independent_round(uint32_t r, long steps, std::vector<SfviLocalFit>& own) {
    const Message broadcast = engine::pack(server_.broadcast(r));
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(
        r, Phase::kSfviFitLocally,
        [&](int) {
          Message m{double(steps), 1.0, 1.0};
          m.insert(m.end(), broadcast.begin(), broadcast.end());
          return m;
        },
        up, size_t(params() + server_.hyper_dim() + 1), false);
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) own[k] = engine::unpack_local_fit(up[k], params(), server_.hyper_dim());
  }

  // The ELBO at the current q (server term plus each silo's term, one number each; no step), at
  // fixed noise so that successive values move with q, not with the draws.
  double elbo(uint32_t round, long draws) {
    const Eigen::MatrixXd eps = engine::global_noise(kEvaluationSeed, 0, server_.global_dim(), draws);
    double total = server_.server_term(eps).elbo_term;
    const Message down = engine::pack(server_.broadcast(0));
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(round, Phase::kSfviEvaluate, [&](int) { return down; }, up, 1);
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) total += up[k][0];
    return total;
  }

  // The final q(Z_G) and theta, for each silo's local posterior.
  void finish(uint32_t round, bool counted) {
    const Message down = engine::pack(server_.broadcast(0));
    std::vector<Message> up(transport_.silos());
    run(round, Phase::kSfviFinish, [&](int) { return down; }, up, 0, counted);
  }

 private:
  std::vector<bool> run(uint32_t round, Phase phase, std::function<Message(int)> request, std::vector<Message>& up,
                        size_t reply_size, bool counted = true) {
    Exchange x;
    x.counted = counted;
    x.round = round;
    x.phase = phase;
    x.request = std::move(request);
    x.reply = [&](int k, Message& m) {
      std::string reason = check_reply(m, reply_size);
      if (reason.empty()) up[k] = std::move(m);
      return reason;
    };
    return transport_.exchange(x);
  }
  Eigen::Index params() const { return server_.q().num_params(); }

  SfviServer& server_;
  Transport& transport_;
};

// The global draws a predictive or an output uses: the global parameters (n x S), and the
// hyperparameters appended as constant rows.
Eigen::MatrixXd global_draws(const Global& q, uint64_t seed, uint32_t stream, long draws) {
  CounterRng rng(RngKey{seed, 0, 0, stream});
  return q.sample(rng.normal(q.dim(), draws));
}

// Writes silo k's local posterior to OUT/silo-K/posterior.json: written by the silo, and nothing
// of it reaches the server. With the ELBO (local_samples = 1) it is q(Z_L)'s marginal given
// q(Z_G); with the importance-weighted bound, q(Z_L | Z_G) is the bound's proposal and the
// posterior is estimated from it by self-normalised importance sampling with the bound's weights.
void write_local_posterior(const std::string& dir, const fvi_model& model, const fvi_data& data, SfviSilo& silo,
                           const Global& global, const Eigen::VectorXd& hyper, const PosteriorSummary& summary,
                           long draws, uint64_t seed) {
  const std::vector<VariableLayout> layout = variable_layout(model, "local", data);
  if (layout.empty()) return;
  const auto& q = silo.q();
  CounterRng rng(RngKey{seed, uint32_t(silo.silo()), 0, rng_stream::kUserStream + 3});
  std::filesystem::create_directories(dir);
  if (silo.local_samples() > 1) {
    const long K = silo.local_samples(), chunk = 50;  // draws of Z_G per evaluation (memory: rows x chunk x K)
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(q.dim()), square = Eigen::VectorXd::Zero(q.dim());
    Eigen::MatrixXd z(q.dim(), draws);
    for (long first = 0; first < draws; first += chunk) {
      const long n = std::min(chunk, draws - first);
      const Eigen::MatrixXd eps_global = rng.normal(global.dim(), n);
      const Eigen::MatrixXd eps_local = rng.normal(q.dim(), n * K);
      const Eigen::MatrixXd uniforms = rng.uniform(q.dim(), n);
      const SfviSilo::LocalPosterior p = silo.importance_posterior(global, hyper, eps_global, eps_local, uniforms);
      sum += p.weighted_sum;
      square += p.weighted_square;
      z.middleCols(first, n) = p.draws;
    }
    const Eigen::VectorXd mean = sum / double(draws);
    const Eigen::VectorXd var = (square / double(draws) - mean.cwiseAbs2()).cwiseMax(0.0);
    write_posterior_json(dir + "/posterior.json", summary, layout, constrain(layout, z), mean, var.cwiseSqrt());
    return;
  }
  const Eigen::MatrixXd u = global.offset(rng.normal(global.dim(), draws));
  const Eigen::MatrixXd z = q.sample(u, rng.normal(q.dim(), draws));
  // Marginal sd: diag(C Sigma_GG C^T + Sigma_LL), Sigma_GG = K K^T with K = D_G L_G.
  const Eigen::MatrixXd k_global = global.sd().asDiagonal() * global.unit_lower();
  const Eigen::MatrixXd k_local = q.sd().asDiagonal() * q.unit_lower();
  Eigen::VectorXd var = k_local.rowwise().squaredNorm();
  if (q.coupled()) var += (q.coupling() * k_global).rowwise().squaredNorm();
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

// A silo of SFVI: its data, its SfviSilo, and the answers to the server's requests.
class SfviSiloHost : public SiloHost, public SiloEndpoint {
 public:
  SfviSiloHost(const fvi_model& model, const engine::Settings& settings, const std::string& method, data::DataSet data,
               int silo, int silos)
      : model_(model),
        method_(method),
        options_(engine::SfviOptions::from(settings)),
        data_(std::move(data)),
        // SFVI-Avg and the independent fit evaluate the global priors in each silo.
        silo_(model, data_.view(), silo, options_,
              method != "sfvi" || (method == "sfvi" && settings.integer("warm_start", 0) > 0)),
        summary_{model.name, method, silos, int(settings.integer("rounds", 10)), {}},
        draws_(0) {
    draws_ = output_draws(settings, 1);
  }

  SiloEndpoint& endpoint() override { return *this; }
  std::string describe() const override {
    return "silo " + std::to_string(silo_.silo()) + ": " + std::to_string(silo_.observations()) + " observations, " +
           std::to_string(silo_.local_dim()) + " local parameters (kept in the silo)";
  }

  Message handle(uint32_t round, Phase phase, const Message& request) override {
    if (phase == Phase::kSfviSizes) return {double(silo_.observations())};
    if (phase == Phase::kSfviFitLocally) {
      if (request.size() < 3) throw std::invalid_argument("a local-fit request needs [steps, scale, independent]");
      const long steps = long(request[0]);
      const double scale = request[1];
      if (!(steps >= 0 && steps <= 100000000 && std::isfinite(scale) && scale > 0))
        throw std::invalid_argument("a local-fit request with steps " + std::to_string(request[0]) + ", scale " +
                                    std::to_string(scale));
      SfviBroadcast b = broadcast(Message(request.begin() + 3, request.end()));
      if (request[2] != 0) {  // independent: from the silo's own previous fit
        if (own_) b.global_params = own_->global_params, b.hyper = own_->hyper;
        own_ = silo_.fit_locally(b, steps, 1.0, round);
        return engine::pack(*own_);
      }
      return engine::pack(silo_.fit_locally(b, steps, scale, round));
    }
    const SfviBroadcast b = broadcast(request);
    if (phase == Phase::kSfviContribute) return engine::pack(silo_.contribute(b, round));
    if (phase == Phase::kSfviEvaluate) {
      const long draws = 16;
      const Eigen::MatrixXd eps = engine::global_noise(kEvaluationSeed, 0, silo_global_dim(), draws);
      CounterRng rng(RngKey{kEvaluationSeed, uint32_t(silo_.silo()), 0, rng_stream::kUserStream + 11});
      const Eigen::MatrixXd eps_local = rng.normal(silo_.local_dim(), draws);
      return {silo_.gradient(global(b), b.hyper, eps, eps_local, 1, nullptr).elbo_term};
    }
    if (phase == Phase::kSfviFinish) {
      final_ = b;
      return {};
    }
    throw std::invalid_argument(std::string("an SFVI silo cannot do ") + phase_name(phase));
  }

  Message state() const override {
    const Eigen::VectorXd s = silo_.checkpoint();
    Message m(s.data(), s.data() + s.size());
    // The independent fit's own q(Z_G) and theta follow, when there is one.
    if (own_) {
      const Message f = engine::pack(*own_);
      m.insert(m.end(), f.begin(), f.end());
    }
    m.push_back(own_ ? 1.0 : 0.0);
    return m;
  }
  void restore(const Message& m) override {
    if (m.empty()) throw std::invalid_argument("an empty SFVI silo checkpoint");
    const size_t fit = own_params_size();
    const bool has_own = m.back() != 0;
    const size_t own_size = has_own ? fit : 0;
    if (m.size() < 1 + own_size) throw std::invalid_argument("a damaged SFVI silo checkpoint");
    const size_t n = m.size() - 1 - own_size;
    silo_.restore(Eigen::Map<const Eigen::VectorXd>(m.data(), Eigen::Index(n)));
    if (has_own) own_ = engine::unpack_local_fit(Message(m.begin() + long(n), m.end() - 1), global_params_size(), hyper_size());
  }

  void finish(const std::string& dir) override {
    if (!final_) return;
    const Global q = own_ && method_ == "independent"
                         ? Global::from_params(own_->global_params, silo_global_dim(), options_.correlated_global)
                         : global(*final_);
    const Eigen::VectorXd& hyper = own_ && method_ == "independent" ? own_->hyper : final_->hyper;
    write_local_posterior(dir, model_, data_.view(), silo_, q, hyper, summary_, draws_, options_.seed);
    if (method_ == "independent" && own_) {
      const GlobalOutput g = global_output(model_, data_.view(), q, own_->hyper, draws_, options_.seed);
      std::filesystem::create_directories(dir);
      write_posterior_json(dir + "/global.json", summary_, g.layout, g.draws, g.mean, g.sd);
    }
  }

 private:
  Eigen::Index silo_global_dim() const { return engine::group_dim(model_, "global", data_.view()); }
  Eigen::Index global_params_size() const {
    return Global::num_params_for(silo_global_dim(), options_.correlated_global);
  }
  Eigen::Index hyper_size() const { return engine::group_dim(model_, "hyper", data_.view()); }
  size_t own_params_size() const { return size_t(global_params_size() + hyper_size() + 1); }
  SfviBroadcast broadcast(const Message& m) const {
    return engine::unpack_broadcast(m, global_params_size(), hyper_size());
  }
  Global global(const SfviBroadcast& b) const {
    return Global::from_params(b.global_params, silo_global_dim(), options_.correlated_global);
  }

  const fvi_model& model_;
  std::string method_;
  engine::SfviOptions options_;
  data::DataSet data_;
  SfviSilo silo_;
  PosteriorSummary summary_;
  long draws_;
  std::optional<SfviLocalFit> own_;      // the independent fit's own q(Z_G) and theta
  std::optional<SfviBroadcast> final_;   // the final global posterior, for the local one
};

}  // namespace

int serve_sfvi(ServerRun& run) {
  const fvi_model& model = run.model;
  const engine::Settings& settings = run.settings;
  const SimArguments& args = run.args;
  const std::string& method = run.method;
  const int S = run.transport.silos();
  const engine::SfviOptions options = engine::SfviOptions::from(settings);
  const long rounds = settings.integer("rounds", 10);
  const long warm_start = method == "sfvi" ? settings.integer("warm_start", 0) : 0;
  const long refresh = std::max(1L, settings.integer("refresh", std::max(1L, rounds / 20)));
  const long predictive_draws = 200, elbo_draws = 16;

  SfviServer server(model, run.server_data.view(), options);
  Federation federation(server, run.transport);

  // Held-out data: one silo's variables; its likelihood must read the globals only.
  HeldOut held_out;
  if (!args.test.empty()) held_out = load_held_out(model, args.test, run.public_data);
  engine::BoundFactor* test_likelihood = held_out.likelihood.get();
  if (test_likelihood && (test_likelihood->info().group_count != 1 || test_likelihood->group_name(0) != "global"))
    throw std::invalid_argument("--test: " + test_likelihood->name() +
                                " reads more than the global parameters (local parameters belong to a silo), so "
                                "held-out rows cannot be scored without a silo of their own");

  if (!args.quiet) {
    std::printf("%s: method = %s, family = %s, silos = %d, rounds = %ld%s\n", run.description.name, method.c_str(),
                settings.name("family", "meanfield").c_str(), S, rounds,
                warm_start ? (", after " + std::to_string(warm_start) + " SFVI-Avg rounds").c_str() : "");
    std::printf("  global parameters %lld, hyperparameters %lld\n", (long long)server.global_dim(),
                (long long)server.hyper_dim());
    for (const std::string& line : run.silo_lines) std::printf("  %s\n", line.c_str());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  const long avg_rounds = method == "sfvi_avg" || method == "independent" ? rounds : warm_start;
  // seed 002 Alg. 2: n / n_j (asked of the silos only when SFVI-Avg runs).
  std::vector<double> weights(S, 1.0);
  if (avg_rounds > 0 && method != "independent") {
    const std::vector<double> rows = federation.sizes();
    double total_rows = 0;
    for (double n : rows) total_rows += n;
    for (int k = 0; k < S; ++k) weights[k] = total_rows / rows[k];
  }

  PosteriorSummary summary{run.description.name, method, S, int(rounds), {}};
  // The independent baseline: every silo keeps its own copy of q(Z_G) and theta (reported here).
  std::vector<SfviLocalFit> own(S);
  for (auto& f : own) f = {server.q().params(), server.hyper(), 0};

  // Progress through the schedule: steps 1..avg_rounds are SFVI-Avg (or independent) rounds,
  // then SFVI iterations. A checkpoint holds the step, the server's state, and the bookkeeping.
  const long sfvi_iterations = method == "sfvi" ? rounds : 0;
  long first = 1, row = 0, in_window = 0;
  double window = 0, seconds_before = 0;
  CheckpointRecord record;
  if (run.resume && !run.checkpoint.empty() && load_checkpoint(run.checkpoint, "sfvi-server", record)) {
    const Eigen::Index state = server.checkpoint().size(), fit = server.q().num_params() + server.hyper_dim() + 1;
    const size_t expected = size_t(state) + 5 + (method == "independent" ? size_t(S * fit) : 0);
    if (record.state.size() != expected)
      throw std::runtime_error(run.checkpoint + ": the checkpoint does not match this model, method and silos");
    server.restore(Eigen::Map<const Eigen::VectorXd>(record.state.data(), state));
    const double* at = record.state.data() + state;
    row = long(at[0]), in_window = long(at[1]), window = at[2], seconds_before = at[3];
    for (int k = 0; k < S && method == "independent"; ++k)
      own[k] = engine::unpack_local_fit(Message(at + 5 + k * fit, at + 5 + (k + 1) * fit), server.q().num_params(),
                                        server.hyper_dim());
    summary.elbo = record.extra;
    run.transport.restore_traffic(record.traffic);
    first = long(record.round) + 1;
    if (!args.quiet) std::printf("resumed from %s after step %u\n", run.checkpoint.c_str(), record.round);
  }
  MetricsWriter metrics(args.output + "/metrics.csv", first > 1);
  const auto start = Clock::now();
  auto seconds_now = [&] { return seconds_before + std::chrono::duration<double>(Clock::now() - start).count(); };

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
  // One progress line and one metrics row; the line says if some silos' replies were missing
  // since the last one (their part is absent from the figure).
  long missing_before = run.transport.missing_replies();
  auto report = [&](const char* label, long r, long of, double elbo) {
    summary.elbo.push_back(elbo);
    std::vector<std::pair<std::string, double>> extra;
    const std::string test_text = test_metrics(extra);
    const double seconds = seconds_now();
    const long long sent = run.transport.total_sent(), received = run.transport.total_received();
    metrics.row(int(++row), elbo, seconds, sent, received, extra);
    if (!args.quiet) {
      const std::string missing = missing_note(run.transport.missing_replies() - missing_before, "silo replies");
      std::printf("%s %6ld/%ld  elbo %.6g%s  %.2f s  sent %s  received %s%s\n", label, r, of, elbo, missing.c_str(), seconds,
                  human_bytes(sent).c_str(), human_bytes(received).c_str(), test_text.c_str());
      std::fflush(stdout);
    }
    missing_before = run.transport.missing_replies();
  };
  auto save = [&](long step) {
    if (run.checkpoint.empty()) return;
    const Eigen::VectorXd state = server.checkpoint();
    record.kind = "sfvi-server";
    record.round = uint32_t(step);
    record.state.assign(state.data(), state.data() + state.size());
    record.state.insert(record.state.end(), {double(row), double(in_window), window, seconds_now(), 0.0});
    for (int k = 0; k < S && method == "independent"; ++k) {
      const Message f = engine::pack(own[k]);
      record.state.insert(record.state.end(), f.begin(), f.end());
    }
    record.extra = summary.elbo;
    record.traffic = run.transport.traffic_counts();
    save_checkpoint(run.checkpoint, record);
  };

  for (long step = first; step <= avg_rounds + sfvi_iterations; ++step) {
    if (step <= avg_rounds) {
      const long r = step;
      if (method == "independent") {
        federation.independent_round(uint32_t(r), options.avg_steps, own);
        if (r % refresh == 0 || r == rounds) {
          double elbo = 0;  // the sum of the silos' own objectives
          for (const auto& f : own) elbo += f.elbo_term;
          report("round", r, rounds, elbo);
        }
      } else {
        federation.average_round(uint32_t(r), options.avg_steps, weights);
        if (method == "sfvi" || r % refresh == 0 || r == avg_rounds)
          report(method == "sfvi" ? "warm start" : "round", r, avg_rounds, federation.elbo(uint32_t(step), elbo_draws));
      }
    } else {
      const long t = step - avg_rounds;
      window += federation.sfvi_iteration(uint32_t(t));
      ++in_window;
      if (t % refresh == 0 || t == rounds) {
        report("iteration", t, rounds, window / double(in_window));  // the mean estimate since the last line
        window = 0, in_window = 0;
      }
    }
    save(step);
  }

  // Outputs: the server writes the global posterior; each silo writes its own local posterior.
  federation.finish(uint32_t(avg_rounds + sfvi_iterations + 1), method != "independent");
  const long draws = output_draws(settings, server.global_dim());
  const Global& q = server.q();
  if (method != "independent") {
    const GlobalOutput g = global_output(model, run.server_data.view(), q, server.hyper(), draws, options.seed);
    write_posterior_json(args.output + "/posterior.json", summary, g.layout, g.draws, g.mean, g.sd);
    write_draws_csv(args.output + "/draws.csv", run.description.name, g.layout, g.draws, g.log_density,
                    settings.entries());
    if (!args.quiet) print_posterior("the global parameters and hyperparameters", g.layout, g.draws, g.mean, g.sd);
  }
  if (!args.quiet)
    std::printf("wrote %s/%smetrics.csv%s\n", args.output.c_str(),
                method == "independent" ? "" : "posterior.json, draws.csv, ",
                method == "independent" ? "; each silo writes silo-K/global.json and silo-K/posterior.json"
                                        : "; each silo writes its local posterior to silo-K/posterior.json");
  return 0;
}

std::unique_ptr<SiloHost> sfvi_silo_host(const fvi_model& model, const engine::Settings& settings,
                                         const std::string& method, data::DataSet data, int silo, int silos) {
  return std::make_unique<SfviSiloHost>(model, settings, method, std::move(data), silo, silos);
}

}  // namespace fvi::program
