#pragma once
// Gaussian natural parameters and the factor algebra of PVI / FedGVI (spec 000 §2.3, seed 000
// Eqs. 3-6): eta = (Sigma^{-1} mu, -1/2 Sigma^{-1}). Products of Gaussian factors add natural
// parameters, quotients subtract them, so
//     cavity        eta_cav = eta_s - lambda_m                         (seed 000 Eq. 3)
//     factor update lambda_m <- lambda_m + tau (eta_q - eta_s)         (seed 000 Eq. 5, spec 000 §2.3)
//     server        eta_s   = eta_prior + sum_m lambda_m               (seed 000 Eq. 6)
//
// Factors need not be normalisable: their precision may be zero or indefinite (spec 000 §2.3
// [repo], valid_factors=False). Only conversion to a distribution (to_mean_field / to_full_rank)
// requires a finite, positive-definite precision, and throws fvi::InvalidArgument otherwise.
//
// A log-normal factor is a Gaussian factor on log theta: use LogNormal::log_space().
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/family/full_rank_gaussian.h"
#include "fvi/family/log_normal.h"
#include "fvi/family/mean_field_gaussian.h"

namespace fvi {

// Diagonal: eta1 = mu / sigma^2, eta2 = -1 / (2 sigma^2), elementwise.
template <typename T = double>
struct DiagGaussianNatural {
  VectorX<T> eta1;
  VectorX<T> eta2;

  static DiagGaussianNatural zero(Eigen::Index d) { return {VectorX<T>::Zero(d), VectorX<T>::Zero(d)}; }
  Eigen::Index dim() const { return eta1.size(); }
  VectorX<T> precision() const { return -T(2) * eta2; }
  // The unnormalised log factor eta1^T z + z^T diag(eta2) z, per column of z.
  VectorX<T> log_factor(const MatrixX<T>& z) const {
    return ((z.array().colwise() * eta1.array()) + (z.array().square().colwise() * eta2.array()))
        .colwise()
        .sum()
        .matrix()
        .transpose();
  }
};

// Full: eta1 = Sigma^{-1} mu, eta2 = -1/2 Sigma^{-1}.
template <typename T = double>
struct GaussianNatural {
  VectorX<T> eta1;
  MatrixX<T> eta2;

  static GaussianNatural zero(Eigen::Index d) { return {VectorX<T>::Zero(d), MatrixX<T>::Zero(d, d)}; }
  Eigen::Index dim() const { return eta1.size(); }
  MatrixX<T> precision() const { return -T(2) * eta2; }
  VectorX<T> log_factor(const MatrixX<T>& z) const {
    return (eta1.transpose() * z).transpose() + (z.array() * (eta2 * z).array()).colwise().sum().matrix().transpose();
  }
};

// --- moment -> natural ------------------------------------------------------------------------

template <typename T>
DiagGaussianNatural<T> to_natural(const MeanFieldGaussian<T>& q) {
  const VectorX<T> precision = q.variance().cwiseInverse();
  return {q.mean().cwiseProduct(precision), -T(0.5) * precision};
}

template <typename T>
GaussianNatural<T> to_natural(const FullRankGaussian<T>& q) {
  const MatrixX<T> precision = q.precision();
  return {precision * q.mean(), -T(0.5) * precision};
}

// Natural parameters of the Gaussian on log theta.
template <typename T>
DiagGaussianNatural<T> to_natural(const LogNormal<T>& q) {
  return to_natural(q.log_space());
}

// --- natural -> moment (validated) --------------------------------------------------------------

// Throws fvi::InvalidArgument unless eta is finite and every precision -2 eta2 is > 0.
template <typename T>
MeanFieldGaussian<T> to_mean_field(const DiagGaussianNatural<T>& eta) {
  const char* fn = "to_mean_field";
  check_size(fn, "eta2", eta.eta2.size(), eta.eta1.size());
  check_finite(fn, "eta1", eta.eta1);
  check_finite(fn, "eta2", eta.eta2);
  const VectorX<T> precision = eta.precision();
  check_positive(fn, "precision (-2 eta2)", precision);
  const VectorX<T> variance = precision.cwiseInverse();
  return MeanFieldGaussian<T>(eta.eta1.cwiseProduct(variance), (T(0.5) * variance.array().log()).matrix());
}

template <typename T>
LogNormal<T> to_log_normal(const DiagGaussianNatural<T>& eta) {
  return LogNormal<T>(to_mean_field(eta));
}

// Throws fvi::InvalidArgument unless eta is finite, eta2 symmetric, and -2 eta2 positive definite.
template <typename T>
FullRankGaussian<T> to_full_rank(const GaussianNatural<T>& eta) {
  const char* fn = "to_full_rank";
  check_size(fn, "eta2 rows", eta.eta2.rows(), eta.eta1.size());
  check_square(fn, "eta2", eta.eta2);
  check_finite(fn, "eta1", eta.eta1);
  const MatrixX<T> precision = eta.precision();
  const auto llt = check_positive_definite(fn, "precision (-2 eta2)", precision);
  const VectorX<T> mean = llt.solve(eta.eta1);
  // Sigma = Lambda^{-1} = (L_p L_p^T)^{-1}; its Cholesky factor is chol of L_p^{-T} L_p^{-1}.
  const MatrixX<T> covariance = llt.solve(MatrixX<T>::Identity(eta.dim(), eta.dim()));
  return FullRankGaussian<T>::from_mean_covariance(mean, T(0.5) * (covariance + covariance.transpose()));
}

// True when the natural parameters describe a normalisable Gaussian.
template <typename T>
bool is_valid(const DiagGaussianNatural<T>& eta) {
  return eta.eta1.size() == eta.eta2.size() && eta.eta1.allFinite() && eta.eta2.allFinite() &&
         (eta.eta2.array() < 0).all();
}

template <typename T>
bool is_valid(const GaussianNatural<T>& eta) {
  if (eta.eta2.rows() != eta.eta1.size() || eta.eta2.cols() != eta.eta1.size()) return false;
  if (!eta.eta1.allFinite() || !eta.eta2.allFinite()) return false;
  if (!eta.eta2.isApprox(eta.eta2.transpose())) return false;
  Eigen::LLT<MatrixX<T>> llt(eta.precision());
  return llt.info() == Eigen::Success && (llt.matrixLLT().diagonal().array() > 0).all();
}

// --- factor algebra -----------------------------------------------------------------------------

namespace internal {
// Not check_same_dim: divergence_gradient.h's takes any two families, and where both are seen this
// one, more specialised, would win for a pair of one type and change the divergences' messages.
template <typename N>
void check_same_factor_dim(const char* fn, const N& a, const N& b) {
  check_size(fn, "second operand dimension", b.dim(), a.dim());
}
}  // namespace internal

// Product of factors: natural parameters add.
template <typename T>
DiagGaussianNatural<T> natural_product(const DiagGaussianNatural<T>& a, const DiagGaussianNatural<T>& b) {
  internal::check_same_factor_dim("natural_product", a, b);
  return {a.eta1 + b.eta1, a.eta2 + b.eta2};
}
template <typename T>
GaussianNatural<T> natural_product(const GaussianNatural<T>& a, const GaussianNatural<T>& b) {
  internal::check_same_factor_dim("natural_product", a, b);
  return {a.eta1 + b.eta1, a.eta2 + b.eta2};
}

// Quotient a / b: natural parameters subtract.
template <typename T>
DiagGaussianNatural<T> natural_quotient(const DiagGaussianNatural<T>& a, const DiagGaussianNatural<T>& b) {
  internal::check_same_factor_dim("natural_quotient", a, b);
  return {a.eta1 - b.eta1, a.eta2 - b.eta2};
}
template <typename T>
GaussianNatural<T> natural_quotient(const GaussianNatural<T>& a, const GaussianNatural<T>& b) {
  internal::check_same_factor_dim("natural_quotient", a, b);
  return {a.eta1 - b.eta1, a.eta2 - b.eta2};
}

// Power a^tau: natural parameters scale (tempering; the tau_m of Prop. 4.3, seed 000).
template <typename T>
DiagGaussianNatural<T> natural_power(const DiagGaussianNatural<T>& a, T tau) {
  check_finite("natural_power", "tau", tau);
  return {tau * a.eta1, tau * a.eta2};
}
template <typename T>
GaussianNatural<T> natural_power(const GaussianNatural<T>& a, T tau) {
  check_finite("natural_power", "tau", tau);
  return {tau * a.eta1, tau * a.eta2};
}

// Cavity q^{\m} = q_s / t_m (seed 000 Eq. 3).
template <typename N>
N cavity(const N& server, const N& factor) {
  return natural_quotient(server, factor);
}

// Damped factor refinement (seed 000 Eq. 5 in natural parameters, spec 000 §2.3):
// lambda_new = lambda_old + tau (eta_q_new - eta_s_old), tau in (0, 1]. The change
// lambda_new - lambda_old is what the client sends to the server.
template <typename T>
DiagGaussianNatural<T> damped_factor_update(const DiagGaussianNatural<T>& factor_old,
                                            const DiagGaussianNatural<T>& q_new,
                                            const DiagGaussianNatural<T>& server_old, T tau) {
  check_bounded("damped_factor_update", "tau", tau, T(0), T(1));
  if (!(tau > 0)) internal::throw_invalid("damped_factor_update", "tau must be in (0, 1] but is 0");
  return natural_product(factor_old, natural_power(natural_quotient(q_new, server_old), tau));
}
template <typename T>
GaussianNatural<T> damped_factor_update(const GaussianNatural<T>& factor_old, const GaussianNatural<T>& q_new,
                                        const GaussianNatural<T>& server_old, T tau) {
  check_bounded("damped_factor_update", "tau", tau, T(0), T(1));
  if (!(tau > 0)) internal::throw_invalid("damped_factor_update", "tau must be in (0, 1] but is 0");
  return natural_product(factor_old, natural_power(natural_quotient(q_new, server_old), tau));
}

}  // namespace fvi
