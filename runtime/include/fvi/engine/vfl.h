#pragma once
// Vertical federated VI with auxiliary variables (seed 004): the augmented-variable model
// (Algorithm 1) and the power-likelihood model (Algorithm 2), for models with `split data` and
// `split` parameters whose likelihood meets the silos through one `silo_sum`.
//
// Silo k holds its columns x_k, its block theta_k (q(theta_k) mean-field Gaussian), its point-
// estimated `split` hyperparameters h_k, and q(z_k | theta_k) over one auxiliary value per row,
//     z_ik ~ N(m_ik, rho^2),   m_k = g_k(x_k, theta_k, h_k)   (the silo_sum operand; seed 004 Eq. 6),
// either mean-field (2N parameters) or amortised (fvi/family/amortized_gaussian.h). The server
// holds the `global` parameters (q mean-field) and, in the augmented model, the labels.
//
// ELBO (seed 004 §3.1, §3.2; per draw, STL, except that with mean-field q(z) the coupling's
// expectation over q(z) and the entropies of q(z) and q(theta_k) are taken in closed form):
//   augmented:  L0 = log p(y | globals, sum_k z_k) + log p(globals) - log q(globals)      server
//               Lk = sum_i [log N(z_ik; m_ik, rho) - log q(z_ik | theta_k)]
//                    + log p(theta_k, h_k) - log q(theta_k)                               silo k
//   power:      the likelihood is (1/J) sum_k log p(y | globals, m_k + sum_{j != k} z_j), term k
//               evaluated by silo k; the global prior and entropy stay on the server.
// Each silo keeps the noise behind the z it sent and reuses it when the server's gradient comes
// back (seed 004 §3.1, "Implementation trick"), so the federated gradient is exactly the
// gradient of the pooled ELBO estimator at the same noise.
//
// vfl_exact may instead fit one joint Gaussian over the globals and every silo's block
// (family = fullrank, fvi/family/joint_gaussian_rows.h): party k holds its rows of the Cholesky
// factor, every party draws the same noise (joint_noise), and the entropy is the sum of the
// parties' log diagonals. It holds the posterior's correlations across silos (columns correlated
// across banks) that mean-field drops. set_layout() switches a party to it before the first step.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fvi/engine/bound_factor.h"
#include "fvi/engine/mode.h"
#include "fvi/engine/settings.h"
#include "fvi/family/amortized_gaussian.h"
#include "fvi/family/joint_gaussian_rows.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/optim/adam.h"
#include "fvi/optim/parameter_average.h"
#include "fvi/optim/stationarity_watch.h"

namespace fvi::engine {

struct VflOptions {
  bool power = false;       // method = vfl_power (Alg. 2) instead of vfl_augmented (Alg. 1)
  double rho = 1.0;         // sd of the coupling z_ik ~ N(m_ik, rho^2)
  bool amortized = false;   // q_z = amortized (else mean-field)
  // q_z = none, and method = vfl_exact: no z; silo k sends m_k itself (its partial predictor eta_k),
  // and the server's likelihood is the written model's (the exact split-predictor decomposition).
  bool auxiliary = true;
  bool exact = false;       // method = vfl_exact
  long width = 16, depth = 1;
  // q_z_offset = residual (the default): the amortised network's mean offsets are taken off their
  // least-squares fit on (1, m_k) over the silo's rows, so z's level and scale stay b's and theta's.
  bool residual_offset = true;
  double lr = 0.01;
  long mc_samples = 1;
  long local_steps = 1;     // silo steps per iteration; steps after the first hold z fixed
  double init_sd = 0.135;   // initial sd of q(theta), q(globals) and q(z)
  double hyper_init_sd = 0.1;  // split hyperparameters (a network body) start N(0, this^2)
  uint64_t seed = 1;
  // q(theta): "meanfield", "fullrank" (one joint Gaussian across the parties; vfl_exact only) or
  // "auto" (fullrank for vfl_exact up to kJointAutoLimit parameters in all, else meanfield).
  std::string family = "auto";
  // center = on: vfl_exact fits a marked intercept of `b + silo_sum(...)` at the centred sum
  // (silo_sum_intercept).
  bool center = true;

  // `method`: vfl_exact, vfl_augmented or vfl_power.
  static VflOptions from(const Settings& settings, const std::string& method);
};

// family = auto takes the joint family up to this many parameters over all parties (its rows cost
// party k p_k x (offset_k + p_k) numbers and every party draws total x S normals per iteration).
constexpr Eigen::Index kJointAutoLimit = 200;
// Whether the parties fit the joint family, given the method's options and the total dimension.
bool use_joint_family(const VflOptions& options, Eigen::Index total);

// vfl_exact with center = on: the offset among the globals of the real b the compiler marked as
// added to `silo_sum(...)` alone (fvi_variable_info.centring_data "silo_sum"), else -1. The
// server then fits b_c = b + mean_n s_n, s = the silos' summed partial predictors, and evaluates
// the written model at b = b_c - mean_n s_n: a change of the fit's coordinates with unit
// Jacobian, so the same posterior, with b_c nearly independent of the silos' blocks where b
// alone trades off against them along a ridge (raw covariates far from 0).
Eigen::Index silo_sum_intercept(const fvi_model& model, const fvi_data& data, const VflOptions& options);
// The model's index of that intercept's variable (what a silo needs to know: predictive_z), or -1.
int silo_sum_intercept_variable(const fvi_model& model, const VflOptions& options);

// Whether a split prior reads a global parameter (`beta ~ normal(0, tau)`, tau global): the
// server then sends the globals' draws with each adjoint and takes back the priors' gradient in
// them (VflSilo::set_prior_globals; vfl_exact only, analysis/plan.cpp).
bool split_priors_read_globals(const fvi_model& model);

// The noise every party of the joint family draws in `round` of `stream` (total x draws): the
// same numbers on every party, each reading its first offset + p rows.
Eigen::MatrixXd joint_noise(uint64_t seed, uint32_t round, uint32_t stream, Eigen::Index total, long draws);

// The pieces of one silo's ELBO gradient that depend on the other parties (what crosses the
// network), and the silo's own term of the ELBO estimate.
struct VflSiloStep {
  double elbo_term = 0;
};

class VflServer {
 public:
  // `data`: public and server data. In the augmented model the coupling likelihood is bound here.
  VflServer(const fvi_model& model, const fvi_data& data, VflOptions options, int silos);

  Eigen::Index global_dim() const { return global_dim_; }
  int64_t rows() const { return rows_; }
  // The centred intercept's offset among the globals (silo_sum_intercept), or -1.
  Eigen::Index intercept() const { return intercept_; }
  const std::string& intercept_name() const { return intercept_name_; }
  // The written globals at draws of the fit's (global x S), given the summed partial predictors
  // s (rows x S) of the same draws: b = b_c - mean_n s_n; the fit's own where nothing is centred.
  Eigen::MatrixXd written(const Eigen::MatrixXd& fit, const Eigen::MatrixXd& s) const;
  // The joint family (every party's rows, `total` parameters in all), before the first step.
  void set_layout(bool joint, Eigen::Index total);
  bool joint() const { return joint_; }
  Eigen::Index joint_total() const { return total_; }
  double log_det() const { return joint_ ? joint_q_.log_det() : 0.0; }  // the server's rows' part of log det L
  // q(globals) in either family: means and sds (unconstrained), the optimiser's parameters.
  Eigen::VectorXd mean() const { return joint_ ? joint_q_.mean() : q_.mean(); }
  Eigen::VectorXd sd() const { return joint_ ? joint_q_.sd() : q_.sd(); }
  Eigen::VectorXd params() const { return joint_ ? joint_q_.params() : q_.params(); }
  void set_params(const Eigen::VectorXd& params);
  // The noise behind `draws` output draws of key `key` and stream `stream`: the globals' own (party
  // 0) or, in the joint family, the joint noise every silo draws for the same key.
  Eigen::MatrixXd output_noise(uint64_t key, uint32_t stream, long draws) const;
  // log q(globals) of the globals' own marginal at draws from `eps` (output_noise).
  Eigen::VectorXd marginal_log_q(const Eigen::MatrixXd& eps) const;
  // Multiplies the step size of later steps (the stopping rule's decay).
  void set_step_scale(double scale) { adam_.set_scale(scale); }
  // The draws per gradient (the stopping rule may multiply them, ConvergenceOptions).
  long mc_samples() const { return options_.mc_samples; }
  void set_mc_samples(long draws) { options_.mc_samples = draws; }
  // The written model's log p(b) + log p(y | b + eta) at draws b (global x S) and eta = the sum
  // of the silos' partial predictors (rows x S); false where the server could not bind the
  // likelihood (it reads data only the silos hold).
  bool log_joint(const Eigen::MatrixXd& b, const Eigen::MatrixXd& eta, Eigen::VectorXd& log_p);

  // vfl_exact, before the first iteration: q(globals) set at the mode of the server's own terms (its
  // priors and the likelihood) with the silos' partial predictors at their start, 0 (every split
  // mean starts at 0), and the Laplace sds there, when a mode is found (fvi/engine/mode.h). The
  // likelihood's location and scale (an intercept at y's mean, a residual sd at y's) then need no
  // travel. Returns the search's outcome; q is unchanged when it found none.
  Mode start_at_mode();
  // The linear predictor's scale at q's mean with the predictors at 0: 1 / sqrt(the mean over the
  // rows of -d^2 log p(y_n | b, eta_n) / d eta_n^2) (sigma for a normal likelihood, 2 for a logit
  // at p = 1/2), by central differences of the likelihood's adjoint; 1 where the curvature is not
  // positive and finite. The silos' split coefficients step at this scale (VflSilo::set_outcome_scale).
  double outcome_scale();

  // The global draws of `iteration` (n_G x S, from the server's noise stream).
  Eigen::MatrixXd global_noise(uint32_t iteration) const;
  Eigen::MatrixXd globals(const Eigen::MatrixXd& eps) const { return joint_ ? joint_q_.sample(eps) : q_.sample(eps); }
  // The squared norm of the server's own rows of noise `eps` per draw (the joint family's first
  // global_dim rows; all of its own noise otherwise), and the log determinant of its rows' factor:
  // its parts of the whitened distance and the log det of a proposal around q (the tail check).
  Eigen::VectorXd own_noise_norm2(const Eigen::MatrixXd& eps) const;
  double own_log_det() const;

  // Augmented model, Alg. 1 steps 4-6: from the summed z (N x S), the gradient G = dL0/dz_sum
  // (N x S; the same for every silo) and the server's gradient with respect to q(globals).
  // Returns L0's estimate.
  double augmented_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& z_sum, Eigen::MatrixXd& G,
                            Eigen::VectorXd& d_params);
  // The server's own terms: log p(globals) - log q(globals) (STL), given the globals' adjoint
  // from the likelihood (n_G x S, summed over silos in the power model). Returns their estimate.
  double prior_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& d_globals, Eigen::VectorXd& d_params);
  // The gradient w.r.t. q(globals)'s parameters of sum_s d_globals_s . globals(eps)_s / S: the
  // silos' split priors' part, which reads the globals' draws of `eps` (no entropy term).
  Eigen::VectorXd path_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& d_globals) const;
  // One Adam step on q(globals) with the ELBO gradient d_params.
  void step(const Eigen::VectorXd& d_params);
  // q(globals) and its Adam's state, for a checkpoint.
  Eigen::VectorXd checkpoint() const;
  void restore(const Eigen::VectorXd& state);

 private:
  // log p(globals) of the server's priors at draws b (global x S), per draw; adds their gradient
  // with respect to b to db.
  Eigen::VectorXd add_priors(const Eigen::MatrixXd& b, Eigen::MatrixXd& db);
  // The gradient with respect to q(globals)'s parameters, from the adjoint db of the fit's draws
  // (eps, draws b) and the log densities log_p per draw; returns the estimate of E[log_p - log q].
  double q_gradient(const Eigen::MatrixXd& eps, const Eigen::MatrixXd& b, Eigen::MatrixXd db,
                    const Eigen::VectorXd& log_p, Eigen::VectorXd& d_params);

  VflOptions options_;
  int silos_;
  Eigen::Index global_dim_ = 0, intercept_ = -1;
  std::string intercept_name_;
  int64_t rows_ = 0;
  std::vector<std::unique_ptr<BoundFactor>> prior_;  // server_density
  std::unique_ptr<BoundFactor> likelihood_;  // the written likelihood: the augmented model's coupling; the power model's, for log_joint only
  MeanFieldGaussian<double> q_;
  bool joint_ = false;
  Eigen::Index total_ = 0;
  JointGaussianRows joint_q_;  // the joint family: the server's rows (offset 0)
  Adam<double> adam_;
};

class VflSilo {
 public:
  // `data`: this silo's split data with the public data. In the power model the coupling
  // likelihood is bound here too (its data must be public).
  VflSilo(const fvi_model& model, const fvi_data& data, int silo, int silos, VflOptions options);

  int silo() const { return silo_; }
  int64_t rows() const { return rows_; }
  Eigen::Index split_dim() const { return split_dim_; }
  Eigen::Index hyper_dim() const { return hyper_dim_; }
  const Eigen::VectorXd& step_scales() const { return step_scales_; }  // contribution_scales() / outcome factor
  // The server's outcome_scale(): where the silo's partial predictor is linear in its coefficients
  // (contribution_scales applied), each coefficient steps max(1, scale / kOutcomeScaleUnit) times
  // larger in Adam's coordinates (step_scales_ divided by it), and before the first step q's
  // starting sds grow with it: an outcome of sd 270 puts standardised coefficients in the
  // hundreds, which steps of 0.01 would take tens of thousands of iterations to reach. Nothing
  // else moves.
  void set_outcome_scale(double scale);
  // Up to this scale the steps stay as they are: Adam's default steps of 0.01 cross a predictor's
  // range of 10 in about a thousand iterations, and larger steps add jitter the stopping rule
  // must average away (a scale of 2, steps doubled: 12,100 iterations where 4,600 did).
  static constexpr double kOutcomeScaleUnit = 10;
  double outcome_factor() const { return outcome_factor_; }
  // [q(theta) params; h; q(z) params (mean-field mu, log sd, or the network)]
  const Eigen::VectorXd& params() const { return params_; }
  void set_params(const Eigen::VectorXd& params);
  MeanFieldGaussian<double> q_theta() const;  // the mean-field family's q(theta_k)
  // The joint family: this silo's rows start at `offset` of `total` (before the first proposal;
  // resets q(theta_k) to its start when the layout changes).
  void set_layout(bool joint, Eigen::Index offset, Eigen::Index total);
  bool joint() const { return joint_; }
  JointGaussianRows joint_q() const;  // q(theta_k)'s rows at the current parameters
  // q(theta_k) in either family: means and marginal sds; draws from the noise of
  // theta_noise(key, stream, draws) and the log density of its marginal at them.
  Eigen::VectorXd theta_mean() const;
  Eigen::VectorXd theta_sd() const;
  Eigen::MatrixXd theta_noise(uint64_t key, uint32_t stream, long draws) const;
  Eigen::MatrixXd theta_draws(const Eigen::MatrixXd& eps) const;
  Eigen::VectorXd theta_log_q(const Eigen::MatrixXd& theta) const;
  // As VflServer's: this silo's rows of noise `eps` (theta_noise's), and its rows' log det.
  Eigen::VectorXd own_noise_norm2(const Eigen::MatrixXd& eps) const;
  double own_log_det() const;
  Eigen::VectorXd hyper() const { return params_.segment(theta_params(), hyper_dim_); }

  // The draws per gradient, S (the server's schedule may change them between proposals).
  long mc_samples() const { return options_.mc_samples; }
  void set_mc_samples(long draws) { options_.mc_samples = draws; }
  // Alg. 1 step 14 / Alg. 2 step 21: draws theta_k and z_k for `iteration` with fresh noise,
  // keeps the noise, and returns z_k (N x S).
  const Eigen::MatrixXd& propose(uint32_t iteration);
  // The noise behind the last proposal: eps (p_k x S) of theta_k, tau (N x S) of z_k.
  const Eigen::MatrixXd& kept_theta_noise() const { return eps_; }
  const Eigen::MatrixXd& kept_z_noise() const { return tau_; }
  // Power model, Alg. 2 step 9: with the globals' draws and the sum of the other silos' z
  // (N x S), evaluates this silo's likelihood term (weight 1/J). Returns H_k = d term / d z_sum
  // (N x S: the gradient the server passes to every other silo) and adds the term's gradient
  // with respect to the globals to d_globals (n_G x S).
  Eigen::MatrixXd power_message(const Eigen::MatrixXd& globals, const Eigen::MatrixXd& others_z,
                                Eigen::MatrixXd& d_globals, double& likelihood_term);
  // Whether its split priors read global parameters (`beta ~ normal(0, tau)`, tau global;
  // vfl_exact): the server then sends the globals' draws paired with each proposal's
  // (set_prior_globals, global_dim x S) before the gradient, and takes back the priors'
  // gradient in them (prior_globals_gradient); log_joint_at reads them too.
  bool prior_reads_globals() const { return prior_reads_globals_; }
  Eigen::Index global_dim() const { return global_dim_; }
  void set_prior_globals(const Eigen::MatrixXd& globals) { prior_globals_ = globals; }
  const Eigen::MatrixXd& prior_globals_gradient() const { return d_prior_globals_; }
  // The gradient of this silo's ELBO term at the kept noise (seed 004 Eqs. 11-13, 15-17), given
  // the adjoint of z_k from the other parties (G, or sum_{j != k} H_j). Returns the term's
  // estimate (the power model's own likelihood term included).
  double gradient(const Eigen::MatrixXd& z_adjoint, Eigen::VectorXd& d_params);
  // Alg. 1 steps 9-13: the gradient above and one Adam step; then local_steps - 1 steps on
  // (theta_k, h_k) with z_k held at the value sent (given z, the rest of the ELBO does not
  // involve them). Returns the term's estimate.
  double update(const Eigen::MatrixXd& z_adjoint, uint32_t iteration);

  // For held-out rows (`test`: this silo's columns of them): S draws of z_k* ~ N(m_k*, rho^2),
  // theta_k ~ q (the coupling's prior for rows never fitted; m_k* itself with q_z = none). With a
  // centred intercept (silo_sum_intercept_variable), m_k* minus the mean of m_k over the silo's training rows
  // at the same draw: the server adds them to the fit's b_c, and b_c - sum_k mean(m_k) = b.
  Eigen::MatrixXd predictive_z(const fvi_model& model, const fvi_data& test, long draws, uint64_t key) const;

  // The silo's part of the written model's log joint at `draws` draws of theta_k ~ q (noise from
  // `key`): its partial predictor eta_k = m_k (rows x draws), log p(theta_k) of its split priors
  // and log q(theta_k), per draw. The server adds its prior and log p(y | b + sum_k eta_k). In the
  // joint family log_q is this silo's part of log q: -(its log diagonal), the same for every draw;
  // the server adds the rest (-|eps|^2 / 2 - total log(2 pi) / 2 and its own diagonal).
  struct LogJointPart {
    Eigen::MatrixXd eta;
    Eigen::VectorXd log_prior, log_q;
  };
  LogJointPart log_joint_part(uint64_t key, long draws, const Eigen::MatrixXd& globals);
  // eta_k and log p(theta_k) at any draws theta (p_k x S) of the block (log_q left empty), the
  // globals' draws paired with them where the priors read globals (else empty).
  LogJointPart log_joint_at(const Eigen::MatrixXd& theta, const Eigen::MatrixXd& globals);

  // The server's stopping rule on this silo's parameters: the step size's multiplier, and at a
  // new averaging epoch a new average of them from the next update on; use_average() at the end.
  void set_schedule(double step_scale, long epoch);
  void use_average();
  // Whether q(theta_k)'s means and sds have settled over the averaging phase's windows (asked once
  // the server's q has: fvi/optim/stationarity_watch.h). q(z_k)'s parameters are not judged: they
  // are the augmentation's, and the split block is what the silo reports.
  WindowJudgement block_settled(double tol_param) const;

  // The silo's parameters, its Adam's state and the iteration of its last proposal, for a
  // checkpoint; restore() draws that proposal again (its noise is a function of the iteration).
  Eigen::VectorXd checkpoint() const;
  void restore(const Eigen::VectorXd& state);

 private:
  // Throws where the priors read the globals and `globals` (their draws) are not global_dim x draws.
  void check_prior_globals(const Eigen::MatrixXd& globals, long draws) const;
  // Rebinds the kept draws' derived values (theta, m, q(z) outputs, z) from the kept noise.
  void evaluate_kept();
  double local_only_step(uint32_t iteration, long step);
  // One Adam step along -descent, taken in step coordinates (step_scales_): q(theta_k)'s means,
  // and in the joint family each row of L_k, times its parameter's scale; the step limits (means
  // and L_k's entries left of the diagonal by their row's sd: fvi/optim/step_limit.h) with them.
  void adam_step(const Eigen::VectorXd& descent);
  // Each split parameter's scale in this silo's rows: the sd over the rows of d m_i / d theta_j
  // (about its mean where the intercept is centred; the root mean square otherwise), x's column
  // sd for x * beta, where m is linear in theta and the silo has no split hyperparameters; 1
  // where it is under 1 or m is not linear. Estimated from J^T a at random a (E (J^T a)_j^2 =
  // sum_i J_ij^2), at two theta to see that J does not move.
  Eigen::VectorXd contribution_scales();
  // Multipliers of params_ into step coordinates (1 but at the means and the joint rows of a
  // parameter whose scale exceeds 1), for the current family.
  Eigen::VectorXd step_multipliers() const;
  // The theta_k and h_k parts of the gradient given the adjoint of m_k (N x S).
  double theta_gradient(const Eigen::MatrixXd& a_m, Eigen::VectorXd& d_params);
  // Mean-field q(z) with mean-field q(theta_k): z's means are offsets from m_k at q's mean.
  bool centred_z() const { return options_.auxiliary && !options_.amortized && !joint_; }
  // m_k at q(theta_k)'s mean and the current h_k (N x 1); the contribution's last forward.
  Eigen::MatrixXd contribution_at_mean();
  // The number of q(theta_k)'s parameters at the front of params_.
  Eigen::Index theta_params() const { return joint_ ? joint_q_.params().size() : 2 * split_dim_; }

  int silo_, silos_;
  VflOptions options_;
  bool centred_intercept_ = false;  // silo_sum_intercept_variable >= 0
  Eigen::Index split_dim_ = 0, hyper_dim_ = 0, global_dim_ = 0, z_params_ = 0;
  int64_t rows_ = 0;
  std::unique_ptr<BoundFactor> contribution_, density_, likelihood_;
  AmortizedGaussianNet net_;
  Eigen::VectorXd params_;
  bool joint_ = false;
  Eigen::Index joint_total_ = 0;
  JointGaussianRows joint_q_;  // the joint family's layout (its parameters live in params_' head)
  // contribution_scales(): Adam walks theta_j as step_scales_[j] theta_j, the coefficient of a
  // standardised column, as SFVI's centring does (fvi/engine/centring.h), and q starts its sd at
  // init_sd / step_scales_[j]. The silo's own columns: nothing is sent.
  Eigen::VectorXd step_scales_;
  Eigen::VectorXd column_scales_;  // contribution_scales() as found, before the outcome factor
  bool linear_ = false;            // contribution_scales found the partial predictor linear
  double outcome_factor_ = 1;      // max(1, the server's outcome_scale()), once set
  Adam<double> adam_;
  uint32_t proposed_ = 0;  // the iteration of the kept draw (0: none yet)
  ParameterAverage average_;  // the server's stopping rule on params_
  StationarityWatch watch_;   // and its judgement of q(theta_k), in the rule's windows
  // The kept draw (from propose): noise, and what it produced.
  Eigen::MatrixXd eps_, tau_, theta_, m_, a_, s_, z_;
  Eigen::MatrixXd own_likelihood_adjoint_;  // power model: d(own term)/d z_sum (N x S)
  bool prior_reads_globals_ = false;
  Eigen::MatrixXd prior_globals_, d_prior_globals_;  // global_dim x S: the draws the priors read, their gradient
  double own_likelihood_ = 0;
  Eigen::VectorXd y_;  // power model with an amortised q(z): the outcome rows (a network input)
};

}  // namespace fvi::engine
