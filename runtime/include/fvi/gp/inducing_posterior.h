#pragma once
// q(u | Z, beta) ∝ p(u | Z, beta) prod_k t_k(u | Z, beta) for a sparse GP whose silos hold
// pseudo-observation factors (pseudo_observations.h), and its predictive (spec 003 §2.5).
//
// With K = K_ZZ + jitter s^2 I and each factor's B_k = K P_k K, b_k = K h_k:
//     A = K + sum_k B_k,   a = A^-1 sum_k b_k,
//     q(u) = N(K a, K A^-1 K)           natural parameters  Lambda = K^-1 A K^-1,  h = K^-1 sum b_k.
// For DPO factors A = K + K_ZV S^-1 K_VZ: the Titsias/DTC posterior given the union of the
// silos' pseudo-observations (spec 003 §2.5); no inverse of K is formed, and the cost is
// O(sum_k M_k M^2 + M^3). The cavity of silo k is the same assembly without t_k.
// Predictive at x (seed 003 §6, the SVGP marginal):
//     mu(x) = k_xZ a,   v(x) = k_xx - k_xZ K^-1 k_Zx + k_xZ A^-1 k_Zx.
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Dense>

#include "fvi/gp/pseudo_observations.h"
#include "fvi/gp/se_ard_kernel.h"

namespace fvi::gp {

// K_ZZ + jitter s^2 I: the jitter is relative to the kernel's variance, so it means the same
// thing whatever the data's scale.
Eigen::MatrixXd inducing_covariance(const Eigen::MatrixXd& z, const SeArdKernel& kernel, double jitter);

// A Cholesky factorisation that names the matrix when it is not positive definite.
Eigen::LLT<Eigen::MatrixXd> cholesky_or_throw(const Eigen::MatrixXd& m, const char* what);

struct InducingPosterior {
  Eigen::MatrixXd k_zz;                 // K
  Eigen::LLT<Eigen::MatrixXd> k_chol;
  Eigen::MatrixXd A;
  Eigen::LLT<Eigen::MatrixXd> a_chol;
  Eigen::VectorXd b;                    // sum_k b_k
  Eigen::VectorXd a;                    // A^-1 b = K^-1 E[u]

  Eigen::VectorXd mean() const;              // E[u] = K a
  Eigen::MatrixXd covariance() const;        // K A^-1 K
  Eigen::VectorXd natural_location() const;  // K^-1 b
  Eigen::MatrixXd natural_precision() const; // K^-1 A K^-1
};

// Assemble q(u | Z, beta) from the given factors (all silos' for q, all but one for a cavity).
InducingPosterior inducing_posterior(const Eigen::MatrixXd& z, const SeArdKernel& kernel, double jitter,
                                     const std::vector<const PseudoObservationFactor*>& factors);

struct LatentPredictive {
  Eigen::VectorXd mean;      // mu(x)
  Eigen::VectorXd variance;  // v(x): the latent f's, without the observation noise
};

LatentPredictive predict_latent(const InducingPosterior& q, const Eigen::MatrixXd& z, const SeArdKernel& kernel,
                                const Eigen::MatrixXd& x);

}  // namespace fvi::gp
