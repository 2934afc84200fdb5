#include "fvi/program/vfl_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>
#include <stdexcept>

#include "fvi/data/readers.h"
#include "fvi/engine/vfl.h"
#include "fvi/message/codec.h"
#include "fvi/message/sizes.h"
#include "fvi/math/constants.h"
#include "fvi/data/validate.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/output.h"
#include "fvi/program/parallel.h"
#include "fvi/program/predictive.h"
#include "fvi/program/quantities.h"
#include "fvi/program/server_loop.h"
#include "fvi/program/silo_settling.h"
#include "fvi/program/vfl_tail_check.h"
#include "fvi/rng.h"

namespace fvi::program {

// The stopping rule's safety net for VFL iterations (max_rounds' default): the acceptance model
// examples/vfl_poisson_multilevel converges by the rule after 25,600 with its own inference block.
constexpr long kVflMaxIterations = 40000;

namespace {

using engine::VflServer;
using engine::VflSilo;

// One matrix, column-major: most vertical messages (message/codec.h).
Message flat(const Eigen::MatrixXd& m) { return message::Writer().values(m).done(); }
// A whole message read as one matrix (its size checked by the exchange).
Eigen::MatrixXd matrix(const Message& m, Eigen::Index rows, Eigen::Index cols, const char* what) {
  message::Reader in(m, what);
  Eigen::MatrixXd out = in.matrix(rows, cols, "the values");
  in.finish();
  return out;
}

// The server's side of the exchanges of a vertical model (seed 004 Algs. 1-2) over a Transport.
// A silo whose z_k is missing in an iteration is represented by the last z_k it sent (zeros
// before its first), and it takes no step that iteration (docs/deployment.md, "Dropouts").
class VerticalFederation {
 public:
  VerticalFederation(VflServer& server, Transport& transport, bool power, Eigen::Index rows, long draws,
                     bool prior_globals)
      : server_(server), transport_(transport), power_(power), prior_globals_(prior_globals && !power), rows_(rows),
        draws_(draws), last_z_(transport.silos(), Eigen::MatrixXd::Zero(rows, draws)) {}

  // The stopping rule's schedule for the silos' split blocks, which every propose request states
  // (fvi/program/silo_settling.h): a silo that missed one is on it again at its next.
  void set_schedule(double scale, long epoch) { scale_ = scale, epoch_ = epoch; }

  // The draws per gradient from the next iteration on (the stopping rule's doubling). A silo that
  // misses an iteration is represented by its last z_k: its columns, repeated to the new count.
  void set_draws(long draws) {
    if (draws == draws_) return;
    for (Eigen::MatrixXd& z : last_z_) {
      Eigen::MatrixXd wider(rows_, draws);
      for (long s = 0; s < draws; ++s) wider.col(s) = z.col(s % z.cols());
      z = std::move(wider);
    }
    draws_ = draws;
  }
  long draws() const { return draws_; }

  // One iteration of Algorithm 1 or 2. Returns the ELBO estimate (the parties' terms summed).
  double iteration(uint32_t t) {
    const int J = transport_.silos();
    const Eigen::Index N = rows_, S = draws_, G = server_.global_dim();
    // Alg. 1 step 14 / Alg. 2 step 21: each silo draws z_k and keeps its noise; z_k goes up.
    std::vector<Message> z(J);
    const Message schedule = silo_schedule_message(scale_, epoch_, draws_);
    exchange(t, Phase::kVflPropose, [&](int) { return schedule; }, z, size_t(message::vfl_rows_size<int64_t>(N, S)));
    for (int k = 0; k < J; ++k)
      if (!z[k].empty()) last_z_[k] = matrix(z[k], N, S, "z_k");
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
      // Split priors that read globals get their draws at the same noise (Phase::kVflUpdate).
      const Message down = prior_globals_ ? message::Writer().values(grad).values(server_.globals(eps)).done() : flat(grad);
      for (int k = 0; k < J; ++k) adjoint[k] = down;
    } else {
      // Alg. 2 steps 5-9: silo k gets the globals' draws and sum_{j != k} z_j (never another
      // silo's own z), and returns H_k and its globals' gradient.
      const Eigen::MatrixXd globals = server_.globals(eps);
      std::vector<Message> up(J);
      exchange(
          t, Phase::kVflPower,
          [&](int k) { return message::Writer().values(globals).values(z_all - last_z_[k]).done(); },
          up, size_t(message::vfl_power_size<int64_t>(N, G, S)));
      Eigen::MatrixXd H_all = Eigen::MatrixXd::Zero(N, S), d_sum = Eigen::MatrixXd::Zero(G, S);
      std::vector<Eigen::MatrixXd> H(J, Eigen::MatrixXd::Zero(N, S));
      for (int k = 0; k < J; ++k) {
        if (up[k].empty()) continue;
        message::Reader in(up[k], "the power reply");
        H[k] = in.matrix(N, S, "H_k");
        H_all += H[k];
        d_sum += in.matrix(G, S, "the globals' gradient");
        in.finish();
      }
      // Alg. 2 steps 11-14: H_j = sum_{k != j} dL_{0,k}/dz_j goes back to silo j.
      for (int k = 0; k < J; ++k) adjoint[k] = flat(H_all - H[k]);
      server_term = server_.prior_gradient(eps, d_sum, d_server);
    }
    std::vector<Message> terms(J);
    // Silos that did not propose this iteration take no step (their kept draw is an old one).
    std::vector<int> proposed;
    for (int k = 0; k < J; ++k)
      if (!z[k].empty()) proposed.push_back(k);
    const Eigen::Index prior_draws = prior_globals_ ? G * S : 0;  // each silo's priors' gradient in the globals
    if (!proposed.empty())
      exchange(t, Phase::kVflUpdate, [&](int k) { return adjoint[k]; }, terms,
               size_t(message::vfl_update_reply_size<int64_t>(N) + prior_draws), proposed);
    double total = server_term;
    Eigen::MatrixXd d_globals = Eigen::MatrixXd::Zero(G, S);
    for (int k = 0; k < J; ++k) {
      if (terms[k].empty()) continue;
      message::Reader in(terms[k], "a silo's update reply");
      total += in.value("its ELBO term");
      if (prior_globals_) d_globals += in.matrix(G, S, "its priors' gradient in the globals");
      in.finish();
    }
    // The server steps once the silos' split priors have added their part in the globals (a silo
    // whose reply is missing adds none this iteration).
    if (prior_globals_) d_server += server_.path_gradient(eps, d_globals);
    server_.step(d_server);
    return total;
  }

  // seed 004 §5.3's held-out scoring: z_k* ~ N(m_k*, rho^2) from each silo, summed.
  Eigen::MatrixXd predictive_z_sum(uint32_t round, Eigen::Index rows, long draws, uint64_t key) {
    std::vector<Message> z(transport_.silos());
    exchange(round, Phase::kVflPredict, [&](int) { return Message{double(key), double(draws)}; }, z,
             size_t(rows * draws));
    Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(rows, draws);
    for (const Message& m : z)
      if (!m.empty()) sum += matrix(m, rows, draws, "z_k*");
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
  bool prior_globals_;  // split priors read globals (engine::split_priors_read_globals)
  Eigen::Index rows_;
  long draws_;
  double scale_ = 1;  // the rule's schedule for the silos, with draws_
  long epoch_ = 0;
  std::vector<Eigen::MatrixXd> last_z_;
};

// Silo k's split parameters (q(theta_k)) and split hyperparameters (point estimates, sd 0):
// written by the silo to OUT/silo-K/posterior.json; nothing of them reaches the server.
void write_split_posterior(const std::string& dir, const fvi_model& model, const fvi_data& data, const VflSilo& silo,
                           const PosteriorSummary& summary, long draws, uint64_t seed,
                           const engine::Settings& settings) {
  std::vector<VariableLayout> layout = variable_layout(model, FVI_GROUP_SPLIT, data);
  const Eigen::Index p = silo.split_dim(), h = silo.hyper_dim();
  for (VariableLayout v : variable_layout(model, FVI_GROUP_SPLIT_HYPER, data)) {
    v.offset += p;
    layout.push_back(v);
  }
  bool derived = false;  // transformed parameters and generated quantities of the split block
  for (int i = 0; i < model.quantity_count; ++i) derived |= model.quantities[i].owner == FVI_SPLIT_SILO;
  if (layout.empty() && !derived) return;
  // The joint family's draws are the server's output draws' partners (the same joint noise).
  Eigen::MatrixXd u(p + h, draws);
  u.topRows(p) = silo.theta_draws(silo.theta_noise(seed, rng_stream::kUserStream + 3, draws));
  u.bottomRows(h) = silo.hyper().replicate(1, draws);
  Eigen::VectorXd mean(p + h), sd = Eigen::VectorXd::Zero(p + h);
  mean << silo.theta_mean(), silo.hyper();
  sd.head(p) = silo.theta_sd();
  std::filesystem::create_directories(dir);
  Eigen::MatrixXd x = constrain(layout, u);
  const std::vector<VariableLayout> parameters = layout;
  if (derived) {
    GroupDraws groups{{FVI_GROUP_SPLIT, u.topRows(p)}};
    if (h > 0) groups[FVI_GROUP_SPLIT_HYPER] = silo.hyper();
    add_silo_quantities(model, data, silo.silo(), groups, seed, layout, x, FVI_SPLIT_SILO);
  }
  write_posterior_json(dir + "/posterior.json", summary, layout, x, mean, sd);
  // OUT/silo-K/draws.csv: the silo's own block (log_p__ 0: the log joint needs every party's data).
  DrawsFile file;
  file.model = model.name;
  file.layout = layout;
  file.mean.resize(x.rows());
  file.mean << constrain(parameters, mean).col(0), x.bottomRows(x.rows() - (p + h)).rowwise().mean();
  file.draws = x;
  file.log_g = silo.theta_log_q(u.topRows(p));
  file.log_p = Eigen::VectorXd::Zero(draws);
  file.config = settings.entries();
  file.fvic = {{"log_p", "0: the log joint needs every silo's data"}, {"family", silo.joint() ? "fullrank" : "meanfield"}};
  write_draws_csv(dir + "/draws.csv", file);
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
        settings_(settings),
        options_(engine::VflOptions::from(settings, method)),
        data_(std::move(data)),
        silo_(model, data_.view(), silo, silos, options_),
        summary_{model.name, method, silos, int(max_steps(settings, kVflMaxIterations)), {}},
        draws_(output_draws(settings, 1)) {}

  SiloEndpoint& endpoint() override { return *this; }
  std::string describe() const override {
    return "silo " + std::to_string(silo_.silo()) + ": " + std::to_string(silo_.rows()) + " rows, " +
           std::to_string(silo_.split_dim()) + " split parameters, " + std::to_string(silo_.hyper_dim()) +
           " split hyperparameters (kept in the silo)" + steps_scaled();
  }
  // What contribution_scales found, where a scale exceeds 1 (as SFVI's header says it).
  std::string steps_scaled() const {
    const Eigen::VectorXd& s = silo_.step_scales();
    if (s.size() == 0 || !(s.maxCoeff() > 1)) return "";
    char range[64], text[192];
    if (s.size() == 1) std::snprintf(range, sizeof range, "%.3g", s[0]);
    else std::snprintf(range, sizeof range, "%.3g to %.3g", s.minCoeff(), s.maxCoeff());
    std::snprintf(text, sizeof text, "; steps scaled by %s (the sds of its columns: Adam walks each coefficient as a "
                                     "standardised column's)", range);
    return text;
  }
  void set_test_data(data::DataSet data) override { test_ = std::make_unique<data::DataSet>(std::move(data)); }

  Message handle(uint32_t round, Phase phase, const Message& request) override {
    auto expect = [&](size_t n) {
      const std::string bad = check_reply(request, n);
      if (!bad.empty()) throw std::invalid_argument(std::string("the server's ") + phase_name(phase) + " request has " + bad);
    };
    if (phase == Phase::kVflPropose) {
      expect(kSiloScheduleSize);
      const SiloSchedule s = read_silo_schedule(request, options_.mc_samples);
      silo_.set_schedule(s.scale, s.epoch);
      silo_.set_mc_samples(s.draws);
      return flat(silo_.propose(round));
    }
    const Eigen::Index N = silo_.rows(), S = silo_.mc_samples();
    switch (phase) {
      case Phase::kVflPower: {
        const Eigen::Index G = request.size() >= size_t(N * S) ? Eigen::Index(request.size()) / S - N : 0;
        expect(size_t(message::vfl_power_size<int64_t>(N, G, S)));
        message::Reader in(request, "the server's power request");
        const Eigen::MatrixXd globals = in.matrix(G, S, "the globals' draws");
        const Eigen::MatrixXd others = in.matrix(N, S, "the other silos' z");
        in.finish();
        Eigen::MatrixXd d_globals = Eigen::MatrixXd::Zero(G, S);
        double term = 0;
        const Eigen::MatrixXd H = silo_.power_message(globals, others, d_globals, term);
        return message::Writer().values(H).values(d_globals).done();
      }
      case Phase::kVflUpdate: {
        // With split priors that read globals, their draws follow the adjoint, and the priors'
        // gradient in them the term.
        const Eigen::Index G = silo_.prior_reads_globals() ? silo_.global_dim() : 0;
        expect(size_t(message::vfl_rows_size<int64_t>(N, S) + G * S));
        message::Reader in(request, "the server's update request");
        const Eigen::MatrixXd adjoint = in.matrix(N, S, "the server's adjoint");
        if (G > 0) silo_.set_prior_globals(in.matrix(G, S, "the globals' draws"));
        in.finish();
        const double term = silo_.update(adjoint, round);
        return G > 0 ? message::Writer().value(term).values(silo_.prior_globals_gradient()).done() : Message{term};
      }
      case Phase::kVflPredict: {
        expect(2);
        if (!test_) throw std::invalid_argument("this silo was given no held-out rows (--test)");
        const KeyedDraws head = read_keyed_draws(request, "a predictive request");
        return flat(silo_.predictive_z(model_, test_->view(), head.draws, head.key));
      }
      case Phase::kVflLogJoint: {
        // [key, draws], then the globals' draws where the split priors read them.
        const KeyedDraws head = read_keyed_draws(request, "a log-joint request");
        const long draws = head.draws;
        const Eigen::Index G = silo_.prior_reads_globals() ? silo_.global_dim() : 0;
        expect(size_t(2 + G * draws));
        const Eigen::MatrixXd globals =
            Eigen::Map<const Eigen::MatrixXd>(request.data() + 2, G, G > 0 ? draws : 0);
        const VflSilo::LogJointPart part = silo_.log_joint_part(head.key, draws, globals);
        return message::Writer().values(part.eta).values(part.log_prior.head(draws)).values(part.log_q.head(draws)).done();
      }
      case Phase::kVflTailDraws: return vfl_tail_draws(silo_, request);
      case Phase::kVflTailMoments:
        return vfl_tail_moments(silo_, model_, data_.view(), request, options_.seed, draws_);
      case Phase::kVflLayout: {
        if (request.empty()) return {double(silo_.split_dim())};
        expect(3);
        const double total = request[2], offset = request[1];
        if (!(total >= 0 && total <= 1e9 && offset >= 0 && offset <= total && offset == std::floor(offset) &&
              total == std::floor(total)))
          throw std::invalid_argument("a layout request at " + std::to_string(offset) + " of " + std::to_string(total));
        silo_.set_layout(request[0] != 0, Eigen::Index(offset), Eigen::Index(total));
        return {};
      }
      case Phase::kVflScale: {
        expect(1);
        // What the silo takes is its own settings' to allow, as the server's start is.
        if (!options_.exact || settings_.name("mode_start", "on") == "off")
          throw std::invalid_argument("this silo does not take an outcome scale (method " +
                                      std::string(options_.exact ? "vfl_exact" : "not vfl_exact") + ", mode_start = " +
                                      settings_.name("mode_start", "on") + ")");
        silo_.set_outcome_scale(request[0]);
        return {};
      }
      case Phase::kVflSettled: {
        return settled_.answer(request, [&](double tol) { return silo_.block_settled(tol); });
      }
      case Phase::kVflFinish:
        if (!finished_) silo_.use_average();
        finished_ = true;
        return {};
      default: throw std::invalid_argument(std::string("a vertical silo cannot do ") + phase_name(phase));
    }
  }

  Message state() const override {
    const Eigen::VectorXd s = silo_.checkpoint();
    return Message(s.data(), s.data() + s.size());
  }
  void restore(const Message& m) override { silo_.restore(Eigen::Map<const Eigen::VectorXd>(m.data(), Eigen::Index(m.size()))); }

  void finish(const std::string& dir) override {
    settled_.report(silo_.silo(), "split block", variable_layout(model_, FVI_GROUP_SPLIT, data_.view()));
    if (finished_) write_split_posterior(dir, model_, data_.view(), silo_, summary_, draws_, options_.seed, settings_);
  }

 private:
  const fvi_model& model_;
  engine::Settings settings_;
  engine::VflOptions options_;
  data::DataSet data_;
  VflSilo silo_;
  PosteriorSummary summary_;
  long draws_;
  std::unique_ptr<data::DataSet> test_;
  bool finished_ = false;
  SettledAnswers settled_;  // a block still moving at the end is named
};

// The vertical methods (seed 004 Algs. 1-2) as the server loop's coordinator.
class VflCoordinator : public Coordinator {
 public:
  explicit VflCoordinator(ServerRun& run)
      : run_(run),
        power_(run.method == "vfl_power"),
        prior_globals_(engine::split_priors_read_globals(run.model)),
        options_(engine::VflOptions::from(run.settings, run.method)),
        rounds_(max_steps(run.settings, kVflMaxIterations)),
        refresh_(std::max(1L, run.settings.integer("refresh", std::max(1L, rounds_ / 20)))),
        server_(run.model, run.server_data.view(), options_, run.transport.silos()),
        federation_(server_, run.transport, power_, checked_rows(server_), options_.mc_samples, prior_globals_) {
    if (!run.args.ood.empty())
      throw data::DataError("--ood: a vertical model's held-out rows are split over the silos; the OOD AUROC is "
                            "PVI's and SFVI's");
    // Held-out rows (`--test DIR`): a data directory like --data's; each silo holds its columns.
    if (!run.args.test.empty()) held_out_ = load_held_out_rows(run.model, run.args.test);
  }

  const char* checkpoint_kind() const override { return "vfl-server"; }
  void print_header() const override {
    if (run_.method == "vfl_exact")
      std::printf("%s: method = vfl_exact (the written model: each silo sends its partial predictor), silos = %d, "
                  "rounds = %ld\n",
                  run_.description.name, run_.transport.silos(), rounds_);
    else
      std::printf("%s: method = %s, q_z = %s, rho = %g, silos = %d, rounds = %ld\n", run_.description.name,
                  run_.method.c_str(), !options_.auxiliary         ? "none"
                  : !options_.amortized       ? "meanfield"
                  : options_.residual_offset ? "amortized (q_z_offset = residual)"
                                             : "amortized (q_z_offset = free)",
                  options_.rho, run_.transport.silos(), rounds_);
    if (options_.auxiliary)
      std::printf("  fitting the %s model (AXDA, rho = %g): an approximation of the written model, exact only as "
                  "rho -> 0; its cost is measured at the end\n",
                  power_ ? "power-likelihood" : "augmented", options_.rho);
    if (server_.intercept() >= 0)
      std::printf("  %s: fitted at the silos' summed partial predictors centred at their mean over the rows (the same "
                  "posterior; center = off fits it as written)\n",
                  server_.intercept_name().c_str());
    if (options_.exact && options_.family == "meanfield")
      std::printf("  q: mean-field across the silos (family = meanfield): it ignores the posterior's correlations "
                  "across silos; k-hat says what that costs\n");
    std::printf("  global parameters %lld (on the server), rows %lld\n", (long long)server_.global_dim(),
                (long long)server_.rows());
  }
  long steps() const override { return rounds_; }
  bool reports(long t) const override { return t % refresh_ == 0; }
  double step(long t) override {
    if (!laid_out_) {
      lay_out();
      if (!restored_) start();
    }
    return federation_.iteration(uint32_t(t));
  }
  std::string position(long t) const override {
    char line[64];
    std::snprintf(line, sizeof line, "iteration %6ld/%ld", t, rounds_);
    return line;
  }
  std::string metrics(long t, Extra& extra) override {
    // Bytes per iteration for each party (the issue's `fvic plan` numbers, measured).
    const Transport& transport = run_.transport;
    const double done = double(t);
    extra.push_back({"server_bytes_per_iteration", double(transport.total_sent() + transport.total_received()) / done});
    for (int k = 0; k < transport.silos(); ++k)
      extra.push_back({"silo" + std::to_string(k + 1) + "_bytes_per_iteration",
                       double(transport.traffic()[k].sent + transport.traffic()[k].received) / done});
    if (!held_out_.likelihood) return "";
    const long draws = 200;
    const Eigen::MatrixXd z_sum =
        federation_.predictive_z_sum(uint32_t(t), held_out_.likelihood->rows(), draws, options_.seed + uint64_t(t));
    // The silos draw their blocks from stream kUserStream + 7 of the same key (predictive_z).
    const uint32_t stream = server_.joint() ? rng_stream::kUserStream + 7 : rng_stream::kUserStream + 3;
    const Eigen::MatrixXd globals = server_.globals(server_.output_noise(options_.seed + uint64_t(t), stream, draws));
    return report_metrics(predictive_metrics(*held_out_.likelihood, globals, z_sum), extra);
  }

  void moments(Eigen::VectorXd& mean, Eigen::VectorXd& sd) const override {
    mean = server_.mean();
    sd = server_.sd();
  }
  Eigen::VectorXd params() const override { return server_.params(); }
  void set_params(const Eigen::VectorXd& p) override { server_.set_params(p); }
  // The silos decay their own steps and average their own parameters with the server, and take
  // the draws per gradient the rule asks for (the messages are N x draws values), on the schedule
  // each propose request states.
  void set_schedule(double scale, long epoch, long mc_factor) override {
    server_.set_step_scale(scale);
    const long draws = options_.mc_samples * mc_factor;
    server_.set_mc_samples(draws);
    federation_.set_draws(draws);
    federation_.set_schedule(scale, epoch);
  }
  // The written model's log joint at the output draws: the server's prior and likelihood at
  // b and the silos' summed partial predictors, each silo's split priors; log q of every block.
  bool closing(const ServerDraws& d, Closing& out, std::string& why) override {
    Eigen::VectorXd& log_p = out.log_p;
    Eigen::VectorXd& log_g = out.log_g;
    const long S = long(d.unconstrained.cols());
    const Eigen::Index N = server_.rows();
    // A centred intercept's outputs asked for these parts already (draws()).
    std::vector<Message> replies = std::move(log_joint_parts_);
    if (replies.empty() && !ask_log_joint_parts(S, replies)) {
      why = "not computed (a silo did not answer)";
      return false;
    }
    Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(N, S);
    // The joint family: log q = -|eps|^2 / 2 - total log(2 pi) / 2 - every party's log diagonal;
    // the silos send their diagonals' part, the server adds the rest.
    log_g = server_.joint() ? Eigen::VectorXd(-0.5 * output_noise_.colwise().squaredNorm().transpose().array() -
                                              0.5 * double(server_.joint_total()) * kLog2Pi - server_.log_det())
                            : d.log_q;
    Eigen::VectorXd silo_prior = Eigen::VectorXd::Zero(S);
    for (const Message& m : replies) {
      message::Reader in(m, "a silo's log-joint part");
      eta += in.matrix(N, S, "eta_k");
      silo_prior += in.vector(S, "log p(theta_k)");
      log_g += in.vector(S, "log q(theta_k)");
      in.finish();
    }
    if (!server_.log_joint(d.unconstrained, eta, log_p)) {
      why = "not computed (the server cannot evaluate the likelihood)";
      return false;
    }
    log_p += silo_prior;
    return true;
  }
  // vfl_exact's q over every party's block, drawn by the parties together (vfl_tail_check.h).
  void check_tails(const ServerDraws& d, uint64_t seed, TailCheck& out) override {
    if (options_.exact) vfl_tail_check(server_, run_.transport, run_.model, prior_globals_, d, seed, uint32_t(rounds_ + 3), out);
  }
  std::string target_note() const override {
    if (!options_.auxiliary) return "";
    char text[200];
    std::snprintf(text, sizeof text,
                  "; measured against the written model: this run fitted the %s model (AXDA, rho = %g), an "
                  "approximation of it",
                  power_ ? "power-likelihood" : "augmented", options_.rho);
    return text;
  }
  std::string surrogate_advice() const override {
    // Mean-field q(z): each z_ik is independent of theta_k, and the coupling N(z; m(theta), rho^2)
    // then sets q(theta_k)'s sds by rho and the silo's columns, not by the data
    // (vfl_logreg_power: q(beta)'s sds 0.023, k-hat 1.70; with q_z = amortized k-hat 0.30).
    return std::string(!options_.amortized && options_.auxiliary
                           ? "q_z = meanfield keeps each z independent of theta_k, which pins q(theta_k)'s sds by "
                             "rho rather than by the data: try q_z = amortized. "
                           : "") +
           "A smaller rho brings the " + (power_ ? "power-likelihood" : "augmented") +
           " model closer to the written one; method = vfl_exact fits the written model itself.";
  }
  ConvergenceOptions convergence() const override {
    ConvergenceOptions o;
    o.max_mc_factor = kMaxMcFactor;  // where the gradients' noise holds the average back
    return o;
  }
  std::string unsettled(long t, double tol_param) override {
    Settling s = ask_silos_settled(run_.transport, uint32_t(t), Phase::kVflSettled, tol_param, "split block");
    settled_note_ = std::move(s.note);
    return s.unsettled;
  }
  std::string settled_note() const override { return settled_note_; }
  const char* unit() const override { return "iterations"; }

  // [the server's state, the draws per gradient, each silo's last z_k (rows x draws)].
  std::vector<double> state() const override {
    const Eigen::VectorXd s = server_.checkpoint();
    std::vector<double> m(s.data(), s.data() + s.size());
    m.push_back(double(federation_.draws()));
    for (const Eigen::MatrixXd& z : federation_.last_z()) m.insert(m.end(), z.data(), z.data() + z.size());
    return m;
  }
  void restore(const std::vector<double>& m) override {
    restored_ = true;
    const int J = run_.transport.silos();
    const Eigen::Index state_size = server_.checkpoint().size();
    const double stored = m.size() > size_t(state_size) ? m[size_t(state_size)] : 0;
    if (!(stored >= 1 && stored <= double(kMaxMcFactor * options_.mc_samples) && stored == std::floor(stored)))
      throw std::invalid_argument("the server's state has a damaged draws per gradient");
    const long draws = long(stored);
    const Eigen::Index z_size = server_.rows() * draws;
    if (m.size() != size_t(state_size + 1 + J * z_size))
      throw std::invalid_argument("the server's state has " + std::to_string(m.size()) + " values");
    server_.restore(Eigen::Map<const Eigen::VectorXd>(m.data(), state_size));
    server_.set_mc_samples(draws);
    federation_.set_draws(draws);
    std::vector<Eigen::MatrixXd> z;
    for (int k = 0; k < J; ++k)
      z.push_back(Eigen::Map<const Eigen::MatrixXd>(m.data() + state_size + 1 + k * z_size, server_.rows(), draws));
    federation_.set_last_z(std::move(z));
  }

  // The server writes the globals; each silo writes its own split block.
  void finish(long last_step) override { federation_.finish(uint32_t(last_step + 1)); }
  std::optional<ServerDraws> draws() override {
    // k-hat asks each silo for its partial predictor at every draw: no more than 10^6 values.
    const long count = std::min(output_draws(run_.settings, std::max<Eigen::Index>(1, server_.global_dim())),
                                std::max(100L, long(kMaxLogJointRequest / std::max<Eigen::Index>(1, server_.rows()))));
    ServerDraws d;
    d.layout = variable_layout(run_.model, FVI_GROUP_GLOBAL, run_.server_data.view());
    output_noise_ = server_.output_noise(options_.seed, rng_stream::kUserStream + 3, count);
    d.unconstrained = server_.globals(output_noise_);
    d.constrained = constrain(d.layout, d.unconstrained);
    d.mean = server_.mean();
    d.sd = server_.sd();
    d.log_q = server_.marginal_log_q(output_noise_);
    d.what = "the global parameters";
    d.family = server_.joint() ? "fullrank" : "meanfield";
    if (server_.intercept() >= 0) write_intercept(d);
    return d;
  }
  std::string fit_coordinate(Eigen::Index i) const override {
    return i == server_.intercept() ? " (fitted at the centred sum of the silos' partial predictors)" : "";
  }
  std::string outputs_note() const override { return "; each silo writes its block to silo-K/posterior.json"; }

 private:
  // vfl_exact, once, before the first iteration (and again after a resume, which changes nothing): each silo
  // says the size of its block; the server chooses the family (use_joint_family) and tells each
  // silo its offset in the joint order: the globals, then silo 1's block, silo 2's, ...
  void lay_out() {
    laid_out_ = true;
    // Only vfl_exact can take the joint family: the AXDA methods exchange nothing for it.
    if (!options_.exact || options_.family == "meanfield") return;
    // Two rounds (0, then 1) of the phase: a deployed silo answers a repeated (phase, round) from
    // its reply cache.
    std::vector<Message> sizes;
    if (!ask_every_silo(run_.transport, 0, Phase::kVflLayout, {}, 1, sizes))
      throw std::runtime_error("a silo did not say the size of its split block (the layout needs every silo)");
    std::vector<Eigen::Index> offset;
    Eigen::Index total = server_.global_dim();
    for (const Message& m : sizes) {
      if (!(m[0] >= 0 && m[0] <= 1e7 && m[0] == std::floor(m[0])))
        throw std::runtime_error("a silo's block size " + std::to_string(m[0]) + " is not a count");
      offset.push_back(total);
      total += Eigen::Index(m[0]);
    }
    const bool joint = engine::use_joint_family(options_, total);
    server_.set_layout(joint, total);
    Exchange x;
    x.round = 1;
    x.phase = Phase::kVflLayout;
    x.request = [&](int k) { return Message{double(joint), double(offset[size_t(k)]), double(total)}; };
    x.reply = [](int, Message& m) { return check_reply(m, 0); };
    const std::vector<bool> told = run_.transport.exchange(x);
    if (!std::all_of(told.begin(), told.end(), [](bool b) { return b; }))
      throw std::runtime_error("a silo did not take its place in the joint family's layout");
    if (run_.args.quiet || announced_) return;
    announced_ = true;
    if (joint)
      std::printf("  q: one full-rank Gaussian over the globals and every silo's block (%lld parameters; each party "
                  "holds its rows of the Cholesky factor and draws the same noise)\n",
                  (long long)total);
    else
      std::printf("  q: mean-field across the silos (%lld parameters, over the full-rank limit of %lld): it ignores "
                  "the posterior's correlations across silos; k-hat says what that costs\n",
                  (long long)total, (long long)engine::kJointAutoLimit);
  }

  // vfl_exact, a fresh run, before the first iteration (after the layout): q(globals) at the mode
  // of the server's own terms with the silos' predictors at 0 (VflServer::start_at_mode), and the
  // linear predictor's scale there, where it exceeds kOutcomeScaleUnit, to every silo (Phase::kVflScale, one
  // number; fvic plan lists it), whose coefficients then step at it.
  void start() {
    if (!options_.exact || run_.settings.name("mode_start", "on") == "off") return;
    const engine::Mode m = server_.start_at_mode();
    const double scale = server_.outcome_scale();
    std::vector<Message> replies;
    const bool scaled = scale > engine::VflSilo::kOutcomeScaleUnit;
    if (scaled && !ask_every_silo(run_.transport, 0, Phase::kVflScale, {scale}, 0, replies))
      throw std::runtime_error("a silo did not take the linear predictor's scale (mode_start = off fits without it)");
    if (run_.args.quiet) return;
    if (m.found)
      std::printf("  started the globals at the mode of the server's terms with the silos' predictors at 0 (Newton, "
                  "%ld gradients)\n",
                  m.evaluations);
    else if (server_.global_dim() > 0)
      std::printf("  started the globals at q's default (no mode of the server's terms found: %s)\n", m.why.c_str());
    if (scaled)
      std::printf("  linear predictor's scale %.3g (1 / sqrt of the likelihood's mean curvature there): each silo's "
                  "coefficients step %.3g times larger (the scale over %g), their starting sds with them\n",
                  scale, scale / engine::VflSilo::kOutcomeScaleUnit, engine::VflSilo::kOutcomeScaleUnit);
  }

  // Each silo's part of the log joint at the output draws: eta_k (rows x S), log p(theta_k), log q.
  bool ask_log_joint_parts(long S, std::vector<Message>& replies) {
    Message request{double(options_.seed), double(S)};
    if (prior_globals_) {  // the split priors' globals, at the output draws
      const Eigen::MatrixXd globals = server_.globals(output_noise_);
      request.insert(request.end(), globals.data(), globals.data() + globals.size());
    }
    return ask_every_silo(run_.transport, uint32_t(rounds_ + 2), Phase::kVflLogJoint, request,
                          size_t(message::vfl_rows_size<int64_t>(server_.rows(), S) + 2 * S), replies);
  }

  // The centred intercept's draws at the written b = b_c - mean_n sum_k eta_k, each draw with the
  // silos' partial predictors at the same draw of their blocks (the rows of their draws.csv). Its
  // mean: q's mean of b_c less the draws' mean of the predictors' mean; its sd the draws'.
  void write_intercept(ServerDraws& d) {
    const long S = long(d.unconstrained.cols());
    const Eigen::Index N = server_.rows(), i = server_.intercept();
    std::vector<Message> replies;
    if (!ask_log_joint_parts(S, replies)) {
      const char* b = server_.intercept_name().c_str();
      std::fprintf(stderr, "WARNING: a silo did not send its partial predictors at the output draws: %s's draws and "
                           "summary are the fit's coordinate, %s + the mean over rows of silo_sum(...), not %s itself\n",
                   b, b, b);
      return;
    }
    Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(N, S);
    for (const Message& m : replies) eta += message::Reader(m, "a silo's log-joint part").matrix(N, S, "eta_k");
    const Eigen::RowVectorXd shift = eta.colwise().mean();
    d.unconstrained = server_.written(d.unconstrained, eta);
    d.constrained = constrain(d.layout, d.unconstrained);
    d.mean(i) -= shift.mean();
    const Eigen::RowVectorXd b = d.unconstrained.row(i);
    d.sd(i) = std::sqrt((b.array() - b.mean()).square().sum() / double(std::max(1L, S - 1)));
    log_joint_parts_ = std::move(replies);
  }

  static Eigen::Index checked_rows(const VflServer& server) {
    if (server.rows() <= 0) throw data::DataError("the server's data gives no rows for the likelihood");
    return server.rows();
  }

  ServerRun& run_;
  bool power_;
  bool prior_globals_;  // split priors read globals: their draws go with the silos' requests
  engine::VflOptions options_;
  long rounds_, refresh_;
  VflServer server_;
  VerticalFederation federation_;
  HeldOutRows held_out_;
  bool laid_out_ = false, announced_ = false;
  bool restored_ = false;  // resumed from a checkpoint: q and the silos' scales are restored, not started
  Eigen::MatrixXd output_noise_;  // behind the output draws (the joint family's log q needs it)
  std::vector<Message> log_joint_parts_;  // the silos' parts at those draws, when draws() asked for them
  std::string settled_note_;  // what the last check of the silos' split blocks found
};

}  // namespace

int serve_vfl(ServerRun& run) {
  VflCoordinator coordinator(run);
  return run_server(run, coordinator, run.method);
}

std::unique_ptr<SiloHost> vfl_silo_host(const fvi_model& model, const engine::Settings& settings,
                                        const std::string& method, data::DataSet data, int silo, int silos) {
  return std::make_unique<VflSiloHost>(model, settings, method, std::move(data), silo, silos);
}

}  // namespace fvi::program
