#include "fvi/program/vfl_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "fvi/data/readers.h"
#include "fvi/engine/vfl.h"
#include "fvi/program/output.h"
#include "fvi/program/parallel.h"
#include "fvi/program/predictive.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

using Clock = std::chrono::steady_clock;
using engine::VflServer;
using engine::VflSilo;

long long bytes_of(const Eigen::MatrixXd& m) { return (long long)(m.size() * sizeof(double)); }

// The server and the silos of a vertical model; each exchange counted as the bytes it sends.
class VerticalFederation {
 public:
  VerticalFederation(VflServer& server, std::vector<std::unique_ptr<VflSilo>>& silos, bool power)
      : silo_sent(silos.size()), silo_received(silos.size()), server_(server), silos_(silos), power_(power) {}

  long long sent = 0, received = 0;
  std::vector<long long> silo_sent, silo_received;  // per silo, this run

  // One iteration of Algorithm 1 or 2. Returns the ELBO estimate (the parties' terms summed).
  double iteration(uint32_t t) {
    const int J = int(silos_.size());
    std::vector<Eigen::MatrixXd> z(J);
    // Alg. 1 step 14 / Alg. 2 step 21: each silo draws z_k and keeps its noise; z_k goes up.
    for_each_silo_in_parallel(J, [&](int k) { z[k] = silos_[k]->propose(t); });
    Eigen::MatrixXd z_all = z[0];
    for (int k = 1; k < J; ++k) z_all += z[k];
    for (int k = 0; k < J; ++k) count_up(k, bytes_of(z[k]));
    const Eigen::MatrixXd eps = server_.global_noise(t);
    std::vector<double> terms(J);
    double server_term = 0;
    Eigen::VectorXd d_server;
    std::vector<Eigen::MatrixXd> adjoint(J);
    if (!power_) {
      // Alg. 1 steps 4-6: G = dL0/dz_sum, one vector, the same for every silo.
      Eigen::MatrixXd G;
      server_term = server_.augmented_gradient(eps, z_all, G, d_server);
      for (int k = 0; k < J; ++k) adjoint[k] = G, count_down(k, bytes_of(G));
    } else {
      // Alg. 2 steps 5-9: silo k gets the globals' draws and sum_{j != k} z_j (never another
      // silo's own z), and returns H_k and its globals' gradient.
      const Eigen::MatrixXd globals = server_.globals(eps);
      std::vector<Eigen::MatrixXd> H(J), d_globals(J);
      for_each_silo_in_parallel(J, [&](int k) {
        d_globals[k] = Eigen::MatrixXd::Zero(globals.rows(), globals.cols());
        double term = 0;
        H[k] = silos_[k]->power_message(globals, z_all - z[k], d_globals[k], term);
      });
      Eigen::MatrixXd H_all = H[0], d_sum = d_globals[0];
      for (int k = 0; k < J; ++k) {
        count_down(k, bytes_of(globals) + bytes_of(z_all));
        count_up(k, bytes_of(H[k]) + bytes_of(d_globals[k]));
        if (k > 0) H_all += H[k], d_sum += d_globals[k];
      }
      // Alg. 2 steps 11-14: H_j = sum_{k != j} dL_{0,k}/dz_j goes back to silo j.
      for (int k = 0; k < J; ++k) adjoint[k] = H_all - H[k], count_down(k, bytes_of(adjoint[k]));
      server_term = server_.prior_gradient(eps, d_sum, d_server);
    }
    server_.step(d_server);
    for_each_silo_in_parallel(J, [&](int k) { terms[k] = silos_[k]->update(adjoint[k], t); });
    double total = server_term;
    for (double v : terms) total += v;
    for (int k = 0; k < J; ++k) count_up(k, sizeof(double));  // the silo's ELBO term (progress)
    return total;
  }

 private:
  void count_up(int k, long long bytes) { received += bytes, silo_sent[k] += bytes; }
  void count_down(int k, long long bytes) { sent += bytes, silo_received[k] += bytes; }

  VflServer& server_;
  std::vector<std::unique_ptr<VflSilo>>& silos_;
  bool power_;
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

// Held-out rows of a vertical model: the server's part (labels) with the coupling likelihood bound
// to it, and each silo's columns of the same rows.
struct HeldOutRows {
  std::unique_ptr<data::DataSet> server;  // on the heap: the likelihood keeps views into it
  std::vector<data::DataSet> silos;
  std::unique_ptr<engine::BoundFactor> likelihood;
};

HeldOutRows load_held_out_rows(const fvi_model& model, const std::string& path, int silos) {
  data::DataDirectory dir = load_run_data(model, path);
  if (int(dir.silos.size()) != silos)
    throw data::DataError("--test " + path + ": " + std::to_string(dir.silos.size()) + " silos' columns, but the run has " +
                          std::to_string(silos) + " silos");
  HeldOutRows out;
  out.server = std::make_unique<data::DataSet>(std::move(dir.server).merged(dir.public_data));
  for (auto& s : dir.silos) out.silos.push_back(std::move(s).merged(dir.public_data));
  for (int f = 0; f < model.factor_count && !out.likelihood; ++f)
    if (model.factors[f].kind == FVI_LIKELIHOOD && model.factors[f].owner == FVI_COUPLING)
      out.likelihood = std::make_unique<engine::BoundFactor>(model, f, out.server->view());
  return out;
}

}  // namespace

int run_vfl(const fvi_model& model, const ModelDescription& description, const engine::Settings& settings,
            const SimArguments& args, const std::string& method) {
  data::DataDirectory dir = load_run_data(model, args.data);
  const int S = int(dir.silos.size());
  const bool power = method == "vfl_power";
  const engine::VflOptions options = engine::VflOptions::from(settings, power);
  const long rounds = settings.integer("rounds", 1000);
  const long refresh = std::max(1L, settings.integer("refresh", std::max(1L, rounds / 20)));

  const data::DataSet server_data = dir.server.merged(dir.public_data);
  VflServer server(model, server_data.view(), options, S);
  std::vector<data::DataSet> silo_data;
  for (int k = 0; k < S; ++k) silo_data.push_back(std::move(dir.silos[k]).merged(dir.public_data));
  std::vector<std::unique_ptr<VflSilo>> silos;
  for (int k = 0; k < S; ++k) {
    silos.push_back(std::make_unique<VflSilo>(model, silo_data[k].view(), k + 1, S, options));
    const int64_t rows = silos[k]->rows(), expected = power ? silos[0]->rows() : server.rows();
    if (rows != expected)
      throw data::DataError(args.data + ": silo " + std::to_string(k + 1) + " holds " + std::to_string(rows) +
                            " rows but " + (power ? "silo 1 holds " : "the server's labels are ") +
                            std::to_string(expected) + "; vertically split data has the same rows in every silo");
  }

  // Held-out rows (`--test DIR`): a data directory like --data's, each silo its columns of them.
  HeldOutRows held_out;
  if (!args.test.empty()) held_out = load_held_out_rows(model, args.test, S);

  if (!args.quiet) {
    std::printf("%s: method = %s, q_z = %s, rho = %g, silos = %d, rounds = %ld\n", description.name, method.c_str(),
                !options.auxiliary ? "none" : options.amortized ? "amortized" : "meanfield", options.rho, S, rounds);
    std::printf("  global parameters %lld (on the server), rows %lld\n", (long long)server.global_dim(),
                (long long)silos[0]->rows());
    for (const auto& s : silos)
      std::printf("  silo %d: %lld split parameters, %lld split hyperparameters (kept in the silo)\n", s->silo(),
                  (long long)s->split_dim(), (long long)s->hyper_dim());
    for (const auto& [key, value] : settings.entries()) std::printf("  %s = %s\n", key.c_str(), value.c_str());
    std::fflush(stdout);
  }

  MetricsWriter metrics(args.output + "/metrics.csv");
  PosteriorSummary summary{description.name, method, S, int(rounds), {}};
  VerticalFederation federation(server, silos, power);
  const auto start = Clock::now();
  double window = 0;
  long in_window = 0;
  for (long t = 1; t <= rounds; ++t) {
    window += federation.iteration(uint32_t(t));
    ++in_window;
    if (t % refresh == 0 || t == rounds) {
      const double elbo = window / double(in_window), seconds = std::chrono::duration<double>(Clock::now() - start).count();
      summary.elbo.push_back(elbo);
      // Bytes per iteration for each party (the issue's `fvic plan` numbers, measured).
      std::vector<std::pair<std::string, double>> extra{
          {"server_bytes_per_iteration", double(federation.sent + federation.received) / double(t)}};
      for (int k = 0; k < S; ++k)
        extra.push_back({"silo" + std::to_string(k + 1) + "_bytes_per_iteration",
                         double(federation.silo_sent[k] + federation.silo_received[k]) / double(t)});
      std::string test_text;
      if (held_out.likelihood) {
        // seed 004 §5.3's held-out scoring: z_k* ~ N(m_k*, rho^2) from each silo, summed.
        const long draws = 200;
        Eigen::MatrixXd z_sum = Eigen::MatrixXd::Zero(held_out.likelihood->rows(), draws);
        for (int k = 0; k < S; ++k)
          z_sum += silos[k]->predictive_z(model, held_out.silos[k].view(), draws, options.seed + uint64_t(t));
        const Eigen::MatrixXd globals = output_draws_of(server.q(), options.seed + uint64_t(t), 0, draws);
        test_text = report_metrics(predictive_metrics(*held_out.likelihood, globals, z_sum), extra);
      }
      metrics.row(int(summary.elbo.size()), elbo, seconds, federation.sent, federation.received, extra);
      if (!args.quiet) {
        std::printf("iteration %6ld/%ld  elbo %.6g  %.2f s  sent %s  received %s%s\n", t, rounds, elbo, seconds,
                    human_bytes(federation.sent).c_str(), human_bytes(federation.received).c_str(), test_text.c_str());
        std::fflush(stdout);
      }
      window = 0, in_window = 0;
    }
  }

  // The server writes the globals; each silo writes its own split block.
  const long draws = output_draws(settings, std::max<Eigen::Index>(1, server.global_dim()));
  const std::vector<VariableLayout> layout = variable_layout(model, "global", server_data.view());
  const Eigen::MatrixXd u = output_draws_of(server.q(), options.seed, 0, draws);
  const Eigen::MatrixXd g = constrain(layout, u);
  write_posterior_json(args.output + "/posterior.json", summary, layout, g, server.q().mean(), server.q().sd());
  write_draws_csv(args.output + "/draws.csv", description.name, layout, g, server.q().log_density(u), settings.entries());
  if (!args.quiet) print_posterior("the global parameters", layout, g, server.q().mean(), server.q().sd());
  for (int k = 0; k < S; ++k)
    write_split_posterior(args.output + "/silo-" + std::to_string(k + 1), model, silo_data[k].view(), *silos[k], summary,
                          draws, options.seed);
  if (!args.quiet)
    std::printf("wrote %s/posterior.json, draws.csv, metrics.csv; each silo's block in silo-K/posterior.json\n",
                args.output.c_str());
  return 0;
}

}  // namespace fvi::program
