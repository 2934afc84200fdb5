#pragma once
// Structured federated VI (seed 002): SFVI (Algorithm 1), SFVI-Avg(m) (Algorithm 2) and the
// independent baseline, for models with `global` and `local` parameters and `hyperparameters`.
//
// The ELBO splits as (spec 002 §2.2, with the digest's correction: the local prior is the silo's)
//     L = E[log p_theta(Z_G) - log q(Z_G)]                                       server
//       + sum_j E[log p_theta(y_j, Z_{L_j} | Z_G) - log q(Z_{L_j} | Z_G)]        silo j
// The server holds eta_G (the global block of the structured Gaussian, spec 002 §2.5) and the
// point-estimated hyperparameters theta; silo j holds eta_{L_j}, which never leaves it. Every
// gradient is the sticking-the-landing estimator (seed 002 Eq. 6) unless `estimator = standard`.
// The engine never sees the model: it calls the compiled factors through the kernel ABI.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fvi/engine/bound_factor.h"
#include "fvi/engine/centring.h"
#include "fvi/engine/class_shift.h"
#include "fvi/engine/element_joint.h"
#include "fvi/engine/mode.h"
#include "fvi/engine/prior_scale.h"
#include "fvi/engine/settings.h"
#include "fvi/family/structured_gaussian.h"
#include "fvi/optim/adam.h"
#include "fvi/optim/parameter_average.h"
#include "fvi/optim/stationarity_watch.h"

namespace fvi::engine {

constexpr Eigen::Index kStructuredAutoLimit = 50;
// SFVI iterations per window of the stopping rule (fvi/optim/convergence.h), the server's and
// each silo's judgement of its locals alike.
constexpr long kSfviRuleWindow = 100;

struct SfviOptions {
  // The structure of the family (spec 002 §2.5): meanfield = none of these; structured = a
  // correlated global block and locals coupled to the globals (C_j); fullrank adds correlated
  // local blocks (L_j).
  bool correlated_global = false, coupled = false, correlated_local = false;
  bool stl = true;         // estimator: sticking-the-landing (true) or standard (closed-form entropy)
  // A mean-field q(Z_G) and no locals: each silo's gradient through the kernels' local
  // reparameterisation (SfviSilo::local_reparam) rather than at the shared draws eps_G.
  bool local_reparam = true;
  double lr = 0.01;        // Adam, server and silos alike
  long mc_samples = 1;     // draws per gradient estimate
  // K > 1: each silo maximises the importance-weighted bound with K draws of its locals per draw
  // of Z_G, over each local element where each can be scored on its own, else over the silo's
  // whole local block (SfviSilo::importance_gradient_at); 1: the ELBO.
  long local_samples = 1;
  long batch_size = 0;     // rows per step in each silo (0: all rows)
  bool local_samples_given = true;  // false (no local_samples key): the silo picks K (SfviSilo::local_samples)
  std::string family = "meanfield";  // as resolved by from(): meanfield, structured or fullrank
  long avg_steps = 10;     // SFVI-Avg: local steps between averagings
  double init_sd = 0.135;  // initial sd of every variational block (sigma = exp(-2), as the authors' code)
  bool centre_local_slopes = true;  // center: a silo's local intercept of its local slopes fitted at its own means
  uint64_t seed = 1;

  // `global_dim`: the model's global parameters. Without a `family` key the family is structured
  // up to kStructuredAutoLimit of them (the posterior's correlations among the globals and
  // between each local block and the globals, which mean-field drops: a hierarchical regression's
  // intercepts and slope), meanfield above.
  static SfviOptions from(const Settings& settings, Eigen::Index global_dim);
};

// What the server sends every silo each iteration (seed 002 Alg. 1 step 2): eta_G, theta, and
// the key of eps_G (the silo draws the same eps_G from it: a seed instead of n_G x S numbers).
struct SfviBroadcast {
  Eigen::VectorXd global_params;  // eta_G (StructuredGlobalGaussian::params order)
  Eigen::VectorXd hyper;          // theta, unconstrained
  uint32_t round = 0;             // eps_G = the server's global-noise stream of this round
};

// What silo j returns (Alg. 1 step 8): g_j^eta (seed 002 Eq. 10) and g_j^theta (Eq. 13), both
// gradients of the ELBO (to maximise), and its ELBO term's estimate (for progress only).
struct SfviContribution {
  Eigen::VectorXd d_global, d_hyper;
  double elbo_term = 0;
};

// What SFVI-Avg and the independent fit return after their local steps (Alg. 2).
struct SfviLocalFit {
  Eigen::VectorXd global_params, hyper;
  double elbo_term = 0;  // the silo's last local objective (for progress only)
};

// Flat messages (what crosses the network) and back.
std::vector<double> pack(const SfviBroadcast& m);
SfviBroadcast unpack_broadcast(const std::vector<double>& message, Eigen::Index global_params, Eigen::Index hyper);
std::vector<double> pack(const SfviContribution& m);
SfviContribution unpack_contribution(const std::vector<double>& message, Eigen::Index global_params, Eigen::Index hyper);
std::vector<double> pack(const SfviLocalFit& m);
SfviLocalFit unpack_local_fit(const std::vector<double>& message, Eigen::Index global_params, Eigen::Index hyper);

// eps_G of `round`: n_G x S standard normals from the server's global-noise stream.
Eigen::MatrixXd global_noise(uint64_t seed, uint32_t round, Eigen::Index n, long draws);

// The input groups a factor reads, bound to this party's values: "global" -> Z_G (n_G x S),
// "local" -> Z_L (m x S), "hyper" -> theta (h x 1).
struct GroupValues {
  const Eigen::MatrixXd* global = nullptr;
  const Eigen::MatrixXd* local = nullptr;
  const Eigen::MatrixXd* hyper = nullptr;
};

// A sum of factors, log p(...) per draw, and its gradient with respect to each group.
class LogDensity {
 public:
  void add(std::unique_ptr<BoundFactor> factor) { factors_.push_back(std::move(factor)); }
  bool empty() const { return factors_.empty(); }
  // The local values evaluate() is given are the fit's coordinates of a silo's local slopes
  // (centring.h local_slope_blocks): the factors see the written locals, and d_local is pulled
  // back to the fit's coordinates.
  void set_local_map(std::vector<CentringBlock> blocks) { local_map_ = std::move(blocks); }
  int64_t rows() const;  // rows of the likelihoods (0 if none)

  struct Value {
    Eigen::VectorXd per_draw;  // log p for each draw (S)
    Eigen::MatrixXd d_global, d_local;  // n x S, m x S (empty if the group is absent)
    Eigen::VectorXd d_hyper;            // h, summed over the draws
    Eigen::MatrixXd d_hyper_draws = {};  // h x S, each draw's, when the hyperparameters came h x S (else empty)
    // evaluate_meanfield: the gradient with respect to q(Z_G)'s means and sds, summed over the draws.
    Eigen::VectorXd d_global_mean = {}, d_global_sd = {};
  };
  // Likelihood rows [begin, begin + count) (count < 0: all), scaled by `likelihood_scale`;
  // densities (priors) scaled by `density_scale`.
  Value evaluate(const GroupValues& values, long draws, Eigen::Index global_dim, Eigen::Index local_dim,
                 Eigen::Index hyper_dim, int64_t begin, int64_t count, double likelihood_scale,
                 double density_scale, bool with_gradient);
  // evaluate() at each of the P points of `global` (n x P) and `local` (m x P, or null), every
  // row at scale 1, 64 points per call: a statement program's values grow with the draws (an ODE
  // solve's, at the tail check's 4,000 draws, past the machine's 2^30 bound).
  Value evaluate_points(const Eigen::MatrixXd& global, const Eigen::MatrixXd* local, const Eigen::MatrixXd& hyper,
                        bool with_gradient);
  // The same for a mean-field q(Z_G) given by its means and sds: `draws` draws made by the kernels
  // from `noise_key` (kernel ABI forward_meanfield: each data product's Gaussian sampled row by
  // row), the hyperparameters at their values. No factor may read the locals.
  Value evaluate_meanfield(const Eigen::VectorXd& global_mean, const Eigen::VectorXd& global_sd,
                           const Eigen::VectorXd& hyper, long draws, uint64_t noise_key, int64_t begin,
                           int64_t count, double likelihood_scale, double density_scale);

 private:
  std::vector<std::unique_ptr<BoundFactor>> factors_;
  std::vector<CentringBlock> local_map_;
};

class SfviServer {
 public:
  // `data`: the public and server data; the server density is log p_theta(Z_G).
  SfviServer(const fvi_model& model, const fvi_data& data, SfviOptions options);

  Eigen::Index global_dim() const { return global_dim_; }
  Eigen::Index hyper_dim() const { return hyper_dim_; }
  const StructuredGlobalGaussian<double>& q() const { return q_; }
  const Eigen::VectorXd& hyper() const { return hyper_; }

  SfviBroadcast broadcast(uint32_t round) const;
  // Alg. 1 steps 9-11: sums the silos' gradients, adds the server's own terms (seed 002 Eqs. 9,
  // 12) at the eps_G it broadcast, and takes one Adam step. Returns the ELBO estimate (server
  // term plus the silos' terms).
  double step(const std::vector<SfviContribution>& contributions, uint32_t round);
  // The server's terms alone (for the tests): gradient with respect to (eta_G, theta) and the
  // ELBO term, at the given eps_G.
  SfviContribution server_term(const Eigen::MatrixXd& eps_global);
  // The server's part of the log joint at each column of z (the fit's coordinates): log
  // p_theta(Z_G) and the likelihood of public and server data.
  Eigen::VectorXd log_server_terms(const Eigen::MatrixXd& z_fit);
  // Intercepts fitted at the silos' centred data (centring.h), their means set: from now on q is
  // over the fit's coordinates and the server's terms are evaluated at the written globals. Blocks
  // with scales also set Adam's step coordinates and q's starting sds of their coefficients
  // (centring.h to_step_coordinates): called before iteration 1 (a resumed run restores q after).
  void set_centring(std::vector<CentringBlock> blocks);
  const std::vector<CentringBlock>& centring() const { return centring_; }
  // Alg. 2: theta <- mean theta_j; q(Z_G) <- the 2-Wasserstein barycenter (seed 002 Eqs. 14-15).
  void average(const std::vector<SfviLocalFit>& fits);
  void set(const Eigen::VectorXd& global_params, const Eigen::VectorXd& hyper);
  // q(Z_G) set to the Laplace approximation of the log joint at its mode (fvi/engine/mode.h), when
  // found: the server's own terms, plus `silos` (the silos' likelihoods at a batch of points of
  // the fit's coordinates; nullptr in a pooled fit, where the server's terms are the whole log
  // joint). Returns the search's outcome (q unchanged when no mode was found); a ModeSearchAborted
  // from `silos` ends it (q unchanged).
  Modes start_at_mode(const LogDensityBatchFn* silos = nullptr);
  // With locals, whose silo terms are no function of Z_G alone: q(Z_G)'s means of the globals
  // declared without bounds set at the mode over them of log p(Z_G) + sum_j log p(y_j | Z_G), each
  // silo's term Laplace's approximation with its locals integrated out (`silos`:
  // SfviSilo::log_likelihood_at), every bounded global held at q's mean: a scale of the locals'
  // prior would collapse the profile (tau -> 0, every local at its location). q's sds stay, as the
  // curvature at held scales is not the posterior's.
  // The means are set only where the mode lies over kLongTravelSteps of Adam's steps (lr each)
  // from q's start in some coordinate: data far from the unit scale, which q would take that
  // long to reach. A ModeSearchAborted from `silos` ends the search (q unchanged).
  struct LocationStart {
    Mode mode;
    double travel = 0;   // the largest |mode - q's start| over the searched coordinates
    bool moved = false;  // q's means were set
  };
  LocationStart start_at_locations(const LogDensityBatchFn& silos);
  static constexpr double kLongTravelSteps = 500;
  // Draws of q the server's terms dropped so far because their log density or its gradient was
  // not finite there (the others' average is the step's estimate, as Stan's ADVI has it).
  long dropped_draws() const { return dropped_draws_; }
  // The extra random starts of the mode search are made up to this many global parameters.
  static constexpr Eigen::Index kMultiStartLimit = 50;
  // Multiplies the step size of later steps (the stopping rule's decay).
  void set_step_scale(double scale) { adam_.set_scale(scale); }
  // Draws per gradient from the next step on (the stopping rule's mc_factor times the setting).
  void set_mc_samples(long draws) { options_.mc_samples = draws; }
  // Everything the server's steps depend on (eta_G, theta, Adam's state), for a checkpoint.
  Eigen::VectorXd checkpoint() const;
  void restore(const Eigen::VectorXd& state);

 private:
  // The log joint at each column of z (the fit's coordinates): the server's terms at the written
  // globals plus `silos` when given.
  LogDensityBatchFn log_joint(const LogDensityBatchFn* silos);
  SfviOptions options_;
  // The server's own terms: the global priors and the likelihoods of public and server data.
  LogDensity server_terms_;
  std::vector<Eigen::Index> unbounded_;  // the coordinates of Z_G declared without bounds
  bool at_mode_ = false;  // started at the mode's Laplace approximation (start_at_mode)
  long dropped_draws_ = 0;  // draws of the server's terms dropped: log density or gradient not finite
  long skipped_in_a_row_ = 0;  // steps skipped in a row: every draw's gradient not finite
  double last_elbo_ = 0;       // the last finite objective, what a skipped step reports
  Eigen::Index global_dim_ = 0, hyper_dim_ = 0;
  StructuredGlobalGaussian<double> q_;
  Eigen::VectorXd hyper_;
  Adam<double> adam_;
  std::vector<PriorScaleBlock> prior_scales_;  // Adam's coordinates for the log-sds of prior-scaled globals
  std::vector<ClassShiftBlock> class_shifts_;  // means set to zero class mean after each step
  std::vector<CentringBlock> centring_;        // intercepts fitted at the centred data
};

class SfviSilo {
 public:
  // `data`: this silo's data together with the public data. `global_prior` binds the server
  // density here too (SFVI-Avg and the independent fit need log p_theta(Z_G) in the silo); it
  // fails, naming the variable, if the global priors read server data.
  SfviSilo(const fvi_model& model, const fvi_data& data, int silo, SfviOptions options, bool global_prior);

  int silo() const { return silo_; }
  Eigen::Index local_dim() const { return local_dim_; }
  int64_t observations() const { return likelihood_rows_; }
  const StructuredLocalGaussian<double>& q() const { return q_; }

  // SFVI, Alg. 1 steps 3-8: draws eps_L, computes g_j^eta and g_j^theta, steps its own Adam on
  // eta_{L_j} (Eq. 11), and returns the gradients. `iteration` picks the minibatch and the noise.
  SfviContribution contribute(const SfviBroadcast& message, uint32_t iteration);

  // Whether the silo's gradient goes through the kernels' local reparameterisation (Kingma,
  // Salimans & Welling 2015): with a mean-field q(Z_G) and no locals, each silo samples every
  // data product x * W as its Gaussian N(x mu, x^2 sigma^2) row by row, from its own noise, instead
  // of at the shared draws eps_G. Both are unbiased for the same gradient; this one's variance
  // falls with the rows (one draw of W moves every row's logits together), which is what a
  // softmax regression's 7,850 sds need to settle (examples/multinomial_eb).
  bool local_reparam() const { return local_reparam_; }

  // SFVI-Avg (Alg. 2): `steps` local steps on (eta_G, theta, eta_{L_j}) from the broadcast
  // values, with log p(y_j, Z_L | Z_G) scaled by `scale` (n / n_j; 1 for the independent fit).
  SfviLocalFit fit_locally(const SfviBroadcast& message, long steps, double scale, uint32_t round);

  // log p(y_j | Z_G) and its gradient at each column of z_global (n x P, the fit's coordinates):
  // the silo's part of the server's mode search (SfviServer::start_at_mode). With locals, Laplace's
  // approximation of it, the profile max_{Z_L} log p(y_j, Z_L | Z_G) less half the log determinant
  // of the locals' curvature there, and the profile's gradient (by the envelope theorem the
  // joint's with respect to Z_G at the locals' conditional mode: SfviServer::start_at_locations).
  // The determinant's gradient (third derivatives) is left out: exact along the globals the
  // curvature does not depend on (a Gaussian likelihood's locations); along a scale of the locals'
  // prior, where the profile alone rises without bound (tau -> 0, every local at its location),
  // it cancels that rise, so the search cannot run off there. log p is NaN at a point where the
  // mode is not found, and at every point where !profile_applies(). ModelError with
  // hyperparameters.
  struct PointValues {
    Eigen::VectorXd log_p;     // P
    Eigen::MatrixXd gradient;  // n x P
    Eigen::VectorXd half_log_det = {};  // P, with locals: the term subtracted from the profile
  };
  PointValues log_likelihood_at(const Eigen::MatrixXd& z_global);
  // Whether the silo answers its profile: no hyperparameters, and locals scored by element (each
  // element's conditional mode on its own: three joint evaluations a Newton step, whatever m) or
  // at most kProfileLocalLimit of them (a dense Newton, 2m + 1 evaluations a step).
  bool profile_applies() const;
  static constexpr Eigen::Index kProfileLocalLimit = 50;
  // q(Z_L | Z_G)'s means set at the locals' conditional mode at z_global (the server's start),
  // before the silo's first step only. Returns whether they were set.
  bool start_locals_at_mode(const Eigen::VectorXd& z_global);

  // The gradients of this silo's ELBO term at given noise (no step; for the tests).
  SfviContribution gradient(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                            const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local, double scale,
                            Eigen::VectorXd* d_local);
  const Eigen::VectorXd& local_params() const { return local_params_; }

  // With local_samples = K > 1, the silo's local posterior by self-normalised importance sampling
  // with the bound's weights: for each column of eps_global (a draw of Z_G ~ q(Z_G)) K draws of
  // each element from q(b_i | Z_G) (eps_local: K columns per draw), weighted by wn_ik. Sums over
  // the draws of Z_G of sum_k wn_ik b_ik and of sum_k wn_ik b_ik^2, and one b_i per draw of Z_G
  // picked with probability wn_ik by `uniforms` (m x S, in [0, 1)): a draw of the posterior.
  struct LocalPosterior {
    Eigen::VectorXd weighted_sum, weighted_square;
    Eigen::MatrixXd draws;
  };
  // With `follow_modes`, half the K draws follow the locals' conditional mode at each draw of Z_G
  // (importance_draws' `modes`), as log_joint's do: where q(Z_G) is wider than the q(Z_L | Z_G) was
  // fitted for (a moment-corrected q), its far draws find the locals there.
  LocalPosterior importance_posterior(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                      const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local,
                                      const Eigen::MatrixXd& uniforms, bool follow_modes = false);
  // K: as set, or (local_samples unset) 16 where every local element can be scored on its own or
  // the silo's local block has at most kWholeBlockLimit values (the importance-weighted bound),
  // else 1.
  long local_samples() const { return options_.local_samples; }
  // Whether the bound weighs the silo's whole local block per draw (its locals read as a whole)
  // rather than each element on its own.
  bool whole_block() const { return whole_block_; }
  // The largest local block weighed whole by default: importance sampling's efficiency falls
  // with the block's dimension, and a scalar intercept or a few values are what needs it.
  static constexpr Eigen::Index kWholeBlockLimit = 4;
  // The silo's part of the log joint at draws z_global of Z_G ~ q(Z_G) (n x S): one draw of its
  // locals from q(Z_L | Z_G) each (eps_local, m x S), log p(y_j, Z_L | Z_G) and log q(Z_L | Z_G).
  // With K = local_samples > 1 (eps_local m x KS) the locals are integrated out instead: log_p is
  // the importance-weighted estimate of log p(y_j | Z_G) and log_q is 0.
  struct LogJoint {
    Eigen::VectorXd log_p, log_q;
    // The locals' draws at each global draw (local_dim x S): from q(Z_L | Z_G), or with
    // local_samples > 1 resampled from the K importance draws by their weights.
    Eigen::MatrixXd local;
    // Their mean and mean square at each global draw (local_dim x S): the importance-weighted
    // ones of the K draws, or the one draw's (local_samples = 1). Weighed across the global draws
    // by the run's importance weights, they give the written model's posterior of the locals.
    Eigen::MatrixXd local_mean, local_square;
  };
  // uniforms (local_dim x S) pick each draw's locals among the K importance draws. eps_local may
  // hold more than local_samples draws per draw of Z_G (log_joint_samples()).
  // K for log_joint: local_samples, or for a whole block at least kWholeBlockJointSamples.
  long log_joint_samples() const {
    return whole_block_ ? std::max<long>(options_.local_samples, kWholeBlockJointSamples) : options_.local_samples;
  }
  static constexpr long kWholeBlockJointSamples = 256;
  // How well q(Z_L | Z_G) holds the locals' posterior given the globals, p(Z_L | Z_G, y_j): at each
  // of S draws of Z_G (eps_global's columns), K draws of the locals (eps_local: K columns per
  // draw) weighed by p(y_j, Z_L | Z_G) / q(Z_L | Z_G), and the Pareto k-hat of each element's K
  // ratios (the whole block's where the locals are read as a whole); the median over the draws of
  // Z_G, the largest over the elements, and how many exceed 0.7. The run's k-hat judges q(Z_G)
  // only: the bound integrates the locals out, and a silo's reported locals are its weighted
  // draws of q(Z_L | Z_G).
  struct LocalsCheck {
    double worst;  // NaN without locals
    long poor, elements;  // elements (or 1, the whole block) whose k-hat exceeds 0.7, of all
  };
  LocalsCheck locals_khat(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                          const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local);
  LogJoint log_joint(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                     const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& eps_local, const Eigen::MatrixXd& uniforms);
  void set_local_params(const Eigen::VectorXd& params);
  // The silo's local intercepts shifted with the centred data (local_centring_blocks,
  // fvi/engine/centring.h): q(Z_L | Z_G) and the factors are in the fit's coordinates, and
  // importance_posterior and log_joint return the written locals.
  void set_local_centring(std::vector<CentringBlock> blocks) { local_centring_ = std::move(blocks); }
  const std::vector<CentringBlock>& local_centring() const { return local_centring_; }
  // The silo's local intercepts of its own slopes, a_c = a + xbar b (centring.h local_slope_blocks;
  // set by the constructor unless options.centre_local_slopes is off, and only where the factors
  // are evaluated as a whole: an element-wise bound reads no such block).
  const std::vector<CentringBlock>& local_slopes() const { return local_slopes_; }
  // Whether written_locals changes anything.
  bool maps_locals() const { return !local_centring_.empty() || !local_slopes_.empty(); }
  // Draws of q(Z_L | Z_G) (m x KS, K per column of z_global) made the written model's.
  Eigen::MatrixXd written_locals(const Eigen::MatrixXd& z_global, const Eigen::MatrixXd& z_local) const;
  // The server's stopping rule, carried out on eta_{L_j}: the step size's multiplier for later
  // steps, and at a new averaging epoch a new Polyak-Ruppert average of eta_{L_j} from the next
  // step on (fvi/optim/parameter_average.h).
  void set_schedule(double step_scale, long epoch);
  // Draws per gradient from the next step on, as the server's stopping rule asks (the server's
  // own draws of Z_G are as many).
  void set_mc_samples(long draws) { options_.mc_samples = draws; }
  long mc_samples() const { return options_.mc_samples; }
  // eta_{L_j} <- its average over the steps since the last restart (if any): the final estimate.
  void use_average();
  // Whether q(Z_Lj | Z_G)'s means and sds have settled over the averaging phase's windows (the
  // server's stopping rule asks once its own q has: fvi/optim/stationarity_watch.h).
  WindowJudgement locals_settled(double tol_param) const;
  // eta_{L_j} and its Adam's state, for a checkpoint (written by the silo, never sent).
  Eigen::VectorXd checkpoint() const;
  void restore(const Eigen::VectorXd& state);

 private:
  // argmax_{Z_L} log p(y_j, Z_L | Z_G) at one point of Z_G by Newton's method from `start`, the
  // joint's value and its gradient with respect to Z_G there; found false where no mode is found.
  struct LocalMode {
    bool found = false;
    Eigen::VectorXd at, d_global;
    double log_p = NAN;
    double log_det = NAN;  // of -Hessian of the joint in Z_L at the mode
    // -Hessian itself at the polished mode, set by local_modes alone: m x m, or by element its
    // diagonal, m x 1.
    Eigen::MatrixXd curvature;
  };
  LocalMode local_mode_at(const Eigen::VectorXd& z_global, const Eigen::VectorXd& start);
  // -Hessian of log p(y_j, Z_L | Z_G) in Z_L at b by central differences: m x m, or by element
  // its diagonal (m x 1). No hyperparameters (profile_applies()).
  Eigen::MatrixXd local_curvature(const Eigen::VectorXd& z_global, const Eigen::VectorXd& b);
  // log p(y_j, Z_L | Z_G) and its gradient in Z_L at the columns of a batch, Z_G fixed at z_global.
  LogDensityBatchFn local_density(const Eigen::VectorXd& z_global);
  // The joint and its gradients at the columns of z_local, Z_G fixed at z_global.
  LogDensity::Value joint_given_globals(const Eigen::VectorXd& z_global, const Eigen::MatrixXd& z_local);
  LocalMode local_mode_by_element(const Eigen::VectorXd& z_global, const Eigen::VectorXd& start);
  // Rows [begin, begin + count) of the minibatch of `iteration`, and the likelihood's scale.
  void minibatch(uint32_t iteration, int64_t& begin, int64_t& count, double& scale) const;
  Eigen::MatrixXd local_noise(uint32_t iteration, long draws) const;
  // The local draws b_ik of the bound (K per column of eps_global), their weights normalised over
  // k, the bound's value summed over the elements and draws of Z_G, and the shared terms.
  struct ImportanceDraws {
    // weights: local_dim x KS per element, or 1 x KS over the whole block (whole_block_);
    // z_written: z_local at the written locals when local_centring_ maps them (else empty).
    Eigen::MatrixXd u_each, z_local, z_written, weights;
    Eigen::MatrixXd log_w;  // the unnormalised log weights, laid out as `weights`
    // The draws the outputs report: the written locals.
    const Eigen::MatrixXd& written() const { return z_written.size() > 0 ? z_written : z_local; }
    LogDensity::Value joint;  // whole_block_: the joint at the KS draws (with its gradient if asked)
    Eigen::VectorXd shared;
    double bound = 0;
    // log (1/K) sum_k p(y_j, b_k | Z_G) / q(b_k | Z_G) per draw of Z_G: log p(y_j | Z_G) estimated.
    Eigen::VectorXd per_draw;
  };
  // Per draw of Z_G and local element, one of the K draws, picked with probability its weight by
  // uniforms (local_dim x S).
  Eigen::MatrixXd resample(const ImportanceDraws& d, long K, const Eigen::MatrixXd& uniforms) const;
  // u: offsets Z_G - mu_G of the draws of Z_G (n x S). With `modes` (one per draw of Z_G), the
  // odd draws of each draw s whose mode was found come instead from a Laplace proposal in the
  // mode's whitening w = U (Z_L - at), U'U its curvature: w ~ N(0, I) for half of them, for the
  // other half each w_i ~ t_2 (tails heavier than the posterior's wherever its prior's Gaussian
  // tail outlasts the curvature at the mode). The weights are p / (q/2 + Laplace/2) (the balance heuristic of multiple importance sampling, Veach
  // and Guibas 1995: unbiased, and bounded by 2 p / Laplace where q(Z_L | Z_G) misses
  // p(Z_L | Z_G, y_j)).
  ImportanceDraws importance_draws(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                   const Eigen::MatrixXd& u, const Eigen::MatrixXd& eps_local,
                                   bool with_gradient = false, const std::vector<LocalMode>* modes = nullptr);
  // For importance_draws' `modes`: replaces the odd draws of z_local (K per draw of Z_G, u_each
  // its offsets, eps the standard normals they were drawn from) and returns log (q/2 + Laplace/2)
  // at every draw, laid out as ImportanceDraws::log_w.
  Eigen::MatrixXd mix_in_laplace(const std::vector<LocalMode>& modes, const Eigen::MatrixXd& u_each,
                                 const Eigen::MatrixXd& eps, long K, Eigen::MatrixXd& z_local) const;
  // The locals' conditional mode and curvature at each draw of Z_G (offsets u), each search from
  // q(Z_L | Z_G)'s mean there; found false where there is none or !profile_applies().
  std::vector<LocalMode> local_modes(const StructuredGlobalGaussian<double>& global, const Eigen::MatrixXd& u);
  // Draw s's normalised weights as local_dim x K (the whole block's row repeated per element).
  Eigen::MatrixXd weights_of(const ImportanceDraws& d, long s, long K) const;
  // The importance-weighted version of gradient_at (local_samples = K > 1): eps_local has K
  // columns per column of eps_global; the whole silo term is scaled by `scale`.
  SfviContribution importance_gradient_at(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                          const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local,
                                          double scale, Eigen::VectorXd* d_local);
  // gradient_at through local reparameterisation (local_reparam()): `draws` draws made by the
  // kernels from `noise_key`.
  SfviContribution meanfield_gradient_at(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                                         long draws, uint64_t noise_key, int64_t begin, int64_t count,
                                         double likelihood_scale);
  // The silo's gradients with the likelihood rows [begin, begin + count) scaled by
  // likelihood_scale and the local prior by density_scale.
  SfviContribution gradient_at(const StructuredGlobalGaussian<double>& global, const Eigen::VectorXd& hyper,
                               const Eigen::MatrixXd& eps_global, const Eigen::MatrixXd& eps_local, int64_t begin,
                               int64_t count, double likelihood_scale, double density_scale, Eigen::VectorXd* d_local);

  int silo_;
  SfviOptions options_;
  LogDensity joint_;   // log p(y_j, Z_L | Z_G): the silo density and the likelihoods
  Eigen::VectorXd profile_start_;  // the locals' last conditional mode: the next point's start
  LogDensity prior_;   // log p(Z_G), when bound (global_prior)
  std::unique_ptr<ElementJoint> elements_;  // the joint by local element (local_samples > 1)
  bool whole_block_ = false;  // local_samples > 1 over the whole block: joint_ weighed per draw
  bool local_reparam_ = false;
  Eigen::Index global_dim_ = 0, local_dim_ = 0, hyper_dim_ = 0;
  int64_t likelihood_rows_ = 0;
  Eigen::VectorXd local_params_;
  StructuredLocalGaussian<double> q_;
  Adam<double> adam_;
  std::vector<PriorScaleBlock> prior_scales_;  // the local fits' (SFVI-Avg) as the server's
  std::vector<CentringBlock> local_centring_;  // local intercepts shifted with the centred data
  std::vector<CentringBlock> local_slopes_;    // local intercepts of local slopes (joint_'s map)
  ParameterAverage average_;  // the server's stopping rule on eta_L
  StationarityWatch watch_{kSfviRuleWindow};  // and its judgement of q(Z_L | Z_G)
  std::vector<long> batch_order_;
};

}  // namespace fvi::engine
