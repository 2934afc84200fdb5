#pragma once
// The amortised Gaussian q_psi(z_i | u_i) of seed 004 §4.1 (Eq. 9): one small network, shared by
// every row, maps a row's inputs u_i (the silo's contribution m_i = g_j(x_ij, theta_j), and y_i
// in the power-likelihood model) to the mean and scale of that row's auxiliary variable:
//     (a_i, s_i) = MLP_psi(u_i),   mu_i = m_i + a_i,   sigma_i = exp(s_i),   z_i = mu_i + sigma_i tau_i.
// The network predicts the offset of the mean from the coupling prior's mean m_i (our choice; the
// paper does not say how the output is parameterised), so that a network with a zero output layer
// starts q(z | theta) at the prior's centre.
//
// Layers: `depth` hidden tanh layers of `width` units, then a linear layer to (a, s). Parameters,
// in this order, layer by layer: the weight matrix (out x in, column-major), then the bias.
// Every evaluation is batched: R rows (row x draw pairs) are R columns.
#include <cmath>
#include <vector>

#include "fvi/eigen_types.h"

namespace fvi {

class AmortizedGaussianNet {
 public:
  AmortizedGaussianNet() = default;
  AmortizedGaussianNet(Eigen::Index inputs, Eigen::Index width, Eigen::Index depth);

  Eigen::Index inputs() const { return inputs_; }
  Eigen::Index num_params() const { return num_params_; }

  // Parameters with the hidden weights drawn N(0, 1/fan_in) from `normals` (num_params() values,
  // of which the hidden layers' weights are used), zero hidden biases, a zero output weight, and
  // output biases (0, log_sd0): q starts at N(m_i, sd0^2) for every row.
  Eigen::VectorXd initial_params(const Eigen::VectorXd& normals, double sd0) const;

  // Evaluates the network on u (inputs x R) and keeps what backward() needs. Returns 2 x R:
  // row 0 the mean offset a, row 1 the log-scale s.
  const Eigen::MatrixXd& forward(const Eigen::VectorXd& params, const Eigen::MatrixXd& u);

  // After forward(): given the adjoint of the outputs (2 x R), adds the parameters' gradient to
  // d_params (if not null) and returns the inputs' adjoint (inputs x R).
  Eigen::MatrixXd backward(const Eigen::VectorXd& params, const Eigen::MatrixXd& d_out, Eigen::VectorXd* d_params) const;

 private:
  struct Layer {
    Eigen::Index in = 0, out = 0, offset = 0;  // the weight starts at offset, the bias at offset + in * out
  };
  Eigen::Index inputs_ = 0, num_params_ = 0;
  std::vector<Layer> layers_;
  std::vector<Eigen::MatrixXd> activations_;  // the input of each layer, from the last forward()
  Eigen::MatrixXd output_;
};

}  // namespace fvi
