#pragma once
// The server aggregation rules of seed 001 other than PVI's natural-parameter sum, for a
// mean-field Gaussian q held as nu = [mean; log variance] (spec 001 Common primitive B):
//  - FedAvg (Algorithm 1, lines 8-10): the pseudo-gradient Delta = sum_s (n_s / n) (nu - nu_s),
//    applied by a server optimiser;
//  - FedVEM (Algorithm 2, Eqs. 36, 41-42): the closed-form M-step of the hierarchical model
//    theta_s ~ N(mu, sigma^2), nu* = (mean of mu_s, log of the mean of (mu* - mu_s)^2 + sigma_s^2),
//    applied as the pseudo-gradient nu - nu*.
// The server optimiser is SGD (lr 1: plain averaging, the exact M-step) or Adam with epsilon = tau
// (FedOpt, Reddi et al. 2021, as spec 001 §5 uses it).
#include <optional>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/optim/adam.h"

namespace fvi::engine {

// nu = [mean; log variance] of a mean-field Gaussian, and back.
Eigen::VectorXd log_variance_params(const Eigen::VectorXd& mean, const Eigen::VectorXd& sd);
void mean_sd_of(const Eigen::VectorXd& nu, Eigen::VectorXd& mean, Eigen::VectorXd& sd);

// seed 001 Alg. 1 lines 8-9: sum_s w_s (server - clients[s]) with w_s = sizes[s] / sum(sizes).
Eigen::VectorXd fedavg_pseudo_gradient(const Eigen::VectorXd& server, const std::vector<Eigen::VectorXd>& clients,
                                       const std::vector<double>& sizes);

// seed 001 Eqs. 36 and 42: nu* = [mu*; alpha*] of the clients' nu_s, the mu* of Eq. 36 inside
// Eq. 41 (the joint stationary point of sum_s KL(q_s : N(mu, sigma^2)), spec 001 Alg. 2).
Eigen::VectorXd fedvem_moment_match(const std::vector<Eigen::VectorXd>& clients);

struct ServerOptimiserOptions {
  std::string kind = "sgd";  // sgd or adam
  double lr = 1;
  double tau = 1e-4;         // Adam's epsilon (the adaptivity of Reddi et al.; spec 001 Table 2 chose 1e-4)
};

// nu <- nu - lr g (SGD) or one Adam step on the pseudo-gradient g.
class ServerOptimiser {
 public:
  ServerOptimiser(Eigen::Index size, ServerOptimiserOptions options);
  void step(Eigen::VectorXd& nu, const Eigen::VectorXd& pseudo_gradient);
  // The step size's multiplier from now on (the stopping rule's decay; 1 at the start).
  void set_scale(double scale);
  const ServerOptimiserOptions& options() const { return options_; }
  // Adam's state (t, m, v) for a checkpoint, and back; empty for SGD.
  std::vector<double> state() const;
  void restore(const std::vector<double>& state);
  size_t state_size() const;

 private:
  ServerOptimiserOptions options_;
  std::optional<Adam<double>> adam_;
  double scale_ = 1;
};

}  // namespace fvi::engine
