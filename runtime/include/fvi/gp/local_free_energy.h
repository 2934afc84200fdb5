#pragma once
// A silo's local free energy for a sparse GP with a Gaussian likelihood, at one draw of the
// inducing inputs Z and the hyperparameters (spec 003 §2.4, seed 003 Eq. 7 inside the
// expectation over q(Z) q(beta)):
//     F_k = sum_{n in D_k} E_{q(f(x_n) | Z, beta)}[log N(y_n; f(x_n), sigma^2)]
//           - KL[q(u | Z, beta) || q_\k(u | Z, beta)],
// where q is the cavity's factors times this silo's own factor t_k. The expectation is closed
// form (spec 003 §2.5): -1/2 log(2 pi sigma^2) - ((y - mu(x))^2 + v(x)) / (2 sigma^2). In the
// coordinates of inducing_posterior.h (A = A_c + B_k, a = A^-1 b, a_c = A_c^-1 b_c), the KL is
//     KL = 1/2 [tr(A_c A^-1) + (a_c - a)' A_c (a_c - a) - M + log|A| - log|A_c|].
// The gradient with respect to this silo's factor, Z, the kernel's log hyperparameters and the
// log noise sd comes from reverse mode written out below (each step's rule beside it).
#include <vector>

#include <Eigen/Dense>

#include "fvi/gp/pseudo_observations.h"
#include "fvi/gp/se_ard_kernel.h"

namespace fvi::gp {

// One draw of the quantities the factors are conditioned on.
struct GpDraw {
  Eigen::MatrixXd z;         // inducing inputs, M x D
  SeArdKernel kernel;
  double log_noise_sd = 0;   // log sigma
};

struct GpDrawAdjoint {
  Eigen::MatrixXd z;
  SeArdKernelAdjoint kernel;
  double log_noise_sd = 0;
  Eigen::VectorXd factor;    // this silo's factor, flattened (pseudo_observations.h)

  GpDrawAdjoint(const GpDraw& at, const PseudoObservationFactor& own);
};

// The silo's rows: x (N x D) and y; `scale` multiplies the data term (N_k / B for a minibatch of
// B rows out of N_k).
struct SiloRows {
  const Eigen::MatrixXd* x = nullptr;
  const Eigen::VectorXd* y = nullptr;
  double scale = 1;
};

struct FreeEnergy {
  double expected_log_likelihood = 0;
  double kl = 0;  // KL[q || cavity] over u
  double value() const { return expected_log_likelihood - kl; }
};

// F_k at one draw; with `adjoint` non-null, adds dF_k / d(everything but the cavity's factors)
// to it. `cavity` holds the other silos' factors (held constant: only this silo's is learnt).
FreeEnergy local_free_energy(const GpDraw& draw, const SiloRows& rows,
                             const std::vector<const PseudoObservationFactor*>& cavity,
                             const PseudoObservationFactor& own, double jitter, GpDrawAdjoint* adjoint);

}  // namespace fvi::gp

namespace fvi::gp {

// The maximiser of F_k over a CPO factor at fixed Z and hyperparameters: the expected
// log-likelihood is quadratic in u (E_{p(f|u)} log N(y; f, sigma^2) = log N(y; Phi u, sigma^2) -
// tr(K_xx - Q_xx) / (2 sigma^2), Phi = K_xZ K^-1), so the optimal factor is conjugate:
//     P_k = Phi' Phi / sigma^2,   h_k = Phi' y / sigma^2,
// whatever the cavity is. P_k has rank <= N_k; where N_k < M its Cholesky factor is taken of
// P_k + 1e-12 tr(P_k) / M I (a relative change of 1e-12).
PseudoObservationFactor conjugate_cpo_factor(const GpDraw& draw, const SiloRows& rows, double jitter);

}  // namespace fvi::gp
