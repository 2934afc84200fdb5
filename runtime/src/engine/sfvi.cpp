#include "fvi/engine/sfvi.h"

#include "fvi/optim/adam_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include "fvi/diagnostics/psis.h"
#include "fvi/divergence/wasserstein_barycenter.h"
#include "fvi/message/codec.h"
#include "fvi/optim/step_limit.h"
#include "fvi/rng.h"

namespace fvi::engine {

SfviOptions SfviOptions::from(const Settings& s, Eigen::Index global_dim) {
  SfviOptions o;
  const std::string family = s.name("family", global_dim <= kStructuredAutoLimit ? "structured" : "meanfield");
  o.family = family;
  if (family == "structured" || family == "fullrank") o.correlated_global = o.coupled = true;
  if (family == "fullrank") o.correlated_local = true;
  if (family != "meanfield" && family != "structured" && family != "fullrank")
    throw std::invalid_argument("family = " + family + " is not an SFVI family (meanfield, structured, fullrank)");
  o.stl = s.name("estimator", "stl") == "stl";
  o.local_reparam = s.name("local_reparam", "on") == "on";
  o.lr = s.number("lr", 0.01);
  o.mc_samples = s.integer("mc_samples", 1);
  o.local_samples = s.integer("local_samples", 1);
  o.local_samples_given = s.has("local_samples");
  o.batch_size = s.integer("batch_size", 0);
  o.avg_steps = s.integer("avg_steps", 10);
  o.init_sd = s.number("init_sd", std::exp(-2.0));
  o.seed = static_cast<uint64_t>(s.integer("seed", 1));
  o.centre_local_slopes = s.name("center", "on") != "off";
  return o;
}

// ---- messages (message/codec.h; sizes in message/sizes.h, as `fvic plan` prints them) ----

namespace {

// Every SFVI message is two vectors and one number: (eta_G, theta, round) down; (g_eta,
// g_theta, ELBO term) or (eta_G, theta, ELBO term) up.
std::vector<double> pack_parts(const Eigen::VectorXd& a, const Eigen::VectorXd& b, double c) {
  return message::Writer().values(a).values(b).value(c).done();
}

struct Parts {
  Eigen::VectorXd a, b;
  double c = 0;
};

Parts unpack_parts(const std::vector<double>& in, Eigen::Index na, Eigen::Index nb, const char* a, const char* b,
                   const char* c) {
  message::Reader r(in, "SFVI message");
  Parts p;
  p.a = r.vector(na, a);
  p.b = r.vector(nb, b);
  p.c = r.value(c);
  r.finish();
  return p;
}

}  // namespace

std::vector<double> pack(const SfviBroadcast& m) { return pack_parts(m.global_params, m.hyper, double(m.round)); }

SfviBroadcast unpack_broadcast(const std::vector<double>& in, Eigen::Index np, Eigen::Index nh) {
  Parts p = unpack_parts(in, np, nh, "eta_G", "theta", "round");
  const uint32_t round = message::round_number(p.c, "SFVI message");
  return {std::move(p.a), std::move(p.b), round};
}

std::vector<double> pack(const SfviContribution& m) { return pack_parts(m.d_global, m.d_hyper, m.elbo_term); }

SfviContribution unpack_contribution(const std::vector<double>& in, Eigen::Index np, Eigen::Index nh) {
  Parts p = unpack_parts(in, np, nh, "g_eta", "g_theta", "ELBO term");
  return {std::move(p.a), std::move(p.b), p.c};
}

std::vector<double> pack(const SfviLocalFit& m) { return pack_parts(m.global_params, m.hyper, m.elbo_term); }

SfviLocalFit unpack_local_fit(const std::vector<double>& in, Eigen::Index np, Eigen::Index nh) {
  Parts p = unpack_parts(in, np, nh, "eta_G", "theta", "ELBO term");
  return {std::move(p.a), std::move(p.b), p.c};
}

Eigen::MatrixXd global_noise(uint64_t seed, uint32_t round, Eigen::Index n, long draws) {
  CounterRng rng(RngKey{seed, 0, round, rng_stream::kGlobalNoise});
  return rng.normal(n, draws);
}

// ---- log densities through the kernels -------------------------------------------------------

int64_t LogDensity::rows() const {
  int64_t n = 0;
  for (const auto& f : factors_)
    if (f->info().kind == FVI_LIKELIHOOD) n = std::max(n, f->rows());
  return n;
}

LogDensity::Value LogDensity::evaluate_points(const Eigen::MatrixXd& global, const Eigen::MatrixXd* local,
                                              const Eigen::MatrixXd& hyper, bool with_gradient) {
  const Eigen::Index P = global.cols(), n = global.rows(), m = local ? local->rows() : 0;
  Value out;
  out.per_draw.resize(P);
  if (with_gradient) {
    out.d_global.resize(n, P);
    if (local) out.d_local.resize(m, P);
  }
  for (Eigen::Index first = 0; first < P; first += 64) {
    const Eigen::Index count = std::min<Eigen::Index>(64, P - first);
    const Eigen::MatrixXd at_global = global.middleCols(first, count);
    const Eigen::MatrixXd at_local = local ? Eigen::MatrixXd(local->middleCols(first, count)) : Eigen::MatrixXd();
    GroupValues values{&at_global, local ? &at_local : nullptr, &hyper};
    const Value v = evaluate(values, long(count), n, m, hyper.rows(), 0, -1, 1, 1, with_gradient);
    out.per_draw.segment(first, count) = v.per_draw;
    if (with_gradient) {
      out.d_global.middleCols(first, count) = v.d_global;
      if (local) out.d_local.middleCols(first, count) = v.d_local;
    }
  }
  return out;
}

LogDensity::Value LogDensity::evaluate(const GroupValues& values, long draws, Eigen::Index global_dim,
                                       Eigen::Index local_dim, Eigen::Index hyper_dim, int64_t begin, int64_t count,
                                       double likelihood_scale, double density_scale, bool with_gradient) {
  Value out;
  out.per_draw = Eigen::VectorXd::Zero(draws);
  if (with_gradient) {
    if (values.global) out.d_global = Eigen::MatrixXd::Zero(global_dim, draws);
    if (values.local) out.d_local = Eigen::MatrixXd::Zero(local_dim, draws);
    out.d_hyper = Eigen::VectorXd::Zero(hyper_dim);
    // Per draw only when the hyperparameters come one column per draw (one column is broadcast
    // by the kernels, and its gradient comes summed over the draws).
    if (values.hyper && values.hyper->cols() == draws) out.d_hyper_draws = Eigen::MatrixXd::Zero(hyper_dim, draws);
  }
  // The factors read the written locals (set_local_map): a = a_c - xbar b.
  Eigen::MatrixXd written_local;
  GroupValues at = values;
  if (values.local && !local_map_.empty()) {
    written_local = *values.local;
    to_written(local_map_, written_local);
    at.local = &written_local;
  }
  for (auto& f : factors_) {
    const bool likelihood = f->info().kind == FVI_LIKELIHOOD;
    const double scale = likelihood ? likelihood_scale : density_scale;
    std::vector<Eigen::MatrixXd> inputs;
    std::vector<int> which;
    for (int g = 0; g < f->info().group_count; ++g) {
      const int group = f->group(g);
      const Eigen::MatrixXd* v = group == FVI_GROUP_GLOBAL  ? at.global
                                 : group == FVI_GROUP_LOCAL ? at.local
                                 : group == FVI_GROUP_HYPER ? at.hyper
                                                            : nullptr;
      if (!v) throw ModelError(f->name() + ": reads the " + fvi_group_name(group) + " group, which SFVI does not provide here");
      inputs.push_back(*v);
      which.push_back(group);
    }
    const auto& lp = likelihood ? f->forward(begin, count, inputs) : f->forward(0, -1, inputs);
    out.per_draw += scale * lp.colwise().sum().transpose();
    if (!with_gradient) continue;
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Constant(lp.rows(), lp.cols(), scale);
    const std::vector<Eigen::MatrixXd> d = f->backward({&seed});
    for (size_t g = 0; g < d.size(); ++g) {
      if (which[g] == FVI_GROUP_GLOBAL) out.d_global += d[g];
      else if (which[g] == FVI_GROUP_LOCAL) out.d_local += d[g];
      else {
        out.d_hyper += d[g].rowwise().sum();
        if (out.d_hyper_draws.cols() == d[g].cols()) out.d_hyper_draws += d[g];
      }
    }
  }
  if (with_gradient && values.local && !local_map_.empty()) pull_back(local_map_, out.d_local);
  return out;
}

LogDensity::Value LogDensity::evaluate_meanfield(const Eigen::VectorXd& global_mean, const Eigen::VectorXd& global_sd,
                                                 const Eigen::VectorXd& hyper, long draws, uint64_t noise_key,
                                                 int64_t begin, int64_t count, double likelihood_scale,
                                                 double density_scale) {
  Value out;
  out.per_draw = Eigen::VectorXd::Zero(draws);
  out.d_global_mean = Eigen::VectorXd::Zero(global_mean.size());
  out.d_global_sd = Eigen::VectorXd::Zero(global_mean.size());
  out.d_hyper = Eigen::VectorXd::Zero(hyper.size());
  for (auto& f : factors_) {
    const bool likelihood = f->info().kind == FVI_LIKELIHOOD;
    const double scale = likelihood ? likelihood_scale : density_scale;
    GroupVectors<double> means, sds;
    for (int g = 0; g < f->info().group_count; ++g) {
      const int group = f->group(g);
      if (group == FVI_GROUP_GLOBAL) {
        means.push_back(global_mean);
        sds.push_back(global_sd);
      } else if (group == FVI_GROUP_HYPER) {
        means.push_back(hyper);  // point-estimated: no sd
        sds.emplace_back();
      } else {
        throw ModelError(f->name() + ": reads the " + fvi_group_name(group) +
                         " group, which a locally reparameterised SFVI gradient does not provide");
      }
    }
    const auto& lp = likelihood ? f->forward_meanfield(begin, count, means, sds, draws, noise_key)
                                : f->forward_meanfield(0, -1, means, sds, draws, noise_key);
    // A factor that samples nothing returns one column: it is the same at every draw.
    if (lp.cols() == draws) out.per_draw += scale * lp.colwise().sum().transpose();
    else out.per_draw.array() += scale * lp.sum();
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Constant(lp.rows(), lp.cols(), scale);
    const MeanFieldGradient<double> d = f->backward_meanfield<double>({&seed});
    for (int g = 0; g < f->info().group_count; ++g) {
      if (f->group(g) == FVI_GROUP_GLOBAL) {
        out.d_global_mean += d.d_means[g];
        out.d_global_sd += d.d_sds[g];
      } else {
        out.d_hyper += d.d_means[g];
      }
    }
  }
  return out;
}

namespace {

// Adds the factors of `kind` owned by `owner` to `into`.
void bind(LogDensity& into, const fvi_model& model, const fvi_data& data, int owner, int kind) {
  for (int f = 0; f < model.factor_count; ++f)
    if (model.factors[f].owner == owner && model.factors[f].kind == kind)
      into.add(std::make_unique<BoundFactor>(model, f, data));
}

// A block's initial parameters: mean 0, sd init_sd, no correlation or coupling.
Eigen::VectorXd initial_global(Eigen::Index n, const SfviOptions& o) {
  StructuredGlobalGaussian<double> q = o.correlated_global
                                           ? StructuredGlobalGaussian<double>(Eigen::VectorXd::Zero(n),
                                                                              Eigen::VectorXd::Constant(n, std::log(o.init_sd)),
                                                                              Eigen::MatrixXd::Identity(n, n))
                                           : StructuredGlobalGaussian<double>(Eigen::VectorXd::Zero(n),
                                                                              Eigen::VectorXd::Constant(n, std::log(o.init_sd)));
  return q.params();
}

// The entropy's gradient with respect to the log-sds (the standard estimator's closed form).
void add_entropy_gradient(Eigen::VectorXd& g, Eigen::Index first_log_sd, Eigen::Index n) {
  g.segment(first_log_sd, n).array() += 1.0;
}

}  // namespace

// ---- server ----------------------------------------------------------------------------------

SfviServer::SfviServer(const fvi_model& model, const fvi_data& data, SfviOptions options)
    : options_(options),
      global_dim_(group_dim(model, FVI_GROUP_GLOBAL, data)),
      hyper_dim_(group_dim(model, FVI_GROUP_HYPER, data)),
      q_(StructuredGlobalGaussian<double>::from_params(initial_global(global_dim_, options), global_dim_,
                                                       options.correlated_global)),
      hyper_(Eigen::VectorXd::Zero(hyper_dim_)),
      adam_(q_.num_params() + hyper_dim_, AdamOptions{StepSizeSchedule(options.lr)}),
      prior_scales_(prior_scale_blocks(model, data, global_dim_, q_.num_params(), hyper_dim_)),
      class_shifts_(class_shift_blocks(model, data, global_dim_)) {
  bind(server_terms_, model, data, FVI_SERVER, FVI_DENSITY);
  bind(server_terms_, model, data, FVI_SERVER, FVI_LIKELIHOOD);  // of public and server data: the server's
  if (global_dim_ == 0) throw ModelError("SFVI needs global parameters; this model has none");
  for (int i = 0; i < model.variable_count; ++i) {
    const fvi_variable_info& v = model.variables[i];
    if (group_kind(model, v.group) != FVI_GROUP_GLOBAL || (v.transform != FVI_IDENTITY && v.transform != FVI_AFFINE))
      continue;
    if (const std::optional<VariablePlace> place = variable_place(model, data, i, global_dim_))
      for (int64_t k = 0; k < place->count; ++k) unbounded_.push_back(Eigen::Index(place->offset + k));
  }
}

SfviBroadcast SfviServer::broadcast(uint32_t round) const { return {q_.params(), hyper_, round}; }

SfviContribution SfviServer::server_term(const Eigen::MatrixXd& eps) {
  const long S = eps.cols();
  const Eigen::MatrixXd z = q_.sample(eps);
  const Eigen::MatrixXd theta = hyper_;
  // The server's terms read the written globals (centring.h: b = b_c - xbar W); a copy only then.
  Eigen::MatrixXd written;
  if (!centring_.empty()) {
    written = z;
    to_written(centring_, written);
  }
  GroupValues values{centring_.empty() ? &z : &written, nullptr, &theta};
  SfviContribution out;
  LogDensity::Value lp;
  if (!server_terms_.empty()) {
    lp = server_terms_.evaluate(values, S, global_dim_, 0, hyper_dim_, 0, -1, 1, 1, true);
    pull_back(centring_, lp.d_global);
  } else {
    lp = {Eigen::VectorXd::Zero(S), Eigen::MatrixXd::Zero(global_dim_, S), {}, Eigen::VectorXd::Zero(hyper_dim_)};
  }
  // seed 002 Eq. 9, first term; Eq. 12, first term (the hyperparameters' prior and global priors).
  Eigen::MatrixXd cotangent = options_.stl ? Eigen::MatrixXd(lp.d_global - q_.score(z)) : lp.d_global;
  // A draw where the log density or its gradient is not finite (a density underflowing to 0 far
  // in q's tail) is dropped, as Stan's ADVI drops it: the others' average is the estimate.
  // With every draw dropped the gradient stays NaN, and step() skips the step.
  const Eigen::VectorXd log_q = q_.log_density(z);
  std::vector<bool> finite(static_cast<size_t>(S));
  long kept = 0;
  for (long s = 0; s < S; ++s) {
    finite[static_cast<size_t>(s)] = std::isfinite(lp.per_draw[s]) && cotangent.col(s).allFinite();
    kept += finite[static_cast<size_t>(s)];
  }
  if (kept == 0 || kept == S) {
    out.d_global = q_.vjp(eps, cotangent) / double(S);
    out.elbo_term = (lp.per_draw - log_q).mean();
  } else {
    double elbo = 0;
    for (long s = 0; s < S; ++s) {
      if (finite[static_cast<size_t>(s)]) elbo += lp.per_draw[s] - log_q[s];
      else cotangent.col(s).setZero();
    }
    dropped_draws_ += S - kept;
    out.d_global = q_.vjp(eps, cotangent) / double(kept);
    out.elbo_term = elbo / double(kept);
  }
  if (!options_.stl) add_entropy_gradient(out.d_global, global_dim_, global_dim_);
  out.d_hyper = lp.d_hyper / double(S);
  return out;
}

double SfviServer::step(const std::vector<SfviContribution>& contributions, uint32_t round) {
  SfviContribution total = server_term(global_noise(options_.seed, round, global_dim_, options_.mc_samples));
  // Alg. 1 step 10: the silos' gradients are summed, not averaged.
  for (const SfviContribution& c : contributions) {
    total.d_global += c.d_global;
    total.d_hyper += c.d_hyper;
    total.elbo_term += c.elbo_term;
  }
  Eigen::VectorXd params(q_.num_params() + hyper_dim_), gradient(params.size());
  params << q_.params(), hyper_;
  gradient << -total.d_global, -total.d_hyper;  // Adam minimises; the ELBO is maximised
  // A step whose every draw fell where the log density or its gradient is not finite is skipped
  // (its draws counted dropped); 100 in a row stop the run as before, naming the gradient.
  if (!gradient.allFinite() && skipped_in_a_row_ < 100) {
    ++skipped_in_a_row_;
    dropped_draws_ += options_.mc_samples;
    return last_elbo_;
  }
  skipped_in_a_row_ = 0;
  if (std::isfinite(total.elbo_term)) last_elbo_ = total.elbo_term;
  // Started at the mode, q is where it should be: its means step by at most half a conditional
  // sd (the Cholesky factor's diagonal), so that a step along a narrow ridge stays on it.
  Eigen::VectorXd limit = mean_step_limit(params.size(), at_mode_ ? Eigen::VectorXd(q_.log_sd().array().exp())
                                                                    : q_.marginal_sd());
  to_step_coordinates(centring_, params, gradient, limit);
  const PriorScaleStep scaled = to_prior_scale_coordinates(prior_scales_, params, gradient, limit);
  adam_.set_step_limit(limit);
  adam_.step(params, gradient);
  from_prior_scale_coordinates(prior_scales_, scaled, params);
  from_step_coordinates(centring_, params);
  // Along a softmax's shift only the prior moves the objective: its optimum, set exactly.
  remove_class_means(class_shifts_, params.head(global_dim_));
  set(params.head(q_.num_params()), params.tail(hyper_dim_));
  return total.elbo_term;
}

void SfviServer::set_centring(std::vector<CentringBlock> blocks) {
  centring_ = std::move(blocks);
  Eigen::VectorXd params = q_.params();
  set_starting_sds(centring_, options_.init_sd, params.segment(global_dim_, global_dim_));  // as the means
  q_ = StructuredGlobalGaussian<double>::from_params(params, global_dim_, options_.correlated_global);
}

void SfviServer::set(const Eigen::VectorXd& global_params, const Eigen::VectorXd& hyper) {
  q_ = StructuredGlobalGaussian<double>::from_params(global_params, global_dim_, options_.correlated_global);
  hyper_ = hyper;
}

LogDensityBatchFn SfviServer::log_joint(const LogDensityBatchFn* silos) {
  // The server's terms at the written globals (centring.h), their gradient pulled back to the
  // fit's coordinates, plus the silos' likelihoods at the fit's (their data centred) when asked.
  return [this, silos, theta = Eigen::MatrixXd(hyper_)](const Eigen::MatrixXd& z, Eigen::VectorXd& lp,
                                                        Eigen::MatrixXd& gradient) {
    const long P = long(z.cols());
    if (server_terms_.empty()) {
      lp = Eigen::VectorXd::Zero(P);
      gradient = Eigen::MatrixXd::Zero(global_dim_, P);
    } else {
      Eigen::MatrixXd written = z;
      to_written(centring_, written);
      LogDensity::Value v = server_terms_.evaluate_points(written, nullptr, theta, true);
      lp = std::move(v.per_draw);
      gradient = std::move(v.d_global);
      pull_back(centring_, gradient);
    }
    if (silos) {
      Eigen::VectorXd silo_lp;
      Eigen::MatrixXd silo_gradient;
      (*silos)(z, silo_lp, silo_gradient);
      lp += silo_lp;
      gradient += silo_gradient;
    }
  };
}

SfviServer::LocationStart SfviServer::start_at_locations(const LogDensityBatchFn& silos) {
  LocationStart out;
  const Eigen::Index k = Eigen::Index(unbounded_.size());
  if (k == 0) {
    out.mode.why = "no global is declared without bounds";
    return out;
  }
  const LogDensityBatchFn full = log_joint(&silos);
  const Eigen::VectorXd start = q_.mean();
  // The searched coordinates alone: the others held at q's means.
  const LogDensityBatchFn searched = [&](const Eigen::MatrixXd& s, Eigen::VectorXd& lp, Eigen::MatrixXd& gradient) {
    Eigen::MatrixXd z = start.replicate(1, s.cols());
    for (Eigen::Index i = 0; i < k; ++i) z.row(unbounded_[size_t(i)]) = s.row(i);
    Eigen::MatrixXd g;
    full(z, lp, g);
    gradient.resize(k, s.cols());
    for (Eigen::Index i = 0; i < k; ++i) gradient.row(i) = g.row(unbounded_[size_t(i)]);
  };
  Eigen::VectorXd from(k);
  for (Eigen::Index i = 0; i < k; ++i) from[i] = start[unbounded_[size_t(i)]];
  out.mode = find_mode(searched, from);
  if (!out.mode.found) return out;
  out.travel = (out.mode.at - from).cwiseAbs().maxCoeff();
  if (out.travel <= kLongTravelSteps * options_.lr) return out;
  Eigen::VectorXd params = q_.params();
  for (Eigen::Index i = 0; i < k; ++i) params[unbounded_[size_t(i)]] = out.mode.at[i];  // the means come first
  q_ = StructuredGlobalGaussian<double>::from_params(params, global_dim_, options_.correlated_global);
  out.moved = true;
  return out;
}

Modes SfviServer::start_at_mode(const LogDensityBatchFn* silos) {
  const LogDensityBatchFn log_p = log_joint(silos);
  // From q's mean and, where each search is cheap, from three of Stan's random inits (uniform on
  // (-2, 2) in every unconstrained coordinate): a search that ends in a poor local mode (an HMM
  // whose second state is never visited) is then found out by the others.
  auto random_init = [this](std::mt19937_64& rng) {  // Stan's: uniform on (-2, 2) in every coordinate
    std::uniform_real_distribution<double> init(-2, 2);
    Eigen::VectorXd z(global_dim_);
    for (Eigen::Index i = 0; i < global_dim_; ++i) z[i] = init(rng);
    return z;
  };
  std::vector<Eigen::VectorXd> starts{q_.mean()};
  if (global_dim_ <= kMultiStartLimit) {
    std::mt19937_64 rng(options_.seed ^ 0x6d6f646573ULL);
    for (int k = 0; k < 3; ++k) starts.push_back(random_init(rng));
  }
  std::vector<Eigen::Index> bounded;  // every global declared with a bound (or another transform)
  for (Eigen::Index i = 0; i < global_dim_; ++i)
    if (std::find(unbounded_.begin(), unbounded_.end(), i) == unbounded_.end()) bounded.push_back(i);
  Modes modes = find_modes(log_p, starts, 200, bounded);
  if (!modes.best.found && !modes.best.finite_start) {
    // Where log p or its gradient is not finite at every start (a spectral density underflowing
    // at the default length scale), Stan's rule: up to 100 random inits on (-2, 2), the first
    // finite one the start of the search, or of q when no mode is found from it.
    std::mt19937_64 rng(options_.seed ^ 0x696e697473ULL);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const Eigen::VectorXd z = random_init(rng);
      Eigen::VectorXd lp;
      Eigen::MatrixXd gradient;
      try {
        log_p(z, lp, gradient);
      } catch (const ModeSearchAborted&) {
        throw;
      } catch (const std::exception&) {
        continue;
      }
      if (!std::isfinite(lp[0]) || !gradient.allFinite()) continue;
      const long evaluations = modes.best.evaluations, batches = modes.best.batches;
      modes = find_modes(log_p, {z}, 200, bounded);
      modes.best.evaluations += evaluations;
      modes.best.batches += batches;
      if (!modes.best.found) {
        q_ = StructuredGlobalGaussian<double>::from_params(
            [&] {
              Eigen::VectorXd params = q_.params();
              params.head(global_dim_) = z;  // the means: the first global_dim_ of q's parameters
              return params;
            }(),
            global_dim_, options_.correlated_global);
        modes.best.why += " (q's means start at random init " + std::to_string(attempt + 1) + ", finite there)";
      }
      break;
    }
  }
  const Mode& m = modes.best;
  if (!m.found) return modes;
  // The Laplace approximation N(mode, C^-1); a mean-field q takes the KL-optimal diagonal of a
  // Gaussian target, sd_i = C_ii^-1/2.
  const Eigen::LLT<Eigen::MatrixXd> llt(m.curvature);
  if (options_.correlated_global) {
    const Eigen::MatrixXd covariance = llt.solve(Eigen::MatrixXd::Identity(global_dim_, global_dim_));
    q_ = StructuredGlobalGaussian<double>::from_mean_covariance(m.at, 0.5 * (covariance + covariance.transpose()));
  } else {
    q_ = StructuredGlobalGaussian<double>(m.at, -0.5 * m.curvature.diagonal().array().log().matrix());
  }
  at_mode_ = true;
  return modes;
}

Eigen::VectorXd SfviServer::checkpoint() const {
  Eigen::VectorXd values(q_.num_params() + hyper_dim_);
  values << q_.params(), hyper_;
  return with_adam(values, adam_);
}

void SfviServer::restore(const Eigen::VectorXd& state) {
  const Eigen::Index np = q_.num_params();
  const Eigen::VectorXd values = restore_adam(state, np + hyper_dim_, 0, adam_);
  set(values.head(np), values.tail(hyper_dim_));
}

// [eta_L with Adam's state, the averaging schedule, the draws per gradient]. The draws are the
// rule's (it may have doubled them): the silo redraws the globals' noise from the seed with its
// own count, which must be the server's after a restart too.
Eigen::VectorXd SfviSilo::checkpoint() const {
  const Eigen::Index m = local_params_.size();
  const Eigen::VectorXd core = with_adam(local_params_, adam_), schedule = average_.state(m);
  Eigen::VectorXd state(core.size() + schedule.size() + 1);
  state << core, schedule, double(options_.mc_samples);
  return state;
}

void SfviSilo::restore(const Eigen::VectorXd& state) {
  const Eigen::Index m = local_params_.size(), schedule = ParameterAverage::state_size(m);
  if (state.size() < schedule + 1) throw std::invalid_argument("a damaged SFVI silo checkpoint");
  const double draws = state[state.size() - 1];
  if (!(draws >= 1 && draws <= 1e6 && draws == std::floor(draws)))
    throw std::invalid_argument("a damaged SFVI silo checkpoint (its draws per gradient)");
  const Eigen::VectorXd values = restore_adam(state.head(state.size() - schedule - 1), m, 0, adam_);
  Adam<double> adam = adam_;
  set_local_params(values);
  adam_ = adam;
  average_.restore(state.segment(state.size() - schedule - 1, schedule));
  adam_.set_scale(average_.step_scale());
  options_.mc_samples = long(draws);
}

void SfviSilo::set_schedule(double step_scale, long epoch) {
  const bool restart = epoch != average_.epoch();
  average_.set_schedule(step_scale, epoch, local_params_.size());
  if (restart) watch_.restart();
  adam_.set_scale(step_scale);
}

WindowJudgement SfviSilo::locals_settled(double tol_param) const {
  if (local_dim_ == 0) return {};  // nothing of its own to settle
  return watch_.judge(tol_param);
}

void SfviSilo::use_average() {
  if (average_.has_average()) set_local_params(average_.average());
}

Eigen::VectorXd SfviServer::log_server_terms(const Eigen::MatrixXd& z_fit) {
  if (server_terms_.empty()) return Eigen::VectorXd::Zero(z_fit.cols());
  const Eigen::MatrixXd theta = hyper_;
  Eigen::MatrixXd z_all = z_fit;
  to_written(centring_, z_all);
  return server_terms_.evaluate_points(z_all, nullptr, theta, false).per_draw;
}

SfviSilo::LogJoint SfviSilo::log_joint(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                       const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& eps_local,
                                       const Eigen::MatrixXd& uniforms) {
  // K draws of the locals per draw of Z_G: local_samples, or more (log_joint_samples) for a
  // whole block, whose importance-weighted estimate of log p(y_j | Z_G) is then less noisy.
  const long K = z_global.cols() > 0 ? eps_local.cols() / z_global.cols() : options_.local_samples;
  check_size("SfviSilo::log_joint", "draws", eps_local.cols(), z_global.cols() * K);
  check_size("SfviSilo::log_joint", "uniforms", uniforms.cols(), z_global.cols());
  if (K != options_.local_samples && (options_.local_samples == 1 || K < 1))
    throw std::invalid_argument("SfviSilo::log_joint: " + std::to_string(K) + " local draws per global draw, " +
                                std::to_string(options_.local_samples) + " expected");
  // Draws of Z_G per call: rows x draws x K stays under about 4M values.
  const Eigen::Index S = z_global.cols(),
                     chunk = std::clamp<Eigen::Index>((Eigen::Index(1) << 22) / (K * std::max<int64_t>(likelihood_rows_, 1)), 1, 64);
  LogJoint out{Eigen::VectorXd(S), Eigen::VectorXd::Zero(S), Eigen::MatrixXd(local_dim_, S),
               Eigen::MatrixXd(local_dim_, S), Eigen::MatrixXd(local_dim_, S)};
  const Eigen::MatrixXd theta = hyper;
  for (Eigen::Index first = 0; first < S; first += chunk) {
    const Eigen::Index n = std::min(chunk, S - first);
    const Eigen::MatrixXd z = z_global.middleCols(first, n);
    const Eigen::MatrixXd u = z.colwise() - global.mean();
    if (K > 1) {
      // Where the bound's q(Z_L | Z_G) misses p(Z_L | Z_G, y_j) (a draw of Z_G far in q's tails,
      // where the tail check looks), half the draws follow the locals' conditional mode: an
      // estimate of log p(y_j | Z_G) from q alone falls short there, and with it the check's
      // weight of that tail (a three-group scale's sd read +6% where it is +35%).
      const std::vector<LocalMode> modes = local_modes(global, u);
      const ImportanceDraws d = importance_draws(global, hyper, u, eps_local.middleCols(first * K, n * K), false, &modes);
      out.log_p.segment(first, n) = d.per_draw;
      out.local.middleCols(first, n) = resample(d, K, uniforms.middleCols(first, n));
      for (Eigen::Index s = 0; s < n; ++s) {
        const Eigen::MatrixXd w = weights_of(d, long(s), K);
        const auto b = d.written().middleCols(s * K, K);
        out.local_mean.col(first + s) = w.cwiseProduct(b).rowwise().sum();
        out.local_square.col(first + s) = w.cwiseProduct(b.cwiseAbs2()).rowwise().sum();
      }
      continue;
    }
    const Eigen::MatrixXd local = q_.sample(u, eps_local.middleCols(first, n));
    GroupValues values{&z, &local, &theta};
    out.log_p.segment(first, n) =
        joint_.evaluate(values, long(n), global_dim_, local_dim_, hyper_dim_, 0, -1, 1, 1, false).per_draw;
    out.log_q.segment(first, n) = q_.log_density(local, u);  // unit Jacobian: the written locals' density too
    out.local.middleCols(first, n) = written_locals(z, local);
  }
  if (K == 1) out.local_mean = out.local, out.local_square = out.local.cwiseAbs2();
  return out;
}

void SfviServer::average(const std::vector<SfviLocalFit>& fits) {
  std::vector<StructuredGlobalGaussian<double>> qs;
  Eigen::VectorXd hyper = Eigen::VectorXd::Zero(hyper_dim_);
  for (const SfviLocalFit& f : fits) {
    qs.push_back(StructuredGlobalGaussian<double>::from_params(f.global_params, global_dim_, options_.correlated_global));
    hyper += f.hyper / double(fits.size());  // Alg. 2: theta <- J^-1 sum_j theta_j
  }
  // seed 002 Eqs. 14-15: the 2-Wasserstein barycenter (closed form for a diagonal block).
  StructuredGlobalGaussian<double> b = wasserstein_barycenter(qs);
  if (options_.correlated_global && !b.correlated())
    b = StructuredGlobalGaussian<double>(b.mean(), b.log_sd(), Eigen::MatrixXd::Identity(global_dim_, global_dim_));
  set(b.params(), hyper);
}

// ---- silo ------------------------------------------------------------------------------------

SfviSilo::SfviSilo(const fvi_model& model, const fvi_data& data, int silo, SfviOptions options, bool global_prior)
    : silo_(silo),
      options_(options),
      global_dim_(group_dim(model, FVI_GROUP_GLOBAL, data)),
      local_dim_(group_dim(model, FVI_GROUP_LOCAL, data)),
      hyper_dim_(group_dim(model, FVI_GROUP_HYPER, data)),
      adam_(1, AdamOptions{StepSizeSchedule(options.lr)}),
      prior_scales_(prior_scale_blocks(model, data, global_dim_,
                                       StructuredGlobalGaussian<double>::num_params_for(global_dim_, options.correlated_global),
                                       hyper_dim_)) {
  if (global_prior) {
    try {
      bind(prior_, model, data, FVI_SERVER, FVI_DENSITY);
    } catch (const ModelError& e) {
      throw ModelError(std::string("silo ") + std::to_string(silo) +
                       ": SFVI-Avg and the independent fit evaluate the global priors in each silo, but " + e.what());
    }
  }
  // The importance-weighted bound by default where each local element can be scored on its own,
  // or the silo's whole local block where it is small (a scalar intercept, a non-centred z): the
  // plain ELBO's Gaussian q(Z_L | Z_G) biases the globals of a mixed model (seed 002 §4.3; a
  // hierarchical scale's sd halved with six groups, examples/stan_programs/hier_regression_tp).
  std::unique_ptr<ElementJoint> by_element;
  if (options.local_samples > 1 || !options.local_samples_given) {
    if (local_dim_ > 0 && !options.correlated_local) {
      try {
        by_element = std::make_unique<ElementJoint>(model, data, local_dim_);
      } catch (const ModelError&) {
        whole_block_ = true;  // the locals read as a whole: the bound weighs the whole block
      }
    }
  }
  if (!options.local_samples_given) {
    const bool bound = (by_element || local_dim_ <= kWholeBlockLimit) && local_dim_ > 0 && !options.correlated_local &&
                       options.batch_size == 0;
    options.local_samples = options_.local_samples = bound ? 16 : 1;
  }
  local_reparam_ = options.local_reparam && !options.correlated_global && local_dim_ == 0 && options.local_samples == 1;
  if (options.local_samples > 1) {
    const std::string why = "local_samples = " + std::to_string(options.local_samples) + " (an importance-weighted bound) ";
    if (local_dim_ == 0) throw ModelError(why + "needs local parameters; this model has none");
    if (options.correlated_local)
      throw ModelError(why + "needs local elements that are independent given the globals: use family = structured or meanfield, not fullrank");
    if (whole_block_) {
      bind(joint_, model, data, FVI_SILO, FVI_DENSITY);
      bind(joint_, model, data, FVI_SILO, FVI_ELEMENTS);
      bind(joint_, model, data, FVI_SILO, FVI_LIKELIHOOD);
      likelihood_rows_ = joint_.rows();
    } else {
      // The silo's factors are bound once, by element (joint_ stays empty: the bound never reads it).
      elements_ = std::move(by_element);
      likelihood_rows_ = elements_->rows();
    }
    if (options.batch_size > 0 && options.batch_size < likelihood_rows_)
      throw ModelError(why + "scores every row of the silo's locals together: use batch_size = 0");
  } else {
    whole_block_ = false;
    bind(joint_, model, data, FVI_SILO, FVI_DENSITY);
    bind(joint_, model, data, FVI_SILO, FVI_ELEMENTS);
    bind(joint_, model, data, FVI_SILO, FVI_LIKELIHOOD);
    likelihood_rows_ = joint_.rows();
  }
  // A local intercept of the silo's own slopes (centring.h local_slope_blocks): where joint_ holds
  // the factors; the element-wise bound reads none (the compiler marks only locals read whole).
  if (options.centre_local_slopes && !elements_) {
    local_slopes_ = local_slope_blocks(model, data, local_dim_);
    joint_.set_local_map(local_slopes_);
  }
  const Eigen::Index m = local_dim_, n = global_dim_;
  // Initial local block: mean 0, sd init_sd, C_j = 0, L_j = I.
  StructuredLocalGaussian<double> q0(Eigen::VectorXd::Zero(m), options.coupled ? Eigen::MatrixXd::Zero(m, n) : Eigen::MatrixXd(),
                                     Eigen::VectorXd::Constant(m, std::log(options.init_sd)),
                                     options.correlated_local ? Eigen::MatrixXd::Identity(m, m) : Eigen::MatrixXd(), n);
  set_local_params(q0.params());
}

void SfviSilo::set_local_params(const Eigen::VectorXd& params) {
  if (adam_.first_moment().size() != params.size()) adam_ = Adam<double>(params.size(), AdamOptions{StepSizeSchedule(options_.lr)});
  local_params_ = params;
  q_ = StructuredLocalGaussian<double>::from_params(params, local_dim_, global_dim_, options_.coupled,
                                                    options_.correlated_local);
}

Eigen::MatrixXd SfviSilo::local_noise(uint32_t iteration, long draws) const {
  draws *= options_.local_samples;  // K draws of Z_L per draw of Z_G
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kLocalNoise});
  return rng.normal(local_dim_, draws);
}

void SfviSilo::minibatch(uint32_t iteration, int64_t& begin, int64_t& count, double& scale) const {
  const int64_t n = likelihood_rows_;
  if (options_.batch_size <= 0 || options_.batch_size >= n) {
    begin = 0, count = -1, scale = 1;
    return;
  }
  // Contiguous batches visited in a fresh random order each epoch (the kernels take contiguous
  // rows); the likelihood is scaled by n / |batch| so the estimate stays unbiased.
  const int64_t batches = (n + options_.batch_size - 1) / options_.batch_size;
  const uint32_t epoch = uint32_t((iteration - 1) / uint64_t(batches));
  std::vector<int64_t> order(batches);
  std::iota(order.begin(), order.end(), 0);
  CounterRng shuffle(RngKey{options_.seed, uint32_t(silo_), epoch, rng_stream::kMinibatch});
  std::shuffle(order.begin(), order.end(), shuffle);
  const int64_t b = order[(iteration - 1) % uint64_t(batches)];
  begin = b * options_.batch_size;
  count = std::min<int64_t>(options_.batch_size, n - begin);
  scale = double(n) / double(count);
}

bool SfviSilo::profile_applies() const {
  return hyper_dim_ == 0 && local_dim_ > 0 && (elements_ || local_dim_ <= kProfileLocalLimit);
}

SfviSilo::LocalMode SfviSilo::local_mode_by_element(const Eigen::VectorXd& z_global, const Eigen::VectorXd& start) {
  // Each element's term log p(y_i, b_i | Z_G) is a function of b_i alone: the Hessian is
  // diagonal, found from the gradients at b + h and b - h, and each element's Newton step is
  // taken or damped by its own term (Levenberg, per element).
  const Eigen::Index m = local_dim_;
  const Eigen::MatrixXd globals1 = z_global;
  const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(m, 1);
  const Eigen::VectorXd shared1 = Eigen::VectorXd::Ones(1);
  auto at = [&](const Eigen::VectorXd& b, Eigen::VectorXd& terms, Eigen::VectorXd& gradient) {
    const ElementJoint::Value v = elements_->evaluate(globals1, b, nullptr);
    terms = v.per_element.col(0);
    gradient = elements_->backward(ones, shared1).d_local.col(0);
  };
  Eigen::VectorXd b = start, terms, gradient, trial_terms, trial_gradient;
  at(b, terms, gradient);
  Eigen::VectorXd damping = Eigen::VectorXd::Zero(m), curvature(m);
  LocalMode out;
  for (int step = 0; step < 200; ++step) {
    if (!terms.allFinite() || !gradient.allFinite()) return out;
    curvature = local_curvature(z_global, b).col(0);
    // Converged: every element's Newton step under 1e-6 of its conditional sd.
    const bool concave = (curvature.array() > 0).all();
    const double newton_in_sds = concave ? (gradient.cwiseAbs().array() / curvature.array().sqrt()).maxCoeff() : INFINITY;
    if (newton_in_sds <= 1e-6) {
      out.found = true;
      break;
    }
    const Eigen::VectorXd floor = 1e-8 * (1 + curvature.cwiseAbs().array());
    const Eigen::VectorXd c = curvature.cwiseMax(floor) + damping;
    const Eigen::VectorXd trial = b + gradient.cwiseQuotient(c);
    at(trial, trial_terms, trial_gradient);
    bool moved = false;
    for (Eigen::Index i = 0; i < m; ++i) {
      if (std::isfinite(trial_terms[i]) && std::isfinite(trial_gradient[i]) && trial_terms[i] > terms[i]) {
        b[i] = trial[i];
        terms[i] = trial_terms[i];
        gradient[i] = trial_gradient[i];
        damping[i] /= 10;
        moved = true;
      } else {
        damping[i] = std::max(floor[i], 10 * damping[i]);
      }
    }
    // The elements' terms were scored at the trial's other elements: gradients of the kept ones
    // are theirs alone (separable), so b, terms and gradient agree. Where no element's term rises,
    // at the floor of floating-point precision (an element's term in the thousands cannot show a
    // gain of 1e-12), a Newton step of 1e-3 sd is the mode for any purpose, as in find_mode.
    if (!moved && newton_in_sds <= 1e-3) {
      out.found = true;
      break;
    }
    if (!moved && (damping.array() > 1e12 * (1 + curvature.cwiseAbs().array())).all()) return out;
  }
  if (!out.found) return out;
  // The last Newton step (as local_mode_at), then the joint and its gradient in Z_G there.
  Eigen::VectorXd polished = b + gradient.cwiseQuotient(curvature);
  at(polished, trial_terms, trial_gradient);
  for (Eigen::Index i = 0; i < m; ++i)
    if (std::isfinite(trial_terms[i]) && trial_terms[i] >= terms[i]) b[i] = polished[i];
  const ElementJoint::Value v = elements_->evaluate(globals1, b, nullptr);
  out.at = b;
  out.log_p = v.per_element.col(0).sum() + v.shared[0];
  out.d_global = elements_->backward(ones, shared1).d_global.col(0);
  out.log_det = curvature.array().log().sum();
  out.found = std::isfinite(out.log_p) && out.d_global.allFinite() && std::isfinite(out.log_det);
  return out;
}

Eigen::MatrixXd SfviSilo::local_curvature(const Eigen::VectorXd& z_global, const Eigen::VectorXd& b) {
  if (elements_) {  // each element's term a function of its own b_i: the diagonal, from two points
    const Eigen::Index m = local_dim_;
    const Eigen::VectorXd h = 1e-5 * (1 + b.array().abs());
    Eigen::MatrixXd pair(m, 2);
    pair << b + h, b - h;
    elements_->evaluate(z_global.replicate(1, 2), pair, nullptr);
    const Eigen::MatrixXd g = elements_->backward(Eigen::MatrixXd::Ones(m, 2), Eigen::VectorXd::Ones(2)).d_local;
    return -(g.col(0) - g.col(1)).cwiseQuotient(2 * h);
  }
  return central_curvature(local_density(z_global), b);
}

LogDensity::Value SfviSilo::joint_given_globals(const Eigen::VectorXd& z_global, const Eigen::MatrixXd& z_local) {
  return joint_.evaluate_points(z_global.replicate(1, z_local.cols()), &z_local, Eigen::MatrixXd(0, 1), true);
}

LogDensityBatchFn SfviSilo::local_density(const Eigen::VectorXd& z_global) {
  return [this, z_global](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& gradient) {
    LogDensity::Value v = joint_given_globals(z_global, z);
    lp = std::move(v.per_draw);
    gradient = std::move(v.d_local);
  };
}

SfviSilo::LocalMode SfviSilo::local_mode_at(const Eigen::VectorXd& z_global, const Eigen::VectorXd& start) {
  if (elements_) return local_mode_by_element(z_global, start);
  const Mode mode = find_mode(local_density(z_global), start, 100);
  LocalMode out;
  if (!mode.found) return out;
  // find_mode stops within 1e-6 of a conditional sd, before its last Newton step: taking it makes
  // the error quadratic, so that the server's finite differences of the envelope gradient (steps
  // of 1e-5) see the profile's curvature and not the inner search's tolerance.
  LogDensity::Value v = joint_given_globals(z_global, mode.at);
  out.at = mode.at;
  const Eigen::LLT<Eigen::MatrixXd> llt(mode.curvature);
  if (llt.info() == Eigen::Success) {
    const Eigen::VectorXd polished = mode.at + llt.solve(v.d_local.col(0));
    const LogDensity::Value w = joint_given_globals(z_global, polished);
    if (std::isfinite(w.per_draw[0]) && w.per_draw[0] >= v.per_draw[0]) {
      out.at = polished;
      v = w;
    }
  }
  out.log_p = v.per_draw[0];
  out.d_global = v.d_global.col(0);
  if (llt.info() == Eigen::Success) out.log_det = 2 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  out.found = std::isfinite(out.log_p) && out.d_global.allFinite() && std::isfinite(out.log_det);
  return out;
}

std::vector<SfviSilo::LocalMode> SfviSilo::local_modes(const StructuredGlobalGaussian<double>& global,
                                                       const Eigen::MatrixXd& u) {
  std::vector<LocalMode> modes(size_t(u.cols()));
  if (!profile_applies()) return modes;
  const Eigen::MatrixXd starts = q_.sample(u, Eigen::MatrixXd::Zero(local_dim_, u.cols()));
  for (Eigen::Index s = 0; s < u.cols(); ++s) {
    try {
      const Eigen::VectorXd z_global = u.col(s) + global.mean();
      LocalMode& mode = modes[size_t(s)];
      mode = local_mode_at(z_global, starts.col(s));
      // The curvature at the polished mode, not at the search's last point before it: that point
      // depends on the path (how many steps met the tolerance), and with it the draws would carry
      // the search's tolerance rather than rounding (the backends agree to 1e-9).
      if (mode.found) mode.curvature = local_curvature(z_global, mode.at);
    } catch (const std::exception&) {  // outside the model's domain (a kernel's error): q alone there
      modes[size_t(s)] = LocalMode();
    }
  }
  return modes;
}

bool SfviSilo::start_locals_at_mode(const Eigen::VectorXd& z_global) {
  check_size("SfviSilo::start_locals_at_mode", "parameters", z_global.size(), global_dim_);
  if (!profile_applies() || adam_.iteration() > 0) return false;
  LocalMode mode;
  try {
    mode = local_mode_at(z_global, profile_start_.size() == local_dim_ ? profile_start_ : q_.mean());
  } catch (const std::exception&) {
    return false;  // outside the model's domain (a kernel's error): the locals keep q's default
  }
  if (!mode.found) return false;
  Eigen::VectorXd params = local_params_;
  params.head(local_dim_) = mode.at;  // the means come first
  set_local_params(params);
  return true;
}

SfviSilo::PointValues SfviSilo::log_likelihood_at(const Eigen::MatrixXd& z_global) {
  if (hyper_dim_ > 0)
    throw ModelError("a point of the globals alone does not fix this silo's term (it has hyperparameters)");
  check_size("SfviSilo::log_likelihood_at", "parameters", z_global.rows(), global_dim_);
  const long P = long(z_global.cols());
  if (local_dim_ > 0) {  // the profile over the locals, each point's mode from the last request's first
    PointValues out{Eigen::VectorXd::Constant(P, NAN), Eigen::MatrixXd::Zero(global_dim_, P),
                    Eigen::VectorXd::Constant(P, NAN)};
    if (!profile_applies()) return out;
    if (profile_start_.size() != local_dim_) profile_start_ = q_.mean();
    Eigen::VectorXd next_start = profile_start_;
    for (long p = 0; p < P; ++p) {
      try {
        const LocalMode mode = local_mode_at(z_global.col(p), profile_start_);
        if (!mode.found) continue;
        out.half_log_det[p] = 0.5 * mode.log_det;
        out.log_p[p] = mode.log_p - out.half_log_det[p];
        out.gradient.col(p) = mode.d_global;
        if (p == 0) next_start = mode.at;
      } catch (const std::exception&) {  // a point outside the model's domain (a kernel's error)
      }
    }
    profile_start_ = next_start;
    return out;
  }
  LogDensity::Value v = joint_.evaluate_points(z_global, nullptr, Eigen::MatrixXd(0, 1), true);
  return {std::move(v.per_draw), std::move(v.d_global)};
}

SfviContribution SfviSilo::gradient(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                    const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local, double scale,
                                    Eigen::VectorXd* d_local) {
  return gradient_at(global, hyper, eps_global, eps_local, 0, -1, scale, scale, d_local);
}

SfviContribution SfviSilo::meanfield_gradient_at(const StructuredGlobalGaussian<double>& global,
                                                 const Eigen::VectorXd& hyper, long draws, uint64_t noise_key,
                                                 int64_t begin, int64_t count, double likelihood_scale) {
  const Eigen::VectorXd sd = global.log_sd().array().exp();
  const LogDensity::Value lp =
      joint_.evaluate_meanfield(global.mean(), sd, hyper, draws, noise_key, begin, count, likelihood_scale, 1);
  SfviContribution out;
  // params = (mu, rho = log sigma): d rho = d sigma .* sigma. The silo's term has no log q (no
  // locals), so STL and the standard estimator agree here.
  out.d_global.resize(global.num_params());
  out.d_global << lp.d_global_mean, lp.d_global_sd.cwiseProduct(sd);
  out.d_global /= double(draws);
  out.d_hyper = lp.d_hyper / double(draws);
  out.elbo_term = lp.per_draw.mean();
  return out;
}

SfviContribution SfviSilo::gradient_at(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                       const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local,
                                       int64_t begin, int64_t count, double likelihood_scale, double density_scale,
                                       Eigen::VectorXd* d_local) {
  if (options_.local_samples > 1) {
    if (likelihood_scale != density_scale || count >= 0)
      throw ModelError("local_samples > 1 scores every row with one scale");
    return importance_gradient_at(global, hyper, eps_global, eps_local, likelihood_scale, d_local);
  }
  const long S = eps_global.cols();
  const Eigen::MatrixXd u = global.offset(eps_global);
  const Eigen::MatrixXd z_global = u.colwise() + global.mean();
  const Eigen::MatrixXd z_local = q_.sample(u, eps_local);
  const Eigen::MatrixXd theta = hyper;
  GroupValues values{&z_global, local_dim_ > 0 ? &z_local : nullptr, &theta};
  LogDensity::Value lp = joint_.evaluate(values, S, global_dim_, local_dim_, hyper_dim_, begin, count,
                                         likelihood_scale, density_scale, true);
  if (lp.d_local.size() == 0) lp.d_local = Eigen::MatrixXd::Zero(local_dim_, S);
  // STL (seed 002 Eq. 6): the scores of q(Z_L | Z_G) with its parameters held fixed.
  Eigen::MatrixXd a = lp.d_global, h = lp.d_local;
  if (options_.stl) {
    a -= q_.score_global(z_local, u);
    h -= q_.score_local(z_local, u);
  }
  SfviContribution out;
  // seed 002 Eq. 10: through Z_G directly, and through Z_L's dependence on u = Z_G - mu_G.
  out.d_global = (global.vjp(eps_global, a) + global.vjp_offset(eps_global, q_.offset_cotangent(h))) / double(S);
  out.d_hyper = lp.d_hyper / double(S);  // seed 002 Eq. 13
  out.elbo_term = (lp.per_draw - q_.log_density(z_local, u)).mean();
  if (d_local) {
    *d_local = q_.vjp(u, eps_local, h) / double(S);  // seed 002 Eq. 11
    if (!options_.stl) {
      const Eigen::Index first_log_sd = local_dim_ + (options_.coupled ? local_dim_ * global_dim_ : 0);
      add_entropy_gradient(*d_local, first_log_sd, local_dim_);
    }
  }
  return out;
}

namespace {

// Student-t with 2 degrees of freedom: heavier tails than any Gaussian's, so that p / t stays
// bounded where the locals' posterior keeps its prior's Gaussian tail beyond the Laplace
// curvature's (a logistic intercept whose rows all say 1: the likelihood flattens, the prior
// remains). Its CDF F(w) = 1/2 + w / (2 sqrt(2 + w^2)) inverts in closed form.
double t2_log_density(double w) { return -1.5 * std::log1p(0.5 * w * w) - std::log(2 * std::sqrt(2.0)); }

// The t_2 quantile of a standard normal's CDF at e (u = Phi(e), both tails without cancellation).
double t2_from_normal(double e) {
  const double u = 0.5 * std::erfc(-e / std::sqrt(2.0)), v = 0.5 * std::erfc(e / std::sqrt(2.0));  // u, 1 - u
  return (u - v) / std::sqrt(2 * u * v);
}

}  // namespace


Eigen::MatrixXd SfviSilo::mix_in_laplace(const std::vector<LocalMode>& modes, const Eigen::MatrixXd& u_each,
                                         const Eigen::MatrixXd& eps, long K, Eigen::MatrixXd& z_local) const {
  const Eigen::Index m = local_dim_, rows = whole_block_ ? 1 : m;
  // log of the Laplace half's density, (Gaussian + t_2) / 2, at every draw; -inf without a mode
  Eigen::MatrixXd log_laplace = Eigen::MatrixXd::Constant(rows, z_local.cols(), -INFINITY);
  auto log_mean = [&](double a, double b) {
    const double top = std::max(a, b);
    return top + std::log(0.5 * std::exp(a - top) + 0.5 * std::exp(b - top));
  };
  for (size_t s = 0; s < modes.size(); ++s) {
    const LocalMode& mode = modes[s];
    if (!mode.found) continue;
    // The mode's whitening w = U (b - at), U'U the curvature: its Cholesky factor for a block, the
    // square roots of the diagonal by element. w ~ N(0, I) or, independently per coordinate, t_2.
    Eigen::MatrixXd U;
    Eigen::ArrayXd root;
    if (whole_block_) {
      const Eigen::LLT<Eigen::MatrixXd> llt(mode.curvature);
      if (llt.info() != Eigen::Success) continue;
      U = llt.matrixU();
    } else {
      root = mode.curvature.col(0).array().sqrt();
    }
    for (long k = 0; k < K; ++k) {
      const Eigen::Index c = Eigen::Index(s) * K + k;
      if (k % 2 == 1) {  // k = 1, 5, 9, ...: the Gaussian; k = 3, 7, ...: the t_2
        const Eigen::VectorXd w = k % 4 == 1 ? Eigen::VectorXd(eps.col(c)) : Eigen::VectorXd(eps.col(c).unaryExpr(&t2_from_normal));
        z_local.col(c) = whole_block_ ? Eigen::VectorXd(mode.at + U.triangularView<Eigen::Upper>().solve(w))
                                      : Eigen::VectorXd(mode.at.array() + w.array() / root);
      }
      const Eigen::VectorXd d = z_local.col(c) - mode.at;
      if (whole_block_) {
        const Eigen::VectorXd w = U.triangularView<Eigen::Upper>() * d;
        const double log_det = U.diagonal().array().log().sum();
        log_laplace(0, c) = log_mean(log_det - 0.5 * w.squaredNorm() - 0.5 * double(m) * kLog2Pi,
                                     log_det + w.unaryExpr(&t2_log_density).sum());
      } else {
        const Eigen::ArrayXd w = root * d.array();
        for (Eigen::Index i = 0; i < m; ++i)
          log_laplace(i, c) = std::log(root[i]) + log_mean(-0.5 * w[i] * w[i] - 0.5 * kLog2Pi, t2_log_density(w[i]));
      }
    }
  }
  // log q at every draw.
  Eigen::MatrixXd log_q(rows, z_local.cols());
  if (whole_block_) {
    log_q.row(0) = q_.log_density(z_local, u_each).transpose();
  } else {
    const Eigen::MatrixXd q_means = q_.sample(u_each, Eigen::MatrixXd::Zero(m, u_each.cols()));
    const Eigen::ArrayXXd r = (z_local - q_means).array().colwise() / q_.sd().array();
    log_q = (-0.5 * r.square() - 0.5 * kLog2Pi).matrix();
    log_q.colwise() -= q_.log_sd();
  }
  // log (q/2 + Laplace/2), or log q where there is no Laplace half.
  Eigen::MatrixXd log_mix(rows, z_local.cols());
  for (Eigen::Index c = 0; c < log_q.cols(); ++c)
    for (Eigen::Index i = 0; i < rows; ++i)
      log_mix(i, c) = log_laplace(i, c) == -INFINITY ? log_q(i, c) : log_mean(log_q(i, c), log_laplace(i, c));
  return log_mix;
}

// The importance-weighted bound over each local element (Burda, Grosse & Salakhutdinov 2016,
// "Importance weighted autoencoders", Eq. 8, applied to each element given Z_G): with L_j = I the
// elements b_i are independent under q(Z_L | Z_G) and, given Z_G, under the model, so
//     L_j = E_{q(Z_G)} sum_i E[ log (1/K) sum_k w_ik ],   w_ik = p(y_i, b_ik | Z_G) / q(b_ik | Z_G)
// is a lower bound on sum_i log p(y_i | Z_G) that tightens as K grows (K = 1: seed 002's L_j).
// Its reparameterisation gradient is sum_k wn_ik d log w_ik, wn the weights normalised over k;
// log q(b_ik | Z_G) at b_ik = mu_i + C_i u + sigma_i eps_ik is log N(eps_ik) - log sigma_i, so
// d log w_ik is d log p through the sample path plus 1 on log sigma_i (no score term: the
// sticking-the-landing variant is biased for this bound).
//
// Where the locals are read as a whole (whole_block_), the same bound with the silo's whole block
// as its one element: w_k = p(y_j, Z_Lk | Z_G) / q(Z_Lk | Z_G), one weight per draw of the block.
SfviSilo::ImportanceDraws SfviSilo::importance_draws(const StructuredGlobalGaussian<double>& global,
                                                     const Eigen::VectorXd& hyper, const Eigen::MatrixXd& u,
                                                     const Eigen::MatrixXd& eps_local, bool with_gradient,
                                                     const std::vector<LocalMode>* modes) {
  const long S = u.cols(), K = S > 0 ? eps_local.cols() / S : options_.local_samples;
  if (!elements_ && !whole_block_) throw ModelError("importance weights need local_samples > 1");
  if (eps_local.cols() != S * K)
    throw std::invalid_argument("importance-weighted SFVI: eps_L has " + std::to_string(eps_local.cols()) +
                                " columns, " + std::to_string(S * K) + " expected (K per draw of Z_G)");
  ImportanceDraws d;
  d.per_draw.resize(S);
  d.u_each.resize(global_dim_, S * K);  // Z_G's offset, repeated for its K local draws
  for (long s = 0; s < S; ++s) d.u_each.middleCols(s * K, K) = u.col(s).replicate(1, K);
  const Eigen::MatrixXd z_global = d.u_each.colwise() + global.mean();
  d.z_local = q_.sample(d.u_each, eps_local);
  const Eigen::MatrixXd log_mix = modes ? mix_in_laplace(*modes, d.u_each, eps_local, K, d.z_local) : Eigen::MatrixXd();
  if (maps_locals()) d.z_written = written_locals(z_global, d.z_local);
  const Eigen::MatrixXd theta = hyper;
  if (whole_block_) {
    // The hyperparameters one column per draw, so that their gradient comes per draw to be weighed.
    const Eigen::MatrixXd theta_each = with_gradient ? Eigen::MatrixXd(hyper.replicate(1, S * K)) : theta;
    GroupValues values{&z_global, &d.z_local, &theta_each};
    d.joint = joint_.evaluate(values, S * K, global_dim_, local_dim_, hyper_dim_, 0, -1, 1, 1, with_gradient);
    const Eigen::VectorXd log_w =
        d.joint.per_draw - (modes ? Eigen::VectorXd(log_mix.row(0).transpose()) : q_.log_density(d.z_local, d.u_each));
    d.log_w = log_w.transpose();
    d.shared = Eigen::VectorXd::Zero(S * K);
    d.weights.resize(1, S * K);
    for (long s = 0; s < S; ++s) {
      const auto block = log_w.segment(s * K, K);
      const double top = block.maxCoeff();
      const Eigen::VectorXd e = (block.array() - top).exp().matrix();
      const double total = e.sum();
      d.per_draw[s] = top + std::log(total) - std::log(double(K));
      d.bound += d.per_draw[s];
      d.weights.middleCols(s * K, K) = (e / total).transpose();
    }
    return d;
  }
  const ElementJoint::Value joint = elements_->evaluate(z_global, d.z_local, hyper_dim_ > 0 ? &theta : nullptr);
  d.shared = joint.shared;
  // log w_ik = log p(y_i, b_ik | Z_G) - log N(eps_ik) + log sigma_i
  Eigen::MatrixXd log_w = joint.per_element;
  if (modes) {
    log_w -= log_mix;
  } else {
    log_w.array() += 0.5 * eps_local.array().square() + 0.5 * kLog2Pi;
    log_w.colwise() += q_.log_sd();
  }
  d.log_w = log_w;
  d.weights.resize(local_dim_, S * K);
  for (long s = 0; s < S; ++s) {
    auto block = log_w.middleCols(s * K, K);
    const Eigen::VectorXd top = block.rowwise().maxCoeff();
    const Eigen::MatrixXd e = (block.colwise() - top).array().exp().matrix();
    const Eigen::VectorXd total = e.rowwise().sum();
    d.per_draw[s] = (top.array() + total.array().log() - std::log(double(K))).sum() + d.shared[s * K];
    d.bound += (top.array() + total.array().log() - std::log(double(K))).sum();
    d.weights.middleCols(s * K, K) = (e.array().colwise() / total.array()).matrix();
  }
  return d;
}

SfviSilo::LocalsCheck SfviSilo::locals_khat(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                            const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local) {
  const long S = eps_global.cols();
  if (local_dim_ == 0 || S == 0 || eps_local.cols() % S != 0) return {NAN, 0, 0};
  const long K = eps_local.cols() / S;
  std::vector<std::vector<double>> khats;  // per row (element or block), one per draw of Z_G
  for (long s = 0; s < S; ++s) {
    const Eigen::MatrixXd u = global.offset(eps_global.col(s));
    const Eigen::MatrixXd eps = eps_local.middleCols(s * K, K);
    Eigen::MatrixXd log_w;
    if (elements_ || whole_block_) {
      log_w = importance_draws(global, hyper, u, eps).log_w;
    } else {
      const Eigen::MatrixXd u_each = u.replicate(1, K), z_global = u_each.colwise() + global.mean();
      const Eigen::MatrixXd z_local = q_.sample(u_each, eps), theta = hyper;
      // 64 draws per call: the silo's rows times K values at once could be large.
      const LogDensity::Value v = joint_.evaluate_points(z_global, &z_local, theta, false);
      log_w = (v.per_draw - q_.log_density(z_local, u_each)).transpose();
    }
    khats.resize(size_t(log_w.rows()));
    for (Eigen::Index r = 0; r < log_w.rows(); ++r) {
      std::vector<double> row(static_cast<size_t>(K));
      for (long k = 0; k < K; ++k) row[size_t(k)] = log_w(r, k);
      khats[size_t(r)].push_back(diagnostics::psis(row).khat);
    }
  }
  LocalsCheck out{-std::numeric_limits<double>::infinity(), 0, long(khats.size())};
  for (std::vector<double>& k : khats) {
    std::sort(k.begin(), k.end());  // NaN-free: psis gives Inf for non-finite ratios
    const double median = k.size() % 2 ? k[k.size() / 2] : 0.5 * (k[k.size() / 2 - 1] + k[k.size() / 2]);
    out.worst = std::max(out.worst, median);
    if (median > 0.7) ++out.poor;
  }
  return out;
}

SfviContribution SfviSilo::importance_gradient_at(const StructuredGlobalGaussian<double>& global,
                                                  const Eigen::VectorXd& hyper, const Eigen::MatrixXd& eps_global,
                                                  const Eigen::MatrixXd& eps_local, double scale,
                                                  Eigen::VectorXd* d_local) {
  const long S = eps_global.cols(), K = options_.local_samples;
  const ImportanceDraws d = importance_draws(global, hyper, global.offset(eps_global), eps_local, whole_block_);
  SfviContribution out;
  out.elbo_term = scale * (d.bound + d.shared.sum() / double(K)) / double(S);

  ElementJoint::Gradient g;
  if (whole_block_) {  // each draw's path gradient weighed by its normalised weight
    const Eigen::VectorXd w = scale * d.weights.row(0).transpose();
    g.d_global = d.joint.d_global * w.asDiagonal();
    g.d_local = d.joint.d_local * w.asDiagonal();
    g.d_hyper = hyper_dim_ > 0 ? Eigen::VectorXd(d.joint.d_hyper_draws * w) : Eigen::VectorXd::Zero(0);
  } else {
    g = elements_->backward(scale * d.weights, Eigen::VectorXd::Constant(S * K, scale / double(K)));
  }
  const Eigen::MatrixXd& h = g.d_local;
  const Eigen::MatrixXd through_u = q_.offset_cotangent(h);
  Eigen::MatrixXd a(global_dim_, S), b(global_dim_, S);  // summed over each draw's K local draws
  for (long s = 0; s < S; ++s) {
    a.col(s) = g.d_global.middleCols(s * K, K).rowwise().sum();
    b.col(s) = through_u.middleCols(s * K, K).rowwise().sum();
  }
  out.d_global = (global.vjp(eps_global, a) + global.vjp_offset(eps_global, b)) / double(S);
  out.d_hyper = g.d_hyper / double(S);
  if (d_local) {
    *d_local = q_.vjp(d.u_each, eps_local, h) / double(S);
    const Eigen::Index first_log_sd = local_dim_ + (options_.coupled ? local_dim_ * global_dim_ : 0);
    d_local->segment(first_log_sd, local_dim_).array() += scale;  // sum_k wn_ik = 1
  }
  return out;
}

Eigen::MatrixXd SfviSilo::written_locals(const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& z_local) const {
  Eigen::MatrixXd written = z_local;
  locals_to_written(local_centring_, z_global, written);
  to_written(local_slopes_, written);  // a = a_c - xbar b: b is not shifted, so the order is free
  return written;
}

SfviSilo::LocalPosterior SfviSilo::importance_posterior(const StructuredGlobalGaussian<double>& global,
                                                         const Eigen::VectorXd& hyper, const Eigen::MatrixXd& eps_global,
                                                         const Eigen::MatrixXd& eps_local, const Eigen::MatrixXd& uniforms,
                                                         bool follow_modes) {
  const long S = eps_global.cols(), K = S > 0 ? eps_local.cols() / S : options_.local_samples;
  if (K < 1 || eps_local.cols() != S * K)
    throw std::invalid_argument("SfviSilo::importance_posterior: " + std::to_string(eps_local.cols()) +
                                " local draws for " + std::to_string(S) + " draws of Z_G");
  const Eigen::MatrixXd u = global.offset(eps_global);
  const std::vector<LocalMode> modes = follow_modes ? local_modes(global, u) : std::vector<LocalMode>();
  const ImportanceDraws d = importance_draws(global, hyper, u, eps_local, false, follow_modes ? &modes : nullptr);
  LocalPosterior out;
  out.weighted_sum = Eigen::VectorXd::Zero(local_dim_);
  out.weighted_square = Eigen::VectorXd::Zero(local_dim_);
  for (long s = 0; s < S; ++s) {
    const Eigen::MatrixXd w = weights_of(d, s, K);
    const auto b = d.written().middleCols(s * K, K);
    out.weighted_sum += w.cwiseProduct(b).rowwise().sum();
    out.weighted_square += w.cwiseProduct(b.cwiseAbs2()).rowwise().sum();
  }
  out.draws = resample(d, K, uniforms);
  return out;
}

Eigen::MatrixXd SfviSilo::resample(const ImportanceDraws& d, long K, const Eigen::MatrixXd& uniforms) const {
  const Eigen::Index S = uniforms.cols();
  Eigen::MatrixXd draws(local_dim_, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const auto w = d.weights.middleCols(s * K, K);
    const auto b = d.written().middleCols(s * K, K);
    for (Eigen::Index i = 0; i < local_dim_; ++i) {  // one of the K draws, with probability its weight
      const Eigen::Index unit = whole_block_ ? 0 : i;  // a whole block's elements are drawn together
      long k = 0;
      for (double c = w(unit, 0); k + 1 < K && c < uniforms(unit, s); c += w(unit, ++k)) {
      }
      draws(i, s) = b(i, k);
    }
  }
  return draws;
}

Eigen::MatrixXd SfviSilo::weights_of(const ImportanceDraws& d, long s, long K) const {
  const auto w = d.weights.middleCols(s * K, K);
  return whole_block_ ? Eigen::MatrixXd(w.replicate(local_dim_, 1)) : Eigen::MatrixXd(w);
}

SfviContribution SfviSilo::contribute(const SfviBroadcast& m, uint32_t iteration) {
  const StructuredGlobalGaussian<double> global =
      StructuredGlobalGaussian<double>::from_params(m.global_params, global_dim_, options_.correlated_global);
  int64_t begin = 0, count = -1;
  double scale = 1;
  minibatch(iteration, begin, count, scale);
  if (local_reparam_) {
    // The silo's own noise (it has no locals, so the local stream is free): the kernels draw it.
    CounterRng rng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kLocalNoise});
    const uint64_t key = (uint64_t(rng()) << 32) | rng();
    return meanfield_gradient_at(global, m.hyper, options_.mc_samples, key, begin, count, scale);
  }
  const Eigen::MatrixXd eps_global = global_noise(options_.seed, m.round, global_dim_, options_.mc_samples);
  Eigen::VectorXd d_local;
  SfviContribution out = gradient_at(global, m.hyper, eps_global, local_noise(iteration, options_.mc_samples), begin,
                                     count, scale, 1, &d_local);
  // Alg. 1 step 7: the silo's own Adam on eta_{L_j}, with the pre-update eta_G.
  if (local_dim_ > 0) {
    Eigen::VectorXd params = local_params_;
    adam_.step(params, -d_local);
    set_local_params(params);
  }
  average_.add(local_params_);
  if (average_.averaging() && local_dim_ > 0) watch_.observe(q_.mean(), q_.sd());
  return out;
}

SfviLocalFit SfviSilo::fit_locally(const SfviBroadcast& m, long steps, double scale, uint32_t round) {
  if (prior_.empty() && global_dim_ > 0)
    throw ModelError("fit_locally needs the global priors in the silo (construct with global_prior)");
  StructuredGlobalGaussian<double> global =
      StructuredGlobalGaussian<double>::from_params(m.global_params, global_dim_, options_.correlated_global);
  Eigen::VectorXd hyper = m.hyper;
  const Eigen::Index np = global.num_params();
  // A fresh optimiser for the copy of (eta_G, theta) each round (the broadcast moved it); the
  // local block keeps its own Adam across rounds (not stated in seed 002; our choice).
  Adam<double> adam(np + hyper_dim_, AdamOptions{StepSizeSchedule(options_.lr)});
  SfviLocalFit out;
  for (long t = 0; t < steps; ++t) {
    // Local steps draw their own eps_G: nothing is shared within a round. Stream per (round, step).
    const uint32_t iteration = uint32_t(round) * uint32_t(steps) + uint32_t(t) + 1;
    CounterRng rng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kUserStream + 10});
    const Eigen::MatrixXd eps_global = rng.normal(global_dim_, options_.mc_samples);
    const Eigen::MatrixXd eps_local = rng.normal(local_dim_, options_.mc_samples * options_.local_samples);
    int64_t begin = 0, count = -1;
    double batch_scale = 1;
    minibatch(iteration, begin, count, batch_scale);
    Eigen::VectorXd d_local;
    // Alg. 2: log p(y_j, Z_L | Z_G) scaled by n / n_j; the global prior and entropies are not.
    SfviContribution g;
    if (local_reparam_) {
      const uint64_t key = (uint64_t(rng()) << 32) | rng();
      g = meanfield_gradient_at(global, hyper, options_.mc_samples, key, begin, count, scale * batch_scale);
    } else {
      g = gradient_at(global, hyper, eps_global, eps_local, begin, count, scale * batch_scale, scale, &d_local);
    }
    // The server's terms, computed here: log p(Z_G) - log q(Z_G).
    const Eigen::MatrixXd z = global.sample(eps_global);
    const Eigen::MatrixXd theta = hyper;
    GroupValues values{&z, nullptr, &theta};
    const LogDensity::Value lp = prior_.evaluate(values, options_.mc_samples, global_dim_, 0, hyper_dim_, 0, -1, 1, 1, true);
    const Eigen::MatrixXd cotangent = options_.stl ? Eigen::MatrixXd(lp.d_global - global.score(z)) : lp.d_global;
    Eigen::VectorXd d_global = g.d_global + global.vjp(eps_global, cotangent) / double(options_.mc_samples);
    if (!options_.stl) add_entropy_gradient(d_global, global_dim_, global_dim_);
    const Eigen::VectorXd d_hyper = g.d_hyper + lp.d_hyper / double(options_.mc_samples);
    out.elbo_term = g.elbo_term + (lp.per_draw - global.log_density(z)).mean();

    Eigen::VectorXd params(np + hyper_dim_), gradient(np + hyper_dim_);
    params << global.params(), hyper;
    gradient << -d_global, -d_hyper;
    Eigen::VectorXd limit = mean_step_limit(params.size(), global.marginal_sd());
    const PriorScaleStep scaled = to_prior_scale_coordinates(prior_scales_, params, gradient, limit);
    adam.set_step_limit(limit);
    adam.step(params, gradient);
    from_prior_scale_coordinates(prior_scales_, scaled, params);
    global = StructuredGlobalGaussian<double>::from_params(params.head(np), global_dim_, options_.correlated_global);
    hyper = params.tail(hyper_dim_);
    if (local_dim_ > 0) {
      Eigen::VectorXd local = local_params_;
      adam_.step(local, -d_local);
      set_local_params(local);
    }
  }
  out.global_params = global.params();
  out.hyper = hyper;
  return out;
}

}  // namespace fvi::engine
