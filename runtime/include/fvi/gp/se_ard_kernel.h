#pragma once
// The squared-exponential kernel with one lengthscale per input dimension (SE-ARD), the kernel of
// every sparse-GP experiment in seed 003 (spec 003 §3):
//     k(x, x') = s^2 exp(-1/2 sum_d (x_d - x'_d)^2 / l_d^2),
// Stan's gp_exp_quad_cov(x, alpha = s, length_scale = l) when every l_d is the same. Inputs are
// matrices with one point per row; hyperparameters live on the log scale, where their priors and
// variational factors are Gaussian (log-normal on the natural scale, spec 003 §3).
#include <Eigen/Dense>

namespace fvi::gp {

struct SeArdKernel {
  double log_scale = 0;                // log s
  Eigen::VectorXd log_lengthscales;    // log l_d, one per input dimension

  Eigen::Index dimensions() const { return log_lengthscales.size(); }
  double variance() const;             // s^2 = k(x, x)
};

// The adjoints of the kernel's hyperparameters, accumulated by se_ard_vjp.
struct SeArdKernelAdjoint {
  double log_scale = 0;
  Eigen::VectorXd log_lengthscales;

  explicit SeArdKernelAdjoint(Eigen::Index dimensions = 0)
      : log_lengthscales(Eigen::VectorXd::Zero(dimensions)) {}
};

// K(a, b): a.rows() x b.rows(). Throws when the points' dimension is not the kernel's.
Eigen::MatrixXd se_ard(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const SeArdKernel& kernel);

// Reverse mode through k = se_ard(a, b, kernel) given k's adjoint k_bar (any matrix of k's shape,
// symmetric or not): adds to *a_bar, *b_bar (either may be null: a constant input) and *kernel_bar.
// With E = k_bar .* k and r_ijd = (a_id - b_jd) / l_d^2:
//     a_bar_id += -sum_j E_ij r_ijd,   b_bar_jd += sum_i E_ij r_ijd,
//     log s_bar += 2 sum E,            log l_d_bar += sum_ij E_ij (a_id - b_jd)^2 / l_d^2.
void se_ard_vjp(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const SeArdKernel& kernel,
                const Eigen::MatrixXd& k, const Eigen::MatrixXd& k_bar, Eigen::MatrixXd* a_bar,
                Eigen::MatrixXd* b_bar, SeArdKernelAdjoint* kernel_bar);

}  // namespace fvi::gp
