#include "fvi/program/sfvi_run.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <utility>
#include <optional>

#include "fvi/data/readers.h"
#include "fvi/engine/sfvi.h"
#include "fvi/message/sizes.h"
#include "fvi/program/checkpoint.h"
#include "fvi/program/output.h"
#include "fvi/program/parallel.h"
#include "fvi/program/predictive.h"
#include "fvi/program/quantities.h"
#include "fvi/program/server_loop.h"
#include "fvi/program/silo_settling.h"
#include "fvi/rng.h"

namespace fvi::program {

namespace {

// A pooled fit starts at the mode up to this many parameters (the Hessian costs 2n gradients).
constexpr Eigen::Index kModeStartLimit = 200;
// Federated, each Newton step costs two exchanges or more with every silo, and each of the
// curvature's 2n points a likelihood evaluation in every silo: up to 50 globals.
constexpr Eigen::Index kFederatedModeStartLimit = 50;

// Whether the settings let the server search the log joint's mode with the silos' likelihoods
// (the silo asks its own settings the same before it answers).
bool mode_start_applies(const std::string& method, const engine::Settings& settings) {
  return method == "sfvi" && settings.name("mode_start", "on") != "off" && settings.integer("warm_start", 0) == 0;
}

// Whether the closing exchange's importance weights reach the silos' locals (weigh_locals, on
// by default): the server sends them and each silo takes them only where its own settings say so.
bool weighs_locals(const engine::Settings& settings) { return settings.name("weigh_locals", "on") != "off"; }

// Whether any parameter is a silo's own: then a point of the globals does not fix a silo's term.
bool has_locals(const fvi_model& model) {
  for (int i = 0; i < model.variable_count; ++i)
    if (engine::group_kind(model, model.variables[i].group) == FVI_GROUP_LOCAL) return true;
  return false;
}

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
  Federation(SfviServer& server, Transport& transport, long draws)
      : server_(server), transport_(transport), schedule_(silo_schedule_message(1.0, 0, draws)) {}

  // Each silo's term of the last iteration's or round's objective (NaN: no reply): its part of
  // the ELBO (SFVI), its local objective (SFVI-Avg, each an estimate of the whole ELBO).
  const std::vector<double>& terms() const { return terms_; }

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

  // The stopping rule's schedule for the silos' locals, stated at the head of every iteration's
  // request (fvi/program/silo_settling.h).
  void set_schedule(double scale, long epoch, long draws) { schedule_ = silo_schedule_message(scale, epoch, draws); }

  // One SFVI iteration (seed 002 Alg. 1). Returns the ELBO estimate.
  double sfvi_iteration(uint32_t t) {
    Message down = schedule_;
    const Message broadcast = engine::pack(server_.broadcast(t));
    down.insert(down.end(), broadcast.begin(), broadcast.end());
    std::vector<SfviContribution> contributions;
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(t, Phase::kSfviContribute, [&](int) { return down; }, up,
                                          reply_size());
    terms_.assign(transport_.silos(), std::numeric_limits<double>::quiet_NaN());
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) {
        contributions.push_back(engine::unpack_contribution(up[k], params(), server_.hyper_dim()));
        terms_[k] = contributions.back().elbo_term;
      }
    return server_.step(contributions, t);
  }

  // One SFVI-Avg round (seed 002 Alg. 2): local steps with the n / n_j scaling, then averaging
  // of the fits that arrived.
  // Returns the mean of the silos' last local objectives (each estimates the ELBO: n / n_j).
  double average_round(uint32_t r, long steps, const std::vector<double>& weights) {
    const Message broadcast = engine::pack(server_.broadcast(r));
    std::vector<Message> up(transport_.silos());
    const std::vector<bool> arrived = run(
        r, Phase::kSfviFitLocally,
        [&](int k) {
          Message m{double(steps), weights[k], 0.0};
          m.insert(m.end(), broadcast.begin(), broadcast.end());
          return m;
        },
        up, reply_size());
    std::vector<SfviLocalFit> fits;
    terms_.assign(transport_.silos(), std::numeric_limits<double>::quiet_NaN());
    for (int k = 0; k < transport_.silos(); ++k)
      if (arrived[k]) {
        fits.push_back(engine::unpack_local_fit(up[k], params(), server_.hyper_dim()));
        terms_[k] = fits.back().elbo_term;
      }
    if (fits.empty()) return std::numeric_limits<double>::quiet_NaN();
    server_.average(fits);
    double objective = 0;
    for (const SfviLocalFit& f : fits) objective += f.elbo_term / double(fits.size());
    return objective;
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
        up, reply_size(), false);
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
  // A silo's contribution or local fit (message/sizes.h).
  size_t reply_size() const { return size_t(message::sfvi_message_size<int64_t>(params(), server_.hyper_dim())); }
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
  Message schedule_;  // [step scale, averaging epoch, draws per gradient]
  std::vector<double> terms_;
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
// OUT/silo-K/draws.csv: the silo's joint posterior of everything it may see, the global
// parameters (draws of the final q(Z_G) it was sent), the hyperparameters and its own locals
// drawn from q(Z_L | Z_G) at those draws. log_g__ is log q of the pair; log_p__ is 0, since the
// log joint needs every silo's data. With the importance-weighted bound (log_q_local null) the
// locals are importance-resampled draws, whose density has no closed form: log_g__ is 0 too.
// `z_global` is in the fit's coordinates; the file holds the written globals (`centring`). The
// silo's own transformed parameters and generated quantities at the same draws follow, as CmdStan
// orders them (`quantities`, `quantity_values`: their layout from offset 0 and their rows).
void write_silo_draws(const std::string& dir, const fvi_model& model, const fvi_data& data, const Global& global,
                      const std::vector<engine::CentringBlock>& centring, const Eigen::VectorXd& hyper,
                      const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& z_local, const Eigen::VectorXd* log_q_local,
                      const std::vector<VariableLayout>& quantities, const Eigen::MatrixXd& quantity_values,
                      const engine::Settings& settings, const std::string& family) {
  const Eigen::Index n = z_global.rows(), h = hyper.size(), m = z_local.rows(), S = z_global.cols();
  DrawsFile file;
  file.model = model.name;
  file.layout = variable_layout(model, FVI_GROUP_GLOBAL, data);
  for (const auto& [group, offset] : {std::pair<fvi_group, Eigen::Index>{FVI_GROUP_HYPER, n}, {FVI_GROUP_LOCAL, n + h}})
    for (VariableLayout v : variable_layout(model, group, data)) {
      v.offset += offset;
      file.layout.push_back(v);
    }
  Eigen::MatrixXd u(n + h + m, S);
  u << z_global, hyper.replicate(1, S), z_local;
  engine::to_written(centring, u.topRows(n));
  file.draws = constrain(file.layout, u);
  Eigen::VectorXd mean(n + h + m);
  mean << global.mean(), hyper, z_local.rowwise().mean();
  engine::to_written(centring, mean.head(n));
  file.mean = constrain(file.layout, mean).col(0);
  if (quantity_values.rows() > 0) {
    const Eigen::Index at = file.draws.rows();
    for (VariableLayout v : quantities) {
      v.offset += at;
      file.layout.push_back(v);
    }
    file.draws.conservativeResize(at + quantity_values.rows(), Eigen::NoChange);
    file.draws.bottomRows(quantity_values.rows()) = quantity_values;
    file.mean.conservativeResize(at + quantity_values.rows());
    file.mean.tail(quantity_values.rows()) = quantity_values.rowwise().mean();
  }
  file.log_g = log_q_local ? Eigen::VectorXd(global.log_density(z_global) + *log_q_local) : Eigen::VectorXd::Zero(S);
  file.log_p = Eigen::VectorXd::Zero(S);
  file.config = settings.entries();
  file.fvic = {{"log_p", "0: the log joint needs every silo's data"}, {"family", family}};
  if (!log_q_local)
    file.fvic.emplace_back("log_g", "0: the locals are drawn by importance resampling (local_samples > 1), whose "
                                    "density has no closed form");
  write_draws_csv(dir + "/draws.csv", file);
}

// The groups a silo's quantities read at its posterior's draws: the globals', its locals', and
// the hyperparameters' point estimate.
GroupDraws silo_groups(const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& z, const Eigen::VectorXd& hyper) {
  GroupDraws groups{{FVI_GROUP_GLOBAL, z_global}, {FVI_GROUP_LOCAL, z}};
  if (hyper.size() > 0) groups[FVI_GROUP_HYPER] = hyper;
  return groups;
}

// A silo's locals (written, constrained) at its posterior's draws, then its quantities at them.
struct SiloValues {
  std::vector<VariableLayout> layout;
  Eigen::MatrixXd values;
  size_t locals = 0;      // layout's entries of the locals
  Eigen::Index rows = 0;  // and their rows
  std::vector<VariableLayout> quantities() const {
    std::vector<VariableLayout> out(layout.begin() + long(locals), layout.end());
    for (VariableLayout& v : out) v.offset -= rows;
    return out;
  }
  Eigen::MatrixXd quantity_values() const { return values.bottomRows(values.rows() - rows); }
};

SiloValues silo_values(const fvi_model& model, const fvi_data& data, int silo,
                       const std::vector<VariableLayout>& local_layout,
                       const std::vector<engine::CentringBlock>& centring, const Eigen::MatrixXd& z_global,
                       const Eigen::MatrixXd& z, const Eigen::VectorXd& hyper, uint64_t seed) {
  SiloValues v{local_layout, constrain(local_layout, z), local_layout.size(), 0};
  v.rows = v.values.rows();
  Eigen::MatrixXd written = z_global;
  engine::to_written(centring, written);
  add_silo_quantities(model, data, silo, silo_groups(written, z, hyper), seed, v.layout, v.values);
  return v;
}

// The check of q(Z_L | Z_G) at the end (SfviSilo::locals_khat): draws of Z_G, and of the locals at each.
constexpr long kLocalsCheckGlobalDraws = 8, kLocalsCheckLocalDraws = 256;

// A silo's locals weighed by the run's importance weights of the closing exchange's draws of Z_G
// (Phase::kSfviLocalWeights): the written model's posterior of them, where q(Z_G) is not (a
// Gaussian, corrected or not, in a funnel's place: three hospitals' intercepts and slopes came
// out 11-22% wide from the mixture over q(Z_G) alone, 0.94-1.00 of NUTS's sds weighed).
struct WeightedLocals {
  Eigen::VectorXd mean, sd;
  Eigen::MatrixXd z_global, z;  // resampled draws: Z_G in the fit's coordinates, the written locals
};

// `centring`: the fit's globals are centred (fvi/engine/centring.h): q(Z_L | Z_G) is conditioned
// on the fit's coordinates, and the quantities and draws.csv read the written ones. `weighted`:
// the locals as the run's importance weights give them, reported instead of the mixture over q(Z_G).
void write_local_posterior(const std::string& dir, const fvi_model& model, const fvi_data& data, SfviSilo& silo,
                           const std::vector<engine::CentringBlock>& centring, const Global& global,
                           const Eigen::VectorXd& hyper, const PosteriorSummary& run_summary, long draws, uint64_t seed,
                           const engine::Settings& settings, const std::string& family, const WeightedLocals* weighted) {
  PosteriorSummary summary = run_summary;
  if (silo.q().dim() > 0) {
    // How well q(Z_L | Z_G) holds this silo's locals given the globals: the run's k-hat does not
    // judge them (the bound integrates them out). Said here, where the locals are.
    CounterRng check(RngKey{seed, uint32_t(silo.silo()), 0, rng_stream::kUserStream + 13});
    const Eigen::MatrixXd eps_global = check.normal(global.dim(), kLocalsCheckGlobalDraws);
    const SfviSilo::LocalsCheck c = silo.locals_khat(
        global, hyper, eps_global, check.normal(silo.q().dim(), kLocalsCheckGlobalDraws * kLocalsCheckLocalDraws));
    summary.locals_khat = c.worst;
    summary.locals_poor = c.poor;
    if (c.poor > 0) {
      const std::string which = c.elements == 1 ? "its locals" : std::to_string(c.poor) + " of its " +
                                                                    std::to_string(c.elements) + " local elements";
      std::fprintf(stderr,
                   "warning: silo %d: for %s, q given the globals is poor for their posterior (k-hat up to %.2f, "
                   "of %ld draws at each of %ld draws of the globals): their reported tails and sds may be off. A "
                   "Gaussian misses a skewed posterior (few rows per local) or a correlated one (family = fullrank "
                   "or centred covariates hold it); a larger local_samples weighs more draws\n",
                   silo.silo(), which.c_str(), c.worst, kLocalsCheckLocalDraws, kLocalsCheckGlobalDraws);
    }
  }
  std::vector<VariableLayout> layout = variable_layout(model, FVI_GROUP_LOCAL, data);
  CounterRng rng(RngKey{seed, uint32_t(silo.silo()), 0, rng_stream::kUserStream + 3});
  if (silo.q().dim() == 0) {
    // No locals: the silo's own quantities (of its data and the globals), if it has any.
    bool any = false;
    for (int i = 0; i < model.quantity_count; ++i) any |= model.quantities[i].owner == FVI_SILO;
    if (!any) return;
    std::filesystem::create_directories(dir);
    const Eigen::MatrixXd z_global = global.offset(rng.normal(global.dim(), draws)).colwise() + global.mean();
    const Eigen::MatrixXd no_locals(0, draws);
    const SiloValues v = silo_values(model, data, silo.silo(), layout, centring, z_global, no_locals, hyper, seed);
    write_posterior_json(dir + "/posterior.json", summary, v.layout, v.values, Eigen::VectorXd(), Eigen::VectorXd());
    const Eigen::VectorXd no_log_q = Eigen::VectorXd::Zero(draws);  // log q of no locals
    write_silo_draws(dir, model, data, global, centring, hyper, z_global, no_locals, &no_log_q, v.quantities(),
                     v.quantity_values(), settings, family);
    return;
  }
  const auto& q = silo.q();
  std::filesystem::create_directories(dir);
  if (weighted) {
    const SiloValues v = silo_values(model, data, silo.silo(), layout, centring, weighted->z_global, weighted->z, hyper, seed);
    write_posterior_json(dir + "/posterior.json", summary, v.layout, v.values, weighted->mean, weighted->sd);
    write_silo_draws(dir, model, data, global, centring, hyper, weighted->z_global, weighted->z, nullptr, v.quantities(),
                     v.quantity_values(), settings, family);
    return;
  }
  // The written locals' linear part in Z_G's offsets u: T = C_j less the pooled xbar at each
  // centred local intercept's coefficient (the written a = a_c - xbar W), through the silo's own
  // slopes' map S (a = a_c - xbar b). Under q, E[T u] = 0 exactly.
  Eigen::MatrixXd t = engine::written_local_coupling(silo.local_centring(), q.coupled() ? q.coupling() : Eigen::MatrixXd(),
                                                     q.dim(), global.dim());
  engine::to_written(silo.local_slopes(), t);
  if (silo.local_samples() > 1) {
    // K draws of the locals per draw of Z_G, weighed: as many as the k-hat's exchange weighs
    // (log_joint_samples: 256 over a whole block), not the bound's K, whose self-normalised
    // estimate leans toward q by O(1/K) (a silo's a and b at a raw x: sds 0.74-0.87 of the
    // posterior's at K = 16). Draws of Z_G per evaluation: rows x chunk x K values at most 2^22.
    const long K = silo.log_joint_samples();
    const long chunk = std::clamp<long>((long(1) << 22) / (K * std::max<long>(long(silo.observations()), 1)), 1, 50);
    Eigen::VectorXd sum = Eigen::VectorXd::Zero(q.dim()), square = Eigen::VectorXd::Zero(q.dim());
    Eigen::VectorXd linear = Eigen::VectorXd::Zero(q.dim());  // sum over the draws of T u
    Eigen::MatrixXd z(q.dim(), draws), z_global(global.dim(), draws);
    for (long first = 0; first < draws; first += chunk) {
      const long n = std::min(chunk, draws - first);
      const Eigen::MatrixXd eps_global = rng.normal(global.dim(), n);
      const Eigen::MatrixXd u = global.offset(eps_global);
      z_global.middleCols(first, n) = u.colwise() + global.mean();
      const Eigen::MatrixXd eps_local = rng.normal(q.dim(), n * K);
      const Eigen::MatrixXd uniforms = rng.uniform(q.dim(), n);
      const SfviSilo::LocalPosterior p = silo.importance_posterior(global, hyper, eps_global, eps_local, uniforms, true);
      sum += p.weighted_sum;
      square += p.weighted_square;
      linear += t * u.rowwise().sum();
      z.middleCols(first, n) = p.draws;
    }
    // The variance about the draws' own mean (its noise cancels in square - mean^2); the mean
    // reported less T u, a control variate of mean 0: the locals' mean varies with Z_G mostly
    // through T u (a written intercept a = a_c - xbar W moves with W), which the draws of Z_G
    // would otherwise bring into it as Monte Carlo noise (hier_linreg's alphas at x near 20: 0.1
    // of their sd).
    const Eigen::VectorXd var = (square / double(draws) - (sum / double(draws)).cwiseAbs2()).cwiseMax(0.0);
    const Eigen::VectorXd mean = (sum - linear) / double(draws);
    const SiloValues v = silo_values(model, data, silo.silo(), layout, centring, z_global, z, hyper, seed);
    write_posterior_json(dir + "/posterior.json", summary, v.layout, v.values, mean, var.cwiseSqrt());
    write_silo_draws(dir, model, data, global, centring, hyper, z_global, z, nullptr, v.quantities(),
                     v.quantity_values(), settings, family);
    return;
  }
  const Eigen::MatrixXd eps_global = rng.normal(global.dim(), draws);
  const Eigen::MatrixXd u = global.offset(eps_global);
  const Eigen::MatrixXd z_fit = q.sample(u, rng.normal(q.dim(), draws));
  const Eigen::VectorXd log_q_local = q.log_density(z_fit, u);  // unit Jacobian: the written locals' too
  const Eigen::MatrixXd z_global = u.colwise() + global.mean();
  const Eigen::MatrixXd z = silo.written_locals(z_global, z_fit);
  const SiloValues v = silo_values(model, data, silo.silo(), layout, centring, z_global, z, hyper, seed);
  write_silo_draws(dir, model, data, global, centring, hyper, z_global, z, &log_q_local, v.quantities(),
                   v.quantity_values(), settings, family);
  // Marginal sd: diag(T Sigma_GG T^T + S Sigma_LL S^T), Sigma_GG = K K^T with K = D_G L_G, T the
  // written locals' linear part in u (above), S the silo's own slopes' map (identity without them).
  const Eigen::MatrixXd k_global = global.sd().asDiagonal() * global.unit_lower();
  Eigen::MatrixXd k_local = q.sd().asDiagonal() * q.unit_lower();
  engine::to_written(silo.local_slopes(), k_local);
  // T is C_j itself where nothing maps the locals, and 0 where q(Z_L | Z_G) is not coupled.
  const Eigen::VectorXd var = k_local.rowwise().squaredNorm() + (t * k_global).rowwise().squaredNorm();
  const Eigen::VectorXd mean = silo.written_locals(global.mean(), q.mean()).col(0);  // q's mean at Z_G's, mapped
  write_posterior_json(dir + "/posterior.json", summary, v.layout, v.values, mean, var.cwiseSqrt());
}

// The global parameters and the hyperparameters as one layout (hyperparameters after the
// globals, reported as point estimates: every draw equal, sd 0).
struct GlobalOutput {
  std::vector<VariableLayout> layout;
  Eigen::MatrixXd unconstrained;
  Eigen::MatrixXd draws;  // constrained
  Eigen::VectorXd mean, sd, log_density;
};

// `centring`: q is over the fit's coordinates (fvi/engine/centring.h); the output is the written globals'.
GlobalOutput global_output(const fvi_model& model, const fvi_data& data, const Global& q, const Eigen::VectorXd& hyper,
                           long draws, uint64_t seed, const std::vector<engine::CentringBlock>& centring = {}) {
  GlobalOutput out;
  out.layout = variable_layout(model, FVI_GROUP_GLOBAL, data);
  std::vector<VariableLayout> hyper_layout = variable_layout(model, FVI_GROUP_HYPER, data);
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
  out.log_density = q.log_density(u.topRows(n));  // the same at the written draws: the map's Jacobian is 1
  engine::to_written(centring, u.topRows(n));
  out.draws = constrain(out.layout, u);
  out.unconstrained = u;
  out.mean.resize(n + h);
  out.mean << q.mean(), hyper;
  engine::to_written(centring, out.mean.head(n));
  out.sd = Eigen::VectorXd::Zero(n + h);
  out.sd.head(n) = centring.empty() ? q.marginal_sd() : engine::written_sd(centring, q);
  return out;
}

// A silo's observations for SFVI-Avg's n / n_j and the run's header: its likelihoods' rows, or,
// where the likelihood is written as statements (a loop of `target +=`, which has no rows), the
// most rows of any of its own data values (`silo vector[N] t` gives N).
int64_t silo_rows(const fvi_model& model, const data::DataSet& data, int64_t likelihood_rows) {
  if (likelihood_rows > 0 || !model.data_table) return likelihood_rows;
  int64_t rows = 0;
  for (int i = 0; i < model.data_table->declaration_count; ++i) {
    const fvi_data_declaration& d = model.data_table->declarations[i];
    if (d.party != FVI_DATA_SILO || d.rank < 1 || d.row_vector) continue;
    if (const data::Variable* v = data.find(d.name)) rows = std::max(rows, v->rows);
  }
  return rows;
}

// A silo of SFVI: its data, its SfviSilo, and the answers to the server's requests.
class SfviSiloHost : public SiloHost, public SiloEndpoint {
 public:
  SfviSiloHost(const fvi_model& model, const engine::Settings& settings, const std::string& method, data::DataSet data,
               int silo, int silos)
      : model_(model),
        method_(method),
        settings_(settings),
        options_(engine::SfviOptions::from(settings, engine::group_dim(model, FVI_GROUP_GLOBAL, data.view()))),
        data_(std::move(data)),
        // SFVI-Avg and the independent fit evaluate the global priors in each silo.
        global_prior_(method != "sfvi" || (method == "sfvi" && settings.integer("warm_start", 0) > 0)),
        silo_(std::make_unique<SfviSilo>(model, data_.view(), silo, options_, global_prior_)),
        summary_{model.name, method, silos, int(max_steps(settings, method == "sfvi" ? 20000 : 2000)), {}},
        draws_(0) {
    draws_ = output_draws(settings, 1);
  }

  SiloEndpoint& endpoint() override { return *this; }
  std::string describe() const override {
    const int64_t rows = silo_rows(model_, data_, silo_->observations());
    return "silo " + std::to_string(silo_->silo()) + ": " + std::to_string(rows) + " observations" +
           (silo_->observations() == 0 && rows > 0 ? " (its data's rows: the likelihood is statements)" : "") + ", " +
           std::to_string(silo_->local_dim()) + " local parameters (kept in the silo)";
  }

  Message handle(uint32_t round, Phase phase, const Message& request) override {
    if (phase == Phase::kSfviSizes) return {double(silo_rows(model_, data_, silo_->observations()))};
    if (phase == Phase::kSfviCentring) return centre(round, request);
    if (phase == Phase::kSfviMode) return likelihood_at(request);
    if (phase == Phase::kSfviModeLocals) return start_locals(request);
    if (phase == Phase::kSfviLogJoint) {
      if (!final_) throw std::invalid_argument("a log-joint request before the final posterior");
      const DrawsRequest r = check_draws_request(request, long(silo_global_dim()));
      const Eigen::Map<const Eigen::MatrixXd> z(request.data(), r.rows, r.draws);
      CounterRng rng(RngKey{options_.seed, uint32_t(silo_->silo()), 0, rng_stream::kUserStream + 12});
      const Eigen::MatrixXd eps_local = rng.normal(silo_->local_dim(), r.draws * silo_->log_joint_samples());
      SfviSilo::LogJoint lj =
          silo_->log_joint(global(*final_), final_->hyper, z, eps_local, rng.uniform(silo_->local_dim(), r.draws));
      Message m(lj.log_p.data(), lj.log_p.data() + lj.log_p.size());
      m.insert(m.end(), lj.log_q.data(), lj.log_q.data() + lj.log_q.size());
      // Its parts of the silo_sum quantities at the same joint draws.
      Eigen::MatrixXd written = z;  // the quantities read the raw data and the written globals
      engine::to_written(centring_, written);
      append_parts(silo_sum_parts(model_, data_.view(), silo_->silo(), silo_groups(written, lj.local, final_->hyper),
                                  options_.seed, r.draws), m);
      // Kept for the weights that may follow (kSfviLocalWeights), where they fit in memory.
      last_joint_.reset();
      if (silo_->local_dim() > 0 && silo_->local_dim() * r.draws <= kMaxWeighedLocals && weighs_locals(settings_))
        last_joint_ = LastJoint{Eigen::MatrixXd(z), std::move(lj.local), std::move(lj.local_mean), std::move(lj.local_square)};
      return m;
    }
    if (phase == Phase::kSfviLocalWeights) {
      weigh_locals(request);
      return {};
    }
    if (phase == Phase::kSfviSettled) {
      // With local_samples > 1, q(Z_L | Z_G) is the importance sampler's proposal, which the bound
      // pins down ever more weakly as K grows (examples/glmm_sixcities: its means still drift 0.2-0.3
      // sd over 6,400 iterations while the globals have settled); the reported locals are the
      // importance-weighted estimate, not q: not judged.
      if (silo_->local_samples() > 1) return settled_reply(request, std::nullopt);
      return settled_.answer(request, [&](double tol) { return silo_->locals_settled(tol); });
    }
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
        own_ = silo_->fit_locally(b, steps, 1.0, round);
        return engine::pack(*own_);
      }
      return engine::pack(silo_->fit_locally(b, steps, scale, round));
    }
    if (phase == Phase::kSfviContribute) {
      const SiloSchedule s = read_silo_schedule(request, options_.mc_samples);
      silo_->set_schedule(s.scale, s.epoch);
      silo_->set_mc_samples(s.draws);
      return engine::pack(silo_->contribute(broadcast(Message(request.begin() + kSiloScheduleSize, request.end())), round));
    }
    const SfviBroadcast b = broadcast(request);
    if (phase == Phase::kSfviEvaluate) {
      const long draws = 16;
      const Eigen::MatrixXd eps = engine::global_noise(kEvaluationSeed, 0, silo_global_dim(), draws);
      CounterRng rng(RngKey{kEvaluationSeed, uint32_t(silo_->silo()), 0, rng_stream::kUserStream + 11});
      const Eigen::MatrixXd eps_local = rng.normal(silo_->local_dim(), draws);
      return {silo_->gradient(global(b), b.hyper, eps, eps_local, 1, nullptr).elbo_term};
    }
    if (phase == Phase::kSfviFinish) {
      if (!final_) silo_->use_average();
      final_ = b;
      last_joint_.reset(), weighted_.reset();  // of the q before
      return {};
    }
    throw std::invalid_argument(std::string("an SFVI silo cannot do ") + phase_name(phase));
  }

  Message state() const override {
    const Eigen::VectorXd s = silo_->checkpoint();
    Message m(s.data(), s.data() + s.size());
    // The independent fit's own q(Z_G) and theta follow, when there is one.
    if (own_) {
      const Message f = engine::pack(*own_);
      m.insert(m.end(), f.begin(), f.end());
    }
    m.push_back(own_ ? 1.0 : 0.0);
    // Then the centring's means and their count: a silo restarted from this resumes at the same
    // centred data (the server sends the means once, before iteration 1).
    size_t means = 0;
    for (const engine::CentringBlock* b : engine::one_block_per_data(centring_)) {
      m.insert(m.end(), b->means.data(), b->means.data() + b->means.size());
      means += size_t(b->means.size());
    }
    m.push_back(double(means));
    return m;
  }
  void restore(const Message& state) override {
    if (state.empty()) throw std::invalid_argument("an empty SFVI silo checkpoint");
    const double count = state.back();
    if (!(count >= 0 && count <= double(state.size() - 1) && count == std::floor(count)))
      throw std::invalid_argument("a damaged SFVI silo checkpoint (its centring's means)");
    const auto means_begin = state.end() - 1 - long(count);
    if (count > 0) apply_centring(Message(means_begin, state.end() - 1));
    const Message m(state.begin(), means_begin);
    if (m.empty()) throw std::invalid_argument("an empty SFVI silo checkpoint");
    const size_t fit = own_params_size();
    const bool has_own = m.back() != 0;
    const size_t own_size = has_own ? fit : 0;
    if (m.size() < 1 + own_size) throw std::invalid_argument("a damaged SFVI silo checkpoint");
    const size_t n = m.size() - 1 - own_size;
    silo_->restore(Eigen::Map<const Eigen::VectorXd>(m.data(), Eigen::Index(n)));
    if (has_own) own_ = engine::unpack_local_fit(Message(m.begin() + long(n), m.end() - 1), global_params_size(), hyper_size());
  }

  void finish(const std::string& dir) override {
    settled_.report(silo_->silo(), "locals", variable_layout(model_, FVI_GROUP_LOCAL, data_.view()));
    if (!final_) return;
    const Global q = own_ && method_ == "independent"
                         ? Global::from_params(own_->global_params, silo_global_dim(), options_.correlated_global)
                         : global(*final_);
    const Eigen::VectorXd& hyper = own_ && method_ == "independent" ? own_->hyper : final_->hyper;
    write_local_posterior(dir, model_, data_.view(), *silo_, centring_, q, hyper, summary_, draws_, options_.seed,
                          settings_, options_.family, method_ == "independent" ? nullptr : weighted_ ? &*weighted_ : nullptr);
    if (method_ == "independent" && own_) {
      const GlobalOutput g = global_output(model_, data_.view(), q, own_->hyper, draws_, options_.seed);
      std::filesystem::create_directories(dir);
      write_posterior_json(dir + "/global.json", summary_, g.layout, g.draws, g.mean, g.sd);
    }
  }

 private:
  // Round 0: each x's column sums and rows (one_block_per_data); round 1: the pooled means, after which the
  // fit's terms read x - xbar (a new SfviSilo over the centred copy, before any step: the
  // exchange precedes iteration 1, and a second one with the same means changes nothing), and
  // the reply is x - xbar's column sums of squares.
  Message centre(uint32_t round, const Message& request) {
    // What leaves the silo is its own settings' to allow (`fvic plan` lists it only for these).
    if (method_ != "sfvi" || settings_.name("center", "on") == "off")
      throw std::invalid_argument("this silo does not centre its data (method " + method_ + ", center = " +
                                  settings_.name("center", "on") + "): its column sums stay here");
    if (round == 0) {
      std::vector<engine::CentringBlock> blocks = engine::centring_blocks(model_, data_.view(), silo_global_dim());
      Message m;
      for (const engine::CentringBlock* b : engine::one_block_per_data(blocks)) {
        int64_t rows = 0;
        const Eigen::VectorXd sums = engine::column_sums(*b, data_.view(), rows);
        m.insert(m.end(), sums.data(), sums.data() + sums.size());
        m.push_back(double(rows));
      }
      return m;
    }
    if (round != 1) throw std::invalid_argument("a centring request of round " + std::to_string(round));
    apply_centring(request);
    // x - xbar's column sums of squares: the pooled sds that scale the server's steps.
    Message m;
    for (const engine::CentringBlock* b : engine::one_block_per_data(centring_)) {
      const Eigen::VectorXd squares = engine::column_sums_of_squares(*b, centred_.view());
      m.insert(m.end(), squares.data(), squares.data() + squares.size());
    }
    return m;
  }

  // The server's mode search (SfviCoordinator::silo_likelihoods): this silo's log
  // likelihood and its gradient at each point asked, [defined (P), log p (P), gradient (n x P)]; a
  // point where either is not finite is answered `defined` 0 and zeros (nothing non-finite is sent).
  Message likelihood_at(const Message& request) {
    if (!mode_start_applies(method_, settings_))
      throw std::invalid_argument("this silo does not answer a mode search (method " + method_ + ", mode_start = " +
                                  settings_.name("mode_start", "on") + ", warm_start " +
                                  std::to_string(settings_.integer("warm_start", 0)) + "): its likelihood stays here");
    const long n = long(silo_global_dim());
    const DrawsRequest r = check_draws_request(request, n);
    if (r.draws > 2 * n + 1)  // a Newton step's curvature asks 2n points at once, never more
      throw std::invalid_argument("a mode-search request of " + std::to_string(r.draws) + " points (at most " +
                                  std::to_string(2 * n + 1) + ")");
    const Eigen::Map<const Eigen::MatrixXd> z(request.data(), n, r.draws);
    engine::SfviSilo::PointValues v;
    try {
      v = silo_->log_likelihood_at(z);
    } catch (const engine::ModelError&) {
      throw;  // a silo with locals: the server should not have asked
    } catch (const std::exception&) {  // a point outside the model's domain: each alone
      v = {Eigen::VectorXd(r.draws), Eigen::MatrixXd(n, r.draws)};
      for (long p = 0; p < r.draws; ++p) {
        try {
          const engine::SfviSilo::PointValues one = silo_->log_likelihood_at(z.col(p));
          v.log_p[p] = one.log_p[0];
          v.gradient.col(p) = one.gradient.col(0);
        } catch (const engine::ModelError&) {
          throw;
        } catch (const std::exception&) {
          v.log_p[p] = NAN;
        }
      }
    }
    Message m(size_t(r.draws) * size_t(n + 2), 0.0);
    for (long p = 0; p < r.draws; ++p) {
      if (!std::isfinite(v.log_p[p]) || !v.gradient.col(p).allFinite()) continue;
      m[size_t(p)] = 1;
      m[size_t(r.draws + p)] = v.log_p[p];
      for (long i = 0; i < n; ++i) m[size_t(2 * r.draws + p * n + i)] = v.gradient(i, p);
    }
    return m;
  }

  // The server's start found (SfviServer::start_at_locations): q's means of this silo's locals at
  // their conditional mode at the point sent, before its first step (nothing is sent back).
  Message start_locals(const Message& request) {
    if (!mode_start_applies(method_, settings_))
      throw std::invalid_argument("this silo does not start its locals at a mode (method " + method_ +
                                  ", mode_start = " + settings_.name("mode_start", "on") + ")");
    const Eigen::Index n = silo_global_dim();
    if (Eigen::Index(request.size()) != n)
      throw std::invalid_argument("a start of the locals at " + std::to_string(request.size()) +
                                  " values of the globals (this model has " + std::to_string(n) + ")");
    for (double v : request)
      if (!std::isfinite(v)) throw std::invalid_argument("a start of the locals at a non-finite value");
    // 1: the locals start at their conditional mode; 0: this silo's search found none (they keep q's).
    return {silo_->start_locals_at_mode(Eigen::Map<const Eigen::VectorXd>(request.data(), n)) ? 1.0 : 0.0};
  }

  // The fit's terms read x - xbar from now on (`request`: each block's xbar in turn).
  void apply_centring(const Message& request) {
    std::vector<engine::CentringBlock> blocks = engine::centring_blocks(model_, data_.view(), silo_global_dim());
    std::vector<std::pair<std::string, Eigen::Index>> data;  // each x once, as the server sends them
    for (const engine::CentringBlock* b : engine::one_block_per_data(blocks)) data.emplace_back(b->data, b->columns);
    size_t expected = 0;
    for (const auto& [x, columns] : data) expected += size_t(columns);
    if (request.size() != expected)
      throw std::invalid_argument("a centring request of " + std::to_string(request.size()) +
                                  " means; this model's x have " + std::to_string(expected) + " columns");
    for (double v : request)
      if (!std::isfinite(v)) throw std::invalid_argument("a centring request with a non-finite mean");
    size_t at = 0;
    for (const auto& [x, columns] : data) {
      engine::set_data_means(blocks, x, Eigen::Map<const Eigen::VectorXd>(request.data() + at, columns));
      at += size_t(columns);
    }
    bool same = centring_.size() == blocks.size();
    for (size_t i = 0; same && i < blocks.size(); ++i) same = centring_[i].means == blocks[i].means;
    if (same) return;
    for (const engine::CentringBlock& b : blocks)
      for (const std::string& name : b.parts()) {
        const data::Variable* x = data_.find(name);
        const bool shaped = x && x->cols == b.columns && x->rows >= 0 &&
                            (x->rows == 0 ? x->size() == 0 : x->size() % x->rows == 0 && x->size() / x->rows == x->cols);
        if (!shaped)
          throw std::invalid_argument("centring: this silo's '" + name + "' is not " + std::to_string(b.columns) +
                                      " columns wide");
      }
    data::DataSet centred;
    for (data::Variable v : data_.variables()) {
      for (const engine::CentringBlock* b : engine::one_block_per_data(blocks))
        if (b->centres(v.name)) engine::centre_columns(*b, v.values.data(), v.rows);
      centred.add(std::move(v));
    }
    centred_ = std::move(centred);
    centring_ = std::move(blocks);
    silo_ = std::make_unique<SfviSilo>(model_, centred_.view(), silo_->silo(), options_, global_prior_);
    // A hierarchy's local intercepts move with their prior's centred location (centring.h).
    silo_->set_local_centring(engine::local_centring_blocks(model_, data_.view(), silo_global_dim(),
                                                            silo_->local_dim(), centring_));
  }

  Eigen::Index silo_global_dim() const { return engine::group_dim(model_, FVI_GROUP_GLOBAL, data_.view()); }
  Eigen::Index global_params_size() const {
    return Global::num_params_for(silo_global_dim(), options_.correlated_global);
  }
  Eigen::Index hyper_size() const { return engine::group_dim(model_, FVI_GROUP_HYPER, data_.view()); }
  size_t own_params_size() const { return size_t(message::sfvi_message_size<int64_t>(global_params_size(), hyper_size())); }
  SfviBroadcast broadcast(const Message& m) const {
    return engine::unpack_broadcast(m, global_params_size(), hyper_size());
  }
  Global global(const SfviBroadcast& b) const {
    return Global::from_params(b.global_params, silo_global_dim(), options_.correlated_global);
  }

  const fvi_model& model_;
  std::string method_;
  engine::Settings settings_;
  engine::SfviOptions options_;
  data::DataSet data_;
  bool global_prior_;  // the silo evaluates the global priors (SFVI-Avg, the independent fit, a warm start)
  // SFVI at the centred data (fvi/engine/centring.h): the blocks with their means, and the copy of
  // the data whose x is centred, which the fit's terms read (quantities read data_).
  std::vector<engine::CentringBlock> centring_;
  data::DataSet centred_;
  std::unique_ptr<SfviSilo> silo_;
  PosteriorSummary summary_;
  long draws_;
  std::optional<SfviLocalFit> own_;      // the independent fit's own q(Z_G) and theta
  std::optional<SfviBroadcast> final_;   // the final global posterior, for the local one
  SettledAnswers settled_;  // locals still moving at the end are named
  // The last log-joint exchange's draws of Z_G (fit coordinates) and, at each, the locals: one
  // draw, and their mean and mean square given Z_G (written).
  struct LastJoint {
    Eigen::MatrixXd z_global, local, mean, square;
  };
  std::optional<LastJoint> last_joint_;
  std::optional<WeightedLocals> weighted_;
  static constexpr Eigen::Index kMaxWeighedLocals = Eigen::Index(1) << 22;  // values per kept matrix

  // The locals weighed across the last exchange's draws of Z_G by the run's normalised log
  // weights: mean sum_s w_s E[Z_L | Z_G^s], variance from the mean squares likewise; draws by
  // systematic resampling of the draws at each Z_G^s.
  void weigh_locals(const Message& request) {
    if (!weighs_locals(settings_))
      throw std::invalid_argument("this silo does not take local weights (weigh_locals = off): its locals stay the "
                                  "mixture over q of the globals");
    if (!last_joint_)
      throw std::invalid_argument("local weights without a log-joint exchange whose locals this silo kept");
    const LastJoint& j = *last_joint_;
    const Eigen::Index S = j.local.cols();
    if (Eigen::Index(request.size()) != S)
      throw std::invalid_argument("local weights: " + std::to_string(request.size()) + " for " + std::to_string(S) +
                                  " draws of the globals");
    const Eigen::Map<const Eigen::VectorXd> log_w(request.data(), S);
    if (!log_w.allFinite()) throw std::invalid_argument("local weights: a log weight that is not finite");
    Eigen::VectorXd w = (log_w.array() - log_w.maxCoeff()).exp().matrix();
    w /= w.sum();
    WeightedLocals out;
    out.mean = j.mean * w;
    out.sd = (j.square * w - out.mean.cwiseAbs2()).cwiseMax(0.0).cwiseSqrt();
    out.z_global.resize(j.z_global.rows(), draws_);
    out.z.resize(j.local.rows(), draws_);
    CounterRng rng(RngKey{options_.seed, uint32_t(silo_->silo()), 0, rng_stream::kUserStream + 14});
    const double start = rng.uniform(1, 1)(0, 0);
    double cumulative = w[0];
    Eigen::Index s = 0;
    for (long i = 0; i < draws_; ++i) {
      const double target = (double(i) + start) / double(draws_);
      while (cumulative < target && s + 1 < S) cumulative += w[++s];
      out.z_global.col(i) = j.z_global.col(s);
      out.z.col(i) = j.local.col(s);
    }
    weighted_ = std::move(out);
  }
};

// SFVI, SFVI-Avg and the independent baseline (seed 002 Algs. 1-2) as the server loop's
// coordinator. Steps 1..avg_rounds are SFVI-Avg (or independent) rounds, then SFVI iterations.
class SfviCoordinator : public Coordinator {
 public:
  explicit SfviCoordinator(ServerRun& run)
      : run_(run),
        method_(run.method),
        options_(engine::SfviOptions::from(run.settings, engine::group_dim(run.model, FVI_GROUP_GLOBAL, run.server_data.view()))),
        rounds_(max_steps(run.settings, run.method == "sfvi" ? 20000 : 2000)),
        warm_start_(method_ == "sfvi" ? run.settings.integer("warm_start", 0) : 0),
        refresh_(std::max(1L, run.settings.integer("refresh", std::max(1L, rounds_ / 20)))),
        avg_rounds_(method_ == "sfvi_avg" || method_ == "independent" ? rounds_ : warm_start_),
        sfvi_iterations_(method_ == "sfvi" ? rounds_ : 0),
        server_(run.model, run.server_data.view(), options_),
        federation_(server_, run.transport, options_.mc_samples),
        weights_(run.transport.silos(), 1.0),
        own_(run.transport.silos()) {
    const int S = run.transport.silos();
    // Held-out data: one silo's variables; its likelihood must read the globals only.
    if (!run.args.test.empty()) held_out_ = load_held_out(run.model, run.args.test, run.public_data);
    ood_ = load_out_of_distribution(run.model, run.args.ood, run.args.test, run.public_data);
    const engine::BoundFactor* test = held_out_.likelihood.get();
    if (test && (test->info().group_count != 1 || test->group(0) != FVI_GROUP_GLOBAL))
      throw std::invalid_argument("--test: " + test->name() +
                                  " reads more than the global parameters (local parameters belong to a silo), so "
                                  "held-out rows cannot be scored without a silo of their own");
    // seed 002 Alg. 2: n / n_j (asked of the silos only when SFVI-Avg runs).
    if (avg_rounds_ > 0 && method_ != "independent") {
      const std::vector<double> rows = federation_.sizes();
      double total_rows = 0;
      for (double n : rows) total_rows += n;
      for (int k = 0; k < S; ++k) weights_[k] = total_rows / rows[k];
    }
    // The independent baseline: every silo keeps its own copy of q(Z_G) and theta (reported here).
    for (auto& f : own_) f = {server_.q().params(), server_.hyper(), 0};
    centre();
    // The fit starts at the Laplace approximation of the log joint's mode where the search is
    // cheap: pooled, the server's terms are the whole log joint; federated, without locals, the
    // silos' likelihoods at the search's points are one exchange per batch. A run resumed from its
    // checkpoint takes q from there, and its silos' locals are past their first step: no search.
    const bool resuming = run.resume && !run.checkpoint.empty() && std::filesystem::exists(run.checkpoint);
    if (resuming) {
      start_note_ = "not searched for a start: q is the checkpoint's (" + run.checkpoint + ")";
    } else if (server_.hyper_dim() == 0) {
      if (pooled(run.model)) {
        if (server_.global_dim() <= kModeStartLimit) start_at_mode(nullptr);
      } else if (mode_start_applies(method_, run.settings) && server_.global_dim() <= kFederatedModeStartLimit) {
        const engine::LogDensityBatchFn silos = silo_likelihoods();
        if (has_locals(run.model) || !start_at_mode(&silos)) start_at_locations(silos);
      }
    }
  }

  // With locals, or where the search over every global found no mode (a hierarchical scale's
  // mode at 0): q's means of the unbounded globals at the mode over them, the scales held (and the
  // silos' locals integrated out, Laplace), where it lies far from q's start
  // (SfviServer::start_at_locations), and each silo's locals at their conditional mode there
  // (Phase::kSfviModeLocals); the header says which.
  void start_at_locations(const engine::LogDensityBatchFn& silos) {
    const bool locals = has_locals(run_.model);
    // The search over every global's note, when it ran first and found nothing.
    const std::string first = locals ? "" : start_note_ + "; ";
    engine::SfviServer::LocationStart start;
    try {
      start = server_.start_at_locations(silos);
    } catch (const engine::ModeSearchAborted& e) {
      start_note_ = std::string("started at q's default (the mode search stopped: ") + e.what() + ")";
      return;
    }
    const engine::Mode& m = start.mode;
    const std::string cost =
        std::to_string(m.evaluations) + " points in " + std::to_string(m.batches) + " exchanges with the silos";
    char travel[160];
    std::snprintf(travel, sizeof travel, "%.3g from q's start, %g of Adam's steps of lr = %g", start.travel,
                  std::round(start.travel / options_.lr), options_.lr);
    if (!locals) {
      start_note_ = first +
                    (!m.found ? "no mode of the unbounded globals with the scales held either (" + m.why +
                                    "): started at q's default"
                     : !start.moved ? std::string("the unbounded globals' mode with the scales held lies ") + travel +
                                          " (" + cost + "): started at q's default"
                                    : std::string("started the unbounded globals' means at their mode with the bounded "
                                                  "globals (scales) at q's start, ") +
                                          travel + " (Newton, " + cost + ")");
      return;
    }
    if (!m.found) {
      start_note_ = "started at q's default (no mode of the globals' locations found, the silos' locals integrated "
                    "out: " + m.why + ")";
      return;
    }
    if (!start.moved) {
      start_note_ = std::string("started at q's default: the mode of the globals' locations lies ") + travel +
                    " (" + cost + ")";
      return;
    }
    std::vector<Message> replies;
    const Eigen::VectorXd at = server_.q().mean();
    ask_every_silo(run_.transport, 0, Phase::kSfviModeLocals, Message(at.data(), at.data() + at.size()), 1, replies);
    std::string others;  // the silos whose locals keep q's default: no reply, or no mode of their own
    for (size_t k = 0; k < replies.size(); ++k)
      if (replies[k].size() != 1 || replies[k][0] != 1) others += (others.empty() ? "" : ", ") + std::to_string(k + 1);
    start_note_ = std::string("started the unbounded globals' means at the mode over them of the log joint with each "
                              "silo's locals integrated out (Laplace) and the bounded globals (scales) at q's start, ") +
                  travel + " (Newton, " + cost + "); " +
                  (others.empty() ? "each silo's locals start at their conditional mode there"
                                  : "each silo's locals start at their conditional mode there but silo " + others +
                                        "'s, which start at q's default (no reply, or no mode found there)");
  }

  // q set to the mode's Laplace approximation (SfviServer::start_at_mode), the header's note and,
  // where the searches found separate modes, the run's closing warning. False where no mode was
  // found and the caller may search the locations instead (start_at_locations); true where one
  // was, or a silo stopped the search (no second search then).
  bool start_at_mode(const engine::LogDensityBatchFn* silos) {
    engine::Modes modes;
    try {
      modes = server_.start_at_mode(silos);
    } catch (const engine::ModeSearchAborted& e) {
      start_note_ = std::string("started at q's default (the mode search stopped: ") + e.what() + ")";
      return true;  // a silo stopped it: no second search
    }
    const engine::Mode& m = modes.best;
    const std::string cost = silos ? std::to_string(m.evaluations) + " points in " + std::to_string(m.batches) +
                                         " exchanges with the silos"
                                   : std::to_string(m.evaluations) + " gradients";
    start_note_ = m.found ? "started at the mode's Laplace approximation (Newton from " +
                                std::to_string(modes.starts) + " starting points, " + cost + ")"
                          : silos ? "no mode of every global found (" + m.why + "; " + cost + ")"  // start_at_locations next
                                  : "started at q's default (no mode found: " + m.why + ")";
    if (modes.separate_log_p.size() > 1) {
      std::string values;
      for (double lp : modes.separate_log_p) {
        char v[32];
        std::snprintf(v, sizeof v, "%s%.1f", values.empty() ? "" : ", ", lp);
        values += v;
      }
      modes_warning_ = "the mode search from " + std::to_string(modes.starts) + " starting points found " +
                       std::to_string(modes.separate_log_p.size()) + " separate modes (log p " + values +
                       "): the posterior is multimodal, and q describes the neighbourhood of the highest "
                       "alone; its means and sds leave the others out";
    }
    return m.found;
  }

  // The silos' log likelihoods at a batch of points of the globals (the fit's coordinates): one
  // exchange, Phase::kSfviMode, each silo's [defined, log p, gradient] summed. A point any silo
  // cannot score has log p NaN (the search refuses it); a silo that does not answer ends the search.
  engine::LogDensityBatchFn silo_likelihoods() {
    return [this](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& gradient) {
      const Eigen::Index n = z.rows(), P = z.cols();
      std::vector<Message> replies;
      if (!ask_every_silo(run_.transport, mode_exchanges_++, Phase::kSfviMode, Message(z.data(), z.data() + z.size()),
                          size_t(P) * size_t(n + 2), replies))
        throw engine::ModeSearchAborted("a silo did not answer it");
      lp = Eigen::VectorXd::Zero(P);
      gradient = Eigen::MatrixXd::Zero(n, P);
      for (const Message& m : replies) {
        for (Eigen::Index p = 0; p < P; ++p)
          if (m[size_t(p)] != 1) lp[p] = NAN;
        lp += Eigen::Map<const Eigen::VectorXd>(m.data() + P, P);
        gradient += Eigen::Map<const Eigen::MatrixXd>(m.data() + 2 * P, n, P);
      }
    };
  }

  // SFVI fits each intercept of `x * W + b` at the silos' centred x (fvi/engine/centring.h): the
  // silos' column sums and rows, then the pooled means to every silo, once, before iteration 1 (a
  // resumed run asks again: the same means, which a silo that kept its own already has).
  void centre() {
    std::vector<engine::CentringBlock> blocks =
        engine::centring_blocks(run_.model, run_.server_data.view(), server_.global_dim());
    if (blocks.empty() || method_ != "sfvi" || warm_start_ > 0 || pooled(run_.model) ||
        run_.settings.name("center", "on") == "off")
      return;
    // One exchange per x (a vector of groups' intercepts and its location share one).
    std::vector<std::pair<std::string, Eigen::Index>> data;  // x and its columns
    for (const engine::CentringBlock* b : engine::one_block_per_data(blocks)) data.emplace_back(b->data, b->columns);
    size_t reply = 0;
    for (const auto& [x, columns] : data) reply += size_t(columns) + 1;
    std::vector<Message> replies;
    if (!ask_every_silo(run_.transport, 0, Phase::kSfviCentring, {}, reply, replies)) {
      centring_note_ = "  not centred: a silo did not send its column sums (the fit is at the raw data)";
      return;
    }
    Message means;
    size_t at = 0;
    std::vector<double> data_rows;
    for (const auto& [x, columns] : data) {
      Eigen::VectorXd sum = Eigen::VectorXd::Zero(columns);
      double rows = 0;
      for (const Message& m : replies) {
        sum += Eigen::Map<const Eigen::VectorXd>(m.data() + at, columns);
        const double n = m[at + size_t(columns)];
        if (!(n >= 0 && n == std::floor(n))) throw std::runtime_error("centring: a silo sent " + std::to_string(n) + " rows");
        rows += n;
      }
      at += size_t(columns) + 1;
      if (!(rows > 0)) return;  // no rows anywhere: nothing to centre at
      data_rows.push_back(rows);
      const Eigen::VectorXd mean = sum / rows;
      engine::set_data_means(blocks, x, mean);
      means.insert(means.end(), mean.data(), mean.data() + mean.size());
    }
    // A silo that misses the means would score its rows at the raw x while the others do not.
    if (!ask_every_silo(run_.transport, 1, Phase::kSfviCentring, means, means.size(), replies))
      throw std::runtime_error("centring: a silo did not take the pooled means of its data (set center = off to "
                               "fit at the raw data)");
    // Their sums of squares about the means: the pooled sds, Adam's step coordinates (centring.h).
    at = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      const auto& [x, columns] = data[i];
      Eigen::VectorXd squares = Eigen::VectorXd::Zero(columns);
      for (const Message& m : replies) {
        const Eigen::Map<const Eigen::VectorXd> silo_squares(m.data() + at, columns);
        if (!(silo_squares.array() >= 0).all())  // NaN too
          throw std::runtime_error("centring: a silo sent a sum of squares that is negative or not a number");
        squares += silo_squares;
      }
      at += size_t(columns);
      engine::set_data_scales(blocks, x, engine::pooled_scales(squares, data_rows[i]));
    }
    std::string names, scales;
    const std::vector<const engine::CentringBlock*> first_of_data = engine::one_block_per_data(blocks);
    // Each intercept once, with its products: `mu + age * b_age + inc * b_inc at the pooled column
    // means of age and inc`.
    for (size_t i = 0; i < blocks.size(); ++i) {
      const engine::CentringBlock& b = blocks[i];
      bool seen = false;
      for (size_t j = 0; j < i && !seen; ++j) seen = blocks[j].intercept == b.intercept;
      if (seen) continue;
      std::string sum = b.intercept_name, data;
      size_t products = 0;
      for (const engine::CentringBlock& p : blocks) {
        if (p.intercept != b.intercept) continue;
        sum += " + " + (p.companions.empty() ? p.data : "(" + p.data_text(" or ") + ")") + " * " + p.coefficient_name;
        data += (products++ == 0 ? "" : ", ") + p.data_text();
      }
      names += (names.empty() ? "" : ", ") + sum + " at " +
               (products == 1 ? data + "'s pooled column means" : "the pooled column means of " + data);
    }
    for (const engine::CentringBlock& b : blocks) {
      // W's steps once (a vector of groups' intercepts and its location share x and W).
      if (std::find(first_of_data.begin(), first_of_data.end(), &b) == first_of_data.end()) continue;
      char range[96];
      if (b.columns == 1) std::snprintf(range, sizeof range, "%.3g", b.scales[0]);
      else std::snprintf(range, sizeof range, "%.3g to %.3g", b.scales.minCoeff(), b.scales.maxCoeff());
      if ((b.scales.array() != 1.0).any())
        scales += (scales.empty() ? "" : "; ") + b.coefficient_name + " by " + range + " (" + b.data_text() + "'s pooled column sds)";
    }
    // A hierarchy's local intercepts (and the links of a chain to their location), shifted with
    // their prior's location in each silo: "with each silo's a_h and a_w".
    std::vector<std::string> locals;
    for (int i = 0; i < run_.model.variable_count; ++i) {
      const fvi_variable_info& a = run_.model.variables[i];
      const int w = a.centring_coefficient;  // a global W (a local one is the silo's own slope: below)
      if (engine::group_kind(run_.model, a.group) == FVI_GROUP_LOCAL && a.centring_data && *a.centring_data &&
          w >= 0 && w < run_.model.variable_count &&
          engine::group_kind(run_.model, run_.model.variables[w].group) == FVI_GROUP_GLOBAL)
        locals.push_back(a.name);
    }
    for (size_t i = 0; i < locals.size(); ++i)
      names += (i == 0 ? ", with each silo's " : i + 1 == locals.size() ? " and " : ", ") + locals[i];
    centring_note_ = "  centred: " + names + " (the fit's intercept is the written one plus the means times the "
                     "coefficients; every output reports the written)";
    if (!scales.empty())
      centring_note_ += "\n  steps scaled: " + scales + ": where a column's sd exceeds 1, Adam's steps and q's starting "
                        "sd of its coefficient are a standardised column's";
    server_.set_centring(std::move(blocks));
  }

  const char* checkpoint_kind() const override { return "sfvi-server"; }
  void print_header() const override {
    if (pooled(run_.model))
      std::printf("%s: pooled (no data is held by silos), method = %s, family = %s, rounds = %ld\n",
                  run_.description.name, method_.c_str(), options_.family.c_str(), rounds_);
    else
      std::printf("%s: method = %s, family = %s, silos = %d, rounds = %ld%s\n", run_.description.name, method_.c_str(),
                  options_.family.c_str(), run_.transport.silos(), rounds_,
                  warm_start_ ? (", after " + std::to_string(warm_start_) + " SFVI-Avg rounds").c_str() : "");
    std::printf("  global parameters %lld, hyperparameters %lld\n", (long long)server_.global_dim(),
                (long long)server_.hyper_dim());
    if (!centring_note_.empty()) std::printf("%s\n", centring_note_.c_str());
    if (run_.settings.name("center", "on") != "off")
      for (const std::string& sum : engine::local_slope_sums(run_.model))
        std::printf("  centred in each silo: %s (nothing is sent; every output reports the written)\n", sum.c_str());
    if (!start_note_.empty()) std::printf("  %s\n", start_note_.c_str());
  }
  long steps() const override { return avg_rounds_ + sfvi_iterations_; }
  long rounds_setting() const override { return rounds_; }
  // Every warm-start round reports; SFVI-Avg and independent rounds and SFVI iterations every
  // `refresh` and at their phase's end.
  bool reports(long step) const override {
    if (step <= avg_rounds_) return method_ == "sfvi" || step % refresh_ == 0 || step == avg_rounds_;
    const long t = step - avg_rounds_;
    return t % refresh_ == 0 || t == rounds_;
  }

  double step(long step) override {
    step_ = step;
    if (step > avg_rounds_) return federation_.sfvi_iteration(uint32_t(step - avg_rounds_));
    if (method_ != "independent") return federation_.average_round(uint32_t(step), options_.avg_steps, weights_);
    federation_.independent_round(uint32_t(step), options_.avg_steps, own_);
    return independent_objective();
  }
  std::vector<double> silo_terms() const override {
    if (method_ != "independent" || step_ > avg_rounds_) return federation_.terms();
    std::vector<double> own;  // each silo's own fit's objective
    for (const SfviLocalFit& f : own_) own.push_back(f.elbo_term);
    return own;
  }
  double report_objective(long step, double window_mean) override {
    if (step > avg_rounds_) return window_mean;  // the mean estimate since the last line
    if (method_ == "independent") return independent_objective();
    const long elbo_draws = 16;
    return federation_.elbo(uint32_t(step), elbo_draws);
  }
  std::string position(long step) const override {
    char line[64];
    if (step <= avg_rounds_)
      std::snprintf(line, sizeof line, "%s %6ld/%ld", method_ == "sfvi" ? "warm start" : "round", step,
                    method_ == "independent" ? rounds_ : avg_rounds_);
    else
      std::snprintf(line, sizeof line, "iteration %6ld/%ld", step - avg_rounds_, rounds_);
    return line;
  }
  std::string metrics(long, Extra& extra) override {
    engine::BoundFactor* test = held_out_.likelihood.get();
    if (!test) return "";
    const long predictive_draws = 200;
    const uint32_t stream = rng_stream::kUserStream + 2;
    PredictiveMetrics pm;
    if (method_ == "independent") {  // the silos' own posteriors, each scored, then averaged
      const int S = run_.transport.silos();
      pm.accuracy = pm.rmse = pm.calibration_error = pm.calibration_if_calibrated = 0;
      pm.ood_auroc = ood_.likelihood ? 0 : -1;
      for (int k = 0; k < S; ++k) {
        const Global q = Global::from_params(own_[k].global_params, server_.global_dim(), options_.correlated_global);
        const PredictiveMetrics m = held_out_metrics(held_out_, ood_, global_draws(q, options_.seed, stream, predictive_draws));
        pm.mean_log_density += m.mean_log_density / S;
        pm.accuracy += m.accuracy / S;
        pm.rmse += m.rmse / S;
        pm.calibration_error += m.calibration_error / S;
        pm.calibration_if_calibrated += m.calibration_if_calibrated / S;
        if (ood_.likelihood) pm.ood_auroc += m.ood_auroc / S;
      }
    } else {
      Eigen::MatrixXd draws = global_draws(server_.q(), options_.seed, stream, predictive_draws);
      engine::to_written(server_.centring(), draws);  // the held-out rows are raw
      pm = held_out_metrics(held_out_, ood_, draws);
    }
    return report_metrics(pm, extra);
  }

  // The hyperparameters are point estimates: their moves are measured in unconstrained units.
  void moments(Eigen::VectorXd& mean, Eigen::VectorXd& sd) const override {
    const Eigen::Index n = server_.global_dim(), h = server_.hyper_dim();
    mean.resize(n + h);
    sd.resize(n + h);
    mean << server_.q().mean(), server_.hyper();
    sd << server_.q().marginal_sd(), Eigen::VectorXd::Ones(h);
  }
  std::string fit_coordinate(Eigen::Index i) const override {
    std::string data;
    for (const engine::CentringBlock& b : server_.centring())
      if (i >= b.intercept && i < b.intercept + b.intercepts()) data += (data.empty() ? "" : ", ") + b.data_text();
    return data.empty() ? "" : " (fitted at the centred " + data + ")";
  }
  Eigen::VectorXd params() const override {
    if (method_ == "independent") return {};
    Eigen::VectorXd p(server_.q().num_params() + server_.hyper_dim());
    p << server_.q().params(), server_.hyper();
    return p;
  }
  void set_params(const Eigen::VectorXd& p) override {
    const Eigen::Index n = server_.q().num_params();
    server_.set(p.head(n), p.tail(p.size() - n));
  }
  // The silos decay their own steps and average their own eta_L with the server, on the schedule
  // each iteration's request states (SFVI only: the other methods' silos fit their locals within
  // the rounds).
  void set_schedule(double scale, long epoch, long mc_factor) override {
    server_.set_step_scale(scale);
    if (method_ != "sfvi") return;
    const long draws = options_.mc_samples * mc_factor;
    server_.set_mc_samples(draws);
    federation_.set_schedule(scale, epoch, draws);
  }
  // SFVI: each silo's locals, judged by the silo (SFVI-Avg's and the independent fit's silos fit
  // theirs within each round).
  std::string unsettled(long step, double tol_param) override {
    settled_note_.clear();
    if (method_ != "sfvi" || engine::group_index(run_.model, FVI_GROUP_LOCAL) < 0) return "";
    Settling s = ask_silos_settled(run_.transport, uint32_t(step), Phase::kSfviSettled,
                                   tol_param, "locals");
    settled_note_ = std::move(s.note);
    return s.unsettled;
  }
  std::string settled_note() const override { return settled_note_; }

  ConvergenceOptions convergence() const override {
    ConvergenceOptions o;
    o.window = method_ == "sfvi" ? engine::kSfviRuleWindow : 5;
    // SFVI: where the average is held back by the gradients' noise, the rule doubles the draws.
    if (method_ == "sfvi") o.max_mc_factor = kMaxMcFactor;
    return o;
  }
  const char* unit() const override { return method_ == "sfvi" ? "iterations" : "rounds"; }

  std::vector<double> state() const override {
    const Eigen::VectorXd s = server_.checkpoint();
    std::vector<double> m(s.data(), s.data() + s.size());
    for (size_t k = 0; k < own_.size() && method_ == "independent"; ++k) {
      const Message f = engine::pack(own_[k]);
      m.insert(m.end(), f.begin(), f.end());
    }
    return m;
  }
  void restore(const std::vector<double>& m) override {
    const Eigen::Index state = server_.checkpoint().size(), fit = server_.q().num_params() + server_.hyper_dim() + 1;
    const size_t S = own_.size();
    if (m.size() != size_t(state) + (method_ == "independent" ? S * size_t(fit) : 0))
      throw std::invalid_argument("the server's state has " + std::to_string(m.size()) + " values");
    server_.restore(Eigen::Map<const Eigen::VectorXd>(m.data(), state));
    const double* at = m.data() + state;
    for (size_t k = 0; k < S && method_ == "independent"; ++k)
      own_[k] = engine::unpack_local_fit(Message(at + k * fit, at + (k + 1) * fit), server_.q().num_params(),
                                         server_.hyper_dim());
  }

  // The server writes the global posterior; each silo writes its own local posterior.
  void finish(long last_step) override { federation_.finish(uint32_t(last_step + 1), method_ != "independent"); }
  std::optional<ServerDraws> draws() override {
    if (method_ == "independent") return std::nullopt;
    const long count = output_draws(run_.settings, server_.global_dim());
    const GlobalOutput g = global_output(run_.model, run_.server_data.view(), server_.q(), server_.hyper(), count,
                                         options_.seed, server_.centring());
    ServerDraws d;
    d.layout = g.layout;
    d.unconstrained = g.unconstrained;
    d.constrained = g.draws;
    d.mean = g.mean;
    d.sd = g.sd;
    d.log_q = g.log_density;
    d.what = "the global parameters and hyperparameters";
    d.family = options_.family;
    return d;
  }
  bool closing(const ServerDraws& d, Closing& out, std::string& why) override {
    // The draws are the written globals'; the silos' terms read the fit's (centring.h).
    Eigen::MatrixXd z = d.unconstrained.topRows(server_.global_dim());
    engine::to_fit(server_.centring(), z);
    if (z.size() > kMaxLogJointRequest) {
      why = "not computed (" + std::to_string(z.size()) + " values of draws to send each silo)";
      return false;
    }
    std::vector<Message> replies;
    const Eigen::Index S = z.cols(), sums = silo_sum_count(run_.model);
    // Each closing exchange its own round: a deployed silo answers a (round, phase) it has
    // answered before from its reply cache (the tail check's exchange follows k-hat's).
    if (!ask_every_silo(run_.transport, uint32_t(steps() + 2 + closing_exchanges_++), Phase::kSfviLogJoint, Message(z.data(), z.data() + z.size()),
                        size_t((2 + sums) * S), replies)) {
      why = "not computed (a silo did not answer)";
      return false;
    }
    // log p = log p(Z_G) (+ the server's likelihood) + sum_j log p(y_j, Z_Lj | Z_G);
    // log q = log q(Z_G) + sum_j log q(Z_Lj | Z_G).
    out.log_p = server_.log_server_terms(z);
    out.log_g = d.log_q;
    out.silo_sums = Eigen::MatrixXd::Zero(sums, S);
    for (const Message& m : replies) {
      out.log_p += Eigen::Map<const Eigen::VectorXd>(m.data(), S);
      out.log_g += Eigen::Map<const Eigen::VectorXd>(m.data() + S, S);
      add_parts(m.data() + 2 * S, out.silo_sums);
    }
    return true;
  }
  bool closing_takes_draws() const override { return true; }
  bool weigh_locals(const std::vector<double>& log_weights) override {
    if (method_ == "independent" || engine::group_index(run_.model, FVI_GROUP_LOCAL) < 0 || !weighs_locals(run_.settings))
      return false;
    std::vector<Message> replies;
    locals_weighted_ = ask_every_silo(run_.transport, uint32_t(steps() + 2 + closing_exchanges_++),
                                      Phase::kSfviLocalWeights, Message(log_weights.begin(), log_weights.end()), 0, replies);
    return locals_weighted_;
  }
  // The draws are the written globals then the hyperparameters' constant rows: q(Z_G) becomes the
  // moments' Gaussian in the fit's coordinates (to_fit is affine: z_fit = A z + b), mean-field
  // where q(Z_G) is (the diagonal: the moment-matching member of that family), and each silo's
  // q(Z_L | Z_G) keeps its fitted coupling and scale.
  bool adopt_moments(const ServerDraws&, const std::vector<Eigen::Index>& varying, const Eigen::VectorXd& mean,
                     const Eigen::MatrixXd& covariance) override {
    const Eigen::Index n = server_.global_dim();
    if (method_ == "independent" || Eigen::Index(varying.size()) != n) return false;
    for (Eigen::Index i = 0; i < n; ++i)
      if (varying[size_t(i)] != i) return false;
    Eigen::MatrixXd b = Eigen::MatrixXd::Zero(n, 1), a = Eigen::MatrixXd::Identity(n, n), m = mean;
    engine::to_fit(server_.centring(), b);
    engine::to_fit(server_.centring(), a);
    engine::to_fit(server_.centring(), m);
    a.colwise() -= b.col(0);
    const Eigen::MatrixXd c = a * covariance * a.transpose();
    const Global q = server_.q().correlated()
                         ? Global::from_mean_covariance(m.col(0), 0.5 * (c + c.transpose()))
                         : Global(m.col(0), Eigen::VectorXd(c.diagonal().cwiseSqrt().array().log()));
    server_.set(q.params(), server_.hyper());
    federation_.finish(uint32_t(steps() + 2 + closing_exchanges_++), true);
    return true;
  }
  std::vector<std::string> closing_warnings() const override {
    std::vector<std::string> out;
    if (!modes_warning_.empty()) out.push_back(modes_warning_);
    if (server_.dropped_draws() > 0)
      out.push_back(std::to_string(server_.dropped_draws()) +
                    " draws of q were dropped from their steps' estimates: the log density or its gradient was "
                    "not finite there (as Stan's ADVI drops them); a model whose density underflows in q's "
                    "tails may want a tighter prior or a reparameterisation");
    return out;
  }
  std::string outputs_note() const override {
    if (method_ == "independent") return "; each silo writes silo-K/global.json and silo-K/posterior.json";
    // A silo writes its locals' posterior and the derived values it computes, if it has any.
    bool own = engine::group_index(run_.model, FVI_GROUP_LOCAL) >= 0;
    for (int i = 0; i < run_.model.quantity_count; ++i)
      own |= run_.model.quantities[i].owner == FVI_SILO && !run_.model.quantities[i].aggregate;
    if (!own) return "";
    return locals_weighted_ ? "; each silo writes its local posterior to silo-K/posterior.json, weighed by the closing "
                              "exchange's importance weights (the written model's posterior of the locals)"
                            : "; each silo writes its local posterior to silo-K/posterior.json";
  }

 private:
  double independent_objective() const {
    double elbo = 0;  // the sum of the silos' own objectives
    for (const auto& f : own_) elbo += f.elbo_term;
    return elbo;
  }

  ServerRun& run_;
  std::string method_;
  engine::SfviOptions options_;
  long rounds_, warm_start_, refresh_, avg_rounds_, sfvi_iterations_;
  long closing_exchanges_ = 0;  // each closing exchange its own round (closing())
  bool locals_weighted_ = false;  // every silo took the closing's weights (weigh_locals)
  SfviServer server_;
  Federation federation_;
  std::vector<double> weights_;
  std::vector<SfviLocalFit> own_;
  HeldOut held_out_, ood_;
  uint32_t mode_exchanges_ = 0;  // the mode search's exchanges so far (each its own round)
  std::string start_note_;  // how the fit started (at the mode's Laplace approximation); the header indents it
  std::string centring_note_;  // which intercepts are fitted at the centred data
  std::string modes_warning_;  // the mode search found several modes
  std::string settled_note_;  // what the last check of the silos' locals found
  long step_ = 0;  // the last step taken
};

}  // namespace

int serve_sfvi(ServerRun& run) {
  SfviCoordinator coordinator(run);
  return run_server(run, coordinator, run.method);
}

std::unique_ptr<SiloHost> sfvi_silo_host(const fvi_model& model, const engine::Settings& settings,
                                         const std::string& method, data::DataSet data, int silo, int silos) {
  return std::make_unique<SfviSiloHost>(model, settings, method, std::move(data), silo, silos);
}

}  // namespace fvi::program
