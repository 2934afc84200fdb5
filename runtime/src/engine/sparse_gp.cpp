#include "fvi/engine/sparse_gp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "fvi/engine/bound_factor.h"
#include "fvi/error.h"
#include "fvi/gp/inducing_posterior.h"
#include "fvi/optim/adam.h"
#include "fvi/rng.h"

namespace fvi::engine {

namespace {

constexpr uint32_t kUpdateStream = rng_stream::kUserStream + 20;
constexpr uint32_t kEvaluationStream = rng_stream::kUserStream + 21;
constexpr uint32_t kPseudoInputStream = rng_stream::kUserStream + 22;
constexpr double kLogTwoPi = 1.8378770664093454836;

Eigen::VectorXd slot_values(const SparseGpLayout::Slot& slot, const Eigen::VectorXd& theta) {
  return slot.random() ? Eigen::VectorXd(theta.segment(slot.offset, slot.count)) : slot.value;
}

std::vector<const gp::PseudoObservationFactor*> pointers(const std::vector<gp::PseudoObservationFactor>& factors) {
  std::vector<const gp::PseudoObservationFactor*> out;
  for (const auto& f : factors) out.push_back(&f);
  return out;
}

// log (1/S sum_s exp(l_s)), stably.
double log_mean_exp(const Eigen::VectorXd& l) {
  const double top = l.maxCoeff();
  return top + std::log((l.array() - top).exp().mean());
}

}  // namespace

gp::GpDraw SparseGpLayout::draw(const Eigen::VectorXd& theta, const Eigen::MatrixXd* z_point) const {
  gp::GpDraw d;
  if (z.random()) d.z = Eigen::Map<const Eigen::MatrixXd>(theta.data() + z.offset, inducing, dimensions);
  else if (z_shared_point) d.z = *z_point;
  else d.z = Eigen::Map<const Eigen::MatrixXd>(z.value.data(), inducing, dimensions);
  d.kernel.log_scale = slot_values(log_scale, theta)[0];
  const Eigen::VectorXd l = slot_values(log_lengthscale, theta);
  d.kernel.log_lengthscales = l.size() == 1 ? Eigen::VectorXd::Constant(dimensions, l[0]) : l;
  d.log_noise_sd = slot_values(log_noise_sd, theta)[0];
  return d;
}

void SparseGpLayout::add_adjoint(const gp::GpDrawAdjoint& a, Eigen::VectorXd* theta_bar,
                                 Eigen::MatrixXd* z_point_bar) const {
  if (z.random()) theta_bar->segment(z.offset, z.count) += Eigen::Map<const Eigen::VectorXd>(a.z.data(), a.z.size());
  else if (z_shared_point && z_point_bar) *z_point_bar += a.z;
  if (log_scale.random()) (*theta_bar)[log_scale.offset] += a.kernel.log_scale;
  if (log_lengthscale.random()) {
    if (log_lengthscale.count == 1) (*theta_bar)[log_lengthscale.offset] += a.kernel.log_lengthscales.sum();
    else theta_bar->segment(log_lengthscale.offset, log_lengthscale.count) += a.kernel.log_lengthscales;
  }
  if (log_noise_sd.random()) (*theta_bar)[log_noise_sd.offset] += a.log_noise_sd;
}

Eigen::VectorXd SparseGpLayout::kl_weights(double auxiliary_weight) const {
  Eigen::VectorXd w = Eigen::VectorXd::Ones(dim);
  if (z.random()) w.segment(z.offset, z.count).setConstant(auxiliary_weight);
  return w;
}

std::string SparseGpLayout::problem() const {
  if (inducing < 1 || dimensions < 1) return "the inducing inputs need at least one point and one dimension";
  auto check = [&](const Slot& s, Eigen::Index count, const char* what) -> std::string {
    if (s.random()) {
      if (s.count != count || s.offset + s.count > dim) return std::string(what) + " does not fit the global parameters";
    } else if (s.value.size() != count) {
      return std::string(what) + " has " + std::to_string(s.value.size()) + " values, not " + std::to_string(count);
    }
    return "";
  };
  std::string p = z_shared_point ? "" : check(z, inducing * dimensions, "Z");
  if (p.empty()) p = check(log_scale, 1, "the kernel's scale");
  if (p.empty()) p = check(log_lengthscale, log_lengthscale.count == 1 ? 1 : dimensions, "the lengthscales");
  if (p.empty()) p = check(log_noise_sd, 1, "the noise sd");
  return p;
}

SparseGpOptions SparseGpOptions::from(const Settings& s) {
  SparseGpOptions o;
  const std::string form = s.name("factors", "dpo");
  if (form != "dpo" && form != "cpo") throw std::invalid_argument("factors = " + form + ": a sparse GP's factors are dpo or cpo");
  o.form = form == "dpo" ? gp::FactorForm::Dpo : gp::FactorForm::Cpo;
  o.pseudo_cap = s.integer("pseudo_cap", o.pseudo_cap);
  o.auxiliary_weight = s.number("auxiliary_weight", o.auxiliary_weight);
  o.jitter = s.number("jitter", o.jitter);
  o.local_steps = s.integer("local_steps", o.local_steps);
  o.learning_rate = s.number("lr", o.learning_rate);
  o.mc_samples = s.integer("mc_samples", o.mc_samples);
  o.batch_size = s.integer("batch_size", o.batch_size);
  o.schedule = s.name("schedule", o.schedule);
  o.damping = s.number("damping", o.damping);
  o.seed = uint64_t(s.integer("seed", 1));
  o.init_sd = s.number("init_sd", o.init_sd);
  if (o.schedule != "sequential" && o.schedule != "synchronous")
    throw std::invalid_argument("schedule = " + o.schedule + ": a sparse GP runs sequential or synchronous rounds");
  if (o.pseudo_cap < 1) throw std::invalid_argument("pseudo_cap must be at least 1");
  if (!(o.auxiliary_weight >= 0 && o.auxiliary_weight <= 1)) throw std::invalid_argument("auxiliary_weight must be in [0, 1]");
  if (!(o.jitter > 0 && o.jitter < 1)) throw std::invalid_argument("jitter must be in (0, 1)");
  if (o.local_steps < 1 || o.mc_samples < 1 || o.batch_size < 0)
    throw std::invalid_argument("local_steps and mc_samples must be at least 1, batch_size at least 0");
  if (!(o.learning_rate > 0) || !(o.damping > 0 && o.damping <= 1))
    throw std::invalid_argument("lr must be positive and damping in (0, 1]");
  return o;
}

double weighted_kl(const Eigen::VectorXd& mean, const Eigen::VectorXd& log_sd, const DiagNatural& c,
                   const Eigen::VectorXd& w, Eigen::VectorXd* mean_bar, Eigen::VectorXd* log_sd_bar) {
  double total = 0;
  for (Eigen::Index i = 0; i < mean.size(); ++i) {
    const double m = mean[i], s2 = std::exp(2 * log_sd[i]), e1 = c.eta1[i], e2 = c.eta2[i];
    // -H(q_i) - E_q[e1 z + e2 z^2], H = 1/2 log(2 pi e s^2)
    double kl = -0.5 * (kLogTwoPi + 1) - log_sd[i] - (e1 * m + e2 * (m * m + s2));
    if (e2 < 0) kl += -e1 * e1 / (4 * e2) + 0.5 * (kLogTwoPi - std::log(-2 * e2));  // log normaliser of c
    total += w[i] * kl;
    if (mean_bar) (*mean_bar)[i] += w[i] * -(e1 + 2 * e2 * m);
    if (log_sd_bar) (*log_sd_bar)[i] += w[i] * (-1 - 2 * e2 * s2);
  }
  return total;
}

SparseGpClient::SparseGpClient(SparseGpLayout layout, Eigen::MatrixXd x, Eigen::VectorXd y, SparseGpOptions options,
                               int silo)
    : layout_(std::move(layout)), x_(std::move(x)), y_(std::move(y)), options_(std::move(options)), silo_(silo) {
  if (x_.rows() != y_.size() || x_.cols() != layout_.dimensions)
    throw InvalidArgument("sparse GP silo " + std::to_string(silo) + ": inputs " + std::to_string(x_.rows()) + " x " +
                          std::to_string(x_.cols()) + " for " + std::to_string(y_.size()) + " outcomes of " +
                          std::to_string(layout_.dimensions) + " dimensions");
  if (y_.size() == 0) throw InvalidArgument("sparse GP silo " + std::to_string(silo) + " holds no rows");
}

gp::PseudoObservationFactor SparseGpClient::initial_factor() const {
  // CPO: precision 0.01, nearly flat: a factor over u, unlike a DPO factor, binds u at once
  // wherever Z is, and a firm one at 0 let the kernel's scale collapse (Boston housing).
  if (options_.form == gp::FactorForm::Cpo) return gp::initial_cpo(layout_.inducing, 0.01);
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), 0, kPseudoInputStream});
  const Eigen::Index m = gp::pseudo_observation_count(y_.size(), options_.pseudo_cap);
  return gp::initial_dpo(rng.normal(m, layout_.dimensions));
}

SparseGpUpdate SparseGpClient::update(uint32_t round, const DiagNatural& q, const DiagNatural& own,
                                      const gp::PseudoObservationFactor& own_pseudo,
                                      const std::vector<gp::PseudoObservationFactor>& others,
                                      const Eigen::MatrixXd& z_point) const {
  const Eigen::Index G = layout_.dim;
  if (!is_valid(q)) throw InvalidArgument("sparse GP update: the server's q is not a proper Gaussian");
  const MeanFieldGaussian<double> q0 = to_mean_field(q);
  const DiagNatural cavity{q.eta1 - own.eta1, q.eta2 - own.eta2};
  const Eigen::VectorXd weights = layout_.kl_weights(options_.auxiliary_weight);
  const auto cavity_factors = pointers(others);
  const bool z_point_free = layout_.z_shared_point;
  const Eigen::Index F = own_pseudo.parameter_count(), Zn = z_point_free ? z_point.size() : 0;

  Eigen::VectorXd p(2 * G + F + Zn);
  p << q0.mean(), q0.sd().array().log().matrix(), gp::flatten(own_pseudo),
      Eigen::Map<const Eigen::VectorXd>(z_point.data(), Zn);
  AdamOptions adam_options;
  adam_options.learning_rate = StepSizeSchedule(options_.learning_rate);
  Adam<double> adam(p.size(), adam_options);
  CounterRng rng(RngKey{options_.seed, uint32_t(silo_), round, kUpdateStream});
  const Eigen::Index n = y_.size();
  const bool minibatch = options_.batch_size > 0 && options_.batch_size < n;
  std::vector<Eigen::Index> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  gp::PseudoObservationFactor pseudo = own_pseudo;
  Eigen::MatrixXd zp = z_point;
  double tail_sum = 0;
  long tail_count = 0, failed = 0;
  const long tail_from = options_.local_steps - std::max(1L, options_.local_steps / 10);
  const long average_from = options_.local_steps / 2;
  Eigen::VectorXd average = Eigen::VectorXd::Zero(p.size());
  // CPO's first round fits the factors over u at the starting q(theta), which it holds: a CPO
  // factor is the same for every Z, so until the factors say something the data cannot pin Z,
  // each silo would hand back its share of the starting q(Z), and after one round q(Z) would be
  // its prior, too wide for any one factor over u to fit (Boston: every run at the noise-only
  // fit from round 2). DPO's factors move with Z and need no such start.
  const bool hold_theta = options_.form == gp::FactorForm::Cpo && round <= 1;
  long averaged = 0;
  for (long step = 0; step < options_.local_steps; ++step) {
    const Eigen::VectorXd mean = p.head(G), log_sd = p.segment(G, G);
    const Eigen::VectorXd sd = log_sd.array().exp();
    gp::unflatten(p.segment(2 * G, F), &pseudo);
    if (Zn) zp = Eigen::Map<const Eigen::MatrixXd>(p.data() + 2 * G + F, z_point.rows(), z_point.cols());
    Eigen::MatrixXd xb;
    Eigen::VectorXd yb;
    double scale = 1;
    if (minibatch) {
      for (Eigen::Index i = 0; i < options_.batch_size; ++i)
        std::swap(order[size_t(i)], order[size_t(i + Eigen::Index(rng.uniform_int(uint64_t(n - i))))]);
      const std::vector<Eigen::Index> rows(order.begin(), order.begin() + options_.batch_size);
      xb = x_(rows, Eigen::all);
      yb = y_(rows);
      scale = double(n) / double(options_.batch_size);
    }
    const gp::SiloRows silo_rows{minibatch ? &xb : &x_, minibatch ? &yb : &y_, scale};
    Eigen::VectorXd grad = Eigen::VectorXd::Zero(p.size());
    double value = 0;
    long used = 0;
    for (long s = 0; s < options_.mc_samples; ++s) {
      const Eigen::VectorXd eps = rng.normal(G, 1).col(0);
      const Eigen::VectorXd theta = mean + sd.cwiseProduct(eps);
      const gp::GpDraw draw = layout_.draw(theta, &zp);
      gp::GpDrawAdjoint adjoint(draw, pseudo);
      try {
        value += gp::local_free_energy(draw, silo_rows, cavity_factors, pseudo, options_.jitter, &adjoint).value();
      } catch (const InvalidArgument&) {
        ++failed;  // a draw whose matrices are not positive definite: left out of this step
        continue;
      }
      Eigen::VectorXd theta_bar = Eigen::VectorXd::Zero(G);
      Eigen::MatrixXd z_bar = Eigen::MatrixXd::Zero(zp.rows(), zp.cols());
      layout_.add_adjoint(adjoint, &theta_bar, &z_bar);
      grad.head(G) += theta_bar;
      grad.segment(G, G) += theta_bar.cwiseProduct(sd).cwiseProduct(eps);
      grad.segment(2 * G, F) += adjoint.factor;
      if (Zn) grad.tail(Zn) += Eigen::Map<const Eigen::VectorXd>(z_bar.data(), Zn);
      ++used;
    }
    if (used == 0) continue;
    grad /= double(used);
    value /= double(used);
    Eigen::VectorXd mean_bar = Eigen::VectorXd::Zero(G), log_sd_bar = Eigen::VectorXd::Zero(G);
    value -= weighted_kl(mean, log_sd, cavity, weights, &mean_bar, &log_sd_bar);
    grad.head(G) -= mean_bar;
    grad.segment(G, G) -= log_sd_bar;
    if (hold_theta) grad.head(2 * G).setZero();
    if (!grad.allFinite()) {
      ++failed;
      continue;
    }
    if (step >= tail_from) tail_sum += value, ++tail_count;
    adam.step(p, -grad);
    // The update is the average of the last half of the iterates (Polyak-Ruppert), not the last
    // one: Adam's noise would otherwise move every factor a little each round.
    if (step >= average_from) {
      ++averaged;
      average += (p - average) / double(averaged);
    }
  }
  if (averaged > 0) p = average;
  if (failed * 2 > options_.local_steps * options_.mc_samples)
    throw ModelError("sparse GP silo " + std::to_string(silo_) + ": " + std::to_string(failed) +
                     " of its draws had a kernel matrix that is not positive definite; raise jitter");
  SparseGpUpdate out;
  const Eigen::VectorXd mean = p.head(G);
  // The factor's precision is kept >= 0 coordinate by coordinate: where the local q came out wider
  // than the cavity (Adam's noise, on a coordinate the silo's data barely informs), q keeps the
  // cavity's precision and its own mean. Then every cavity is at least as precise as the prior, so
  // no silo is ever handed an improper one (whose KL would reward an infinitely wide q).
  const Eigen::VectorXd precision = (-2 * p.segment(G, G)).array().exp().max((-2 * cavity.eta2).array()).matrix();
  const DiagNatural local{mean.cwiseProduct(precision), -0.5 * precision};
  out.factor = DiagNatural{local.eta1 - cavity.eta1, local.eta2 - cavity.eta2};
  gp::unflatten(p.segment(2 * G, F), &pseudo);
  out.pseudo = pseudo;
  if (Zn) out.z_point = Eigen::Map<const Eigen::MatrixXd>(p.data() + 2 * G + F, z_point.rows(), z_point.cols());
  out.free_energy = tail_count ? tail_sum / double(tail_count) : std::nan("");
  return out;
}

Eigen::MatrixXd evaluation_draws(const DiagNatural& q, const SparseGpOptions& options, uint32_t) {
  // The same noise every round (common random numbers): the objective's change from one round to
  // the next is q's, not the draws'.
  const MeanFieldGaussian<double> d = to_mean_field(q);
  CounterRng rng(RngKey{options.seed, 0, 0, kEvaluationStream});
  const Eigen::MatrixXd eps = rng.normal(q.dim(), options.evaluation_draws);
  return (eps.array().colwise() * d.sd().array()).colwise() + d.mean().array();
}

namespace {

// Per draw (column of theta): the latent predictive at x and the noise variance.
template <class Visit>
void for_each_draw(const SparseGpLayout& layout, const Eigen::MatrixXd& theta,
                   const std::vector<gp::PseudoObservationFactor>& all, const Eigen::MatrixXd& z_point, double jitter,
                   const Eigen::MatrixXd& x, Visit visit) {
  const auto factors = pointers(all);
  for (Eigen::Index s = 0; s < theta.cols(); ++s) {
    const gp::GpDraw draw = layout.draw(theta.col(s), &z_point);
    const gp::InducingPosterior q = gp::inducing_posterior(draw.z, draw.kernel, jitter, factors);
    visit(s, gp::predict_latent(q, draw.z, draw.kernel, x), std::exp(2 * draw.log_noise_sd));
  }
}

}  // namespace

SparseGpClient::Evaluation SparseGpClient::evaluate(uint32_t round, const DiagNatural& q,
                                                    const std::vector<gp::PseudoObservationFactor>& all,
                                                    const Eigen::MatrixXd& z_point) const {
  const Eigen::MatrixXd theta = evaluation_draws(q, options_, round);
  const Eigen::Index S = theta.cols(), n = y_.size();
  Eigen::MatrixXd log_density(n, S);
  double ell = 0;
  for_each_draw(layout_, theta, all, z_point, options_.jitter, x_,
                [&](Eigen::Index s, const gp::LatentPredictive& p, double sigma2) {
                  const Eigen::ArrayXd r2 = (y_ - p.mean).array().square();
                  ell += (-0.5 * (kLogTwoPi + std::log(sigma2)) - (r2 + p.variance.array()) / (2 * sigma2)).sum();
                  const Eigen::ArrayXd v = p.variance.array() + sigma2;
                  log_density.col(s) = (-0.5 * (kLogTwoPi + v.log()) - r2 / (2 * v)).matrix();
                });
  Evaluation e;
  e.expected_log_likelihood = ell / double(S);
  for (Eigen::Index i = 0; i < n; ++i) e.predictive_log_density += log_mean_exp(log_density.row(i).transpose());
  return e;
}

PredictiveScore predictive_score(const SparseGpLayout& layout, const Eigen::MatrixXd& theta,
                                 const std::vector<gp::PseudoObservationFactor>& all, const Eigen::MatrixXd& z_point,
                                 double jitter, const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  const Eigen::Index S = theta.cols(), n = y.size();
  Eigen::MatrixXd log_density(n, S);
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(n), second = Eigen::VectorXd::Zero(n);
  for_each_draw(layout, theta, all, z_point, jitter, x, [&](Eigen::Index s, const gp::LatentPredictive& p, double sigma2) {
    const Eigen::ArrayXd v = p.variance.array() + sigma2;
    log_density.col(s) = (-0.5 * (kLogTwoPi + v.log()) - (y - p.mean).array().square() / (2 * v)).matrix();
    mean += p.mean / double(S);
    second += (v + p.mean.array().square()).matrix() / double(S);  // E[y^2] of this draw's Gaussian
  });
  PredictiveScore score;
  score.mean = mean;
  score.sd = (second - mean.cwiseAbs2()).cwiseMax(0.0).cwiseSqrt();
  for (Eigen::Index i = 0; i < n; ++i) score.log_density += log_mean_exp(log_density.row(i).transpose()) / double(n);
  score.rmse = std::sqrt((y - mean).squaredNorm() / double(n));
  return score;
}

SparseGpServer::SparseGpServer(SparseGpLayout layout, DiagNatural prior, int silos, SparseGpOptions options,
                               Eigen::MatrixXd z_point)
    : layout_(std::move(layout)),
      prior_(std::move(prior)),
      options_(std::move(options)),
      factors_(size_t(silos), DiagNatural::zero(layout_.dim)),
      pseudo_(size_t(silos)),
      z_point_(std::move(z_point)) {
  if (const std::string p = layout_.problem(); !p.empty()) throw ModelError("sparse GP: " + p);
  if (prior_.dim() != layout_.dim || !is_valid(prior_))
    throw ModelError("sparse GP: the prior of the global parameters must be a proper Gaussian on their unconstrained scale");
  if (layout_.z_shared_point && (z_point_.rows() != layout_.inducing || z_point_.cols() != layout_.dimensions))
    throw ModelError("sparse GP: the shared inducing inputs must be " + std::to_string(layout_.inducing) + " x " +
                     std::to_string(layout_.dimensions));
  // The starting q (seed 003 App. D: "all precisions 100"): sd init_sd in every coordinate, the
  // hyperparameters at their prior means, each random inducing input at its own draw from its
  // prior (all at the prior mean, they would coincide and K_ZZ would be singular). Each silo's
  // factor holds 1/K of the step from the prior to it, so every factor's precision is >= 0.
  if (options_.init_sd > 0 && layout_.dim > 0) {
    const MeanFieldGaussian<double> p = to_mean_field(prior_);
    Eigen::VectorXd mean = p.mean();
    if (layout_.z.random()) {
      CounterRng rng(RngKey{options_.seed, 0, 0, rng_stream::kInitialisation});
      mean.segment(layout_.z.offset, layout_.z.count) += p.sd().segment(layout_.z.offset, layout_.z.count).cwiseProduct(
          rng.normal(layout_.z.count, 1).col(0));
    }
    const Eigen::VectorXd precision = p.sd().cwiseInverse().cwiseAbs2().cwiseMax(1 / (options_.init_sd * options_.init_sd));
    const DiagNatural start{mean.cwiseProduct(precision), -0.5 * precision};
    for (DiagNatural& t : factors_)
      t = DiagNatural{(start.eta1 - prior_.eta1) / double(silos), (start.eta2 - prior_.eta2) / double(silos)};
  }
}

DiagNatural SparseGpServer::posterior() const {
  DiagNatural q = prior_;
  for (const DiagNatural& t : factors_) q.eta1 += t.eta1, q.eta2 += t.eta2;
  return q;
}

std::vector<gp::PseudoObservationFactor> SparseGpServer::others(int k) const {
  std::vector<gp::PseudoObservationFactor> out;
  for (size_t j = 0; j < pseudo_.size(); ++j)
    if (int(j) != k && pseudo_[j]) out.push_back(*pseudo_[j]);
  return out;
}

std::vector<gp::PseudoObservationFactor> SparseGpServer::all() const { return others(-1); }

std::string SparseGpServer::accept(int k, const SparseGpUpdate& u, double damping, Eigen::Index rows_k,
                                   Eigen::Index rows_total) {
  const Eigen::Index G = layout_.dim;
  if (u.factor.dim() != G || !u.factor.eta1.allFinite() || !u.factor.eta2.allFinite())
    return "its factor over the global parameters has the wrong size or a non-finite value";
  const gp::PseudoObservationFactor& f = u.pseudo;
  if (f.form != options_.form) return "its factor over u is of the other form";
  if (f.form == gp::FactorForm::Dpo) {
    if (f.targets.size() < 1 || f.targets.size() > options_.pseudo_cap || f.inputs.rows() != f.targets.size() ||
        f.inputs.cols() != layout_.dimensions || f.log_noise.size() != f.targets.size())
      return "its pseudo-observations have the wrong sizes";
    if (!f.inputs.allFinite() || !f.targets.allFinite() || !f.log_noise.allFinite() ||
        f.log_noise.cwiseAbs().maxCoeff() > 50)
      return "its pseudo-observations hold a non-finite value or a pseudo-noise outside e^-50 .. e^50";
  } else if (f.h.size() != layout_.inducing || f.chol.rows() != layout_.inducing || f.chol.cols() != layout_.inducing ||
             !f.h.allFinite() || !f.chol.allFinite()) {
    return "its factor over u has the wrong size or a non-finite value";
  }
  if (layout_.z_shared_point && (u.z_point.rows() != layout_.inducing || u.z_point.cols() != layout_.dimensions ||
                                 !u.z_point.allFinite()))
    return "its inducing inputs have the wrong size or a non-finite value";
  DiagNatural next = factors_[size_t(k)];
  next.eta1 += damping * (u.factor.eta1 - next.eta1);
  next.eta2 += damping * (u.factor.eta2 - next.eta2);
  DiagNatural q = prior_;
  for (size_t j = 0; j < factors_.size(); ++j) {
    const DiagNatural& t = int(j) == k ? next : factors_[j];
    q.eta1 += t.eta1, q.eta2 += t.eta2;
  }
  if (!is_valid(q)) return "it would make the global posterior improper";
  factors_[size_t(k)] = next;
  pseudo_[size_t(k)] = f;
  if (layout_.z_shared_point) {
    const double w = double(rows_k) / double(std::max<Eigen::Index>(rows_total, 1));  // seed 003 Alg. 1 line 12
    z_point_ = (1 - w) * z_point_ + w * u.z_point;
  }
  return "";
}

double SparseGpServer::kl_part(uint32_t round) const {
  const DiagNatural q = posterior();
  const Eigen::MatrixXd theta = evaluation_draws(q, options_, round);
  const std::vector<gp::PseudoObservationFactor> everything = all();
  const auto factors = pointers(everything);
  double kl_u = 0;
  for (Eigen::Index s = 0; s < theta.cols(); ++s) {
    const gp::GpDraw draw = layout_.draw(theta.col(s), &z_point_);
    const gp::InducingPosterior p = gp::inducing_posterior(draw.z, draw.kernel, options_.jitter, factors);
    // KL(N(K a, K A^-1 K) || N(0, K)) = 1/2 [tr(A^-1 K) + a' K a - M + log|A| - log|K|]
    const double log_det_a = 2 * p.a_chol.matrixLLT().diagonal().array().log().sum();
    const double log_det_k = 2 * p.k_chol.matrixLLT().diagonal().array().log().sum();
    kl_u += 0.5 * (p.a_chol.solve(p.k_zz).trace() + p.a.dot(p.k_zz * p.a) - double(layout_.inducing) + log_det_a -
                   log_det_k);
  }
  const MeanFieldGaussian<double> d = to_mean_field(q);
  const Eigen::VectorXd log_sd = d.sd().array().log();
  return kl_u / double(theta.cols()) +
         weighted_kl(d.mean(), log_sd, prior_, layout_.kl_weights(options_.auxiliary_weight), nullptr, nullptr);
}

std::vector<double> SparseGpServer::state() const {
  std::vector<double> out;
  auto put = [&](const Eigen::VectorXd& v) { out.insert(out.end(), v.data(), v.data() + v.size()); };
  for (const DiagNatural& t : factors_) put(t.eta1), put(t.eta2);
  for (const auto& f : pseudo_) {
    out.push_back(f ? double(f->size()) : 0.0);
    if (f) put(gp::flatten(*f));
  }
  put(Eigen::Map<const Eigen::VectorXd>(z_point_.data(), z_point_.size()));
  return out;
}

void SparseGpServer::restore(const std::vector<double>& state) {
  size_t at = 0;
  auto take = [&](Eigen::Index n) {
    if (n < 0 || at + size_t(n) > state.size()) throw std::invalid_argument("sparse GP checkpoint: too short");
    Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(state.data() + at, n);
    at += size_t(n);
    return v;
  };
  const Eigen::Index G = layout_.dim;
  for (DiagNatural& t : factors_) t.eta1 = take(G), t.eta2 = take(G);
  for (auto& f : pseudo_) {
    const double size = take(1)[0];
    if (size < 0 || size > double(std::max<long>(options_.pseudo_cap, long(layout_.inducing))) || size != std::floor(size))
      throw std::invalid_argument("sparse GP checkpoint: a factor's size is out of range");
    if (size == 0) {
      f.reset();
      continue;
    }
    gp::PseudoObservationFactor g = options_.form == gp::FactorForm::Dpo
                                        ? gp::initial_dpo(Eigen::MatrixXd::Zero(Eigen::Index(size), layout_.dimensions))
                                        : gp::initial_cpo(layout_.inducing);
    gp::unflatten(take(g.parameter_count()), &g);
    f = g;
  }
  const Eigen::VectorXd z = take(z_point_.size());
  z_point_ = Eigen::Map<const Eigen::MatrixXd>(z.data(), z_point_.rows(), z_point_.cols());
  if (at != state.size()) throw std::invalid_argument("sparse GP checkpoint: " + std::to_string(state.size() - at) + " extra values");
}

}  // namespace fvi::engine
