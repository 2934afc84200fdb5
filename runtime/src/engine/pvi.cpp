#include "fvi/engine/pvi.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <type_traits>

#include "fvi/engine/factor_loss.h"
#include "fvi/engine/mode.h"
#include "fvi/optim/adam.h"
#include "fvi/math/constants.h"
#include "fvi/optim/convergence.h"
#include "fvi/optim/early_stopping.h"
#include "fvi/rng.h"
#include "inference_keys.h"

namespace fvi::engine {

bool pvi_engine_method(const std::string& method) {
  return method == "pvi" || method == "fedavg" || method == "fedvem" || method == "fedavg_fsvi" ||
         method == "fedvem_hsvi";
}

std::string pvi_aggregation(const std::string& method) {
  if (method == "fedavg_fsvi") return "fedavg";
  if (method == "fedvem_hsvi") return "fedvem";
  return method;
}

PviOptions PviOptions::from(const Settings& s, int silos, const std::string& method_name) {
  PviOptions o;
  if (!pvi_engine_method(method_name))
    throw std::invalid_argument("method = " + method_name + " is not served by the PVI engine");
  const std::string method = pvi_aggregation(method_name);
  o.aggregation = method;
  o.loss = s.loss();
  s.score_matching(o.score_weight, o.score_length_scale);
  o.divergence = s.divergence();
  o.damping_given = s.has("damping");
  o.schedule = s.name("schedule", fvic::stdlib::default_pvi_schedule(s.name("loss", "nll")));
  // With clients_per_round the server's scale cannot act (rounds of different silos are not
  // compared, fvi/program/pvi_rounds.h): each of the m silos asked is damped by 1/m instead.
  o.clients_per_round = s.integer("clients_per_round", 0);
  if (o.clients_per_round < 0) throw std::invalid_argument("clients_per_round must not be negative");
  const long asked = o.clients_per_round > 0 ? std::min<long>(o.clients_per_round, std::max(1, silos)) : std::max(1, silos);
  o.server_damping = o.schedule == "synchronous" && s.name("server_damping", "on") == "on" && asked >= silos;
  // Sequential updates see every earlier silo's change: no damping is needed (spec 000 §2.5
  // recommends 1/M for silos updating at once).
  o.damping = s.number("damping", o.server_damping || o.schedule == "sequential" ? 1.0 : 1.0 / double(std::max(1L, asked)));
  o.local_steps = s.integer("local_steps", 100);
  o.epochs = s.integer("epochs", 0);
  o.adaptive_steps = !s.has("local_steps") && !s.has("epochs");
  o.lr = s.number("lr", 0.01);
  o.local_optimiser = s.name("local_optimiser", "adam");
  o.batch_size = s.integer("batch_size", 0);
  o.batch_size_given = s.has("batch_size");
  o.mc_samples = s.integer("mc_samples", o.mc_samples);
  o.seed = static_cast<uint64_t>(s.integer("seed", 1));
  o.lr_schedule = s.name("lr_schedule", "cosine");
  o.patience = s.integer("patience", 0);
  o.init_sd = s.number("init_sd", 0);
  o.init_mean_sd = s.number("init_mean_sd", 0);
  o.loss_weight = s.number("loss_weight", 1);
  o.precision = s.name("precision", "float64") == "float32" ? Precision::kFloat32 : Precision::kFloat64;
  if (method != "pvi") {
    // The server's optimiser takes the steps (fvi/engine/aggregation.h): every silo solves its
    // local problem undamped, all at once, from what the server sends.
    o.damping = 1, o.damping_given = false, o.server_damping = false, o.schedule = "synchronous";
    o.server_optimiser.kind = s.name("server_optimiser", "sgd");
    o.server_optimiser.lr = s.number("server_lr", 1.0);
    o.server_optimiser.tau = s.number("server_tau", o.server_optimiser.tau);
    o.divergence = DivergenceSpec{};
    // seed 001 Eq. 30: silo s's share of the ELBO carries (1/S) KL(q : prior), weighted_kl(S).
    if (method == "fedavg") o.divergence = DivergenceSpec{DivergenceKind::kWeightedKl, double(std::max(1, silos))};
  }
  if (method_name == "fedavg_fsvi" || method_name == "fedvem_hsvi") {
    // seed 001 Eqs. 25-27 (FedAvg FSVI) and 22-24 (FedVEM HSVI, local step): each silo's own
    // context points carry the function-space KL, so it is not shared out as fedavg's (1/S) KL.
    o.function_space = true;
    o.divergence = DivergenceSpec{DivergenceKind::kNone, 1};
    o.context_points = s.integer("context_points", o.context_points);
    o.context_noise = s.number("context_noise", o.context_noise);
    o.function_kl_weight = s.number("function_kl_weight", o.function_kl_weight);
    if (!o.score_weight.empty())
      throw std::invalid_argument("method = " + method_name + " cannot use loss = score_matching: its closed-form silo "
                                  "update has no function-space KL at context points (use loss = nll)");
  }
  return o;
}

namespace {

constexpr bool kDiagonal(const DiagGaussianNatural<double>*) { return true; }
constexpr bool kDiagonal(const GaussianNatural<double>*) { return false; }

// The only group a PVI model's factors may read.
void require_global_only(const fvi_model& model, const BoundFactor& f) {
  const fvi_factor_info& info = f.info();
  if (info.group_count != 1 || group_kind(model, info.groups[0]) != FVI_GROUP_GLOBAL)
    throw ModelError(f.name() + ": PVI needs factors that read only the global parameters; this model has local, " +
                     "split or hyper parameters (use method = sfvi or a vertical method)");
}

}  // namespace

template <class Q>
PviClient<Q>::PviClient(const fvi_model& model, const fvi_data& data, int silo, PviOptions options)
    : silo_(silo), options_(std::move(options)) {
  dim_ = group_size(model, FVI_GROUP_GLOBAL, data);
  if (dim_ <= 0) throw ModelError("PVI needs global parameters; this model has none");
  for (int v = 0; v < data.count; ++v) {
    const fvi_tensor& t = data.values[v];
    for (int64_t i = 0; i < t.rows * t.cols; ++i)  // sizes checked when the data were read
      if (std::abs(t.data[i]) > largest_datum_) largest_datum_ = std::abs(t.data[i]), largest_datum_name_ = data.names[v];
  }
  // Refused before any step (issue 27 item 10): the mean-field kernels' squares of such data
  // overflow at the first step, and the full-rank family's draws fit it silently.
  if (largest_datum_ > kLargestUsable) {
    char value[32];
    std::snprintf(value, sizeof value, "%.3g", largest_datum_);
    throw ModelError("silo " + std::to_string(silo_) + ": its data hold " + value + " in " + largest_datum_name_ +
                     ", too near double's limit for the products a fit forms (more than 1e100 in size): rescale it");
  }
  if (options_.threads > 1) pool_ = std::make_shared<WorkerPool>(options_.threads);
  for (int f = 0; f < model.factor_count; ++f) {
    const fvi_factor_info& info = model.factors[f];
    if (info.owner != FVI_SILO) continue;
    if (info.kind == FVI_DENSITY || info.kind == FVI_ELEMENTS) continue;  // local priors: none in a PVI model (checked below)
    auto bound = std::make_unique<RowParallelFactor>(model, f, data, options_.precision, pool_);
    require_global_only(model, bound->bound());
    if (!loss_supported(options_.loss, info.distribution))
      throw std::invalid_argument("loss = " + options_.loss.name() + " is not available for the " +
                                  std::string(info.distribution) + " likelihood of " + bound->bound().name() +
                                  " (it is for bernoulli_logit, categorical_logit, poisson_log and normal)");
    likelihoods_.push_back(std::move(bound));
    if (options_.function_space) {
      if (!kDiagonal(static_cast<const Natural*>(nullptr)))
        throw ModelError("a function-space prior (method = fedavg_fsvi, fedvem_hsvi) needs family = meanfield");
      if (context_) throw ModelError("a function-space prior needs one likelihood: the network's outputs");
      const int64_t rows = likelihoods_.back()->bound().rows();
      context_ = std::make_unique<ContextPoints>(model, f, data, rows, options_.context_points, options_.context_noise);
    }
  }
  if (options_.function_space && !context_) throw ModelError("a function-space prior needs a likelihood on the silo");
  factor_ = Family::zero(dim_);
  if (!options_.score_weight.empty()) {
    bind_location_model();
    return;
  }
  // A closed-form update (spec 000 §2.6): NLL with KL or weighted KL, and a likelihood whose log
  // density is exactly quadratic in the parameters. Probing costs 3 evaluations for the mean-field
  // family and D + 2 for the full-rank one, so the latter only for moderate D.
  const bool kl = options_.divergence.kind == DivergenceKind::kKl || options_.divergence.kind == DivergenceKind::kWeightedKl;
  const Natural* tag = nullptr;
  if (options_.probe_closed_form && options_.loss.kind == LossKind::kNegativeLogLikelihood && kl &&
      (kDiagonal(tag) || dim_ <= 2000) && !likelihoods_.empty()) {
    auto gradient = [&](const Eigen::MatrixXd& theta) {
      Eigen::MatrixXd g = Eigen::MatrixXd::Zero(theta.rows(), theta.cols());
      for (auto& f : likelihoods_) {
        f->bound().forward(0, -1, {theta});
        const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(f->rows(), theta.cols());
        g += f->bound().backward({&seed})[0];
      }
      return g;
    };
    // For the mean-field family the probe's check also confirms the curvature is diagonal, so
    // cavity x likelihood stays in the family.
    if (auto q = probe_quadratic(dim_, kDiagonal(tag), options_.seed, gradient)) {
      const double w = options_.loss_weight *
                       (options_.divergence.kind == DivergenceKind::kWeightedKl ? options_.divergence.parameter : 1.0);
      // (1/w) KL is the loss tempered by w (seed 000 Lemma B.1): the factor is the likelihood^w.
      closed_form_ = Family::from_quadratic(*q, w);
    }
  }
}

// Score matching needs x ~ normal(theta, sigma) with theta the (one) global parameter and sigma
// known: checked by evaluating the likelihood at two draws and reading its arguments.
template <class Q>
void PviClient<Q>::bind_location_model() {
  const auto refuse = [&](const std::string& why) {
    throw ModelError("loss = score_matching needs a Gaussian location model, x ~ normal(theta, sigma) with theta the "
                     "one global parameter and sigma known (seed 000 Prop 4.10); " + why);
  };
  if (likelihoods_.size() != 1) refuse("this model has " + std::to_string(likelihoods_.size()) + " likelihoods");
  BoundFactor& f = likelihoods_[0]->bound();
  if (std::string(f.info().distribution) != "normal") refuse("its likelihood is " + std::string(f.info().distribution));
  if (dim_ != 1) refuse("it has " + std::to_string(dim_) + " global values");
  const DivergenceKind d = options_.divergence.kind;
  if (d != DivergenceKind::kKl && d != DivergenceKind::kWeightedKl)
    throw ModelError("loss = score_matching has a closed-form update with divergence = kl or weighted_kl only");
  const Eigen::MatrixXd theta = (Eigen::MatrixXd(1, 2) << 0.37, -1.91).finished();
  f.forward(0, -1, {theta});
  const auto args = f.arguments();
  const auto& mu = args[1];
  const auto& sigma = args[2];
  for (Eigen::Index s = 0; s < 2; ++s)
    for (Eigen::Index i = 0; i < mu.rows; ++i)
      if (mu.values(i, mu.draws == 1 ? 0 : s) != theta(0, s)) refuse("its mean is not the parameter itself");
  if (sigma.rows * sigma.cols != 1 || sigma.draws != 1) refuse("its sigma is not one known value");
  location_ = LocationModel{args[0].values.col(0).transpose(), sigma.values(0, 0) * sigma.values(0, 0)};
}

template <class Q>
ScoreWeight<double> PviClient<Q>::score_weight() const {
  const double scale = default_score_weight_scale(location_->sigma2);  // spec 000 §2.6 [repo]
  return options_.score_weight == "imq" ? ScoreWeight<double>::inverse_multiquadric(scale, options_.score_length_scale)
                                        : ScoreWeight<double>::squared_exponential(scale, options_.score_length_scale);
}

template <class Q>
Eigen::VectorXd PviClient<Q>::log_likelihood(const Eigen::MatrixXd& theta) {
  check_size("PviClient::log_likelihood", "theta rows", theta.rows(), dim_);
  Eigen::VectorXd total = Eigen::VectorXd::Zero(theta.cols());
  const Eigen::Index chunk = 64;  // draws per call: the rows x draws output stays small
  for (Eigen::Index first = 0; first < theta.cols(); first += chunk) {
    const Eigen::Index n = std::min(chunk, theta.cols() - first);
    const Eigen::MatrixXd block = theta.middleCols(first, n);
    for (auto& f : likelihoods_) total.segment(first, n) += f->bound().forward(0, -1, {block}).colwise().sum().transpose();
  }
  return total;
}

template <class Q>
std::string PviClient<Q>::update_kind() const {
  if (closed_form_ || location_) return "closed-form update";
  if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
    return "stochastic optimisation";
  } else {
    return dim_ <= PviOptions::kLaplaceDimensions
               ? "stochastic optimisation, whitened by its Laplace approximation (docs/user-guide.md, PVI)"
               : "stochastic optimisation, whitened by q";
  }
}

template <class Q>
int64_t PviClient<Q>::observations() const {
  int64_t n = 0;
  for (const auto& f : likelihoods_) n = std::max(n, f->rows());
  return n;
}

template <class Q>
long PviClient<Q>::batches() const {
  long rows = options_.batch_size;
  if (!options_.batch_size_given && options_.adaptive_steps && observations() > PviOptions::kFullBatchRows)
    rows = PviOptions::kDefaultBatchRows;
  if (rows <= 0) return 1;
  return std::max<long>(1, long((observations() + rows - 1) / rows));
}

template <class Q>
typename PviClient<Q>::Gradient PviClient<Q>::loss_gradient(const Q& q, long batch, long batches, long draws,
                                                             CounterRng& rng, bool with_gradient,
                                                             const AffineCoordinates* coordinates) {
  Gradient out;
  if (with_gradient) out.d_params = Eigen::VectorXd::Zero(q.num_params());
  if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
    const MeanFieldLossGradient<double> g =
        meanfield_loss_gradient<double>({q.mean()}, {q.sd()}, batch, batches, draws, rng, with_gradient);
    out.loss = g.loss;
    if (with_gradient) {
      // params = [mean; log sd]: d/dlog sd = sd .* d/dsd.
      for (size_t k = 0; k < g.d_mean.size(); ++k) {
        out.d_params.head(dim_) += g.d_mean[k];
        out.d_params.tail(dim_) += (g.d_sd[k].array() * q.sd().array()).matrix();
      }
    }
  } else {
    const Eigen::MatrixXd eps = rng.normal(dim_, draws);
    const Eigen::MatrixXd sample = q.sample(eps);
    const Eigen::MatrixXd theta = coordinates ? coordinates->to_theta(sample) : sample;
    Eigen::MatrixXd d_theta = Eigen::MatrixXd::Zero(dim_, draws);
    for (auto& f : likelihoods_) {
      const int64_t n = f->rows();
      const int64_t begin = n * batch / batches, end = n * (batch + 1) / batches;
      if (end <= begin) continue;
      const double scale = options_.loss_weight * double(n) / double(end - begin);
      FactorLoss l = f->loss(options_.loss, begin, end - begin, {theta}, scale, with_gradient);
      out.loss += l.value;
      if (with_gradient) d_theta += l.gradients[0];
    }
    if (with_gradient) out.d_params = q.vjp(eps, coordinates ? coordinates->gradient_to_z(d_theta) : d_theta);
  }
  return out;
}

template <class Q>
template <class T>
typename PviClient<Q>::template MeanFieldLossGradient<T> PviClient<Q>::meanfield_loss_gradient(
    const GroupVectors<T>& means, const GroupVectors<T>& sds, long batch, long batches, long draws, CounterRng& rng,
    bool with_gradient) {
  MeanFieldLossGradient<T> out;
  // The kernels draw the noise (local reparameterisation of data products); one key per step,
  // shared by every likelihood so that theta is the same draw in each.
  const uint64_t key = (uint64_t(rng()) << 32) | rng();
  for (auto& f : likelihoods_) {
    const int64_t n = f->rows();
    const int64_t begin = n * batch / batches, end = n * (batch + 1) / batches;
    if (end <= begin) continue;
    const double scale = options_.loss_weight * double(n) / double(end - begin);
    MeanFieldLoss<T> l = f->loss_meanfield(options_.loss, begin, end - begin, means, sds, draws, key, scale,
                                           with_gradient, RowParallelFactor::Parts::kUnsummed);
    out.loss += l.value;
    if (!with_gradient) continue;
    out.d_mean.push_back(std::move(l.gradient.d_means[0]));
    out.d_sd.push_back(std::move(l.gradient.d_sds[0]));
    for (MeanFieldGradient<T>& part : l.other_parts) {
      out.d_mean.push_back(std::move(part.d_means[0]));
      out.d_sd.push_back(std::move(part.d_sds[0]));
    }
  }
  return out;
}

template <class Q>
double PviClient<Q>::evaluate(const Natural& server, uint32_t round) {
  const Q q = Family::distribution(server);
  if (location_) {
    // E_q[sum_i L_SM(x_i, theta)] in closed form, the weights centred at q's mean.
    const MeanFieldGaussian<double> q1 = MeanFieldGaussian<double>::from_mean_sd(q.mean(), Family::sd(q));
    double total = 0;
    for (Eigen::Index i = 0; i < location_->xs.cols(); ++i)
      total += expected_score_matching_loss<double>(location_->xs.col(i), q1, location_->sigma2, score_weight(), q.mean()).value;
    return options_.loss_weight * total;
  }
  const long n_batches = batches();
  // The same draws every round (common random numbers): the printed objective then moves with q,
  // not with the Monte Carlo noise. At least 16 draws: one draw makes it jump.
  (void)round;
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), 0, rng_stream::kUserStream + 1});
  double total = 0;
  for (long b = 0; b < n_batches; ++b)
    total += loss_gradient(q, b, n_batches, std::max(options_.mc_samples, 16L), rng, false).loss / double(n_batches);
  if (context_) total += function_space_term(server);
  return total;
}

template <class Q>
double PviClient<Q>::function_space_term(const Natural& server) {
  // seed 001 Eq. 24: fedvem's local q_s is the server's N(mu, sigma^2) when evaluated, and its KL
  // to the prior linearised there vanishes.
  if (options_.aggregation != "fedavg") return 0;
  // seed 001 Eq. 27: FedAvg FSVI's silo term carries beta sum_x KL(q~(f(x)) || p~(f(x))) at its
  // context points, as each local step's does (optimise), against the prior linearised at the
  // last update's cavity (fedavg's cavity is the prior). kEvaluationContextSets sets of
  // context_points each, averaged: the expected term of one step, at the same points every round.
  if (!function_space_prior_)
    throw ModelError("silo " + std::to_string(silo_) + ": asked for its objective before its first update, so it "
                     "has no function-space prior to measure q against");
  const Q q = Family::distribution(server);
  const Q& prior = *function_space_prior_;
  const Eigen::VectorXd variance = Family::sd(q).array().square().matrix();
  const Eigen::VectorXd prior_variance = Family::sd(prior).array().square().matrix();
  double kl = 0;
  for_evaluation_points([&](BoundFactor& points) {
    kl += function_space_kl(points, q.mean(), variance, prior.mean(), prior_variance, PviOptions::kFunctionSpaceJitter)
              .value;
  });
  return options_.function_kl_weight * kl / double(kEvaluationContextSets);
}

template <class Q>
template <class Visit>
void PviClient<Q>::for_evaluation_points(Visit visit) {
  // Round 0, which no update has: the same points every round, so that what is measured there
  // moves with q and not with the points.
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), 0, rng_stream::kContextPoints});
  for (int set = 0; set < kEvaluationContextSets; ++set) visit(context_->draw(rng));
}

template <class Q>
bool PviClient<Q>::function_moments(const Natural& server, Eigen::VectorXd& mean, Eigen::VectorXd& sd) {
  if (!context_) return false;
  const Q q = Family::distribution(server);
  const Eigen::VectorXd variance = Family::sd(q).array().square().matrix();
  std::vector<double> means, sds;
  for_evaluation_points([&](BoundFactor& points) {
    for (int64_t row = 0; row < points.rows(); ++row) {
      const LinearisedGaussian f = linearise(points, row, q.mean(), variance);  // seed 001 Eq. 17
      const Eigen::VectorXd f_variance = f.covariance().diagonal();
      for (Eigen::Index c = 0; c < f.mean.size(); ++c)
        means.push_back(f.mean[c]), sds.push_back(std::sqrt(f_variance[c] + PviOptions::kFunctionSpaceJitter));
    }
  });
  mean = Eigen::Map<const Eigen::VectorXd>(means.data(), Eigen::Index(means.size()));
  sd = Eigen::Map<const Eigen::VectorXd>(sds.data(), Eigen::Index(sds.size()));
  return true;
}

template <class Q>
typename PviClient<Q>::Update PviClient<Q>::update(const Natural& server, uint32_t round) {
  Update out;
  const Natural cavity = natural_quotient(server, factor_);  // seed 000 Eq. 3
  const Q q_server = Family::distribution(server);
  Natural q_new;
  if (location_) {
    // seed 000 Prop 4.10 (spec 000 §2.6, the corrected completion of the square): q_m is the
    // cavity times exp(-k sum_i L_SM(x_i, theta)), weights centred at the cavity mean.
    if (!Family::proper(cavity))
      throw ModelError("silo " + std::to_string(silo_) + ": the cavity is not a proper Gaussian, so the score-matching "
                       "weights have no centre; use damping < 1");
    const double k = options_.loss_weight *
                     (options_.divergence.kind == DivergenceKind::kWeightedKl ? options_.divergence.parameter : 1.0);
    q_new = score_matching_conjugate_update(cavity, location_->xs, location_->sigma2, score_weight(), k);
  } else if (closed_form_) {
    q_new = natural_product(cavity, *closed_form_);  // q_m = cavity x likelihood, exactly
    if (!Family::proper(q_new)) throw ModelError("silo " + std::to_string(silo_) + ": the closed-form update is not a proper Gaussian");
  } else {
    const bool cavity_proper = Family::proper(cavity);
    if (!cavity_proper && options_.divergence.kind != DivergenceKind::kKl) {
      // Undamped synchronous updates can overshoot so that q_s / t_k is improper for a round. The
      // divergence to it is undefined, so this silo keeps its factor this round (a zero change)
      // and says so; the run goes on, and its verdict and k-hat judge the result.
      std::fprintf(stderr,
                   "round %u: warning: silo %d: the cavity is not a proper Gaussian, so divergence = %s is undefined; "
                   "the silo keeps its factor this round (damping < 1, schedule = sequential or divergence = kl "
                   "avoid this)\n",
                   round, silo_, options_.divergence.name().c_str());
      out.delta = natural_quotient(factor_, factor_);
      return out;
    }
    // Warm start at q_s (spec 000 §6 [repo]); a client's first update may start narrower, as the
    // reference BNN code does (init q = N(0, 1e-3 I)): a wide prior drowns a network's signal.
    // Never wider than q_s: a silo first asked in a later round (clients_per_round) would
    // otherwise start wider than the silos before it left q, and its change take precision away.
    const Q start = updated_once_               ? q_server
                    : options_.init_sd > 0      ? Family::narrowed(q_server, first_start_mean(q_server.mean()), options_.init_sd)
                    : options_.init_mean_sd > 0 ? Family::with_mean(q_server, first_start_mean(q_server.mean()))
                                                : q_server;
    if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
      std::optional<Q> q_cavity;
      if (cavity_proper) q_cavity = Family::distribution(cavity);
      q_new = to_natural(Family::from_params(optimise(start.params(), cavity, q_cavity, round, out)));
    } else {
      // The fit runs in z, theta = m + L z (fvi/engine/affine_coordinates.h); a first update with
      // nothing asked of its start begins at the tilted posterior's Laplace approximation, z ~
      // N(0, I), not at the prior (a prior 10^5 of the posterior's sds wide took Adam thousands of
      // steps to leave, and its first factors made q improper).
      bool at_laplace = false;
      const AffineCoordinates coordinates = local_coordinates(cavity, q_server, at_laplace);
      const Natural cavity_z = coordinates.to_z(cavity);
      std::optional<Q> q_cavity;
      if (cavity_proper) q_cavity = Family::distribution(cavity_z);
      const bool start_at_laplace =
          at_laplace && !updated_once_ && options_.init_sd <= 0 && options_.init_mean_sd <= 0;
      const Eigen::VectorXd start_z =
          start_at_laplace ? Family::from_mean_covariance(Eigen::VectorXd::Zero(dim_),
                                                          Eigen::MatrixXd::Identity(dim_, dim_)).params()
                           : Family::distribution(coordinates.to_z(to_natural(start))).params();
      const Eigen::VectorXd params = optimise(start_z, cavity_z, q_cavity, round, out, &coordinates);
      q_new = coordinates.to_theta(to_natural(Family::from_params(params)));
    }
  }
  updated_once_ = true;
  // seed 000 Eq. 5: the damped change of this silo's factor.
  // A closed-form update is the exact factor whatever the cavity: undamped, one round is exact.
  const double damping = closed_form_ && !options_.damping_given ? 1.0 : options_.damping;
  const Natural updated = damped_factor_update(factor_, q_new, server, damping);
  out.delta = natural_quotient(updated, factor_);
  factor_ = updated;
  return out;
}

template <class Q>
Eigen::VectorXd PviClient<Q>::first_start_mean(const Eigen::VectorXd& mean) const {
  if (options_.init_mean_sd <= 0) return mean;
  CounterRng rng(RngKey{options_.seed, 0, 0, rng_stream::kInitialisation});
  return mean + options_.init_mean_sd * rng.normal(mean.size(), 1);
}

template <class Q>
AffineCoordinates PviClient<Q>::local_coordinates(const Natural& cavity, const Q& q_server, bool& at_laplace) {
  at_laplace = false;
  if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
    throw std::logic_error("PviClient::local_coordinates: the mean-field family fits in theta");
  } else {
    if (dim_ <= PviOptions::kLaplaceDimensions && !likelihoods_.empty()) {
      const double w = options_.loss_weight;
      const LogDensityBatchFn tilted = [&](const Eigen::MatrixXd& theta, Eigen::VectorXd& log_p,
                                           Eigen::MatrixXd& gradient) {
        log_p = cavity.log_factor(theta);
        gradient = (2 * cavity.eta2 * theta).colwise() + cavity.eta1;
        const Eigen::Index chunk = 64;  // points per call, as log_likelihood
        for (Eigen::Index first = 0; first < theta.cols(); first += chunk) {
          const Eigen::Index n = std::min(chunk, theta.cols() - first);
          const Eigen::MatrixXd block = theta.middleCols(first, n);
          for (auto& f : likelihoods_) {
            log_p.segment(first, n) += w * f->bound().forward(0, -1, {block}).colwise().sum().transpose();
            const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(f->rows(), n);
            gradient.middleCols(first, n) += w * f->bound().backward({&seed})[0];
          }
        }
      };
      const Mode mode = find_mode(tilted, q_server.mean());
      if (mode.found) {
        try {
          AffineCoordinates laplace = AffineCoordinates::from_curvature(mode.at, mode.curvature);
          at_laplace = true;
          return laplace;
        } catch (const std::invalid_argument&) {
          // a curvature too near singular to invert: q_s's own coordinates below
        }
      }
    }
    return AffineCoordinates::from_cholesky(q_server.mean(), q_server.chol());
  }
}

template <class Q>
Eigen::VectorXd PviClient<Q>::optimise(Eigen::VectorXd params, const Natural& cavity, const std::optional<Q>& q_cavity,
                                       uint32_t round, Update& out, const AffineCoordinates* coordinates) {
  const long n_batches = batches();
  const long steps = options_.adaptive_steps ? options_.max_local_steps
                     : options_.epochs > 0  ? options_.epochs * n_batches
                                            : options_.local_steps;
  AdamOptions adam_options;
  // The adaptive update decays the step size itself, once its objective has levelled off.
  adam_options.learning_rate = options_.lr_schedule == "constant" || options_.adaptive_steps
                                   ? StepSizeSchedule::constant(options_.lr)
                                   : StepSizeSchedule::cosine(options_.lr, steps);
  // An adaptive update starts at the cavity, whose sds may be 100 times the optimum's: the
  // gradient's scale then falls 10^4-fold within the update, and Adam's second moment, which
  // remembers the largest gradients over 1 / (1 - beta2) steps, held the steps at a few percent of
  // lr for thousands of steps (5,000 rows: sds 2.7 times the optimum's at the 5,000-step cap with
  // 0.999; 2,450 steps to within 5% with 0.99).
  if (options_.adaptive_steps) adam_options.beta2 = 0.99;
  adam_options.moments = options_.local_optimiser != "sgd";
  CounterRng noise(RngKey{options_.seed, uint32_t(silo_), round, rng_stream::kLocalNoise});
  CounterRng context_rng(RngKey{options_.seed, uint32_t(silo_), round, rng_stream::kContextPoints});
  if (context_ && !q_cavity)
    throw ModelError("silo " + std::to_string(silo_) + ": the function-space prior is linearised at the cavity, "
                     "which is not a proper Gaussian");
  if (context_) function_space_prior_ = q_cavity;
  // Names the likely cause (issue 27 item 10; data near double's limit were refused above): the
  // starting point (a loss not finite at step 1 was evaluated before any step, so the step size
  // cannot be its cause), else lr.
  const auto not_finite = [&](long t, double loss) {
    std::string cause = "try a smaller lr";
    if (t == 0 && !std::isfinite(loss)) {
      cause = "no step had been taken yet, so the cause is the model or the data at q's starting point, not lr";
    }
    return ModelError("silo " + std::to_string(silo_) + ": the local objective is not finite at step " +
                      std::to_string(t + 1) + " of round " + std::to_string(round) + "; " + cause);
  };
  if constexpr (std::is_same_v<Q, MeanFieldGaussian<double>>) {
    // The divergence and Adam split by coordinates between the silo's threads, as the kernels
    // split the minibatch's rows. A non-finite gradient of the loss makes the combined one
    // non-finite, which the shards report.
    // With precision = float32 the shards keep q and Adam's moments in float, as the kernels compute.
    const auto run = [&](auto&& q) {
      // The divergence's value is read only at the last step and, with early stopping, in every
      // epoch's objective; its gradient is needed at every step.
      const bool every_value = (options_.epochs > 0 && options_.patience > 0) || options_.adaptive_steps;
      using T = typename std::decay_t<decltype(q.means()[0])>::Scalar;
      const auto step = [&](long batch, long t) {
        auto g = meanfield_loss_gradient(q.means(), q.sds(), batch, n_batches, options_.mc_samples, noise, true);
        double function_kl = 0;
        if (context_) {
          // seed 001 Eq. 25: beta sum_x KL(q~(f(x)) || p~(f(x))) at fresh context points, the
          // prior linearised at the cavity's means and variances (Eq. 18).
          const Eigen::VectorXd mean = q.means()[0].template cast<double>();
          const Eigen::VectorXd sd = q.sds()[0].template cast<double>();
          const WeightSpaceGradient kl =
              function_space_kl(context_->draw(context_rng), mean, sd.array().square().matrix(), q_cavity->mean(),
                                q_cavity->variance(), PviOptions::kFunctionSpaceJitter);
          const double beta = options_.function_kl_weight;
          function_kl = beta * kl.value;
          g.d_mean.push_back((beta * kl.d_mean).template cast<T>());
          // d/dsd = d/dvariance * 2 sd
          g.d_sd.push_back((beta * 2 * kl.d_variance.array() * sd.array()).matrix().template cast<T>());
        }
        const auto s = q.step(g.d_mean, g.d_sd, every_value || t == steps - 1);
        const double objective = g.loss + s.divergence + function_kl;
        if (!s.finite || !std::isfinite(objective)) throw not_finite(t, g.loss);
        return objective;
      };
      return run_steps(steps, n_batches, round, step, [&] { return q.params(); },
                       [&](double scale) { q.set_step_scale(scale); }, out);
    };
    if (options_.precision == Precision::kFloat32)
      return run(MeanFieldShards<float>(params, q_cavity, cavity, options_.divergence, adam_options, pool_));
    return run(MeanFieldShards<double>(params, q_cavity, cavity, options_.divergence, adam_options, pool_));
  } else {
    Adam<double> adam(params.size(), adam_options);
    const auto step = [&](long batch, long t) {
      // A step too large leaves parameters that are no Gaussian (a Cholesky diagonal of exp(-1e300)):
      // the same error as a loss that is not finite.
      const Q q = [&] {
        try {
          if (!params.allFinite()) throw std::invalid_argument("not finite");
          return Family::from_params(params);
        } catch (const std::invalid_argument&) {
          throw not_finite(t, 0.0);
        }
      }();
      Gradient g = loss_gradient(q, batch, n_batches, options_.mc_samples, noise, true, coordinates);
      Eigen::VectorXd d_div;
      const double div = q_cavity ? Family::divergence(q, *q_cavity, options_.divergence, &d_div)
                                  : Family::improper_kl(q, cavity, &d_div);
      g.d_params += d_div;
      const double objective = g.loss + div;
      if (!std::isfinite(objective) || !g.d_params.allFinite()) throw not_finite(t, g.loss);
      adam.step(params, g.d_params);
      return objective;
    };
    return run_steps(steps, n_batches, round, step, [&] { return params; },
                     [&](double scale) { adam.set_scale(scale); }, out);
  }
}

template <class Q>
template <class StepFn, class CurrentFn, class ScaleFn>
Eigen::VectorXd PviClient<Q>::run_steps(long steps, long n_batches, uint32_t round, StepFn step, CurrentFn current,
                                        ScaleFn scale, Update& out) {
  CounterRng shuffle(RngKey{options_.seed, uint32_t(silo_), round, rng_stream::kMinibatch});
  std::vector<long> order(n_batches);
  // Early stopping on the epoch objective, keeping the best parameters (spec 000 §5.5 [repo]).
  const bool stop_early = options_.epochs > 0 && options_.patience > 0;
  std::optional<EarlyStopping> stopping;
  if (stop_early) stopping.emplace(EarlyStoppingOptions{options_.patience, 0, false});
  Eigen::VectorXd best;
  if (stopping) best = current();
  // The adaptive update (PviOptions::adaptive_steps): the server's stopping rule, run on the
  // local objective and q's moments: full steps until the objective levels off, then decaying
  // steps averaged until the means are stationary; the result is the average.
  std::optional<ConvergenceMonitor> rule;
  if (options_.adaptive_steps) {
    ConvergenceOptions o;
    o.window = options_.local_window;
    rule.emplace(o);
  }
  double epoch_objective = 0;
  long t = 0;
  for (; t < steps; ++t) {
    if (rule) scale(rule->step_scale());
    if (t % n_batches == 0) {  // a new epoch: visit the contiguous minibatches in a fresh order
      std::iota(order.begin(), order.end(), 0L);
      std::shuffle(order.begin(), order.end(), shuffle);
      epoch_objective = 0;
    }
    out.objective = step(order[t % n_batches], t);
    epoch_objective += out.objective / double(n_batches);
    if (rule) {
      const Eigen::VectorXd now = current();
      const Q q = Family::from_params(now);
      rule->observe(out.objective, q.mean(), Family::sd(q), now);
      if (rule->converged()) {
        ++t;
        break;
      }
    }
    if (stopping && (t + 1) % n_batches == 0) {
      stopping->update(epoch_objective);
      if (stopping->improved()) best = current();
      if (stopping->should_stop()) {
        ++t;
        break;
      }
    }
  }
  out.steps = t;
  if (rule && rule->averaged_steps() > 0) return rule->average();
  return stopping ? best : current();
}

template <class Q>
PviServer<Q>::PviServer(const fvi_model& model, const fvi_data& data, uint64_t seed) {
  const int64_t dim = group_size(model, FVI_GROUP_GLOBAL, data);
  if (dim <= 0) throw ModelError("PVI needs global parameters; this model has none");
  std::vector<std::unique_ptr<BoundFactor>> densities;
  for (int f = 0; f < model.factor_count; ++f) {
    if (model.factors[f].owner != FVI_SERVER) continue;
    if (model.factors[f].kind != FVI_DENSITY)
      throw ModelError(std::string(model.factors[f].name) + ": PVI has no server-side likelihood; use another method");
    densities.push_back(std::make_unique<BoundFactor>(model, f, data));
    require_global_only(model, *densities.back());
  }
  auto gradient = [&](const Eigen::MatrixXd& theta) {
    Eigen::MatrixXd g = Eigen::MatrixXd::Zero(theta.rows(), theta.cols());
    for (auto& f : densities) {
      f->forward(0, -1, {theta});
      const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(1, theta.cols());
      g += f->backward({&seed})[0];
    }
    return g;
  };
  const Natural* tag = nullptr;
  auto q = probe_quadratic(dim, kDiagonal(tag), seed, gradient);
  if (!q)
    throw ModelError("PVI needs a Gaussian prior on the global parameters (on the unconstrained scale), with " +
                     std::string(kDiagonal(tag) ? "independent coordinates for family = meanfield" : "any covariance") +
                     "; this model's prior is not. Use normal() priors on unconstrained globals, or method = sfvi");
  prior_ = Family::from_quadratic(*q, 1.0);
  if (!Family::proper(prior_)) throw ModelError("the prior of the global parameters is improper");
  posterior_ = prior_;
}

template <class Q>
std::string PviServer<Q>::unusable(const Natural& eta) {
  if (!Family::proper(eta)) return "it would make the global posterior improper (its precision is not positive definite)";
  // Issue 27 item 7: an update of 1e300 was taken, and every later round failed.
  const Q q = Family::distribution(eta);
  const Eigen::VectorXd mean = q.mean(), sd = Family::sd(q);
  auto shown = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return std::string(text);
  };
  for (Eigen::Index i = 0; i < mean.size(); ++i) {
    if (!std::isfinite(mean(i)) || std::abs(mean(i)) > kLargestUsable)
      return "it would put the mean of global parameter " + std::to_string(i + 1) + " at " + shown(mean(i)) +
             ", beyond 1e100";
    if (!std::isfinite(sd(i)) || sd(i) > kLargestUsable || sd(i) < 1 / kLargestUsable)
      return "it would put the sd of global parameter " + std::to_string(i + 1) + " at " + shown(sd(i)) +
             ", outside [1e-100, 1e100]";
  }
  return "";
}

template <class Q>
void PviServer<Q>::apply(const Natural& delta, int silo) {
  const Natural next = natural_product(posterior_, delta);
  const std::string reason = unusable(next);
  if (!reason.empty())
    throw ModelError("the update of silo " + std::to_string(silo) + " was not applied: " + reason);
  posterior_ = next;
}

template <class Q>
double PviServer<Q>::kl_to_prior() const {
  return Family::divergence(distribution(), Family::distribution(prior_), DivergenceSpec{}, nullptr);
}

template class PviClient<MeanFieldGaussian<double>>;
template class PviClient<FullRankGaussian<double>>;
template class PviServer<MeanFieldGaussian<double>>;
template class PviServer<FullRankGaussian<double>>;

}  // namespace fvi::engine
