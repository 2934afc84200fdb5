#pragma once
// A silo's approximate-likelihood factor over the inducing outputs u = f(Z) of a sparse GP
// (spec 003 §2.5), in one of the two forms seed 003 compares:
//   DPO, decoupled pseudo-observations:  t_k(u | Z, beta) ∝ N(K_{V_k Z} K_ZZ^-1 u; m_k, S_k)
//        with learnt pseudo-inputs V_k (M_k x D), pseudo-targets m_k and diagonal pseudo-noise
//        S_k (seed 003 Eq. 12); the factor moves with Z and the kernel.
//   CPO, coupled pseudo-observations:    t_k(u) ∝ exp(h_k' u - 1/2 u' P_k u), P_k = L_k L_k'
//        (N(u; m_k, S_k) in natural parameters, h = S^-1 m, P = S^-1), the same whatever Z is.
// Both enter q(u | Z, beta) ∝ p(u | Z, beta) prod_k t_k through their contributions in the
// "K-scaled" coordinates in which DPO needs no inverse of K = K_ZZ (inducing_posterior.h):
//     B_k = K P_k K,  b_k = K h_k   where P_k, h_k are t_k's natural parameters over u,
//   DPO: B_k = W' S^-1 W, b_k = W' S^-1 m with W = K_{V_k Z}   (spec 003 App. C, Eqs. 24-25);
//   CPO: B_k = (K L)(K L)',  b_k = K h.
#include <Eigen/Dense>

#include "fvi/gp/se_ard_kernel.h"

namespace fvi::gp {

enum class FactorForm { Dpo, Cpo };

struct PseudoObservationFactor {
  FactorForm form = FactorForm::Dpo;
  // DPO
  Eigen::MatrixXd inputs;     // V_k, M_k x D
  Eigen::VectorXd targets;    // m_k
  Eigen::VectorXd log_noise;  // log diag(S_k): pseudo-noise variances on the log scale
  // CPO
  Eigen::VectorXd h;          // natural location h_k (M)
  Eigen::MatrixXd chol;       // lower triangular L_k (M x M), P_k = L_k L_k'

  Eigen::Index size() const { return form == FactorForm::Dpo ? targets.size() : h.size(); }
  // Every number the factor holds, in one vector (the order of flatten/unflatten below).
  Eigen::Index parameter_count() const;
};

// A silo's first factor: DPO with M_k pseudo-inputs at the given points, targets 0 and
// pseudo-noise 1 / precision; CPO over M inducing outputs with h = 0 and P = precision I. The
// default, precision 1, is about as informative as one standardised observation per point: seed
// 003 App. D starts "all precisions at 100", which, read as these factors' (pseudo-targets of 0
// with noise sd 0.1), pins f at 0 and let the kernel's scale collapse on Boston housing.
PseudoObservationFactor initial_dpo(const Eigen::MatrixXd& pseudo_inputs, double precision = 1);
PseudoObservationFactor initial_cpo(Eigen::Index inducing_points, double precision = 1);

// The factor's numbers as one vector (CPO: h, then L's lower triangle by columns) and back; the
// adjoint of a factor uses the same layout.
Eigen::VectorXd flatten(const PseudoObservationFactor& factor);
void unflatten(const Eigen::VectorXd& values, PseudoObservationFactor* factor);

// M_k by seed 003's rule min(0.8 N_k, cap) (spec 003 §4.2), at least 1.
Eigen::Index pseudo_observation_count(Eigen::Index silo_rows, Eigen::Index cap);

// B_k and b_k of one factor at inducing inputs z, with k_zz = K (jitter included) and, for DPO,
// w = K_{V_k Z} (pass the matrix so that the caller computes each kernel matrix once).
struct FactorContribution {
  Eigen::MatrixXd B;  // M x M, symmetric positive semi-definite
  Eigen::VectorXd b;  // M
  Eigen::MatrixXd w;  // DPO: K_{V_k Z}; empty for CPO
};

FactorContribution contribution(const PseudoObservationFactor& factor, const Eigen::MatrixXd& z,
                                const Eigen::MatrixXd& k_zz, const SeArdKernel& kernel);

// Reverse mode through contribution(): given the adjoints of B (any M x M matrix) and b, adds to
// the factor's own adjoint (flattened layout; null for a factor held constant), to K's adjoint
// (CPO) and, for DPO, through W = K_{V Z} to Z's and the kernel's adjoints.
void contribution_vjp(const PseudoObservationFactor& factor, const FactorContribution& c,
                      const Eigen::MatrixXd& z, const Eigen::MatrixXd& k_zz, const SeArdKernel& kernel,
                      const Eigen::MatrixXd& B_bar, const Eigen::VectorXd& b_bar, Eigen::VectorXd* factor_bar,
                      Eigen::MatrixXd* k_zz_bar, Eigen::MatrixXd* z_bar, SeArdKernelAdjoint* kernel_bar);

}  // namespace fvi::gp
