#pragma once
// Which global intercepts may be fitted at the centred data (brms's `center`, done for the silos).
//
// `y ~ bernoulli_logit(alpha + x * beta)` with a raw covariate far from 0 has a posterior in which
// alpha and beta trade off along a narrow ridge (alpha + mean(x) * beta is what the data pin
// down); an optimiser crosses it slowly and a mean-field q cannot lie along it. Written at the
// centred data, `alpha_c + (x - xbar) * beta` with alpha_c = alpha + xbar * beta, the same model
// has alpha_c and beta nearly independent. The map (alpha, beta) -> (alpha_c, beta) is linear with
// unit Jacobian, so fitting q over (alpha_c, beta), evaluating every prior at alpha = alpha_c -
// xbar * beta and reporting alpha fits the posterior of the model as written, exactly: a change
// of the fit's coordinates, not of the model. xbar is the pooled column means of x, from each
// silo's column sums and rows (a message the plan lists, once, before the first iteration).
#include <optional>
#include <string>
#include <vector>

#include "frontend/semantic.h"

namespace fvic {

// Centring::data of a vertical model's intercept: `b + silo_sum(...)` (a function's name, never a
// variable's). vfl_exact fits b_c = b + the mean over rows of the silos' summed partial predictors,
// and evaluates every prior at b = b_c - that mean (runtime/include/fvi/engine/vfl.h).
inline constexpr const char* kSiloSumCentring = "silo_sum";

// One `x * W` of an intercept's sums.
struct CentringProduct {
  std::string data;         // x: silo data, a matrix[N, D] (or a vector[N] with a scalar coefficient)
  std::string coefficient;  // W: a global matrix[D, K] or vector[D] (real with a vector x)
};
inline bool operator==(const CentringProduct& a, const CentringProduct& b) {
  return a.data == b.data && a.coefficient == b.coefficient;
}

// Every `x * W` of the intercept's sums, as the first sum writes them: b_c = b + sum_j xbar_j W_j
// (`a + age * b_age + income * b_income`, each column centred at its own pooled means, as brms
// centres every column of the design matrix). A vertical model's: one, {kSiloSumCentring, ""}.
struct Centring {
  std::vector<CentringProduct> products;
  // A silo's vector of groups' intercepts of their own slopes (local_slope_centring_of): the silo
  // int array g that gives each row's group, each group then centred at its own mean of x; "" else.
  std::string group;
};
inline bool operator==(const Centring& a, const Centring& b) { return a.products == b.products && a.group == b.group; }
inline bool operator!=(const Centring& a, const Centring& b) { return !(a == b); }

// A centring's products by coefficient, first written first: each W with its x, or with the several
// x read with it in different sums (companions, centred at their pooled means: one shift of b).
struct CentredCoefficient {
  std::vector<std::string> data;  // x, then its companions
  std::string coefficient;
  std::string data_text() const;     // "x", "x and v", "x, v and u"
  std::string product_text() const;  // "x * W", "(x or v) * W"
};
std::vector<CentredCoefficient> by_coefficient(const Centring& c);

// For global `b`: the data and coefficients it is the intercept of, when every read of each x in
// the transformed parameters and model block is in a sum (a chain of + and -) that adds b once
// and x * W (`W * x` too, W a real; x or one row of it, `x[n] * W` in a loop over the rows; or a
// different x of one type in different sums, `b + age_obs * W` and `b + age_cen * W`: companions):
// `b + x * W`, `x * W + b`, `offset + b + x * W - c`, `exp(-(b + x[n] * W) / k)`, and with several
// products, each of its own x and W, `b + x * W + v * c` (every such sum adds the same ones); b is read
// only there and in priors the server evaluates; b and W are unconstrained, b a real (W a vector
// or real) or a row_vector (W a matrix); and the model has no split parameters (a silo's
// locals may be added to the sum: `b + x * W + u`). In a model with split parameters: b a real,
// added once to `silo_sum(...)` in one sum and read nowhere else but in server priors; then data
// is kSiloSumCentring and coefficient "". b may also be a vector of groups' intercepts read as
// b[g] or b[g[n]] (W a real or vector: each group's b plus x * W); then no other global is in its
// sums, and a real b in a sum with another global read whole (`b1 + b2 + x * W`) is refused (both
// would take the shift). Also the real location mu of one such vector's prior (`b ~ normal(mu,
// tau)`), shifted with it. x is a silo's data or its transformed data computed from the raw data
// when the silo reads it (semantic.h computed_at_load), and is read in no transformed datum's value
// that the kernels compute (they would read the centred x). Conservative: nullopt for anything else.
std::optional<Centring> centring_of(const SemanticModel& model, const Symbol& b);

// A hierarchy's intercept: `a ~ normal(mu, tau)` and `a + x * W`, a a silo's local (a real, a
// row_vector with a matrix W, or a vector of groups' intercepts read as a[g] about a real mu)
// whose every sum adding +a once holds +x * W (or several products, as centring_of) and no other
// parameter, x read only there, a only there and in that one prior (normal, student_t, cauchy,
// double_exponential or logistic: the density reads a - mu alone), mu a global of a's type read
// only there and in server priors. centring_of marks mu (x, W) and local_centring_of marks a:
// SFVI fits mu_c = mu + xbar W and a_c = a + xbar W at the pooled centred x, the silo's terms
// then read (a_c - mu_c) and a_c + (x - xbar) W, the written values exactly; the server's
// priors read mu = mu_c - xbar W, the silo's outputs a = a_c - xbar W. The ridge a raw x makes
// (mu, a and W trading off) is gone. The location may also be a chain of silo locals ending at
// such a mu (wards in hospitals: `a_w ~ normal(a_h, tau_w)`, `a_h ~ normal(mu, tau_h)`, `a_w[ward]
// + x * W`), each link read only as the location below it and in its own prior (a location
// family), and in no declaration's bound, offset or multiplier: every link is shifted with a and mu (a_h_c = a_h + xbar W), which leaves every
// difference the priors read as written, and local_centring_of marks it too.
std::optional<Centring> local_centring_of(const SemanticModel& model, const Symbol& a);

// A silo's local intercept of its own local slopes: `a + b * x` (x[n] * b in a loop, or `a + x * b`
// with x a matrix[N, D] and b a local vector[D]; several products as centring_of), a and b a
// silo's unconstrained locals (a a real), every sum adding +a once holding the same products, each
// x read only there; no chains (b is no intercept of slopes, a no one's slope). The silo fits
// a_c = a + xbar b, xbar its own column means of x (nothing is sent), and evaluates every term at
// the written a = a_c - xbar b: a unit-Jacobian change of the fit's coordinates, exact for any
// prior on a, that takes away the ridge between a silo's intercept and slope at a raw x far from
// 0 (random slopes on age in years). runtime/include/fvi/engine/centring.h local_slope_blocks.
// Also a silo's vector of groups' intercepts read as a[g] (`a[g] + b[g] .* x`, or `a[g[n]] + b[g[n]]
// * x[n]` in a loop; b a local vector of the groups' slopes indexed as a is, or a local real, one
// slope for every group; x a silo vector), g a silo int array: then Centring::group is g and each
// group c is fitted at a_c[c] = a[c] + xbar_c b[c], xbar_c the mean of x over the silo's rows of
// group c (varying intercepts and slopes by ward within each hospital).
std::optional<Centring> local_slope_centring_of(const SemanticModel& model, const Symbol& a);

}  // namespace fvic
