#pragma once
// Random draws of a distribution (Stan's `dist_rng(...)` in generated quantities), as generated
// quantity kernels call them:
//
//   random_draws(dist, {a1, a2, ...}, rows, cols, draws, key, stream)
//
// one draw per element of the arguments' broadcast shape (at least rows x cols) and per posterior
// draw (at least `draws`), in double whatever the kernel's precision; categorical_logit takes one
// vector of K logits and gives one category in 1..K per posterior draw, ordered_logistic and
// ordered_probit one eta and K - 1 cutpoints one category in 1..K; multi_normal(_cholesky)
// takes a K-vector mu (or N of them, the rows of N x K) and a K x K covariance (or its lower
// factor) and gives a K-vector (N rows) per posterior draw. Element j (column-major over
// rows x cols, draw s after draw s - 1) takes Philox block j of (key, stream): one uniform for
// the inverse-CDF distributions, two for Box-Muller, so a value does not depend on how many others
// were drawn. Discrete draws are whole numbers. The formulas are the distributions' standard
// samplers (Stan's parameterisations); tests/runtime/kernel/random_test.cpp checks each one's
// moments against its closed forms.
#include <cstdint>
#include <string>

#include "fvi/kernel/distributions.h"

namespace fvi::kernel {

// The distributions random_draws supports (the checker refuses the others' `_rng`).
inline bool has_random_draws(const std::string& d) {
  for (const char* name : {"normal", "lognormal", "cauchy", "logistic", "double_exponential", "exponential", "uniform",
                           "bernoulli", "bernoulli_logit", "poisson", "poisson_log", "binomial", "binomial_logit",
                           "categorical_logit", "ordered_logistic", "ordered_probit", "weibull", "frechet", "gumbel",
                           "pareto", "pareto_type_2", "rayleigh",
                           "gamma", "inv_gamma", "chi_square", "inv_chi_square", "scaled_inv_chi_square", "beta",
                           "beta_proportion", "student_t", "neg_binomial_2", "neg_binomial_2_log", "neg_binomial",
                           "beta_binomial", "multi_normal", "multi_normal_cholesky"})
    if (d == name) return true;
  return false;
}

// T = double or float (a float kernel's arguments are converted to double, its draws back).
template <class T>
Tensor<T> random_draws(const std::string& dist, const Operands<T>& args, Eigen::Index rows, Eigen::Index cols,
                       Eigen::Index draws, uint64_t key, uint32_t stream);
template <>
Tensor<double> random_draws<double>(const std::string&, const Operands<double>&, Eigen::Index, Eigen::Index,
                                    Eigen::Index, uint64_t, uint32_t);
template <>
Tensor<float> random_draws<float>(const std::string&, const Operands<float>&, Eigen::Index, Eigen::Index,
                                  Eigen::Index, uint64_t, uint32_t);

}  // namespace fvi::kernel
