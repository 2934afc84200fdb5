#pragma once
// What the PVI engine needs of a Gaussian variational family, for the mean-field and the
// full-rank family alike: natural parameters (spec 000 §2.3), unconstrained parameters for the
// optimiser, reparameterised draws, and the client divergences D(q : cavity) with their gradients.
#include <string>

#include "fvi/divergence/alpha_renyi_divergence.h"
#include "fvi/divergence/fisher_rao_distance.h"
#include "fvi/divergence/kl_divergence.h"
#include "fvi/divergence/reverse_kl_divergence.h"
#include "fvi/divergence/weighted_kl_divergence.h"
#include "fvi/engine/quadratic_probe.h"
#include "fvi/engine/settings.h"
#include "fvi/family/natural_gaussian.h"

namespace fvi::engine {

template <class Q>
struct GaussianFamily;

template <>
struct GaussianFamily<MeanFieldGaussian<double>> {
  using Q = MeanFieldGaussian<double>;
  using Natural = DiagGaussianNatural<double>;
  static const char* name() { return "meanfield"; }
  static Q from_params(const Eigen::VectorXd& p) { return Q::from_params(p); }
  // The family's member with these marginal moments (a covariance's off-diagonal is dropped).
  static Q from_mean_covariance(const Eigen::VectorXd& mean, const Eigen::MatrixXd& covariance) {
    return Q::from_mean_sd(mean, covariance.diagonal().cwiseSqrt());
  }
  static Q with_mean(const Q& q, const Eigen::VectorXd& mean) { return Q::from_mean_sd(mean, q.sd()); }
  // q moved to `mean`, no sd wider than `sd`.
  static Q narrowed(const Q& q, const Eigen::VectorXd& mean, double sd) {
    return Q::from_mean_sd(mean, q.sd().cwiseMin(sd));
  }
  static Eigen::VectorXd sd(const Q& q) { return q.sd(); }
  static Natural zero(Eigen::Index d) { return Natural::zero(d); }
  // A factor's curvature as the family can hold it: the diagonal of -2 eta2 (a full Hessian
  // from a probe keeps only its diagonal, which is exact when the likelihood factorises).
  static Natural from_quadratic(const Quadratic& q, double weight) {
    return {weight * q.h, -0.5 * weight * (q.diagonal ? q.lambda_diagonal : Eigen::VectorXd(q.lambda.diagonal()))};
  }
  static double divergence(const Q& q, const Q& p, const DivergenceSpec& d, Eigen::VectorXd* gradient) {
    DiagDivergenceGradient<double> g;
    switch (d.kind) {
      case DivergenceKind::kKl: g = kl_divergence_gradient(q, p); break;
      case DivergenceKind::kReverseKl: g = reverse_kl_divergence_gradient(q, p); break;
      case DivergenceKind::kWeightedKl: g = weighted_kl_divergence_gradient(q, p, d.parameter); break;
      case DivergenceKind::kAlphaRenyi: g = alpha_renyi_divergence_gradient(q, p, d.parameter); break;
      case DivergenceKind::kFisherRao: g = fisher_rao_distance_gradient(q, p); break;
      case DivergenceKind::kNone:
        if (gradient) *gradient = Eigen::VectorXd::Zero(q.num_params());
        return 0;
    }
    if (gradient) *gradient = g.params_gradient();
    return g.value;
  }
  // KL(q : cavity) up to a constant when the cavity is improper (the paper's factors may be):
  // -H(q) - E_q[eta1 z + eta2 z^2].
  static double improper_kl(const Q& q, const Natural& cav, Eigen::VectorXd* gradient) {
    const Eigen::ArrayXd m = q.mean().array(), s2 = q.variance().array();
    const double value = -q.entropy() - (cav.eta1.array() * m + cav.eta2.array() * (m * m + s2)).sum();
    if (gradient) {
      gradient->resize(q.num_params());
      gradient->head(q.dim()) = -(cav.eta1.array() + 2 * cav.eta2.array() * m).matrix();
      gradient->tail(q.dim()) = (-1.0 - 2 * cav.eta2.array() * s2).matrix();
    }
    return value;
  }
  static bool proper(const Natural& eta) { return is_valid(eta); }
  static Q distribution(const Natural& eta) { return to_mean_field(eta); }
};

template <>
struct GaussianFamily<FullRankGaussian<double>> {
  using Q = FullRankGaussian<double>;
  using Natural = GaussianNatural<double>;
  static const char* name() { return "fullrank"; }
  static Q from_params(const Eigen::VectorXd& p) { return Q::from_params(p); }
  static Q from_mean_covariance(const Eigen::VectorXd& mean, const Eigen::MatrixXd& covariance) {
    return Q::from_mean_covariance(mean, covariance);
  }
  static Q with_mean(const Q& q, const Eigen::VectorXd& mean) { return Q(mean, q.chol()); }
  // q moved to `mean` and shrunk so that no sd is wider than `sd`.
  static Q narrowed(const Q& q, const Eigen::VectorXd& mean, double sd) {
    return Q(mean, std::min(1.0, sd / GaussianFamily::sd(q).maxCoeff()) * q.chol());
  }
  static Eigen::VectorXd sd(const Q& q) { return q.covariance().diagonal().cwiseSqrt(); }
  static Natural zero(Eigen::Index d) { return Natural::zero(d); }
  static Natural from_quadratic(const Quadratic& q, double weight) { return {weight * q.h, -0.5 * weight * q.full()}; }
  static double divergence(const Q& q, const Q& p, const DivergenceSpec& d, Eigen::VectorXd* gradient) {
    FullDivergenceGradient<double> g;
    switch (d.kind) {
      case DivergenceKind::kKl: g = kl_divergence_gradient(q, p); break;
      case DivergenceKind::kReverseKl: g = reverse_kl_divergence_gradient(q, p); break;
      case DivergenceKind::kWeightedKl: g = weighted_kl_divergence_gradient(q, p, d.parameter); break;
      case DivergenceKind::kAlphaRenyi: g = alpha_renyi_divergence_gradient(q, p, d.parameter); break;
      case DivergenceKind::kFisherRao:
        throw std::invalid_argument("divergence = fisher_rao needs family = meanfield (its closed form is univariate)");
      case DivergenceKind::kNone:
        throw std::invalid_argument("a function-space prior needs family = meanfield");
    }
    if (gradient) *gradient = q.params_gradient_from_covariance(g.d_mean, g.d_cov);
    return g.value;
  }
  static double improper_kl(const Q& q, const Natural& cav, Eigen::VectorXd* gradient) {
    const Eigen::VectorXd m = q.mean();
    const Eigen::MatrixXd cov = q.covariance();
    const double value = -q.entropy() - (cav.eta1.dot(m) + (cav.eta2 * (cov + m * m.transpose())).trace());
    if (gradient) {
      // d/dm = -(eta1 + 2 eta2 m); d/dSigma = -eta2 - Sigma^{-1}/2 (from -H(q)).
      const Eigen::VectorXd d_mean = -(cav.eta1 + 2 * cav.eta2 * m);
      const Eigen::MatrixXd d_cov = -cav.eta2 - 0.5 * q.precision();
      *gradient = q.params_gradient_from_covariance(d_mean, d_cov);
    }
    return value;
  }
  static bool proper(const Natural& eta) { return is_valid(eta); }
  static Q distribution(const Natural& eta) { return to_full_rank(eta); }

};

}  // namespace fvi::engine
