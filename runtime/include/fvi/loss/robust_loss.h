#pragma once
// A loss chosen at run time (the `loss = ...` inference key): the NLL or one of its robust
// replacements of FedGVI (seed 000 §3.1), evaluated from the observation's log likelihood and,
// where needed, the likelihood's power integral.
//
//   LossSpec::nll()                              -log p
//   LossSpec::generalized_cross_entropy(delta)   (1 - p^delta) / delta         delta in [0, 1]
//   LossSpec::density_power(beta)                Ghosh-Basu + constant          beta >= 0
//   LossSpec::gamma(gamma)                       Hung et al. + constant         gamma >= 1
// Each equals the NLL at its limiting parameter (delta = 0, beta = 0, gamma = 1). Weighted score
// matching needs x-derivatives of the model and is separate (score_matching.h).
#include <sstream>
#include <string>

#include "fvi/check.h"
#include "fvi/loss/density_power.h"
#include "fvi/loss/gamma_divergence.h"
#include "fvi/loss/generalized_cross_entropy.h"
#include "fvi/loss/loss_term.h"
#include "fvi/loss/negative_log_likelihood.h"

namespace fvi {

enum class LossKind { kNegativeLogLikelihood, kGeneralizedCrossEntropy, kDensityPower, kGamma };

struct LossSpec {
  LossKind kind = LossKind::kNegativeLogLikelihood;
  double parameter = 0;

  static LossSpec nll() { return {}; }
  static LossSpec generalized_cross_entropy(double delta) {
    LossSpec s{LossKind::kGeneralizedCrossEntropy, delta};
    s.validate();
    return s;
  }
  static LossSpec density_power(double beta) {
    LossSpec s{LossKind::kDensityPower, beta};
    s.validate();
    return s;
  }
  static LossSpec gamma(double gamma) {
    LossSpec s{LossKind::kGamma, gamma};
    s.validate();
    return s;
  }

  // Whether the loss needs log int p^c (then c = integral_power()).
  bool needs_integral() const { return kind == LossKind::kDensityPower || kind == LossKind::kGamma; }
  double integral_power() const {
    if (kind == LossKind::kDensityPower) return 1 + parameter;
    if (kind == LossKind::kGamma) return parameter;
    return 1;
  }

  void validate() const {
    const char* fn = "LossSpec";
    switch (kind) {
      case LossKind::kNegativeLogLikelihood:
        return;
      case LossKind::kGeneralizedCrossEntropy:
        check_bounded(fn, "generalized cross-entropy delta", parameter, 0.0, 1.0);
        return;
      case LossKind::kDensityPower:
        check_nonnegative(fn, "density power beta", parameter);
        return;
      case LossKind::kGamma:
        check_finite(fn, "gamma", parameter);
        if (!(parameter >= 1)) {
          internal::throw_invalid(fn, "gamma must be >= 1 but is " + internal::to_string(parameter));
        }
        return;
    }
  }

  // "nll", "gce(0.8)", "density_power(0.7)", "gamma(1.5)".
  std::string name() const {
    std::ostringstream os;
    switch (kind) {
      case LossKind::kNegativeLogLikelihood:
        return "nll";
      case LossKind::kGeneralizedCrossEntropy:
        os << "gce(" << parameter << ")";
        break;
      case LossKind::kDensityPower:
        os << "density_power(" << parameter << ")";
        break;
      case LossKind::kGamma:
        os << "gamma(" << parameter << ")";
        break;
    }
    return os.str();
  }
};

// log_integral = log int p^c with c = spec.integral_power(); ignored (may be 0) when
// !spec.needs_integral().
template <typename T>
LossTerm<T> evaluate_loss(const LossSpec& spec, T loglik, T log_integral = T(0)) {
  switch (spec.kind) {
    case LossKind::kNegativeLogLikelihood:
      return nll_loss(loglik);
    case LossKind::kGeneralizedCrossEntropy:
      return generalized_cross_entropy_loss(loglik, T(spec.parameter));
    case LossKind::kDensityPower:
      return density_power_loss(loglik, log_integral, T(spec.parameter));
    case LossKind::kGamma:
      return gamma_divergence_loss(loglik, log_integral, T(spec.parameter));
  }
  internal::throw_invalid("evaluate_loss", "unknown loss kind");
}

}  // namespace fvi
