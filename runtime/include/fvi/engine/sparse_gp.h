#pragma once
// Federated sparse GP regression (seed 003): PVI over the global parameters theta (the kernel's
// log hyperparameters, the log noise sd and, when they are random, the inducing inputs Z), with
// each silo's approximate likelihood over the inducing outputs u held as pseudo-observations
// (fvi/gp/pseudo_observations.h) that the server stores and sends on, never as natural
// parameters (a DPO factor moves with Z and the kernel, so it has none that stay fixed).
//
// A silo's step (seed 003 Algorithm 2 steps 5-6, Eq. 7 with the weight alpha):
//     max over q(theta), t_k(u):  E_{q(theta)}[F_k(theta; t_k, {t_m}_{m != k})]
//                                 - sum_i w_i KL[q(theta_i) || q_\k(theta_i)],
// F_k the local free energy of fvi/gp/local_free_energy.h, w_i = alpha for Z's coordinates (the
// hierarchical variational model's auxiliary KL, spec 003 §2.3) and 1 for the hyperparameters; q
// mean-field Gaussian (log-normal hyperparameters, spec 003 §3), started at the server's q and
// optimised by Adam on reparameterised draws. Its new factor over theta is q / q_\k in natural
// parameters, its precision kept >= 0 (so that no cavity is ever improper). When Z is a point estimate shared by all (Algorithm 1, the FedAvg baseline), the
// silo takes joint gradient steps on Z too and the server averages the silos' Z with weights N_k / N.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include "fvi/engine/settings.h"
#include "fvi/family/natural_gaussian.h"
#include "fvi/gp/local_free_energy.h"
#include "fvi/gp/pseudo_observations.h"

namespace fvi::engine {

using DiagNatural = DiagGaussianNatural<double>;

// Where the sparse GP's quantities sit in theta (a positive quantity's unconstrained value is its
// log), or their values when they are not random.
struct SparseGpLayout {
  struct Slot {
    Eigen::Index offset = -1;  // in theta; -1: not random (fixed, or Z as a shared point estimate)
    Eigen::Index count = 1;
    Eigen::VectorXd value;     // when not random: the value (log for positive quantities; Z column-major)
    bool random() const { return offset >= 0; }
  };
  Eigen::Index dim = 0;                       // theta's size
  Eigen::Index inducing = 0, dimensions = 0;  // M, D
  Slot z;                                     // M * D values, column-major
  bool z_shared_point = false;                // Z a point estimate averaged by the server (Algorithm 1)
  Slot log_scale, log_lengthscale, log_noise_sd;  // log_lengthscale: 1 (isotropic) or D values

  // The draw's Z, kernel and noise at theta (Z from `z_point` when Z is not in theta).
  gp::GpDraw draw(const Eigen::VectorXd& theta, const Eigen::MatrixXd* z_point = nullptr) const;
  // Adds the draw's adjoint to theta's (and to Z's when Z is a point: *z_point_bar).
  void add_adjoint(const gp::GpDrawAdjoint& adjoint, Eigen::VectorXd* theta_bar,
                   Eigen::MatrixXd* z_point_bar = nullptr) const;
  // The weight of each coordinate's KL: alpha on Z's, 1 on the others.
  Eigen::VectorXd kl_weights(double auxiliary_weight) const;
  // "" or what is inconsistent (a slot outside theta, a wrong count).
  std::string problem() const;
};

struct SparseGpOptions {
  gp::FactorForm form = gp::FactorForm::Dpo;
  long pseudo_cap = 500;           // M_k = min(0.8 N_k, pseudo_cap) (spec 003 §4.2)
  double auxiliary_weight = 0.1;   // alpha, the KL weight of q(Z) (spec 003 §4: 0.1 in every experiment)
  double jitter = 1e-6;            // relative to the kernel's variance
  long local_steps = 300;          // Adam steps of one silo update
  double learning_rate = 1e-2;     // Adam (spec 003 App. D: lr 1e-2, betas 0.9, 0.999)
  long mc_samples = 1;             // draws of theta per step
  long batch_size = 0;             // rows per step; 0: every row
  std::string schedule = "sequential";  // or synchronous
  double damping = 1;              // synchronous: t_k <- t_k + damping (t_k_new - t_k)
  uint64_t seed = 1;
  long evaluation_draws = 16;      // draws of theta behind each round's objective and predictions
  double init_sd = 0.1;            // the starting q's sd (precision 100, seed 003 App. D); 0: start at the prior

  static SparseGpOptions from(const Settings& settings);
};

// Diagonal Gaussian KL(q || c) per coordinate in natural parameters, weighted and summed, with
// its gradient in q's mean and log sd; a cavity that is not proper in some coordinate counts
// only -H(q) - E_q[log c] there (the rest does not depend on q).
double weighted_kl(const Eigen::VectorXd& mean, const Eigen::VectorXd& log_sd, const DiagNatural& cavity,
                   const Eigen::VectorXd& weights, Eigen::VectorXd* mean_bar, Eigen::VectorXd* log_sd_bar);

struct SparseGpUpdate {
  DiagNatural factor;                 // t_k(theta), natural parameters
  gp::PseudoObservationFactor pseudo; // t_k(u)
  Eigen::MatrixXd z_point;            // Algorithm 1: the silo's Z after its steps (empty otherwise)
  double free_energy = 0;             // the local objective, averaged over the last 10% of the steps
};

class SparseGpClient {
 public:
  SparseGpClient(SparseGpLayout layout, Eigen::MatrixXd x, Eigen::VectorXd y, SparseGpOptions options, int silo);

  Eigen::Index rows() const { return y_.size(); }
  // This silo's first factor over u: DPO with M_k pseudo-inputs drawn from N(0, I) (never its own
  // rows, which would leave the silo in its first message), CPO over the M inducing outputs.
  gp::PseudoObservationFactor initial_factor() const;

  // One update from the server's q (= cavity x this silo's factor) and the other silos' factors.
  SparseGpUpdate update(uint32_t round, const DiagNatural& q, const DiagNatural& own, const gp::PseudoObservationFactor& own_pseudo,
                        const std::vector<gp::PseudoObservationFactor>& others, const Eigen::MatrixXd& z_point) const;

  // At the round's shared draws of theta from q, with every silo's factor in q(u): the sum over
  // the silo's rows of E[log N(y_n; f(x_n), sigma^2)] and of the predictive log density log p(y_n)
  // (the mixture over the draws), each averaged / mixed over the draws.
  struct Evaluation {
    double expected_log_likelihood = 0, predictive_log_density = 0;
  };
  Evaluation evaluate(uint32_t round, const DiagNatural& q, const std::vector<gp::PseudoObservationFactor>& all,
                      const Eigen::MatrixXd& z_point) const;

 private:
  SparseGpLayout layout_;
  Eigen::MatrixXd x_;
  Eigen::VectorXd y_;
  SparseGpOptions options_;
  int silo_;
};

// The shared draws of theta for a round's evaluation (the same on the server and every silo).
Eigen::MatrixXd evaluation_draws(const DiagNatural& q, const SparseGpOptions& options, uint32_t round);

// The predictive at held-out rows: the mixture over draws of theta of N(y; mu(x), v(x) + sigma^2)
// (seed 003 §6, S draws). Returns the mean log density per row and the RMSE of the mixture's mean.
struct PredictiveScore {
  double log_density = 0, rmse = 0;
  Eigen::VectorXd mean, sd;  // the mixture's mean and sd of y at each row
};
PredictiveScore predictive_score(const SparseGpLayout& layout, const Eigen::MatrixXd& theta_draws,
                                 const std::vector<gp::PseudoObservationFactor>& all, const Eigen::MatrixXd& z_point,
                                 double jitter, const Eigen::MatrixXd& x, const Eigen::VectorXd& y);

class SparseGpServer {
 public:
  SparseGpServer(SparseGpLayout layout, DiagNatural prior, int silos, SparseGpOptions options,
                 Eigen::MatrixXd z_point = {});

  const SparseGpLayout& layout() const { return layout_; }
  const SparseGpOptions& options() const { return options_; }
  int silos() const { return int(factors_.size()); }
  const DiagNatural& prior() const { return prior_; }
  DiagNatural posterior() const;   // prior + sum_k t_k
  const DiagNatural& factor(int k) const { return factors_[size_t(k)]; }
  // Silo k's factor over u, once it has sent one.
  const std::optional<gp::PseudoObservationFactor>& pseudo(int k) const { return pseudo_[size_t(k)]; }
  std::vector<gp::PseudoObservationFactor> others(int k) const;  // every other silo's that exists
  std::vector<gp::PseudoObservationFactor> all() const;
  const Eigen::MatrixXd& z_point() const { return z_point_; }

  // Takes silo k's update (damped by `damping` for its factor over theta); "" or why it is
  // refused (the posterior would be improper, a factor of the wrong size, non-finite numbers).
  std::string accept(int k, const SparseGpUpdate& update, double damping, Eigen::Index rows_k, Eigen::Index rows_total);

  // The objective's server part at the round's shared draws: E[KL(q(u | Z, beta) || p(u | Z, beta))]
  // + sum_i w_i KL(q(theta_i) || p(theta_i)). The silos' expected log-likelihoods make up the rest.
  double kl_part(uint32_t round) const;

  // Checkpoint state (every factor, pseudo-observations and Z) and back.
  std::vector<double> state() const;
  void restore(const std::vector<double>& state);

 private:
  SparseGpLayout layout_;
  DiagNatural prior_;
  SparseGpOptions options_;
  std::vector<DiagNatural> factors_;
  std::vector<std::optional<gp::PseudoObservationFactor>> pseudo_;
  Eigen::MatrixXd z_point_;
};

}  // namespace fvi::engine
