#include "fvi/program/pvi_run.h"

#include <cstdio>
#include <filesystem>
#include <memory>

#include "fvi/engine/pvi.h"
#include "fvi/message/codec.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/output.h"
#include "fvi/program/predictive.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/program/quantities.h"
#include "fvi/program/server_loop.h"
#include "fvi/program/silo_settling.h"
#include "fvi/rng.h"
#include "inference_keys.h"

namespace fvi::program {

namespace {

template <class Q>
class PviSiloHost : public SiloHost {
 public:
  // The client is made here, so that data it refuses are refused before the run starts. A silo
  // that is asked in some rounds only (clients_per_round below the silos) drops it until it is
  // asked (PviSiloEndpoint): memory for the kernels' states of the round's silos alone. It keeps
  // it from its update to the round's evaluation, which follows, and remakes it without probing
  // for a closed form it has not got.
  PviSiloHost(const fvi_model& model, const engine::Settings& settings, data::DataSet data, int silo, int silos,
              int threads, const std::string& method)
      : model_(model),
        settings_(settings),
        seed_(uint64_t(settings.integer("seed", 1))),
        data_(std::move(data)),
        options_(options(settings, silos, threads, method)),
        client_(std::make_unique<engine::PviClient<Q>>(model, data_.view(), silo, options_)),
        observations_(client_->observations()),
        closed_form_(client_->closed_form()),
        update_kind_(client_->update_kind()),
        keep_client_(options_.clients_per_round <= 0 || options_.clients_per_round >= silos),
        silo_(silo) {
    const Eigen::Index dim = client_->dim();
    endpoint_ = std::make_unique<PviSiloEndpoint<Q>>(
        dim,
        [this]() -> engine::PviClient<Q>& {
          if (!client_) client_ = std::make_unique<engine::PviClient<Q>>(model_, data_.view(), silo_, options_);
          return *client_;
        },
        [this](Phase phase) {
          if (!keep_client_ && phase != Phase::kPviUpdate) client_.reset();
        },
        [this](const Eigen::MatrixXd& u) {
          return silo_sum_parts(model_, data_.view(), silo_, {{FVI_GROUP_GLOBAL, u}}, seed_, u.cols());
        });
    options_.probe_closed_form = closed_form_;
    if (!keep_client_) client_.reset();
  }
  SiloEndpoint& endpoint() override { return *endpoint_; }
  // OUT/silo-K/draws.csv: the silo's draws of the final global posterior (it has no locals).
  void finish(const std::string& dir) override {
    if (options_.function_space) endpoint_->report_settling(silo_);
    if (!endpoint_->final_posterior()) return;
    const Q q = engine::GaussianFamily<Q>::distribution(*endpoint_->final_posterior());
    CounterRng rng(RngKey{seed_, uint32_t(silo_), 0, rng_stream::kUserStream + 3});
    const Eigen::MatrixXd u = q.sample(rng.normal(q.dim(), output_draws(settings_, q.dim())));
    DrawsFile file;
    file.model = model_.name;
    file.layout = variable_layout(model_, FVI_GROUP_GLOBAL, data_.view());
    file.mean = constrain(file.layout, q.mean()).col(0);
    file.draws = constrain(file.layout, u);
    file.log_g = q.log_density(u);
    file.log_p = Eigen::VectorXd::Zero(u.cols());
    file.config = settings_.entries();
    file.fvic = {{"log_p", "0: the log joint needs every silo's data"}};
    // The silo's own transformed parameters and generated quantities (of its data), at the same
    // draws: into its draws.csv, and alone into its posterior.json.
    const Eigen::Index globals = file.draws.rows();
    const size_t global_variables = file.layout.size();
    add_silo_quantities(model_, data_.view(), silo_, {{FVI_GROUP_GLOBAL, u}}, seed_, file.layout, file.draws);
    std::filesystem::create_directories(dir);
    const Eigen::Index own_rows = file.draws.rows() - globals;
    if (own_rows > 0) {
      const Eigen::MatrixXd own_draws = file.draws.bottomRows(own_rows);
      file.mean.conservativeResize(file.draws.rows());
      file.mean.tail(own_rows) = own_draws.rowwise().mean();
      std::vector<VariableLayout> own(file.layout.begin() + long(global_variables), file.layout.end());
      for (VariableLayout& v : own) v.offset -= globals;
      PosteriorSummary summary;
      summary.model = model_.name;
      summary.method = options_.aggregation;
      write_posterior_json(dir + "/posterior.json", summary, own, own_draws, Eigen::VectorXd(), Eigen::VectorXd());
    }
    write_draws_csv(dir + "/draws.csv", file);
  }
  static engine::PviOptions options(const engine::Settings& settings, int silos, int threads, const std::string& method) {
    engine::PviOptions o = engine::PviOptions::from(settings, silos, method);
    o.threads = threads;
    return o;
  }
  std::string describe() const override {
    return "silo " + std::to_string(silo_) + ": " + std::to_string(observations_) + " observations, " +
           update_kind_;
  }

 private:
  const fvi_model& model_;
  engine::Settings settings_;
  uint64_t seed_;
  data::DataSet data_;
  engine::PviOptions options_;
  std::unique_ptr<engine::PviClient<Q>> client_;  // null between requests when not kept
  int64_t observations_;
  bool closed_form_;
  std::string update_kind_;  // the client's, for describe(): the client may be dropped between rounds
  bool keep_client_;  // every silo asked every round: the client lives for the run
  int silo_;
  std::unique_ptr<PviSiloEndpoint<Q>> endpoint_;
};

// PVI / FedGVI's rounds (spec 000 Algorithm 1) as the server loop's coordinator.
template <class Q>
class PviCoordinator : public Coordinator {
 public:
  using Server = engine::PviServer<Q>;

  explicit PviCoordinator(ServerRun& run)
      : run_(run),
        options_(engine::PviOptions::from(run.settings, run.transport.silos(), run.method)),
        rounds_(max_steps(run.settings, 100)),
        refresh_(std::max(1L, run.settings.integer("refresh", 1))),
        schedule_(options_.schedule),
        server_(run.model, run.server_data.view(), options_.seed),
        layout_(variable_layout(run.model, FVI_GROUP_GLOBAL, run.server_data.view())),
        runner_(server_, run.transport, options_) {
    if (!run.args.test.empty())
      held_out_ = load_held_out(run.model, run.args.test, run.public_data, options_.precision);
    ood_ = load_out_of_distribution(run.model, run.args.ood, run.args.test, run.public_data, options_.precision);
  }

  const char* checkpoint_kind() const override { return "pvi-server"; }
  void print_header() const override {
    const std::string& method = options_.aggregation;
    std::printf("%s: method = %s, family = %s, silos = %d, rounds = %ld, schedule = %s\n", run_.description.name,
                run_.method.c_str(), engine::GaussianFamily<Q>::name(), run_.transport.silos(), rounds_, schedule_.c_str());
    const long asked = options_.clients_per_round;
    if (asked > 0 && asked < run_.transport.silos())
      std::printf("  %ld of the %d silos are asked each round, drawn from the seed\n", asked, run_.transport.silos());
    if (method != "pvi") {
      const engine::ServerOptimiserOptions& server = options_.server_optimiser;
      std::printf("  the server %s, then takes a step of %s (lr %g%s)\n",
                  method == "fedavg" ? "averages the silos' changes of q's means and log variances, weighted by rows"
                                     : "matches N(mu, sigma^2) to the silos' q_k (seed 001 Eqs. 36, 42)",
                  server.kind.c_str(), server.lr,
                  server.kind == "adam" ? (", tau " + std::to_string(server.tau)).c_str() : "");
      if (method == "fedvem")
        std::printf("  fedvem fits a hierarchical surrogate: each silo's own parameters ~ N(mu, sigma^2), with (mu, "
                    "sigma^2) estimated; the written prior only starts it\n");
      if (options_.function_space)
        std::printf("  loss = %s, divergence = the linearised function-space KL to the cavity at %ld context point%s "
                    "per step (beta %g, noise %g; seed 001 Eq. 25), each silo's change undamped\n",
                    options_.loss.name().c_str(), options_.context_points, options_.context_points == 1 ? "" : "s",
                    options_.function_kl_weight, options_.context_noise);
      else
        std::printf("  loss = %s, divergence = %s, each silo's change undamped\n", options_.loss.name().c_str(),
                    options_.divergence.name().c_str());
      return;
    }
    std::printf("  loss = %s, divergence = %s, damping = %g%s\n", options_.loss.name().c_str(),
                options_.divergence.name().c_str(), options_.damping,
                options_.damping_given ? "" : " (1 for a silo whose update is in closed form)");
    if (options_.server_damping)
      std::printf("  the server scales the silos' changes by 1, halved (down to 1/%d) after a round whose "
                  "objective falls\n", run_.transport.silos());
  }
  long steps() const override { return rounds_; }
  // Every `refresh` rounds (and the last): a line, a metrics row and the held-out evaluation, which
  // for a network on thousands of test rows at 200 draws can take longer than the round itself.
  bool reports(long t) const override { return t % refresh_ == 0; }
  double step(long t) override {
    runner_.run_round(uint32_t(t));
    return runner_.elbo(uint32_t(t));
  }
  std::vector<double> silo_terms() const override { return runner_.silo_terms(); }
  std::string position(long t) const override {
    char line[64];
    std::snprintf(line, sizeof line, "round %3ld/%ld", t, rounds_);
    return line;
  }
  std::string metrics(long, Extra& extra) override {
    if (!held_out_.likelihood) return "";
    CounterRng rng(RngKey{options_.seed, 0, 0, rng_stream::kUserStream + 2});  // the same draws every round
    const Q q = server_.distribution();
    const long predictive_draws = 200;
    return report_metrics(held_out_metrics(held_out_, ood_, q.sample(rng.normal(q.dim(), predictive_draws))), extra);
  }
  // The round's ELBO lacks the terms of the silos that did not answer its evaluation.
  std::string missing_note(long) override { return program::missing_note(runner_.missing_terms(), "silo terms"); }
  // A function-space objective leaves the weights in its Jacobians' null space free to wander
  // (seed 001 Eqs. 15-18): the server's rule then watches the objective alone, and each silo the
  // function at its context points (unsettled).
  void moments(Eigen::VectorXd& mean, Eigen::VectorXd& sd) const override {
    if (options_.function_space) {
      mean.resize(0), sd.resize(0);
      return;
    }
    const Q q = server_.distribution();
    mean = q.mean();
    sd = engine::GaussianFamily<Q>::sd(q);
  }
  std::string unsettled(long t, double tol_param) override {
    settled_note_.clear();
    if (!options_.function_space) return "";
    Settling s = ask_silos_settled(run_.transport, uint32_t(t), Phase::kPviSettled, tol_param,
                                   "function at its context points");
    settled_note_ = std::move(s.note);
    return s.unsettled;
  }
  std::string settled_note() const override { return settled_note_; }
  // With a function-space objective, the rule's decay of the step once the objective has levelled
  // off, on the server's step: each round's average of the silos' local optima carries their
  // optimisers' noise, which a full step would leave in q's function for ever.
  void set_schedule(double step_scale, long, long) override {
    if (options_.function_space) runner_.set_step_scale(step_scale);
  }
  // A round moves q far (a closed-form update to the exact posterior): one flat round ends the
  // optimising phase and three stationary ones show convergence.
  ConvergenceOptions convergence() const override {
    ConvergenceOptions o;
    o.window = 1, o.plateaus = 1, o.min_average_windows = 3;
    return o;
  }
  const char* unit() const override { return "rounds"; }
  std::vector<double> state() const override { return runner_.state(); }
  void restore(const std::vector<double>& state) override { runner_.restore(state); }
  // Each silo gets the final q, to write its own draws of it.
  void finish(long last_step) override {
    std::vector<Message> none;
    ask_every_silo(run_.transport, uint32_t(last_step + 1), Phase::kPviFinish,
                   message::Writer().natural(server_.posterior()).done(), 0, none);
  }
  std::optional<ServerDraws> draws() override {
    const Q q = adopted_ ? *adopted_ : server_.distribution();
    CounterRng rng(RngKey{options_.seed, 0, 0, rng_stream::kUserStream + 3});
    ServerDraws d;
    d.layout = layout_;
    d.unconstrained = q.sample(rng.normal(q.dim(), output_draws(run_.settings, q.dim())));
    d.constrained = constrain(layout_, d.unconstrained);
    d.mean = q.mean();
    d.sd = engine::GaussianFamily<Q>::sd(q);
    d.log_q = q.log_density(d.unconstrained);
    d.what = "the global parameters";
    d.family = engine::GaussianFamily<Q>::name();
    return d;
  }
  std::string outputs_note() const override { return ""; }
  bool closing(const ServerDraws& d, Closing& out, std::string& why) override {
    const Eigen::MatrixXd& u = d.unconstrained;
    if (u.size() > kMaxLogJointRequest) {
      why = "not computed (" + std::to_string(u.size()) + " values of draws to send each silo)";
      return false;
    }
    std::vector<Message> replies;
    const Eigen::Index S = u.cols(), sums = silo_sum_count(run_.model);
    // Each closing exchange its own round: a deployed silo answers a (round, phase) it has
    // answered before from its reply cache (the tail check's exchange follows k-hat's).
    if (!ask_every_silo(run_.transport, uint32_t(rounds_ + 1 + closing_exchanges_++), Phase::kPviLogJoint, Message(u.data(), u.data() + u.size()),
                        size_t((1 + sums) * S), replies)) {
      why = "not computed (a silo did not answer)";
      return false;
    }
    // PVI's prior is the Gaussian the server holds; each silo adds its log likelihood, then its
    // parts of the silo_sum quantities.
    out.log_p = engine::GaussianFamily<Q>::distribution(server_.prior()).log_density(u);
    out.silo_sums = Eigen::MatrixXd::Zero(sums, S);
    for (const Message& m : replies) {
      out.log_p += Eigen::Map<const Eigen::VectorXd>(m.data(), S);
      add_parts(m.data() + S, out.silo_sums);
    }
    out.log_g = d.log_q;
    return true;
  }
  bool closing_takes_draws() const override { return true; }
  // q becomes the moments' Gaussian (mean-field: the diagonal, that family's moment-matching
  // member), and every silo is sent it as the final q it writes its draws of.
  bool adopt_moments(const ServerDraws& d, const std::vector<Eigen::Index>& varying, const Eigen::VectorXd& mean,
                     const Eigen::MatrixXd& covariance) override {
    const Eigen::Index n = d.unconstrained.rows();
    if (Eigen::Index(varying.size()) != n) return false;
    for (Eigen::Index i = 0; i < n; ++i)
      if (varying[size_t(i)] != i) return false;
    adopted_ = engine::GaussianFamily<Q>::from_mean_covariance(mean, 0.5 * (covariance + covariance.transpose()));
    std::vector<Message> none;
    ask_every_silo(run_.transport, uint32_t(rounds_ + 1 + closing_exchanges_++), Phase::kPviFinish,
                   message::Writer().natural(to_natural(*adopted_)).done(), 0, none);
    return true;
  }
  std::string surrogate_advice() const override {
    if (options_.function_space)
      return "The function-space KL is taken at a few context points per step, about a linearisation; a weight-space "
             "method (fedavg, fedvem, or pvi for the written model) bounds it (seed 001 Eq. 10).";
    if (options_.aggregation == "fedvem")
      return "fedvem fits its hierarchical surrogate by design; method = pvi fits the written model.";
    if (options_.aggregation == "fedavg")
      return "Fewer local steps per round (local_steps, with more rounds) keep fedavg nearer the written model's "
             "optimum; method = pvi fits it.";
    return Coordinator::surrogate_advice();
  }
  std::string target_note() const override {
    if (options_.function_space)
      return "; measured against the written model's posterior: " + run_.method +
             " fits the function-space objective (a linearised KL at context points, seed 001 Eq. 25), not that "
             "posterior";
    if (options_.aggregation == "fedvem")
      return "; measured against the written model's posterior: fedvem's N(mu, sigma^2) is the hyper-distribution of "
             "a hierarchical surrogate (seed 001 Eq. 33), not that posterior";
    if (options_.aggregation == "fedavg")
      return "; measured against the written model's posterior: fedavg's q is an average of the silos' local optima, "
             "which drift apart where their data differ";
    if (options_.loss.name() == "nll" && options_.divergence.name() == "kl" && options_.loss_weight == 1) return "";
    return "; measured against the written model's posterior, from which the loss or divergence chosen departs on purpose";
  }

 private:
  ServerRun& run_;
  engine::PviOptions options_;
  long rounds_, refresh_;
  long closing_exchanges_ = 0;
  std::optional<Q> adopted_;  // q moved to the posterior's moments (adopt_moments)
  std::string settled_note_;  // what the last check of the silos' functions found
  std::string schedule_;
  Server server_;
  std::vector<VariableLayout> layout_;
  PviRounds<Q> runner_;
  HeldOut held_out_, ood_;
};

template <class Q>
int serve(ServerRun& run) {
  PviCoordinator<Q> coordinator(run);
  return run_server(run, coordinator, run.method);
}

// The written family, or the default for this many global values (stdlib/inference_keys.h):
// server and silos decide alike, from the model and the public data they both hold.
bool full_rank(const engine::Settings& settings, const fvi_model& model, const fvi_data& data,
               const std::string& method) {
  if (method != "pvi") {  // seed 001's mean-field q (checked by fvic plan)
    if (settings.name("family", "meanfield") != "meanfield")
      throw std::invalid_argument("method = " + method + " fits a mean-field q; family = " +
                                  settings.name("family", "") + " is not one");
    return false;
  }
  const long long globals = engine::group_dim(model, FVI_GROUP_GLOBAL, data);
  const std::string family =
      settings.name("family", fvic::stdlib::default_pvi_family(globals, settings.name("divergence", "kl")));
  if (family == "fullrank") return true;
  if (family == "meanfield") return false;
  throw std::invalid_argument("family = " + family + " is not a PVI family (meanfield or fullrank)");
}

}  // namespace

int serve_pvi(ServerRun& run) {
  return full_rank(run.settings, run.model, run.server_data.view(), run.method) ? serve<FullRankGaussian<double>>(run) : serve<MeanFieldGaussian<double>>(run);
}

std::unique_ptr<SiloHost> pvi_silo_host(const fvi_model& model, const engine::Settings& settings, data::DataSet data,
                                        int silo, int silos, int threads, const std::string& method) {
  if (full_rank(settings, model, data.view(), method))
    return std::make_unique<PviSiloHost<FullRankGaussian<double>>>(model, settings, std::move(data), silo, silos, threads,
                                                                   method);
  return std::make_unique<PviSiloHost<MeanFieldGaussian<double>>>(model, settings, std::move(data), silo, silos, threads,
                                                                  method);
}

}  // namespace fvi::program
