#include "fvi/engine/vfl.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "fvi/math/constants.h"
#include "fvi/optim/adam_state.h"
#include "fvi/optim/step_limit.h"
#include "fvi/rng.h"

namespace fvi::engine {

VflOptions VflOptions::from(const Settings& s, const std::string& method) {
  const bool power = method == "vfl_power";
  VflOptions o;
  o.power = power;
  o.rho = s.number("rho", 1.0);
  o.amortized = s.name("q_z", "meanfield") == "amortized";
  o.auxiliary = method != "vfl_exact" && s.name("q_z", "meanfield") != "none";
  o.width = s.integer("q_z_width", 16);
  o.depth = s.integer("q_z_depth", 1);
  o.residual_offset = s.name("q_z_offset", "residual") != "free";
  o.lr = s.number("lr", 0.01);
  o.mc_samples = s.integer("mc_samples", 1);
  o.local_steps = s.integer("local_steps", 1);
  o.init_sd = s.number("init_sd", std::exp(-2.0));
  o.seed = static_cast<uint64_t>(s.integer("seed", 1));
  o.exact = method == "vfl_exact";
  o.family = s.name("family", "auto");
  o.center = s.name("center", "on") != "off";
  if (o.family != "auto" && o.family != "meanfield" && o.family != "fullrank")
    throw std::invalid_argument("family = " + o.family + ": vertical models take family = auto, meanfield or fullrank "
                                "for q(theta_k) (q(z) is chosen by q_z)");
  if (o.family == "fullrank" && !o.exact)
    throw std::invalid_argument("family = fullrank (one Gaussian across the silos) needs method = vfl_exact; " + method +
                                " fits a mean-field q(theta_k)");
  return o;
}

bool use_joint_family(const VflOptions& options, Eigen::Index total) {
  if (!options.exact || options.auxiliary) return false;
  return options.family == "fullrank" || (options.family == "auto" && total <= kJointAutoLimit);
}

int silo_sum_intercept_variable(const fvi_model& model, const VflOptions& options) {
  if (!options.exact || !options.center || model.abi_version < 13) return -1;
  for (int i = 0; i < model.variable_count; ++i) {
    const fvi_variable_info& b = model.variables[i];
    if (b.centring_data && std::strcmp(b.centring_data, "silo_sum") == 0 && group_kind(model, b.group) == FVI_GROUP_GLOBAL &&
        b.transform == FVI_IDENTITY && b.rank == 0)
      return i;
  }
  return -1;
}

Eigen::Index silo_sum_intercept(const fvi_model& model, const fvi_data& data, const VflOptions& options) {
  const int i = silo_sum_intercept_variable(model, options);
  if (i < 0) return -1;
  const std::optional<VariablePlace> place = variable_place(model, data, i, group_dim(model, FVI_GROUP_GLOBAL, data));
  if (!place || place->count != 1) throw ModelError(std::string(model.variables[i].name) + ": the centred intercept has no place among the globals");
  return Eigen::Index(place->offset);
}

bool split_priors_read_globals(const fvi_model& model) {
  for (int f = 0; f < model.factor_count; ++f) {
    const fvi_factor_info& info = model.factors[f];
    if (info.owner != FVI_SPLIT_SILO || info.kind != FVI_DENSITY) continue;
    for (int g = 0; g < info.group_count; ++g)
      if (group_kind(model, info.groups[g]) == FVI_GROUP_GLOBAL) return true;
  }
  return false;
}

Eigen::MatrixXd joint_noise(uint64_t seed, uint32_t round, uint32_t stream, Eigen::Index total, long draws) {
  return CounterRng(RngKey{seed, 0, round, stream}).normal(total, draws);
}

namespace {

// The one factor of `kind` owned by `owner`, bound to `data` (null if the model has none).
std::unique_ptr<BoundFactor> bind_one(const fvi_model& model, const fvi_data& data, int owner, int kind) {
  std::unique_ptr<BoundFactor> found;
  for (int f = 0; f < model.factor_count; ++f) {
    if (model.factors[f].owner != owner || model.factors[f].kind != kind) continue;
    if (found) throw ModelError("a vertical model has one " + std::string(kind == FVI_LIKELIHOOD ? "likelihood" : "factor") +
                                " of this kind per party; this one has more (" + found->name() + ")");
    found = std::make_unique<BoundFactor>(model, f, data);
  }
  return found;
}

// The factor's inputs, one per group it reads, from the named values (a missing one is an error
// naming the factor and the group).
std::vector<Eigen::MatrixXd> inputs_of(const BoundFactor& f, const std::vector<std::pair<fvi_group, const Eigen::MatrixXd*>>& values) {
  std::vector<Eigen::MatrixXd> inputs;
  for (int g = 0; g < f.info().group_count; ++g) {
    const int group = f.group(g);
    const Eigen::MatrixXd* v = nullptr;
    for (const auto& [n, value] : values)
      if (n == group) v = value;
    if (!v) throw ModelError(f.name() + ": reads the " + fvi_group_name(group) + " group, which the vertical engine does not provide to it");
    inputs.push_back(*v);
  }
  return inputs;
}

// The gradient of `f` (after forward) for the named group, or zeros of the given shape.
Eigen::MatrixXd gradient_of(const BoundFactor& f, const std::vector<Eigen::MatrixXd>& gradients, fvi_group group,
                            Eigen::Index rows, Eigen::Index cols) {
  for (int g = 0; g < f.info().group_count; ++g)
    if (f.group(g) == group) return gradients[g];
  return Eigen::MatrixXd::Zero(rows, cols);
}

// [d mu; d log sd] of a mean-field Gaussian from the adjoint of its draws x = mu + sd .* eps.
Eigen::VectorXd meanfield_params_gradient(const Eigen::MatrixXd& dx, const Eigen::MatrixXd& eps, const Eigen::VectorXd& sd) {
  Eigen::VectorXd g(2 * dx.rows());
  g << dx.rowwise().sum(), (dx.array() * eps.array()).rowwise().sum().matrix().cwiseProduct(sd);
  return g;
}

}  // namespace

// ---- server ----------------------------------------------------------------------------------

VflServer::VflServer(const fvi_model& model, const fvi_data& data, VflOptions options, int silos)
    : options_(options),
      silos_(silos),
      global_dim_(group_dim(model, FVI_GROUP_GLOBAL, data)),
      intercept_(silo_sum_intercept(model, data, options)),
      adam_(1, AdamOptions{StepSizeSchedule(options.lr)}) {
  if (intercept_ >= 0) intercept_name_ = model.variables[silo_sum_intercept_variable(model, options)].name;
  for (int f = 0; f < model.factor_count; ++f)
    if (model.factors[f].owner == FVI_SERVER && model.factors[f].kind == FVI_DENSITY)
      prior_.push_back(std::make_unique<BoundFactor>(model, f, data));
  if (!options.power) {
    likelihood_ = bind_one(model, data, FVI_COUPLING, FVI_LIKELIHOOD);
    if (!likelihood_) throw ModelError("the augmented-variable model needs a likelihood through silo_sum; this model has none");
    rows_ = likelihood_->rows();
  } else if ((likelihood_ = bind_one(model, data, FVI_COUPLING, FVI_LIKELIHOOD))) {
    // The power model's likelihood reads public data: the server knows its rows, and scores the
    // written model at the end (k-hat) from the silos' partial predictors; it never trains on it.
    rows_ = likelihood_->rows();
  }
  q_ = MeanFieldGaussian<double>(Eigen::VectorXd::Zero(global_dim_), Eigen::VectorXd::Constant(global_dim_, std::log(options.init_sd)));
  adam_ = Adam<double>(q_.num_params(), AdamOptions{StepSizeSchedule(options.lr)});
}

void VflServer::set_layout(bool joint, Eigen::Index total) {
  if (joint == joint_ && total == total_) return;
  total_ = total;
  joint_ = joint;
  if (joint) {
    joint_q_ = JointGaussianRows(0, global_dim_, options_.init_sd);
    adam_ = Adam<double>(joint_q_.params().size(), AdamOptions{StepSizeSchedule(options_.lr)});
  } else {
    adam_ = Adam<double>(q_.num_params(), AdamOptions{StepSizeSchedule(options_.lr)});
  }
}

void VflServer::set_params(const Eigen::VectorXd& params) {
  if (joint_)
    joint_q_.set_params(params);
  else
    q_ = MeanFieldGaussian<double>::from_params(params);
}

Eigen::MatrixXd VflServer::output_noise(uint64_t key, uint32_t stream, long draws) const {
  if (joint_) return joint_noise(key, 0, stream, total_, draws);
  return CounterRng(RngKey{key, 0, 0, stream}).normal(global_dim_, draws);
}

Eigen::VectorXd VflServer::own_noise_norm2(const Eigen::MatrixXd& eps) const {
  return eps.topRows(global_dim_).colwise().squaredNorm().transpose();
}

double VflServer::own_log_det() const { return joint_ ? joint_q_.log_det() : q_.log_sd().sum(); }

Eigen::VectorXd VflServer::marginal_log_q(const Eigen::MatrixXd& eps) const {
  if (joint_) return joint_q_.marginal_log_density(joint_q_.sample(eps));
  return q_.log_density(q_.sample(eps));
}

Eigen::MatrixXd VflServer::global_noise(uint32_t iteration) const {
  if (joint_) return joint_noise(options_.seed, iteration, rng_stream::kJointNoise, total_, options_.mc_samples);
  CounterRng rng(RngKey{options_.seed, 0, iteration, rng_stream::kGlobalNoise});
  return rng.normal(global_dim_, options_.mc_samples);
}

Mode VflServer::start_at_mode() {
  if (!likelihood_ || options_.power || global_dim_ == 0) return Mode{};
  // The predictors at their start: eta = 0, so the written globals are the fit's (b = b_c - 0).
  const Eigen::MatrixXd eta = Eigen::MatrixXd::Zero(rows_, 1);
  const LogDensityFn log_p = [&](const Eigen::VectorXd& z, Eigen::VectorXd& gradient) {
    const Eigen::MatrixXd b = z;
    const auto& lp = likelihood_->forward(0, -1, inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &b}, {FVI_GROUP_Z_SUM, &eta}}));
    const double log_lik = lp.sum();
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(lp.rows(), lp.cols());
    Eigen::MatrixXd db = gradient_of(*likelihood_, likelihood_->backward({&seed}), FVI_GROUP_GLOBAL, global_dim_, 1);
    const double log_prior = add_priors(b, db)[0];
    gradient = db.col(0);
    return log_lik + log_prior;
  };
  Mode m = find_mode(log_p, mean());
  if (!m.found) return m;
  // The joint family starts at the Laplace marginal sds (its rows' off-diagonals 0); a mean-field q
  // at the KL-optimal diagonal of a Gaussian target, C_ii^-1/2 (as SFVI's start_at_mode).
  const Eigen::LLT<Eigen::MatrixXd> llt(m.curvature);
  const Eigen::VectorXd log_sd =
      joint_ ? Eigen::VectorXd(0.5 * llt.solve(Eigen::MatrixXd::Identity(global_dim_, global_dim_)).diagonal().array().log())
             : Eigen::VectorXd(-0.5 * m.curvature.diagonal().array().log());
  if (joint_) {
    JointGaussianRows start(0, global_dim_, options_.init_sd);
    Eigen::VectorXd p = start.params();
    p.head(global_dim_) = m.at;
    for (Eigen::Index r = 0; r < global_dim_; ++r) p[start.diagonal_at(r)] = log_sd[r];
    joint_q_.set_params(p);
  } else {
    q_ = MeanFieldGaussian<double>(m.at, log_sd);
  }
  return m;
}

double VflServer::outcome_scale() {
  if (!likelihood_ || rows_ == 0) return 1;
  const Eigen::MatrixXd b = mean();
  const double h = 1e-4;
  auto adjoint = [&](double at) {
    const Eigen::MatrixXd eta = Eigen::MatrixXd::Constant(rows_, 1, at);
    const auto& lp = likelihood_->forward(0, -1, inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &b}, {FVI_GROUP_Z_SUM, &eta}}));
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(lp.rows(), lp.cols());
    return Eigen::MatrixXd(gradient_of(*likelihood_, likelihood_->backward({&seed}), FVI_GROUP_Z_SUM, rows_, 1));
  };
  const double curvature = -(adjoint(h) - adjoint(-h)).mean() / (2 * h);
  return std::isfinite(curvature) && curvature > 0 ? 1 / std::sqrt(curvature) : 1.0;
}

Eigen::MatrixXd VflServer::written(const Eigen::MatrixXd& fit, const Eigen::MatrixXd& s) const {
  Eigen::MatrixXd b = fit;
  if (intercept_ >= 0) b.row(intercept_) -= s.colwise().mean();
  return b;
}

double VflServer::augmented_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& z_sum, Eigen::MatrixXd& G,
                                     Eigen::VectorXd& d_params) {
  const long S = z_sum.cols();
  const Eigen::MatrixXd fit = globals(eps);
  const Eigen::MatrixXd b = written(fit, z_sum);
  const auto inputs = inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &b}, {FVI_GROUP_Z_SUM, &z_sum}});
  const auto& lp = likelihood_->forward(0, -1, inputs);
  const Eigen::VectorXd log_lik = lp.colwise().sum().transpose();
  const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(lp.rows(), lp.cols());
  const auto d = likelihood_->backward({&seed});
  // seed 004 Alg. 1 step 5: G = dL0/dz_j, the same for every silo (additive link).
  G = gradient_of(*likelihood_, d, FVI_GROUP_Z_SUM, z_sum.rows(), S);
  Eigen::MatrixXd db = gradient_of(*likelihood_, d, FVI_GROUP_GLOBAL, global_dim_, S);
  if (global_dim_ == 0) {
    d_params = Eigen::VectorXd::Zero(params().size());
    return log_lik.mean();
  }
  const Eigen::VectorXd log_prior = add_priors(b, db);
  // b = b_c - (1/N) sum_n s_n: every row of the summed predictors also moves b (centred intercept).
  if (intercept_ >= 0) G.rowwise() -= db.row(intercept_) / double(z_sum.rows());
  return q_gradient(eps, fit, db, log_lik + log_prior, d_params);
}

bool VflServer::log_joint(const Eigen::MatrixXd& b, const Eigen::MatrixXd& eta, Eigen::VectorXd& log_p) {
  if (!likelihood_) return false;
  const long S = eta.cols();
  log_p = Eigen::VectorXd::Zero(S);
  for (auto& f : prior_) log_p += f->forward(0, -1, inputs_of(*f, {{FVI_GROUP_GLOBAL, &b}})).transpose();
  log_p += likelihood_->forward(0, -1, inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &b}, {FVI_GROUP_Z_SUM, &eta}})).colwise().sum().transpose();
  return true;
}

Eigen::VectorXd VflServer::add_priors(const Eigen::MatrixXd& b, Eigen::MatrixXd& db) {
  const long S = b.cols();
  Eigen::VectorXd log_p = Eigen::VectorXd::Zero(S);
  for (auto& f : prior_) {
    log_p += f->forward(0, -1, inputs_of(*f, {{FVI_GROUP_GLOBAL, &b}})).transpose();
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(1, S);
    db += gradient_of(*f, f->backward({&seed}), FVI_GROUP_GLOBAL, global_dim_, S);
  }
  return log_p;
}

double VflServer::q_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& b, Eigen::MatrixXd db,
                             const Eigen::VectorXd& log_p, Eigen::VectorXd& d_params) {
  const long S = eps.cols();
  if (joint_) {
    // The joint family's entropy is exact: total/2 log(2 pi e) + log det L, the server's rows'
    // part here (the silos add theirs).
    d_params = joint_q_.path_gradient(db, eps) / double(S) + joint_q_.log_det_gradient();
    return log_p.mean() + 0.5 * double(global_dim_) * (kLog2Pi + 1) + joint_q_.log_det();
  }
  const Eigen::VectorXd log_q = q_.log_density(b);
  db -= q_.score(b);  // STL: the entropy term through the draw only (seed 004 Eq. 4)
  d_params = meanfield_params_gradient(db, eps, q_.sd()) / double(S);
  return (log_p - log_q).mean();
}

double VflServer::prior_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& d_globals, Eigen::VectorXd& d_params) {
  d_params = Eigen::VectorXd::Zero(params().size());
  if (global_dim_ == 0) return 0;
  const Eigen::MatrixXd b = globals(eps);
  Eigen::MatrixXd db = d_globals;
  const Eigen::VectorXd log_prior = add_priors(b, db);
  return q_gradient(eps, b, db, log_prior, d_params);
}

Eigen::VectorXd VflServer::path_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& d_globals) const {
  const double S = double(eps.cols());
  if (joint_) return joint_q_.path_gradient(d_globals, eps) / S;
  return meanfield_params_gradient(d_globals, eps, q_.sd()) / S;
}

void VflServer::step(const Eigen::VectorXd& d_params) {
  if (global_dim_ == 0) return;
  Eigen::VectorXd p = params();
  adam_.set_step_limit(joint_ ? joint_rows_step_limit(p.size(), joint_q_) : mean_step_limit(p.size(), q_.sd()));
  adam_.step(p, Eigen::VectorXd(-d_params));  // Adam minimises; the ELBO is maximised
  set_params(p);
}

// ---- silo ------------------------------------------------------------------------------------

VflSilo::VflSilo(const fvi_model& model, const fvi_data& data, int silo, int silos, VflOptions options)
    : silo_(silo),
      silos_(silos),
      options_(options),
      centred_intercept_(silo_sum_intercept_variable(model, options) >= 0),
      split_dim_(group_dim(model, FVI_GROUP_SPLIT, data)),
      hyper_dim_(group_dim(model, FVI_GROUP_SPLIT_HYPER, data)),
      global_dim_(group_dim(model, FVI_GROUP_GLOBAL, data)),
      adam_(1, AdamOptions{StepSizeSchedule(options.lr)}) {
  contribution_ = bind_one(model, data, FVI_SPLIT_SILO, FVI_CONTRIBUTION);
  if (!contribution_) throw ModelError("silo " + std::to_string(silo) + ": the model has no silo_sum contribution");
  density_ = bind_one(model, data, FVI_SPLIT_SILO, FVI_DENSITY);
  prior_reads_globals_ = density_ && split_priors_read_globals(model);
  rows_ = contribution_->rows();
  if (options.power) {
    likelihood_ = bind_one(model, data, FVI_COUPLING, FVI_LIKELIHOOD);
    if (!likelihood_) throw ModelError("the power-likelihood model needs a likelihood through silo_sum; this model has none");
    if (likelihood_->rows() != rows_)
      throw ModelError("silo " + std::to_string(silo) + ": the likelihood has " + std::to_string(likelihood_->rows()) +
                       " rows but the silo's contribution has " + std::to_string(rows_));
  }
  const int64_t n = rows_;
  // Initial values: q(theta) = N(0, init_sd^2); h ~ N(0, hyper_init_sd^2) (a network body must
  // not start symmetric); q(z) = N(0, init_sd^2) per row, or the network at N(m_i, init_sd^2).
  CounterRng init(RngKey{options.seed, uint32_t(silo), 0, rng_stream::kInitialisation});
  Eigen::VectorXd z_params;
  if (!options.auxiliary) {
    // no q(z)
  } else if (options.amortized) {
    net_ = AmortizedGaussianNet(options.power ? 2 : 1, options.width, options.depth);
    z_params = net_.initial_params(init.normal(net_.num_params(), 1), options.init_sd);
  } else {
    z_params.resize(2 * n);
    z_params << Eigen::VectorXd::Zero(n), Eigen::VectorXd::Constant(n, std::log(options.init_sd));
  }
  z_params_ = z_params.size();
  params_.resize(2 * split_dim_ + hyper_dim_ + z_params_);
  params_ << Eigen::VectorXd::Zero(split_dim_), Eigen::VectorXd::Constant(split_dim_, std::log(options.init_sd)),
      options.hyper_init_sd * init.normal(hyper_dim_, 1), z_params;
  step_scales_ = column_scales_ = contribution_scales();
  params_.segment(split_dim_, split_dim_) -= step_scales_.array().log().matrix();
  adam_ = Adam<double>(params_.size(), AdamOptions{StepSizeSchedule(options.lr)});
  if (options.power && options.amortized && options.auxiliary) {
    // The network reads y_i: take the outcome rows from the likelihood (one evaluation at zero).
    const Eigen::MatrixXd g = Eigen::MatrixXd::Zero(global_dim_, 1), zs = Eigen::MatrixXd::Zero(n, 1);
    likelihood_->forward(0, -1, inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &g}, {FVI_GROUP_Z_SUM, &zs}}));
    y_ = likelihood_->arguments()[0].values.col(0);
  }
}

void VflSilo::set_params(const Eigen::VectorXd& params) {
  if (params.size() != params_.size())
    throw std::invalid_argument("silo " + std::to_string(silo_) + ": " + std::to_string(params.size()) +
                                " parameters given, expected " + std::to_string(params_.size()));
  params_ = params;
}

MeanFieldGaussian<double> VflSilo::q_theta() const {
  if (joint_) throw std::logic_error("q_theta(): this silo fits the joint family");
  return MeanFieldGaussian<double>(params_.head(split_dim_), params_.segment(split_dim_, split_dim_));
}

void VflSilo::set_layout(bool joint, Eigen::Index offset, Eigen::Index total) {
  if (!joint) {
    if (joint_) throw std::invalid_argument("silo " + std::to_string(silo_) + ": the joint family cannot be undone");
    joint_total_ = total;
    return;
  }
  if (joint_ && joint_q_.offset() == offset && joint_total_ == total) return;
  if (options_.auxiliary) throw std::invalid_argument("the joint family needs method = vfl_exact (no auxiliary z)");
  if (offset < 0 || total < offset + split_dim_)
    throw std::invalid_argument("silo " + std::to_string(silo_) + ": a layout at " + std::to_string(offset) + " of " +
                                std::to_string(total) + " for " + std::to_string(split_dim_) + " split parameters");
  const Eigen::VectorXd rest = params_.tail(params_.size() - theta_params());  // h (no q(z) without z)
  joint_q_ = JointGaussianRows(offset, split_dim_, options_.init_sd);
  joint_ = true;
  joint_total_ = total;
  Eigen::VectorXd start = joint_q_.params();  // L_k's diagonal at init_sd / step_scales_ (a log)
  Eigen::Index at = split_dim_;
  for (Eigen::Index r = 0; r < split_dim_; ++r) {
    at += offset + r;
    start[at++] -= std::log(step_scales_[r]);
  }
  joint_q_.set_params(start);
  params_.resize(joint_q_.params().size() + rest.size());
  params_ << joint_q_.params(), rest;
  adam_ = Adam<double>(params_.size(), AdamOptions{StepSizeSchedule(options_.lr)});
}

JointGaussianRows VflSilo::joint_q() const {
  JointGaussianRows q = joint_q_;
  q.set_params(params_.head(theta_params()));
  return q;
}

Eigen::VectorXd VflSilo::theta_mean() const { return joint_ ? joint_q().mean() : q_theta().mean(); }
Eigen::VectorXd VflSilo::theta_sd() const { return joint_ ? joint_q().sd() : q_theta().sd(); }

Eigen::MatrixXd VflSilo::theta_noise(uint64_t key, uint32_t stream, long draws) const {
  if (joint_) return joint_noise(key, 0, stream, joint_total_, draws);
  return CounterRng(RngKey{key, uint32_t(silo_), 0, stream}).normal(split_dim_, draws);
}

Eigen::MatrixXd VflSilo::theta_draws(const Eigen::MatrixXd& eps) const {
  return joint_ ? joint_q().sample(eps) : q_theta().sample(eps);
}

Eigen::VectorXd VflSilo::theta_log_q(const Eigen::MatrixXd& theta) const {
  return joint_ ? joint_q().marginal_log_density(theta) : q_theta().log_density(theta);
}

namespace {

// m_k for the draws of theta (p_k x S), by a forward call that contribution_backward may follow.
// A contribution that reads no split parameter (a network of point estimates only) is the same
// for every draw: its one column is repeated S times.
Eigen::MatrixXd contribution_draws(BoundFactor& contribution, const Eigen::MatrixXd& theta, const Eigen::MatrixXd& h) {
  const Eigen::MatrixXd m = contribution.forward(0, -1, inputs_of(contribution, {{FVI_GROUP_SPLIT, &theta}, {FVI_GROUP_SPLIT_HYPER, &h}}));
  return m.cols() == theta.cols() ? m : Eigen::MatrixXd(m.replicate(1, theta.cols()));
}

// After contribution_draws: the gradient of sum(a_m .* m) with respect to the contribution's
// groups. A draw-independent contribution takes the adjoint summed over the draws.
std::vector<Eigen::MatrixXd> contribution_backward(BoundFactor& contribution, const Eigen::MatrixXd& a_m) {
  for (int g = 0; g < contribution.info().group_count; ++g)
    if (contribution.group(g) == FVI_GROUP_SPLIT) return contribution.backward({&a_m});
  const Eigen::MatrixXd summed = a_m.rowwise().sum();
  return contribution.backward({&summed});
}

// q_z_offset = residual: the amortised network's mean offsets less their least-squares fit on
// (1, m) over the silo's rows, draw by draw (column by column): a' = P a, P the projection off
// span{1, m_s}. A free offset can carry z's level, which b also sets, and its scale (a slope in
// m), which theta also sets: with mean-field q across both, the fit crawls along the two ridges
// (examples/vfl_poisson_multilevel: slopes 12 posterior sds off after 20,000 iterations, k-hat
// 9.6). Off span{1, m} the level and the scale are b's and theta's alone, and what the network
// adds is each row's own departure from the coupling's mean.
Eigen::MatrixXd residual_on_level_and_scale(const Eigen::MatrixXd& a, const Eigen::MatrixXd& m) {
  Eigen::MatrixXd out(a.rows(), a.cols());
  for (Eigen::Index s = 0; s < a.cols(); ++s) {
    const Eigen::ArrayXd c = m.col(s).array() - m.col(s).mean(), t = a.col(s).array() - a.col(s).mean();
    const double cc = c.square().sum(), gamma = cc > 0 ? (t * c).sum() / cc : 0.0;
    out.col(s) = (t - gamma * c).matrix();
  }
  return out;
}

// The adjoint of residual_on_level_and_scale: given g, the adjoint of a' = P(m) a, returns a's
// (P g) and adds m's to dm. With c = m - mean(m), t = a - mean(a), gamma = t.c / c.c:
// a' = t - gamma c, so dc = -((c.g / c.c) t + gamma g - 2 gamma (c.g / c.c) c), dm = dc - mean(dc).
Eigen::MatrixXd residual_adjoint(const Eigen::MatrixXd& a, const Eigen::MatrixXd& m, const Eigen::MatrixXd& g,
                                 Eigen::MatrixXd* dm) {
  Eigen::MatrixXd ga(a.rows(), a.cols());
  for (Eigen::Index s = 0; s < a.cols(); ++s) {
    const Eigen::ArrayXd c = m.col(s).array() - m.col(s).mean(), t = a.col(s).array() - a.col(s).mean();
    const Eigen::ArrayXd gs = g.col(s).array(), gt = gs - gs.mean();
    const double cc = c.square().sum();
    const double gamma = cc > 0 ? (t * c).sum() / cc : 0.0, gc = cc > 0 ? (gt * c).sum() / cc : 0.0;
    ga.col(s) = (gt - gc * c).matrix();
    if (dm) {
      const Eigen::ArrayXd dc = -(gc * t + gamma * gs - 2 * gamma * gc * c);
      dm->col(s).array() += dc - dc.mean();
    }
  }
  return ga;
}

}  // namespace

const Eigen::MatrixXd& VflSilo::propose(uint32_t iteration) {
  const long S = options_.mc_samples;
  eps_ = joint_ ? joint_noise(options_.seed, iteration, rng_stream::kJointNoise, joint_total_, S)
                : CounterRng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kLocalNoise}).normal(split_dim_, S);
  tau_ = CounterRng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kAuxiliaryNoise}).normal(rows_, S);
  evaluate_kept();
  proposed_ = iteration;
  return z_;
}


namespace {

// A checkpoint's count (a layout's size or offset) read back as an index, or an error.
Eigen::Index checkpoint_count(double value, const char* what) {
  if (!(value >= 0 && value <= 1e9 && value == std::floor(value)))
    throw std::invalid_argument(std::string("a damaged vertical checkpoint (") + what + ")");
  return Eigen::Index(value);
}

}  // namespace

// [joint?, total, q(globals) with Adam's state].
Eigen::VectorXd VflServer::checkpoint() const {
  const Eigen::VectorXd core = with_adam(params(), adam_);
  Eigen::VectorXd state(2 + core.size());
  state << double(joint_), double(total_), core;
  return state;
}

void VflServer::restore(const Eigen::VectorXd& state) {
  if (state.size() < 2) throw std::invalid_argument("a damaged vertical server checkpoint");
  set_layout(state[0] != 0, checkpoint_count(state[1], "the joint family's size"));
  const Eigen::VectorXd core = state.tail(state.size() - 2);
  set_params(restore_adam(core, params().size(), 0, adam_));
}

// [joint?, offset, total, params with Adam's state, the averaging schedule, the iteration of the
// kept proposal, the draws per gradient, the outcome factor].
Eigen::VectorXd VflSilo::checkpoint() const {
  const Eigen::VectorXd core = with_adam(params_, adam_), schedule = average_.state(params_.size());
  Eigen::VectorXd state(3 + core.size() + schedule.size() + 3);
  state << double(joint_), double(joint_ ? joint_q_.offset() : 0), double(joint_total_), core, schedule, double(proposed_),
      double(options_.mc_samples), outcome_factor_;
  return state;
}

void VflSilo::restore(const Eigen::VectorXd& saved) {
  if (saved.size() < 3) throw std::invalid_argument("a damaged vertical silo checkpoint");
  if (saved[0] != 0)
    set_layout(true, checkpoint_count(saved[1], "the silo's offset"), checkpoint_count(saved[2], "the joint family's size"));
  const Eigen::VectorXd state = saved.tail(saved.size() - 3);
  const Eigen::Index p = params_.size(), schedule = ParameterAverage::state_size(p);
  if (state.size() < schedule + 3) throw std::invalid_argument("a damaged vertical silo checkpoint");
  const Eigen::Index core = state.size() - schedule - 3;
  const double proposed = state[state.size() - 3], draws = state[state.size() - 2], factor = state[state.size() - 1];
  if (!(factor >= 1 && factor <= 1e150 && (linear_ || factor == 1)))
    throw std::invalid_argument("a damaged vertical silo checkpoint (its outcome factor)");
  if (!(proposed >= 0 && proposed <= 4294967295.0 && proposed == std::floor(proposed)))
    throw std::invalid_argument("a damaged vertical silo checkpoint");
  if (!(draws >= 1 && draws <= 1e6 && draws == std::floor(draws)))
    throw std::invalid_argument("a damaged vertical silo checkpoint (its draws per gradient)");
  set_params(restore_adam(state.head(core), p, 0, adam_));
  average_.restore(state.segment(core, schedule));
  adam_.set_scale(average_.step_scale());
  options_.mc_samples = long(draws);
  outcome_factor_ = factor;  // the restored q is already in these coordinates
  step_scales_ = column_scales_ / factor;
  if (proposed > 0) propose(uint32_t(proposed));
}

Eigen::MatrixXd VflSilo::contribution_at_mean() {
  return contribution_draws(*contribution_, Eigen::MatrixXd(theta_mean()), hyper());
}

void VflSilo::evaluate_kept() {
  const long S = tau_.cols();
  theta_ = theta_draws(eps_);
  // Mean-field q(z)'s means are offsets from m_k at q(theta_k)'s mean: the same family, in
  // coordinates where a step of theta's mean carries z's means with it. In the plain ones each z
  // follows theta only through its own small gradient, and with hundreds of rows pulling theta
  // back the pair crawls along the ridge z = m(theta) (vfl_logreg_power: the ELBO levels off by
  // iteration 2,000 centred, 6,000 not). gradient() then takes the coupling and the entropies in
  // closed form, which these coordinates need (examples/vfl_logreg/README.md).
  const Eigen::MatrixXd centre = centred_z() ? contribution_at_mean() : Eigen::MatrixXd();
  m_ = contribution_draws(*contribution_, theta_, hyper());  // theta_gradient's backward follows this forward
  const Eigen::VectorXd z_params = params_.tail(z_params_);
  if (!options_.auxiliary) {
    z_ = m_;  // the classical split network: the contribution itself goes up
  } else if (options_.amortized) {
    // seed 004 Eq. 9: one network evaluation per (row, draw), inputs m_ik (and y_i).
    Eigen::MatrixXd u(net_.inputs(), rows_ * S);
    u.row(0) = Eigen::Map<const Eigen::RowVectorXd>(m_.data(), rows_ * S);
    if (options_.power) u.row(1) = y_.transpose().replicate(1, S);
    const Eigen::MatrixXd& out = net_.forward(z_params, u);
    a_ = Eigen::Map<const Eigen::MatrixXd>(Eigen::RowVectorXd(out.row(0)).data(), rows_, S);
    s_ = Eigen::Map<const Eigen::MatrixXd>(Eigen::RowVectorXd(out.row(1)).data(), rows_, S);
    const Eigen::MatrixXd offset = options_.residual_offset ? residual_on_level_and_scale(a_, m_) : a_;
    z_ = m_ + offset + (s_.array().exp() * tau_.array()).matrix();
  } else {
    // seed 004 Eq. 10: z = mu_z + sigma_z tau, independent of theta's draw; mu_z = m_k(mean) + offset.
    Eigen::VectorXd mu = z_params.head(rows_);
    if (centred_z()) mu += centre.col(0);
    const Eigen::VectorXd sd = z_params.tail(rows_).array().exp();
    z_ = (tau_.array().colwise() * sd.array()).colwise() + mu.array();
  }
}

Eigen::MatrixXd VflSilo::power_message(const Eigen::MatrixXd& globals, const Eigen::MatrixXd& others_z,
                                       Eigen::MatrixXd& d_globals, double& likelihood_term) {
  const long S = m_.cols();
  // seed 004 Eq. 7: silo k's likelihood sees its own exact contribution plus the others' z.
  const Eigen::MatrixXd z_sum = m_ + others_z;
  const auto& lp = likelihood_->forward(0, -1, inputs_of(*likelihood_, {{FVI_GROUP_GLOBAL, &globals}, {FVI_GROUP_Z_SUM, &z_sum}}));
  const double weight = 1.0 / double(silos_);
  own_likelihood_ = weight * lp.sum() / double(S);
  likelihood_term = own_likelihood_;
  const Eigen::MatrixXd seed = Eigen::MatrixXd::Constant(lp.rows(), lp.cols(), weight);
  const auto d = likelihood_->backward({&seed});
  if (global_dim_ > 0) d_globals += gradient_of(*likelihood_, d, FVI_GROUP_GLOBAL, global_dim_, S);
  own_likelihood_adjoint_ = gradient_of(*likelihood_, d, FVI_GROUP_Z_SUM, rows_, S);
  return own_likelihood_adjoint_;
}

double VflSilo::gradient(const Eigen::MatrixXd& z_adjoint, Eigen::VectorXd& d_params) {
  const long S = z_.cols();
  const double rho2 = options_.rho * options_.rho;
  d_params = Eigen::VectorXd::Zero(params_.size());
  if (!options_.auxiliary) {  // z = m: the other parties' adjoint goes straight to m
    Eigen::MatrixXd a_m = z_adjoint;
    if (options_.power) a_m += own_likelihood_adjoint_;
    return theta_gradient(a_m, d_params) + (options_.power ? own_likelihood_ : 0.0);
  }
  const Eigen::MatrixXd sd_z = options_.amortized
                                   ? Eigen::MatrixXd(s_.array().exp())
                                   : Eigen::MatrixXd(params_.tail(rows_).array().exp().matrix().replicate(1, S));
  const Eigen::Index z_at = theta_params() + hyper_dim_;
  const Eigen::VectorXd z_params = params_.tail(z_params_);
  const double log_rho_norm = std::log(options_.rho) + 0.5 * kLog2Pi;
  if (centred_z()) {
    // Mean-field q(z) = N(mu_z, sd_z^2) with mu_z = m_k(mean) + offset: the coupling's expectation
    // over q(z), E log N(z; m, rho^2) = -((mu_z - m)^2 + sd_z^2) / (2 rho^2) - log rho - log(2 pi)/2,
    // and q(z)'s entropy, sum log sd_z + (1 + log 2 pi)/2, are Gaussian moments; only the other
    // parties' adjoint is sampled in z. Their sampled forms (tau/sd_z, about 2 a row, and the
    // coupling at the draw) no longer cancel once z's means move with q(theta)'s: they kept
    // vfl_logreg_power's means wandering 1-2 q sds (examples/vfl_logreg/README.md).
    const Eigen::ArrayXXd gap = (z_ - m_).array() - sd_z.array() * tau_.array();  // mu_z - m, per draw
    Eigen::MatrixXd a_m = (gap / rho2).matrix();  // the explicit dependence on m
    if (options_.power) a_m += own_likelihood_adjoint_;
    const Eigen::ArrayXd sd = sd_z.col(0).array();
    d_params.segment(z_at, rows_) = (z_adjoint.array() - gap / rho2).matrix().rowwise().sum() / double(S);
    d_params.segment(z_at + rows_, rows_) =
        ((z_adjoint.array() * sd_z.array() * tau_.array()).matrix().rowwise().sum() / double(S)).array() -
        sd.square() / rho2 + 1.0;
    double value = (-0.5 * gap.square() / rho2).sum() / double(S) - 0.5 * sd.square().sum() / rho2 -
                   double(rows_) * log_rho_norm;
    value += sd.log().sum() + double(rows_) * 0.5 * (kLog2Pi + 1.0);  // -E log q(z)
    value += theta_gradient(a_m, d_params) + (options_.power ? own_likelihood_ : 0.0);
    // z's means moved with m_k(mean of theta, h): their adjoint, through the contribution.
    const Eigen::MatrixXd a_centre = d_params.segment(z_at, rows_);
    contribution_at_mean();
    const auto dc = contribution_backward(*contribution_, a_centre);
    d_params.head(split_dim_) += gradient_of(*contribution_, dc, FVI_GROUP_SPLIT, split_dim_, 1).rowwise().sum();
    d_params.segment(theta_params(), hyper_dim_) +=
        gradient_of(*contribution_, dc, FVI_GROUP_SPLIT_HYPER, hyper_dim_, 1).rowwise().sum();
    return value;
  }
  // Amortised q(z) (the joint family has no z).
  const Eigen::ArrayXXd r = (z_ - m_).array();  // z - m
  // Terms in z: the other parties' adjoint, the coupling log N(z; m, rho^2) (seed 004 Eq. 6),
  // and -log q(z | .) through the draw (STL): d/dz = tau / sigma.
  const Eigen::MatrixXd g_z = (z_adjoint.array() - r / rho2 + tau_.array() / sd_z.array()).matrix();
  // The explicit dependence on m: the coupling's mean, and the power model's own likelihood.
  Eigen::MatrixXd a_m = (r / rho2).matrix();
  if (options_.power) a_m += own_likelihood_adjoint_;
  double value = (-0.5 * r.square() / rho2).sum() - double(rows_ * S) * log_rho_norm;
  value += (sd_z.array().log() + 0.5 * tau_.array().square()).sum() + double(rows_ * S) * 0.5 * kLog2Pi;  // -log q(z|.)
  const Eigen::Index R = rows_ * S;
  auto flat = [R](const Eigen::MatrixXd& x) { return Eigen::Map<const Eigen::RowVectorXd>(x.data(), R); };
  // z = m + a + exp(s) tau. Path adjoints of the network's outputs (psi's gradient, Eq. 12):
  const bool residual = options_.residual_offset;
  Eigen::MatrixXd d_out(2, R);
  d_out.row(0) = flat(residual ? residual_adjoint(a_, m_, g_z, nullptr) : g_z);
  d_out.row(1) = flat(Eigen::MatrixXd(g_z.array() * sd_z.array() * tau_.array()));
  Eigen::VectorXd d_net = Eigen::VectorXd::Zero(z_params_);
  net_.backward(z_params, d_out, &d_net);
  d_params.tail(z_params_) = d_net / double(S);
  // theta's path also meets -log q(z | m(theta)) with psi held fixed: d/da = -tau/sigma,
  // d/ds = 1 - tau^2, and m enters through the network's input and the mean's offset.
  const Eigen::MatrixXd explicit_a = -(tau_.array() / sd_z.array()).matrix();
  const Eigen::MatrixXd explicit_s = (1.0 - tau_.array().square()).matrix();
  const Eigen::MatrixXd g_offset = g_z + explicit_a;
  // With the residual offset, m also enters through the fit on (1, m) that a' is taken off.
  d_out.row(0) = flat(residual ? residual_adjoint(a_, m_, g_offset, &a_m) : g_offset);
  d_out.row(1) += flat(explicit_s);
  const Eigen::MatrixXd d_u = net_.backward(z_params, d_out, nullptr);
  a_m += g_z + explicit_a + Eigen::Map<const Eigen::MatrixXd>(Eigen::RowVectorXd(d_u.row(0)).data(), rows_, S);
  return value / double(S) + theta_gradient(a_m, d_params) + (options_.power ? own_likelihood_ : 0.0);
}

double VflSilo::theta_gradient(const Eigen::MatrixXd& a_m, Eigen::VectorXd& d_params) {
  // theta_k and h_k: through m (the contribution kernel), the split priors, and -log q(theta).
  // Fills d_params' theta and h parts (divided by S) and returns their terms' estimate.
  const long S = z_.cols();
  double value = 0;
  const Eigen::MatrixXd h = hyper();
  const auto dc = contribution_backward(*contribution_, a_m);  // the forward of evaluate_kept
  Eigen::MatrixXd d_theta = gradient_of(*contribution_, dc, FVI_GROUP_SPLIT, split_dim_, S);
  Eigen::VectorXd d_h = gradient_of(*contribution_, dc, FVI_GROUP_SPLIT_HYPER, hyper_dim_, 1).rowwise().sum();
  if (density_) {
    check_prior_globals(prior_globals_, S);
    const auto& lp = density_->forward(0, -1, inputs_of(*density_, {{FVI_GROUP_SPLIT, &theta_}, {FVI_GROUP_SPLIT_HYPER, &h},
                                                                    {FVI_GROUP_GLOBAL, &prior_globals_}}));
    value += lp.sum();
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(1, S);
    const auto dd = density_->backward({&seed});
    d_theta += gradient_of(*density_, dd, FVI_GROUP_SPLIT, split_dim_, S);
    d_h += gradient_of(*density_, dd, FVI_GROUP_SPLIT_HYPER, hyper_dim_, 1).rowwise().sum();
    if (prior_reads_globals_) d_prior_globals_ = gradient_of(*density_, dd, FVI_GROUP_GLOBAL, global_dim_, S);
  }
  d_params.segment(theta_params(), hyper_dim_) = d_h / double(S);
  if (joint_) {
    // The joint family's entropy is exact: this silo's rows add p/2 log(2 pi e) + their log diagonal.
    const JointGaussianRows q = joint_q();
    d_params.head(theta_params()) = q.path_gradient(d_theta, eps_) / double(S) + q.log_det_gradient();
    return value / double(S) + 0.5 * double(split_dim_) * (kLog2Pi + 1) + q.log_det();
  }
  const MeanFieldGaussian<double> q = q_theta();
  if (centred_z()) {
    // With q(z) centred on m_k(mean), STL's path term eps/sd of -log q(theta) (about 40 a
    // coefficient at vfl_logreg_power's sds) is no longer cancelled by the coupling's; the
    // entropy in closed form has no noise at all.
    d_params.head(2 * split_dim_) = meanfield_params_gradient(d_theta, eps_, q.sd()) / double(S) + q.entropy_gradient();
    return value / double(S) + q.entropy();
  }
  value -= q.log_density(theta_).sum();
  d_theta -= q.score(theta_);  // STL
  d_params.head(2 * split_dim_) = meanfield_params_gradient(d_theta, eps_, q.sd()) / double(S);
  return value / double(S);
}

VflSilo::LogJointPart VflSilo::log_joint_part(uint64_t key, long draws, const Eigen::MatrixXd& globals) {
  // The draws of the silo's draws.csv (write_split_posterior), so that a centred intercept's
  // draws, b = b_c - sum_k mean(eta_k), pair with them row by row; the joint family's are also the
  // server's output draws (the same joint noise of `key`).
  const Eigen::MatrixXd theta = theta_draws(theta_noise(key, rng_stream::kUserStream + 3, draws));
  LogJointPart out = log_joint_at(theta, globals);
  out.log_q = joint_ ? Eigen::VectorXd::Constant(draws, -joint_q().log_det()) : q_theta().log_density(theta);
  return out;
}

VflSilo::LogJointPart VflSilo::log_joint_at(const Eigen::MatrixXd& theta, const Eigen::MatrixXd& globals) {
  const Eigen::MatrixXd h = hyper();
  LogJointPart out;
  out.eta = contribution_draws(*contribution_, theta, h);
  out.log_prior = Eigen::VectorXd::Zero(theta.cols());
  check_prior_globals(globals, theta.cols());
  if (density_)
    out.log_prior = density_->forward(0, -1, inputs_of(*density_, {{FVI_GROUP_SPLIT, &theta}, {FVI_GROUP_SPLIT_HYPER, &h},
                                                                   {FVI_GROUP_GLOBAL, &globals}})).transpose();
  return out;
}

void VflSilo::check_prior_globals(const Eigen::MatrixXd& globals, long draws) const {
  if (prior_reads_globals_ && (globals.rows() != global_dim_ || globals.cols() != draws))
    throw std::invalid_argument("silo " + std::to_string(silo_) + "'s split priors read the globals, but the server sent " +
                                std::to_string(globals.rows()) + " x " + std::to_string(globals.cols()) +
                                " draws of them for " + std::to_string(draws) + " of its block");
}

Eigen::VectorXd VflSilo::own_noise_norm2(const Eigen::MatrixXd& eps) const {
  const Eigen::Index from = joint_ ? joint_q_.offset() : 0;
  return eps.middleRows(from, split_dim_).colwise().squaredNorm().transpose();
}

double VflSilo::own_log_det() const { return joint_ ? joint_q().log_det() : q_theta().log_sd().sum(); }

void VflSilo::set_schedule(double step_scale, long epoch) {
  const bool restart = epoch != average_.epoch();
  average_.set_schedule(step_scale, epoch, params_.size());
  if (restart) watch_.restart();
  adam_.set_scale(step_scale);
}

WindowJudgement VflSilo::block_settled(double tol_param) const {
  if (split_dim_ == 0) return {};
  return watch_.judge(tol_param);
}

Eigen::VectorXd VflSilo::contribution_scales() {
  Eigen::VectorXd ones = Eigen::VectorXd::Ones(split_dim_);
  if (split_dim_ == 0 || rows_ == 0 || hyper_dim_ > 0) return ones;
  // 64 projections give each sd within about 9% (1 / sqrt(128)): a step scale needs no more.
  const long draws = 64;
  if (rows_ > (int64_t(1) << 24) / draws) return ones;  // rows x draws values at each call
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), 0, rng_stream::kUserStream + 40});
  Eigen::MatrixXd a = rng.normal(rows_, draws);
  if (centred_intercept_) a.rowwise() -= a.colwise().mean();
  const Eigen::MatrixXd h = hyper();
  auto projected = [&](const Eigen::MatrixXd& theta) {
    contribution_draws(*contribution_, theta, h);
    return gradient_of(*contribution_, contribution_backward(*contribution_, a), FVI_GROUP_SPLIT, split_dim_, draws);
  };
  const Eigen::MatrixXd at_zero = projected(Eigen::MatrixXd::Zero(split_dim_, draws));
  const Eigen::MatrixXd at_draw = projected(rng.normal(split_dim_, draws));
  if (!at_zero.allFinite() || !((at_zero - at_draw).norm() <= 1e-9 * at_zero.norm())) return ones;
  const Eigen::VectorXd sd = (at_zero.rowwise().squaredNorm() / double(draws * rows_)).cwiseSqrt();
  linear_ = true;
  return sd.cwiseMax(1.0);
}

void VflSilo::set_outcome_scale(double scale) {
  if (!(std::isfinite(scale) && scale > 0 && scale <= 1e150))
    throw std::invalid_argument("an outcome scale of " + std::to_string(scale));
  const double factor = linear_ ? std::max(1.0, scale / kOutcomeScaleUnit) : 1.0;
  if (factor == outcome_factor_) return;
  // Before the first step q's starting sds move with the coordinates (init_sd in step
  // coordinates); after it (a resumed silo's restored q) only the coordinates do.
  if (adam_.iteration() == 0) {
    const double shift = std::log(factor / outcome_factor_);
    if (joint_) {
      Eigen::VectorXd p = joint_q_.params();
      for (Eigen::Index r = 0; r < split_dim_; ++r) p[joint_q_.diagonal_at(r)] += shift;
      joint_q_.set_params(p);
      params_.head(p.size()) = p;
    } else {
      params_.segment(split_dim_, split_dim_).array() += shift;
    }
  }
  outcome_factor_ = factor;
  step_scales_ = column_scales_ / factor;
}

Eigen::VectorXd VflSilo::step_multipliers() const {
  Eigen::VectorXd f = Eigen::VectorXd::Ones(params_.size());
  f.head(split_dim_) = step_scales_;
  if (!joint_) return f;
  Eigen::Index at = split_dim_;
  for (Eigen::Index r = 0; r < split_dim_; ++r) {  // row r of L_k: its entries left of the diagonal
    const Eigen::Index left = joint_q_.offset() + r;
    f.segment(at, left).setConstant(step_scales_[r]);
    at += left + 1;
  }
  return f;
}

void VflSilo::adam_step(const Eigen::VectorXd& descent) {
  // A log-diagonal or log-sd moves by a constant in step coordinates: Adam's steps are the same.
  const Eigen::VectorXd f = step_multipliers();
  const Eigen::VectorXd limit =
      joint_ ? joint_rows_step_limit(params_.size(), joint_q()) : mean_step_limit(params_.size(), theta_sd());
  adam_.set_step_limit(limit.cwiseProduct(f));
  Eigen::VectorXd p = params_.cwiseProduct(f);
  adam_.step(p, Eigen::VectorXd(descent.cwiseQuotient(f)));
  params_ = p.cwiseQuotient(f);
}

void VflSilo::use_average() {
  if (average_.has_average()) set_params(average_.average());
}

double VflSilo::update(const Eigen::MatrixXd& z_adjoint, uint32_t iteration) {
  Eigen::VectorXd d;
  const double value = gradient(z_adjoint, d);
  adam_step(-d);
  for (long step = 1; step < options_.local_steps; ++step) local_only_step(iteration, step);
  average_.add(params_);
  if (average_.averaging() && split_dim_ > 0) watch_.observe(theta_mean(), theta_sd());
  return value;
}

double VflSilo::local_only_step(uint32_t iteration, long step) {
  if (!options_.auxiliary) return 0;  // without z there is nothing to hold fixed
  // With z_k fixed at the value sent, the rest of the ELBO in (theta_k, h_k) is
  // E[log N(z_k; m_k, rho^2) + log p(theta_k, h_k) - log q(theta_k)] (seed 004 §5.3: several
  // local updates for a fixed z).
  const long S = z_.cols();
  const double rho2 = options_.rho * options_.rho;
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), iteration, rng_stream::kUserStream + uint32_t(step)});
  const Eigen::MatrixXd eps = rng.normal(split_dim_, S);
  const MeanFieldGaussian<double> q = q_theta();
  const Eigen::MatrixXd theta = q.sample(eps), h = hyper();
  const Eigen::MatrixXd m = contribution_draws(*contribution_, theta, h);
  const Eigen::MatrixXd a_m = (z_ - m) / rho2;
  const auto dc = contribution_backward(*contribution_, a_m);
  Eigen::MatrixXd d_theta = gradient_of(*contribution_, dc, FVI_GROUP_SPLIT, split_dim_, S);
  Eigen::VectorXd d_h = gradient_of(*contribution_, dc, FVI_GROUP_SPLIT_HYPER, hyper_dim_, 1).rowwise().sum();
  double value = (-0.5 * (z_ - m).array().square() / rho2).sum() - q.log_density(theta).sum();
  if (density_) {
    check_prior_globals(prior_globals_, S);
    value += density_->forward(0, -1, inputs_of(*density_, {{FVI_GROUP_SPLIT, &theta}, {FVI_GROUP_SPLIT_HYPER, &h},
                                                           {FVI_GROUP_GLOBAL, &prior_globals_}})).sum();
    const Eigen::MatrixXd seed = Eigen::MatrixXd::Ones(1, S);
    const auto dd = density_->backward({&seed});
    d_theta += gradient_of(*density_, dd, FVI_GROUP_SPLIT, split_dim_, S);
    d_h += gradient_of(*density_, dd, FVI_GROUP_SPLIT_HYPER, hyper_dim_, 1).rowwise().sum();
  }
  d_theta -= q.score(theta);
  Eigen::VectorXd d = Eigen::VectorXd::Zero(params_.size());
  d.head(2 * split_dim_) = meanfield_params_gradient(d_theta, eps, q.sd());
  d.segment(2 * split_dim_, hyper_dim_) = d_h;
  adam_step(-d / double(S));
  return value / double(S);
}

Eigen::MatrixXd VflSilo::predictive_z(const fvi_model& model, const fvi_data& test, long draws, uint64_t key) const {
  std::unique_ptr<BoundFactor> contribution = bind_one(model, test, FVI_SPLIT_SILO, FVI_CONTRIBUTION);
  CounterRng rng(RngKey{key, uint32_t(silo_), 0, rng_stream::kUserStream + 7});
  // The joint family's draws pair with the server's globals drawn from the same joint noise.
  const Eigen::MatrixXd eps = joint_ ? joint_noise(key, 0, rng_stream::kUserStream + 7, joint_total_, draws)
                                     : rng.normal(split_dim_, draws);
  const Eigen::MatrixXd theta = theta_draws(eps), h = hyper();
  Eigen::MatrixXd z = contribution_draws(*contribution, theta, h);
  if (options_.auxiliary) z += options_.rho * rng.normal(z.rows(), draws);  // z* ~ N(m*, rho^2)
  if (centred_intercept_) z.rowwise() -= contribution_draws(*contribution_, theta, h).colwise().mean();
  return z;
}

}  // namespace fvi::engine
