#include "fvi/program/vfl_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "fvi/data/readers.h"
#include "fvi/engine/vfl.h"
#include "fvi/data/validate.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/output.h"
#include "fvi/program/parallel.h"
#include "fvi/program/predictive.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;
using engine::VflServer;
using engine::VflSilo;

Message flat(const Eigen::MatrixXd& m) { return Message(m.data(), m.data() + m.size()); }
Eigen::MatrixXd matrix(const double* data, Eigen::Index rows, Eigen::Index cols) {
  return Eigen::Map<const Eigen::MatrixXd>(data, rows, cols);
}

// The server's side of the exchanges of a vertical model (seed 004 Algs. 1-2) over a Transport.
// A silo whose z_k is missing in an iteration is represented by the last z_k it sent (zeros
// before its first), and it takes no step that iteration (docs/deployment.md, "Dropouts").
class VerticalFederation {
 public:
  VerticalFederation(VflServer& server, Transport& transport, bool power, Eigen::Index rows, long draws)
      : server_(server), transport_(transport), power_(power), rows_(rows), draws_(draws),
        last_z_(transport.silos(), Eigen::MatrixXd::Zero(rows, draws)) {}

  // One iteration of Algorithm 1 or 2. Returns the ELBO estimate (the parties' terms summed).
  double iteration(uint32_t t) {
    const int J = transport_.silos();
    const Eigen::Index N = rows_, S = draws_, G = server_.global_dim();
    // Alg. 1 step 14 / Alg. 2 step 21: each silo draws z_k and keeps its noise; z_k goes up.
    std::vector<Message> z(J);
    exchange(t, Phase::kVflPropose, [](int) { return Message{}; }, z, size_t(N * S));
    for (int k = 0; k < J; ++k)
      if (!z[k].empty()) last_z_[k] = matrix(z[k].data(), N, S);
    Eigen::MatrixXd z_all = last_z_[0];
    for (int k = 1; k < J; ++k) z_all += last_z_[k];
    const Eigen::MatrixXd eps = server_.global_noise(t);
    double server_term = 0;
    Eigen::VectorXd d_server;
    std::vector<Message> adjoint(J);
    if (!power_) {
      // Alg. 1 steps 4-6: G = dL0/dz_sum, one vector, the same for every silo.
      Eigen::MatrixXd grad;
      server_term = server_.augmented_gradient(eps, z_all, grad, d_server);
      const Message down = flat(grad);
      for (int k = 0; k < J; ++k) adjoint[k] = down;
    } else {
      // Alg. 2 steps 5-9: silo k gets the globals' draws and sum_{j != k} z_j (never another
      // silo's own z), and returns H_k and its globals' gradient.
      const Eigen::MatrixXd globals = server_.globals(eps);
      std::vector<Message> up(J);
      exchange(
          t, Phase::kVflPower,
          [&](int k) {
            Message m = flat(globals);
            const Message others = flat(z_all - last_z_[k]);
            m.insert(m.end(), others.begin(), others.end());
            return m;
          },
          up, size_t(N * S + G * S));
      Eigen::MatrixXd H_all = Eigen::MatrixXd::Zero(N, S), d_sum = Eigen::MatrixXd::Zero(G, S);
      std::vector<Eigen::MatrixXd> H(J, Eigen::MatrixXd::Zero(N, S));
      for (int k = 0; k < J; ++k) {
        if (up[k].empty()) continue;
        H[k] = matrix(up[k].data(), N, S);
        H_all += H[k];
        d_sum += matrix(up[k].data() + N * S, G, S);
      }
      // Alg. 2 steps 11-14: H_j = sum_{k != j} dL_{0,k}/dz_j goes back to silo j.
      for (int k = 0; k < J; ++k) adjoint[k] = flat(H_all - H[k]);
      server_term = server_.prior_gradient(eps, d_sum, d_server);
    }
    server_.step(d_server);
    std::vector<Message> terms(J);
    // Silos that did not propose this iteration take no step (their kept draw is an old one).
    std::vector<int> proposed;
    for (int k = 0; k < J; ++k)
      if (!z[k].empty()) proposed.push_back(k);
    if (!proposed.empty()) exchange(t, Phase::kVflUpdate, [&](int k) { return adjoint[k]; }, terms, 1, proposed);
    double total = server_term;
    for (int k = 0; k < J; ++k)
      if (!terms[k].empty()) total += terms[k][0];
    return total;
  }

  // seed 004 §5.3's held-out scoring: z_k* ~ N(m_k*, rho^2) from each silo, summed.
  Eigen::MatrixXd predictive_z_sum(uint32_t round, Eigen::Index rows, long draws, uint64_t key) {
    std::vector<Message> z(transport_.silos());
    exchange(round, Phase::kVflPredict, [&](int) { return Message{double(key), double(draws)}; }, z,
             size_t(rows * draws));
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(rows, draws);
    for (const Message& m : z)
      if (!m.empty()) sum += matrix(m.data(), rows, draws);
    return sum;
  }

  void finish(uint32_t round) {
    std::vector<Message> none(transport_.silos());
    exchange(round, Phase::kVflFinish, [](int) { return Message{}; }, none, 0);
  }

  const std::vector<Eigen::MatrixXd>& last_z() const { return last_z_; }
  void set_last_z(std::vector<Eigen::MatrixXd> z) { last_z_ = std::move(z); }

 private:
  void exchange(uint32_t round, Phase phase, std::function<Message(int)> request, std::vector<Message>& up,
                size_t reply_size, std::vector<int> silos = {}) {
    Exchange x;
    x.round = round;
    x.phase = phase;
    x.silos = std::move(silos);
    x.request = std::move(request);
    x.reply = [&](int k, Message& m) {
      std::string reason = check_reply(m, reply_size);
      if (reason.empty()) up[k] = std::move(m);
      return reason;
    };
    transport_.exchange(x);
  }

  VflServer& server_;
  Transport& transport_;
  bool power_;
  Eigen::Index rows_;
  long draws_;
  std::vector<Eigen::MatrixXd> last_z_;
};

// Draws of a mean-field Gaussian for the output files (stream kUserStream + 3, party `party`).
Eigen::MatrixXd output_draws_of(const MeanFieldGaussian<double>& q, uint64_t seed, uint32_t party, long draws) {
  CounterRng rng(RngKey{seed, party, 0, rng_stream::kUserStream + 3});
  return q.sample(rng.normal(q.dim(), draws));
}

// Silo k's split parameters (q(theta_k)) and split hyperparameters (point estimates, sd 0):
// written by the silo to OUT/silo-K/posterior.json; nothing of them reaches the server.
void write_split_posterior(const std::string& dir, const fvi_model& model, const fvi_data& data, const VflSilo& silo,
                           const PosteriorSummary& summary, long draws, uint64_t seed) {
  std::vector<VariableLayout> layout = variable_layout(model, "split", data);
  const Eigen::Index p = silo.split_dim(), h = silo.hyper_dim();
  for (VariableLayout v : variable_layout(model, "split_hyper", data)) {
    v.offset += p;
    layout.push_back(v);
  }
  if (layout.empty()) return;
  const MeanFieldGaussian<double> q = silo.q_theta();
  Eigen::MatrixXd u(p + h, draws);
  u.topRows(p) = output_draws_of(q, seed, uint32_t(silo.silo()), draws);
  u.bottomRows(h) = silo.hyper().replicate(1, draws);
  Eigen::VectorXd mean(p + h), sd = Eigen::VectorXd::Zero(p + h);
  mean << q.mean(), silo.hyper();
  sd.head(p) = q.sd();
  std::filesystem::create_directories(dir);
  write_posterior_json(dir + "/posterior.json", summary, layout, constrain(layout, u), mean, sd);
}

// Held-out rows of a vertical model, the server's part: the labels (or the public outcome) with
// the coupling likelihood bound to them. Each silo holds its own columns of the same rows.
struct HeldOutRows {
  std::unique_ptr<data::DataSet> server;  // on the heap: the likelihood keeps views into it
  std::unique_ptr<engine::BoundFactor> likelihood;
};

HeldOutRows load_held_out_rows(const fvi_model& model, const std::string& path) {
  data::DataSet public_data = data::load_party(path, "data"), server = data::load_party(path, "server");
  data::Problems problems;
  data::validate_party(*model.data_table, data::Party::Public, public_data, data::DataSet(), problems);
  data::validate_party(*model.data_table, data::Party::Server, server, public_data, problems);
  if (!problems.empty()) throw data::DataError("--test " + path + ": " + problems.text());
  HeldOutRows out;
  out.server = std::make_unique<data::DataSet>(std::move(server).merged(public_data));
  for (int f = 0; f < model.factor_count && !out.likelihood; ++f)
    if (model.factors[f].kind == FVI_LIKELIHOOD && model.factors[f].owner == FVI_COUPLING)
      out.likelihood = std::make_unique<engine::BoundFactor>(model, f, out.server->view());
  return out;
}

// A silo of a vertical model: its columns, its VflSilo, and the answers to the server's requests.
class VflSiloHost : public SiloHost, public SiloEndpoint {
 public:
  VflSiloHost(const fvi_model& model, const engine::Settings& settings, const std::string& method, data::DataSet data,
              int silo, int silos)
      : model_(model),
        options_(engine::VflOptions::from(settings, method == "vfl_power")),
        data_(std::move(data)),
        silo_(model, data_.view(), silo, silos, options_),
        summary_{model.name, method, silos, int(settings.integer("rounds", 1000)), {}},
        draws_(output_draws(settings, 1)) {}

  SiloEndpoint& endpoint() override { return *this; }
  std::string describe() const override {
    return "silo " + std::to_string(silo_.silo()) + ": " + std::to_string(silo_.rows()) + " rows, " +
           std::to_string(silo_.split_dim()) + " split parameters, " + std::to_string(silo_.hyper_dim()) +
           " split hyperparameters (kept in the silo)";
  }
  void set_test_data(data::DataSet data) override { test_ = std::make_unique<data::DataSet>(std::move(data)); }

  Message handle(uint32_t round, Phase phase, const Message& request) override {
    const Eigen::Index N = silo_.rows(), S = options_.mc_samples;
    auto expect = [&](size_t n) {
      const std::string bad = check_reply(request, n);
      if (!bad.empty()) throw std::invalid_argument(std::string("the server's ") + phase_name(phase) + " request has " + bad);
    };
    switch (phase) {
      case Phase::kVflPropose: return flat(silo_.propose(round));
      case Phase::kVflPower: {
        const Eigen::Index G = request.size() >= size_t(N * S) ? Eigen::Index(request.size()) / S - N : 0;
        expect(size_t((G + N) * S));
        const Eigen::MatrixXd globals = matrix(request.data(), G, S), others = matrix(request.data() + G * S, N, S);
        Eigen::MatrixXd d_globals = Eigen::MatrixXd::Zero(G, S);
        double term = 0;
        Message out = flat(silo_.power_message(globals, others, d_globals, term));
        const Message d = flat(d_globals);
        out.insert(out.end(), d.begin(), d.end());
        return out;
      }
      case Phase::kVflUpdate:
        expect(size_t(N * S));
        return {silo_.update(matrix(request.data(), N, S), round)};
      case Phase::kVflPredict: {
        expect(2);
        if (!test_) throw std::invalid_argument("this silo was given no held-out rows (--test)");
        const long draws = long(request[1]);
        if (draws < 1 || draws > 100000) throw std::invalid_argument("a predictive request for " + std::to_string(request[1]) + " draws");
        return flat(silo_.predictive_z(model_, test_->view(), draws, uint64_t(request[0])));
      }
      case Phase::kVflFinish: finished_ = true; return {};
      default: throw std::invalid_argument(std::string("a vertical silo cannot do ") + phase_name(phase));
    }
  }

  Message state() const override {
    const Eigen::VectorXd s = silo_.checkpoint();
    return Message(s.data(), s.data() + s.size());
  }
  void restore(const Message& m) override { silo_.restore(Eigen::Map<const Eigen::VectorXd>(m.data(), Eigen::Index(m.size()))); }

  void finish(const std::string& dir) override {
    if (finished_) write_split_posterior(dir, model_, data_.view(), silo_, summary_, draws_, options_.seed);
  }

 private:
  const fvi_model& model_;
  engine::VflOptions options_;
  data::DataSet data_;
  VflSilo silo_;
  PosteriorSummary summary_;
  long draws_;
  std::unique_ptr<data::DataSet> test_;
  bool finished_ = false;
};

}  // namespace

int serve_vfl(ServerRun& run) {
  const fvi_model& model = run.model;
  const engine::Settings& settings = run.settings;
  const SimArguments& args = run.args;
  const std::string& method = run.method;
  const int S = run.transport.silos();
  const bool power = method == "vfl_power";
  const engine::VflOptions options = engine::VflOptions::from(settings, power);
  const long rounds = settings.integer("rounds", 1000);
  const long refresh = std::max(1L, settings.integer("refresh", std::max(1L, rounds / 20)));

  VflServer server(model, run.server_data.view(), options, S);
  if (server.rows() <= 0) throw data::DataError("the server's data gives no rows for the likelihood");
  VerticalFederation federation(server, run.transport, power, server.rows(), options.mc_samples);

  // Held-out rows (`--test DIR`): a data directory like --data's; each silo holds its columns.
  HeldOutRows held_out;
  if (!args.test.empty()) held_out = load_held_out_rows(model, args.test);

  if (!args.quiet) {
    std::printf("%s: method = %s, q_z = %s, rho = %g, silos = %d, rounds = %ld\n", run.description.name, method.c_str(),
                !options.auxiliary ? "none" : options.amortized ? "amortized" : "meanfield", options.rho, S, rounds);
    std::printf("  global parameters %lld (on the server), rows %lld\n", (long long)server.global_dim(),
                (long long)server.rows());
    for (const std::string& line : run.silo_lines) std::printf("  %s\n", line.c_str());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  PosteriorSummary summary{run.description.name, method, S, int(rounds), {}};
  long first = 1, in_window = 0;
  double window = 0, seconds_before = 0;
  CheckpointRecord record;
  const Eigen::Index state_size = server.checkpoint().size(), z_size = server.rows() * options.mc_samples;
  if (run.resume && !run.checkpoint.empty() && load_checkpoint(run.checkpoint, "vfl-server", record)) {
    if (record.state.size() != size_t(state_size + 3 + S * z_size))
      throw std::runtime_error(run.checkpoint + ": the checkpoint does not match this model, method and silos");
    server.restore(Eigen::Map<const Eigen::VectorXd>(record.state.data(), state_size));
    const double* at = record.state.data() + state_size;
    in_window = long(at[0]), window = at[1], seconds_before = at[2];
    std::vector<Eigen::MatrixXd> z;
    for (int k = 0; k < S; ++k) z.push_back(matrix(at + 3 + k * z_size, server.rows(), options.mc_samples));
    federation.set_last_z(std::move(z));
    run.transport.restore_traffic(record.traffic);
    summary.elbo = record.extra;
    first = long(record.round) + 1;
    if (!args.quiet) std::printf("resumed from %s after iteration %u\n", run.checkpoint.c_str(), record.round);
  }
  MetricsWriter metrics(args.output + "/metrics.csv", first > 1);
  const auto start = Clock::now();
  auto seconds_now = [&] { return seconds_before + std::chrono::duration<double>(Clock::now() - start).count(); };
  long missing_before = run.transport.missing_replies();  // a progress line says if some silos' replies were missing
  for (long t = first; t <= rounds; ++t) {
    window += federation.iteration(uint32_t(t));
    ++in_window;
    if (t % refresh == 0 || t == rounds) {
      const double elbo = window / double(in_window), seconds = seconds_now();
      summary.elbo.push_back(elbo);
      const long long sent = run.transport.total_sent(), received = run.transport.total_received();
      // Bytes per iteration for each party (the issue's `fvic plan` numbers, measured).
      const double done = double(t);
      std::vector<std::pair<std::string, double>> extra{{"server_bytes_per_iteration", double(sent + received) / done}};
      for (int k = 0; k < S; ++k)
        extra.push_back({"silo" + std::to_string(k + 1) + "_bytes_per_iteration",
                         double(run.transport.traffic()[k].sent + run.transport.traffic()[k].received) / done});
      std::string test_text;
      if (held_out.likelihood) {
        const long draws = 200;
        const Eigen::MatrixXd z_sum =
            federation.predictive_z_sum(uint32_t(t), held_out.likelihood->rows(), draws, options.seed + uint64_t(t));
        const Eigen::MatrixXd globals = output_draws_of(server.q(), options.seed + uint64_t(t), 0, draws);
        test_text = report_metrics(predictive_metrics(*held_out.likelihood, globals, z_sum), extra);
      }
      metrics.row(int(summary.elbo.size()), elbo, seconds, sent, received, extra);
      if (!args.quiet) {
        const std::string missing = missing_note(run.transport.missing_replies() - missing_before, "silo replies");
        std::printf("iteration %6ld/%ld  elbo %.6g%s  %.2f s  sent %s  received %s%s\n", t, rounds, elbo,
                    missing.c_str(), seconds,
                    human_bytes(sent).c_str(), human_bytes(received).c_str(), test_text.c_str());
        std::fflush(stdout);
      }
      missing_before = run.transport.missing_replies();
      window = 0, in_window = 0;
    }
    if (!run.checkpoint.empty()) {
      const Eigen::VectorXd state = server.checkpoint();
      record.kind = "vfl-server";
      record.round = uint32_t(t);
      record.state.assign(state.data(), state.data() + state.size());
      record.state.insert(record.state.end(), {double(in_window), window, seconds_now()});
      for (const Eigen::MatrixXd& z : federation.last_z()) record.state.insert(record.state.end(), z.data(), z.data() + z.size());
      record.extra = summary.elbo;
      record.traffic = run.transport.traffic_counts();
      save_checkpoint(run.checkpoint, record);
    }
  }

  // The server writes the globals; each silo writes its own split block.
  federation.finish(uint32_t(rounds + 1));
  const long draws = output_draws(settings, std::max<Eigen::Index>(1, server.global_dim()));
  const std::vector<VariableLayout> layout = variable_layout(model, "global", run.server_data.view());
  const Eigen::MatrixXd u = output_draws_of(server.q(), options.seed, 0, draws);
  const Eigen::MatrixXd g = constrain(layout, u);
  write_posterior_json(args.output + "/posterior.json", summary, layout, g, server.q().mean(), server.q().sd());
  write_draws_csv(args.output + "/draws.csv", run.description.name, layout, g, server.q().log_density(u),
                  settings.entries());
  if (!args.quiet) {
    print_posterior("the global parameters", layout, g, server.q().mean(), server.q().sd());
    std::printf("wrote %s/posterior.json, draws.csv, metrics.csv; each silo writes its block to silo-K/posterior.json\n",
                args.output.c_str());
  }
  return 0;
}

std::unique_ptr<SiloHost> vfl_silo_host(const fvi_model& model, const engine::Settings& settings,
                                        const std::string& method, data::DataSet data, int silo, int silos) {
  return std::make_unique<VflSiloHost>(model, settings, method, std::move(data), silo, silos);
}

}  // namespace fvi::program
