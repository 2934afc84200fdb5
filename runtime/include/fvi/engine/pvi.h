#pragma once
// Partitioned variational inference and FedGVI (seed 000, Algorithms 1-2, in the natural-parameter
// form of spec 000 §2.3): the server holds q_s = prior x prod_m t_m; client m forms the cavity
// q_s / t_m, solves its local (generalised) VI problem
//     q_m = argmin_q  E_q[sum_i L(y_i | theta)] + D(q : cavity)            (seed 000 Eq. 4)
// and sends the damped change of its factor, tau (eta(q_m) - eta(q_s))       (seed 000 Eq. 5)
// The engine never sees the model: it calls the compiled factors through the kernel ABI.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fvi/engine/affine_coordinates.h"
#include "fvi/engine/aggregation.h"
#include "fvi/engine/bound_factor.h"
#include "fvi/engine/gaussian_family.h"
#include "fvi/engine/meanfield_shards.h"
#include "fvi/engine/quadratic_probe.h"
#include "fvi/engine/row_parallel.h"
#include "fvi/engine/function_space.h"
#include "fvi/engine/settings.h"
#include "fvi/loss/score_matching.h"
#include "fvi/rng.h"

namespace fvi::engine {

struct PviOptions {
  // The server's aggregation, from `method`: pvi (the natural-parameter sum of every silo's
  // factor), fedavg or fedvem (seed 001 Algorithms 1 and 2; fvi/engine/aggregation.h). Their
  // silos solve PVI's local problem with another cavity and no factor of their own: fedavg's
  // cavity is the prior with its KL shared out, (1/S) KL(q : prior) (seed 001 Eq. 30); fedvem's
  // is the server's N(mu, sigma^2), the hierarchical prior of seed 001 Eq. 33.
  std::string aggregation = "pvi";
  ServerOptimiserOptions server_optimiser;  // fedavg and fedvem: server_optimiser, server_lr, server_tau
  // method = fedavg_fsvi or fedvem_hsvi (seed 001 Algorithms 3 and 5): the local objective's
  // divergence is the linearised function-space KL at context points (fvi/engine/function_space.h)
  // against the cavity, weighted by function_kl_weight (beta, App. E.1), in the weight-space KL's
  // place; the aggregation is fedavg's or fedvem's.
  bool function_space = false;
  long context_points = 1;           // per local step (App. E.1: "a random datapoint")
  double context_noise = 1.0 / 255;  // U[-noise, noise] on each real value (App. E.1: 1/255 of a pixel)
  double function_kl_weight = 1;     // beta
  static constexpr double kFunctionSpaceJitter = 1e-8;  // on both covariances' diagonals
  // Silos asked per synchronous round, drawn from `seed` and the round (FedAvg's protocol); 0: all.
  long clients_per_round = 0;
  // Whether the client probes its likelihood for a closed-form update (spec 000 §2.6) when it is
  // made: a silo host that remakes its client for each round it is asked knows the answer.
  bool probe_closed_form = true;
  LossSpec loss;
  // The generalised-Bayes learning rate (seed 000 Eq. 2): the loss is multiplied by it. With KL,
  // loss_weight = w is divergence = weighted_kl(w), i.e. (1/w) KL (seed 000 Lemma B.1).
  double loss_weight = 1;
  // loss = score_matching(se|imq, c): the weight ("se" or "imq") and c; empty for other losses.
  std::string score_weight;
  double score_length_scale = 1;
  DivergenceSpec divergence;
  double damping = 1;      // tau, as the silo applies it
  bool damping_given = false;  // set by the user: a closed-form update is otherwise undamped
  // The synchronous schedule: the server also scales every silo's change alike, halving the
  // scale after a round whose objective fell (program/pvi_rounds.h), so that simultaneous
  // updates that overshoot are damped by the run itself.
  bool server_damping = false;
  std::string schedule = "synchronous";  // synchronous, sequential or asynchronous
  long local_steps = 100;  // optimiser steps per client update (when epochs = 0)
  // Neither local_steps nor epochs given: a client update runs at the full step size until its
  // objective levels off (ConvergenceMonitor's plateau rule over windows of local_window steps),
  // at most max_local_steps, then decays it over local_steps more (with lr_schedule = cosine).
  // A fixed count stops short of the local optimum whenever q must travel far (a wide prior,
  // the first round), and PVI's fixed point is that of exact local optima (seed 000 Eq. 4).
  bool adaptive_steps = false;
  long local_window = 50;
  long max_local_steps = 5000;
  long epochs = 0;         // passes over the silo's rows per client update (overrides local_steps)
  double lr = 0.01;
  std::string local_optimiser = "adam";  // adam, or sgd (plain gradient steps: spec 001's FedAvg clients)
  // Rows per step; 0: all rows. Not given and the update adaptive: all rows up to
  // kFullBatchRows, else kDefaultBatchRows (a step over 60,000 images is a pass over the silo;
  // thousands of them per update are hours, and the rule judges minibatch noise like any other).
  long batch_size = 0;
  bool batch_size_given = false;
  static constexpr long kFullBatchRows = 4096, kDefaultBatchRows = 1024;
  // The full-rank family's local fit is whitened by the Laplace approximation of the tilted
  // posterior (PviClient::local_coordinates) up to this many globals, by q_s above: its Newton
  // steps cost 2D + 1 passes over the silo's rows each.
  static constexpr long kLaplaceDimensions = 50;
  long mc_samples = 10;
  uint64_t seed = 1;
  std::string lr_schedule = "cosine";  // within a client update: constant or cosine (to 0)
  double init_sd = 0;      // > 0: a client's first update starts at N(q_s mean, init_sd^2), not at q_s
  // > 0: a client's first start's means are q_s's plus N(0, init_mean_sd^2) noise drawn from `seed` alone, the
  // same on every silo: a network's units must differ at the start (at the prior mean, 0, every hidden
  // unit computes the same and the signal through several layers vanishes).
  double init_mean_sd = 0;
  long patience = 0;       // with epochs: stop after this many epochs without improvement (0: never)
  Precision precision = Precision::kFloat64;
  // Threads of this silo's client: each minibatch's rows are split between them
  // (fvi/engine/row_parallel.h). Not an inference key: the programs set it from the machine's
  // cores (fvi/program/threads.h), and the result does not depend on it beyond rounding.
  int threads = 1;

  // From the inference keys. Damping: what the user gives; else 1 in the synchronous schedule
  // (the server's adaptive scale damps it), 1/silos in the others (spec 000 §2.5). A silo whose
  // update is in closed form is undamped unless the user says otherwise (its exact factor does
  // not depend on the cavity).
  // mc_samples defaults to 10, the smallest of the paper's settings (spec 000 §6 [repo]).
  // `method`: pvi, fedavg, fedvem, fedavg_fsvi or fedvem_hsvi (the run's method, which the
  // settings may leave to the plan).
  static PviOptions from(const Settings& settings, int silos, const std::string& method = "pvi");
};

// The methods the PVI engine serves, and the server aggregation each uses (pvi, fedavg, fedvem).
bool pvi_engine_method(const std::string& method);
std::string pvi_aggregation(const std::string& method);


// The largest size of a mean, an sd or a datum every party can compute with: squares of 1e100
// are 1e200, which leaves 1e108 for the values they meet before double's range (1.8e308) ends.
constexpr double kLargestUsable = 1e100;

template <class Q>
class PviClient {
 public:
  using Family = GaussianFamily<Q>;
  using Natural = typename Family::Natural;

  // `data`: this silo's data together with the public data.
  PviClient(const fvi_model& model, const fvi_data& data, int silo, PviOptions options);

  struct Update {
    Natural delta;              // tau (eta(q_m) - eta(q_s)): the only thing sent
    long steps = 0;             // optimiser steps taken (0: closed form)
    double objective = 0;       // the local objective at the end (MC estimate)
  };
  Update update(const Natural& server, uint32_t round);
  // E_q[sum_i L(y_i | theta)] over this silo's rows for q = the given global posterior (Monte
  // Carlo, mc_samples draws per minibatch): the silo's term of the objective, one number.
  // With a function-space prior, plus the silo's function-space KL term (function_space_term).
  double evaluate(const Natural& server, uint32_t round);
  // With a function-space prior: the linearised q~(f(x)) = N(f(x; m), J diag(sigma^2) J') of q =
  // `server` at the silo's evaluation context points (the same every round), each output's mean
  // and sd; what the silo's stopping rule watches, since a function-space objective leaves the
  // weights in J's null space free (seed 001 Eqs. 15, 17). False without one.
  bool function_moments(const Natural& server, Eigen::VectorXd& mean, Eigen::VectorXd& sd);

  int64_t observations() const;
  // Minibatches per pass over this silo's rows (1: every row each step; PviOptions::batch_size).
  long batches() const;
  Eigen::Index dim() const { return dim_; }
  const PviOptions& options() const { return options_; }
  // The silo's log likelihood of the written model (every row, no loss or weight) at each column
  // of theta: the silo's part of log p for the quality diagnostic.
  Eigen::VectorXd log_likelihood(const Eigen::MatrixXd& theta);
  bool closed_form() const { return closed_form_.has_value(); }
  // How this silo's update is made, for the run's header.
  std::string update_kind() const;
  const Natural& factor() const { return factor_; }
  void set_factor(const Natural& factor) { factor_ = factor; }
  // Whether the next update is this silo's first (init_sd applies to the first only).
  bool first_update() const { return !updated_once_; }
  void set_first_update(bool first) { updated_once_ = !first; }

 private:
  struct Gradient {
    double loss = 0;
    Eigen::VectorXd d_params;  // with respect to q's parameters (empty if not asked)
  };
  // The loss on minibatch `batch` of `batches`, scaled to the whole silo, averaged over
  // `draws` draws of q: the mean-field family through the kernels' local reparameterisation,
  // the full-rank one by sampling theta. The noise is a pure function of `rng`'s next values.
  // With `coordinates`, q is a distribution of z and theta = coordinates.to_theta(z) (full-rank only).
  Gradient loss_gradient(const Q& q, long batch, long batches, long draws, CounterRng& rng, bool with_gradient,
                         const AffineCoordinates* coordinates = nullptr);
  // The same for a mean-field q given by its mean and sd (one vector each: the global group),
  // through the kernels' local reparameterisation: the gradient with respect to the mean and sd.
  // In T: double, or float as MeanFieldShards<float> keeps q for precision = float32.
  template <class T>
  struct MeanFieldLossGradient {
    double loss = 0;
    // The gradient with respect to q's mean and sd is the sum of these terms (one per likelihood
    // and part of its rows: MeanFieldShards::step adds them up as it steps); empty if not asked.
    std::vector<VectorX<T>> d_mean, d_sd;
  };
  template <class T>
  MeanFieldLossGradient<T> meanfield_loss_gradient(const GroupVectors<T>& means, const GroupVectors<T>& sds,
                                                   long batch, long batches, long draws, CounterRng& rng,
                                                   bool with_gradient);
  // The first update's start means: `mean`, plus init_mean_sd times standard normals of the
  // initialisation stream of `seed` (party 0: every silo draws the same).
  Eigen::VectorXd first_start_mean(const Eigen::VectorXd& mean) const;
  // beta times the function-space KL of q = `server` against the prior linearised at the cavity,
  // summed over context_points fixed points and averaged over kEvaluationContextSets such sets.
  double function_space_term(const Natural& server);
  // Calls `visit(context)` for each of the kEvaluationContextSets fixed sets of evaluation points.
  template <class Visit>
  void for_evaluation_points(Visit visit);
  static constexpr int kEvaluationContextSets = 4;
  // The stochastic optimisation of the local objective from `params` (seed 000 Eq. 4): Adam over
  // the minibatches, with early stopping. Returns the final parameters; sets out.steps and
  // out.objective. With `coordinates`, params, cavity and q_cavity are in z (the full-rank family).
  Eigen::VectorXd optimise(Eigen::VectorXd params, const Natural& cavity, const std::optional<Q>& q_cavity,
                           uint32_t round, Update& out, const AffineCoordinates* coordinates = nullptr);
  // The coordinates of this update's fit (full-rank family): theta = m + L z from the Laplace
  // approximation of the tilted posterior, cavity x likelihood^loss_weight over every row (Newton
  // from q_s's mean; at most kLaplaceDimensions globals), else from q_s itself. `at_laplace`: the
  // former, so that z ~ N(0, I) is that Laplace approximation.
  AffineCoordinates local_coordinates(const Natural& cavity, const Q& q_server, bool& at_laplace);
  // One pass of the optimiser's loop: `step(batch, t)` takes step t on minibatch `batch` and
  // returns the objective before it; `current()` gives the parameters now; `scale(s)` sets the
  // step size's multiplier (the adaptive update's decay).
  template <class StepFn, class CurrentFn, class ScaleFn>
  Eigen::VectorXd run_steps(long steps, long n_batches, uint32_t round, StepFn step, CurrentFn current,
                            ScaleFn scale, Update& out);

  std::shared_ptr<WorkerPool> pool_;  // null with one thread
  std::vector<std::unique_ptr<RowParallelFactor>> likelihoods_;
  std::unique_ptr<ContextPoints> context_;  // function_space: the likelihood at context points
  std::optional<Q> function_space_prior_;   // function_space: the last update's cavity (evaluate's prior)
  int silo_;
  // The data value largest in size and its variable: named when the objective is not finite
  // and the data, not the step size, are the likely cause.
  double largest_datum_ = 0;
  std::string largest_datum_name_;
  PviOptions options_;
  Eigen::Index dim_ = 0;
  Natural factor_;
  bool updated_once_ = false;
  std::optional<Natural> closed_form_;  // the likelihood's natural parameters, when quadratic
  // Weighted score matching (seed 000 Prop 4.10) of a Gaussian location model x ~ normal(theta,
  // sigma): the silo's observations and sigma^2.
  struct LocationModel {
    Eigen::MatrixXd xs;  // 1 x n
    double sigma2 = 1;
  };
  std::optional<LocationModel> location_;
  void bind_location_model();
  ScoreWeight<double> score_weight() const;
};

template <class Q>
class PviServer {
 public:
  using Family = GaussianFamily<Q>;
  using Natural = typename Family::Natural;

  // `data`: the public and server data. Reads the prior from the model's server density, which
  // must be Gaussian on the unconstrained scale.
  PviServer(const fvi_model& model, const fvi_data& data, uint64_t seed);

  const Natural& posterior() const { return posterior_; }
  const Natural& prior() const { return prior_; }
  Q distribution() const { return Family::distribution(posterior_); }
  // eta_s += delta (spec 000 §2.3). Refused, with nothing changed, if the result is not a proper
  // Gaussian or not usable (unusable()).
  void apply(const Natural& delta, int silo);
  // Why a global posterior with natural parameters `eta` cannot be used ("" if it can): it is
  // not a proper Gaussian, or a mean or a standard deviation is outside [1e-100, 1e100] in size
  // (a finite but absurd update; every party squares these and multiplies them by data).
  static std::string unusable(const Natural& eta);
  void set_posterior(const Natural& eta) { posterior_ = eta; }
  // KL(q_s : prior), the server's term of the negative ELBO.
  double kl_to_prior() const;

 private:
  Natural prior_, posterior_;
};

}  // namespace fvi::engine
