// The adjoint pass, end to end: every factor of every acceptance model is lowered, differentiated
// and interpreted on random data and random variables, and each input group's gradient is checked
// against finite differences of <seeds, outputs> (tests/support/gradient_check.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "frontend/parser.h"
#include "ir/interpret.h"
#include "support/gradient_check.h"
#include "test_models.h"
#include "pipeline.h"

using fvic::ir::RealTensor;

namespace fvic::test {

void check_adjoints(fvic::test::LoadedModel& m) {
  {
    INFO(m.errors());
    REQUIRE(m.ok());
    fvic::ir::Module module;
    REQUIRE(fvic::build_ir(*m.model, module, m.diags));
    std::mt19937 rng(11);
    fvic::ir::Bindings b = fvic::test::random_bindings(*m.model, module, rng, /*draws=*/2);

    for (const fvic::ir::Factor& f : module.factors) {
      INFO("factor " << f.name);
      fvic::ir::Interpreter interp(module, f);
      RealTensor out = interp.forward(b);
      REQUIRE(out.m.allFinite());
      // Random seeds for the output and each distribution argument.
      std::normal_distribution<double> normal;
      std::vector<RealTensor> seeds;
      std::vector<int> seeded;  // the forward node each seed multiplies
      for (int s : f.seeds) {
        const fvic::ir::Node& n = f.nodes[s];
        int target = n.name == "output" ? f.output : f.arguments[std::stoi(n.name.substr(9)) - 1];
        RealTensor t = RealTensor::zeros_like(interp.value(target));
        for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = normal(rng);
        seeds.push_back(t);
        seeded.push_back(target);
      }
      auto grads = interp.backward(b, seeds);
      for (fvi_group kind : f.groups) {
        const std::string group = fvi_group_name(kind);
        INFO("group " << group);
        REQUIRE(grads.count(group));
        const RealTensor& x0 = b.inputs.at(group);
        auto value = [&](const Eigen::VectorXd& x) {
          fvic::ir::Bindings moved = b;
          moved.inputs[group].m = Eigen::Map<const Eigen::MatrixXd>(x.data(), x0.m.rows(), x0.m.cols());
          fvic::ir::Interpreter again(module, f);
          again.forward(moved);
          double total = 0;
          for (size_t k = 0; k < seeds.size(); ++k)
            total += fvi::kernel::mul(seeds[k], again.value(seeded[k])).m.sum();
          return total;
        };
        Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(x0.m.data(), x0.m.size());
        const RealTensor& g = grads.at(group);
        Eigen::VectorXd analytic = Eigen::Map<const Eigen::VectorXd>(g.m.data(), g.m.size());
        auto result = fvi::test::check_gradient(value, x, analytic);
        INFO(result.report());
        CHECK(result.ok());
      }
    }
  }
}

}  // namespace fvic::test

using fvic::test::check_adjoints;

TEST_CASE("adjoints of every acceptance model's factors match finite differences", "[adjoint]") {
  for (const std::string& path : fvic::test::acceptance_models()) {
    INFO(path);
    fvic::test::LoadedModel m(path);
    check_adjoints(m);
  }
}

TEST_CASE("adjoints through Stan's forms, softmax, reductions, concatenation and loop locals match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_forms", fvic::test::kFormsModel);
  check_adjoints(m);
}

TEST_CASE("adjoints through conv2d, max_pool2d and avg_pool2d match finite differences", "[adjoint][conv]") {
  fvic::test::LoadedModel m(fvic::test::conv_model_path());
  check_adjoints(m);
}

// append_row / append_col and the literals built from them: each operand gets its own rows
// (columns) of the gradient, summed to one draw where the operand is a point estimate.
TEST_CASE("adjoints through append_row, append_col and row_vector literals match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_concat", R"(silo data {
  int<lower=0> N;
  vector[N] a;
  vector[N] c;
  vector[N] y;
}
hyperparameters {
  real<lower=0> tau;
}
parameters {
  global real alpha;
  global vector[2] beta;
  global real gamma;
}
model {
  matrix[N, 2] x = [a', c']';
  vector[3] coefs = append_row(beta, gamma);
  row_vector[3] r = [alpha, tau, gamma * alpha];
  alpha ~ normal(0, 1);
  beta ~ normal(0, tau);
  gamma ~ normal(0, 1);
  target += sum(r .* append_col(beta', gamma)) + dot_self(append_row(tau, beta));
  y ~ normal(append_col(x, rep_vector(1, N)) * coefs + alpha, 1);
}
)");
  check_adjoints(m);
}

// Sizes and ranges known from the data: a transformed data int (`int Kc = K - 1;`) sizing a
// parameter, a range with a data bound (`beta[2:K]`), a single index by such an int, and `:`.
TEST_CASE("adjoints through ranges and sizes computed from the data match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_ranges", R"(data {
  int<lower=2> K;
}
silo data {
  int<lower=0> N;
  matrix[N, K] X;
  vector[N] y;
}
transformed data {
  int Kc = K - 1;
  matrix[N, Kc] Xc = X[, 2:K];
}
parameters {
  global vector[K] beta;
  global vector[Kc] gamma;
}
model {
  beta ~ normal(0, 1);
  gamma ~ normal(beta[2:K], 1);
  target += beta[Kc] * gamma[Kc] + sum(X[:, 1]) * beta[1];
  y ~ normal(Xc * gamma + X[, 1:Kc] * beta[1:Kc], 1);
}
)");
  check_adjoints(m);
}

// ordered and positive_ordered parameters (running sums of exp steps) and cumulative_sum.
TEST_CASE("adjoints through ordered and positive_ordered transforms match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_ordered", R"(data {
  int<lower=1> K;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global ordered[K] cuts;
  global positive_ordered[3] scales;
}
model {
  cuts ~ normal(0, 2);
  scales ~ normal(0, 2);
  target += sum(cumulative_sum(cuts) .* cuts);
  y ~ normal(cuts[K] + scales[1], scales[3]);
}
)");
  check_adjoints(m);
}

// The transforms themselves against Stan's definitions written out: x_1 = u_1,
// x_k = x_(k-1) + exp(u_k) (ordered), x_k = x_(k-1) + exp(u_k) from 0 (positive_ordered), and
// their log-Jacobians sum(u_2..K) and sum(u) in the density.
TEST_CASE("ordered and positive_ordered transforms and log-Jacobians are Stan's", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_ordered_values", R"(silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global ordered[3] a;
  global positive_ordered[2] b;
}
model {
  target += 2 * a[1] + 3 * a[2] + 5 * a[3] + 7 * b[1] + 11 * b[2];
  y ~ normal(a[3], b[2]);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings bind;
  bind.inputs["global"] = RealTensor(5, 1, 1);
  bind.inputs["global"].m << 0.3, -0.4, 0.9, -1.2, 0.5;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  const double u[5] = {0.3, -0.4, 0.9, -1.2, 0.5};
  const double a1 = u[0], a2 = a1 + std::exp(u[1]), a3 = a2 + std::exp(u[2]);
  const double b1 = std::exp(u[3]), b2 = b1 + std::exp(u[4]);
  const double log_jacobian = (u[1] + u[2]) + (u[3] + u[4]);
  CHECK(server.forward(bind).m(0, 0) == Approx(2 * a1 + 3 * a2 + 5 * a3 + 7 * b1 + 11 * b2 + log_jacobian).epsilon(1e-14));
}

// `if`/`else` (a select: the gradient reaches the branch taken), `?:`, a loop's locals and the
// CDFs' derivatives through the IR.
TEST_CASE("adjoints through ifs, ?:, loop locals and CDFs match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_conditions", R"(silo data {
  int<lower=0> N;
  array[N] int<lower=1, upper=2> g;
  array[N] int<lower=0, upper=2> s;
  vector[N] y;
}
parameters {
  global vector[2] a;
  global real<lower=0> sigma;
}
model {
  a ~ normal(0, 1);
  target += student_t_lpdf(sigma | 3, 0, 2) - student_t_lccdf(0 | 3, 0, 2);
  for (n in 1:N) {
    real mu = a[g[n]];
    if (s[n] > 0)
      target += normal_lpdf(y[n] | mu, sigma) + normal_lcdf(y[n] | mu, sigma) + cauchy_lccdf(y[n] | mu, sigma);
    else
      target += log_sum_exp(logistic_lccdf(y[n] | mu, sigma), double_exponential_lcdf(y[n] | mu, sigma));
    target += s[n] > 1 ? student_t_lcdf(y[n] | 4, mu, sigma) : lognormal_lccdf(sigma | mu, 1);
  }
}
)");
  check_adjoints(m);
}

// A right-censored Weibull survival model (weibull_lccdf for the censored rows, as Stan writes
// it) and the other closed-tail CDFs, each reading parameters in every argument it has.
TEST_CASE("adjoints through censored survival times and closed-tail CDFs match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_survival", R"(silo data {
  int<lower=0> N;
  vector<lower=0>[N] t;
  array[N] int<lower=0, upper=1> event;
  vector[N] x;
}
parameters {
  global real b0;
  global real b1;
  global real<lower=0> shape;
}
model {
  b0 ~ normal(0, 1);
  b1 ~ normal(0, 1);
  shape ~ gamma(2, 1);
  for (n in 1:N) {
    real scale = exp(-(b0 + x[n] * b1) / shape);
    if (event[n] == 1)
      t[n] ~ weibull(shape, scale);
    else
      target += weibull_lccdf(t[n] | shape, scale) + weibull_lcdf(t[n] | shape, scale);
  }
  target += frechet_lcdf(t | shape, exp(b0)) + frechet_lccdf(t | shape, 2) + rayleigh_lccdf(t | shape);
  target += rayleigh_lcdf(t | exp(b1)) + pareto_lccdf(t + 1 | exp(b0 - 3), shape) + pareto_lcdf(t + 1 | 0.5, shape);
  target += pareto_type_2_lccdf(t | b0 - 3, shape, exp(b1)) + pareto_type_2_lcdf(t | -1, exp(b1), shape);
  target += gumbel_lcdf(t | b0, shape) + gumbel_lccdf(t | b1, shape);
}
)");
  check_adjoints(m);
}

// Element i's vector as row i (2-D arrays, matrix rows, vectors every element reads).
TEST_CASE("adjoints through rows as each element's vector match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_rows", R"(data {
  int<lower=1> I;
  int<lower=1> J;
}
silo data {
  array[I, J] int<lower=0, upper=1> y;
  matrix[I, J] x;
}
parameters {
  global vector[J] theta;
  global vector[I] a;
  global real<lower=0> s;
}
model {
  theta ~ normal(0, 1);
  a ~ normal(0, 1);
  s ~ normal(0, 1);
  for (i in 1:I) {
    y[i] ~ bernoulli_logit(exp(a[i]) * (theta - a[i] / 2));
    target += normal_lpdf(x[i] | theta' * a[i], s);
  }
}
)");
  check_adjoints(m);
}

// Locals assigned again (versions read where each statement stands).
TEST_CASE("adjoints through locals assigned again match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_versions", R"(silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real a;
  global real<lower=0> s;
}
model {
  vector[N] mu = rep_vector(a, N) + y / 2;
  a ~ normal(0, 1);
  s ~ normal(0, 1);
  y ~ normal(mu, s);
  mu *= s;
  for (n in 1:N) mu[n] = exp(mu[n]) - a;
  target += -sum(square(mu));
}
)");
  check_adjoints(m);
}

// log_sum_exp, max, min and prod of a container.
TEST_CASE("adjoints through log_sum_exp, max, min and prod of containers match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_reductions", R"(data {
  int<lower=1> K;
  vector[K] w;
}
parameters {
  global vector[K] a;
}
model {
  a ~ normal(0, 1);
  target += log_sum_exp(a + w) + max(a) - min(2 * a) + prod(exp(a / 3)) + log_sum_exp(w);
}
)");
  check_adjoints(m);
}

// The elementwise functions Stan has beyond the exponential family's (asin ... erfc), each inside
// its domain whatever the random value of a: vectorised (the model's factors) and one at a time
// (the statement program of the loop).
TEST_CASE("adjoints through the trigonometric, hyperbolic and other elementwise functions match finite differences",
          "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_elementwise", R"(data {
  int<lower=1> K;
  vector[K] w;
}
parameters {
  global vector[K] a;
}
model {
  vector[K] t = 0.9 * tanh(a);
  a ~ normal(0, 1);
  target += sum(asin(t) + acos(t) + atan(a) + tan(0.5 * t) + sinh(a) + cosh(a) + asinh(a + w));
  target += sum(acosh(1 + exp(a)) + atanh(t) + step(a) .* a + inv_cloglog(a) + log1m_exp(-exp(a)));
  target += sum(Phi_approx(a) + cbrt(exp(a)) + exp2(a) + erfc(a) + expm1(a));
  for (k in 1:K) target += asin(t[k]) * cosh(a[k]) + log1m_exp(-exp(a[k]) - 1);
}
)");
  check_adjoints(m);
}

// The distributions beyond the exponential family's, as likelihoods of silo data and as priors.
TEST_CASE("adjoints through gumbel, frechet, pareto, skew_normal, exp_mod_normal, von_mises and the rest match "
          "finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_distributions", R"(silo data {
  int<lower=0> N;
  vector[N] y;
  array[N] int<lower=0, upper=5> k;
}
parameters {
  global real mu;
  global real<lower=0> s;
  global real<lower=0, upper=1> p;
}
model {
  vector[N] e = exp(y);
  mu ~ skew_normal(0, 1.5, 2);
  s ~ scaled_inv_chi_square(4, 1);
  p ~ beta_proportion(0.4, 6);
  y ~ gumbel(mu, s);
  y ~ skew_normal(mu, s, -1.5);
  y ~ exp_mod_normal(mu, s, 1.5);
  y ~ von_mises(mu, s + 0.5);
  target += frechet_lpdf(e | s + 1, exp(mu)) + rayleigh_lpdf(e | s) + chi_square_lpdf(e | s + 1);
  target += inv_chi_square_lpdf(e | s + 1) + pareto_type_2_lpdf(e | 0, s, 2 + s) + pareto_lpdf(e + 10 | 5, s);
  k ~ beta_binomial(5, s, 1 + p);
  k ~ neg_binomial(s + 1, p + 0.5);
}
)");
  check_adjoints(m);
}

// cholesky_factor_corr (its transform and log-Jacobian), lkj_corr_cholesky, an array of vectors
// under multi_normal_cholesky, and the matrix shorthands (diag_pre_multiply, quad_form_diag,
// tcrossprod, crossprod, trace, quad_form, col, row, columns_dot_self, rows_dot_self).
TEST_CASE("adjoints through cholesky_factor_corr, lkj_corr_cholesky and the matrix shorthands match finite differences",
          "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_lkj", R"(data {
  int<lower=2> K;
  int<lower=1> N;
  array[N] vector[K] y;
}
parameters {
  global vector[K] mu;
  global vector<lower=0>[K] tau;
  global cholesky_factor_corr[K] L;
}
model {
  matrix[K, K] S = quad_form_diag(tcrossprod(L), tau);
  mu ~ normal(0, 2);
  tau ~ lognormal(0, 1);
  L ~ lkj_corr_cholesky(2.5);
  y ~ multi_normal_cholesky(mu, diag_pre_multiply(tau, L));
  target += -0.1 * trace(S) + 0.05 * quad_form(S, mu) - 0.01 * sum(crossprod(L));
  target += 0.2 * sum(col(L, 1)) - 0.1 * sum(row(L, K)) + 0.1 * sum(columns_dot_self(L) + rows_dot_self(L)');
}
)");
  check_adjoints(m);
}

// corr_matrix and cov_matrix parameters (their transforms and log-Jacobians) under lkj_corr,
// wishart and inv_wishart, the covariance read by multi_normal.
TEST_CASE("adjoints through corr_matrix, cov_matrix, lkj_corr, wishart and inv_wishart match finite differences",
          "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_cov", R"(data {
  int<lower=2> K;
  int<lower=1> N;
  array[N] vector[K] y;
  matrix[K, K] S;
}
parameters {
  global corr_matrix[K] Omega;
  global cov_matrix[K] Sigma;
  global cov_matrix[K] W;
}
model {
  Omega ~ lkj_corr(3);
  Sigma ~ inv_wishart(K + 3, S);
  W ~ wishart(K + 2, Sigma);
  y ~ multi_normal(rep_vector(0, K), quad_form_diag(Omega, sqrt(diagonal(Sigma))));
}
)");
  check_adjoints(m);
}

// cholesky_factor_cov and unit_vector parameters (their transforms and log-Jacobians): a
// covariance's factor read by multi_normal_cholesky, a direction read by a dot product, global
// and local.
TEST_CASE("adjoints through cholesky_factor_cov and unit_vector match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_factor_unit", R"(data {
  int<lower=2> K;
}
silo data {
  int<lower=1> N;
  array[N] vector[K] y;
}
parameters {
  global cholesky_factor_cov[K] L;
  global cholesky_factor_cov[K + 1, 2] loadings;
  global unit_vector[K] direction;
  local unit_vector[K] own;
}
model {
  to_vector(L) ~ normal(0, 2);
  to_vector(tcrossprod(loadings)) ~ normal(0, 3);
  target += 4 * dot_product(direction, own);
  y ~ multi_normal_cholesky(direction + own, L);
}
)");
  check_adjoints(m);
}

// <offset=..., multiplier=...>: the affine transform and its log-Jacobian, offset and multiplier
// read from parameters (a vector offset, a scalar multiplier; a vector multiplier), global and local.
TEST_CASE("adjoints through offset and multiplier match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_affine", R"(data {
  int<lower=1> J;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global vector[J] mu;
  global real<lower=0> tau;
  global vector<lower=0>[J] s;
  global vector<offset=mu, multiplier=tau>[J] theta;
  global vector<multiplier=s>[J] phi;
  local real<offset=theta[1], multiplier=2> eta;
}
model {
  mu ~ normal(0, 1);
  tau ~ lognormal(0, 0.5);
  s ~ lognormal(0, 0.5);
  theta ~ normal(mu, tau);
  phi ~ normal(0, s);
  eta ~ normal(theta[1], 2);
  y ~ normal(eta + sum(phi), 1);
}
)");
  check_adjoints(m);
}

// inverse of a matrix built from parameters, vectorised and in a loop run one statement at a time.
TEST_CASE("adjoints through inverse match finite differences", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_inverse", R"(data {
  int<lower=2> K;
}
parameters {
  global vector[K] a;
}
model {
  matrix[K, K] B = diag_matrix(exp(a)) + rep_matrix(0.2, K, K);
  a ~ normal(0, 1);
  target += -0.3 * sum(inverse(B)) + 0.1 * trace(inverse_spd(B));
  for (k in 1:K) target += 0.05 * inverse(B)[k, k];
}
)");
  check_adjoints(m);
}

// simplex[K]: softmax of K values with the auxiliary scale's log-Jacobian (lower.cpp,
// constrain_simplex): the density of u is the Dirichlet's at softmax(u) times gamma(sum(exp(u)) |
// K, 1) times the Jacobian, written out here; and its gradient against finite differences.
TEST_CASE("simplex parameters: the density of u written out, and its adjoint", "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_simplex", R"(data {
  int<lower=2> K;
  vector<lower=0>[K] counts;
}
parameters {
  global simplex[K] theta;
}
model {
  theta ~ dirichlet(rep_vector(1.5, K));
  target += dot_product(counts, log(theta));
}
)");
  check_adjoints(m);
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 3;
  b.data["counts"] = RealTensor(3, 1, 1);
  b.data["counts"].m << 2, 0, 5;
  b.inputs["global"] = RealTensor(3, 1, 1);
  b.inputs["global"].m << 0.4, -1.1, 0.9;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  const double u[3] = {0.4, -1.1, 0.9}, counts[3] = {2, 0, 5};
  double s = 0;
  for (double v : u) s += std::exp(v);
  double want = std::lgamma(4.5) - 3 * std::lgamma(1.5), sum_u = 0;
  for (int k = 0; k < 3; ++k) {
    const double x = std::exp(u[k]) / s;
    want += 0.5 * std::log(x) + counts[k] * std::log(x);
    sum_u += u[k];
  }
  // gamma(s | 3, 1) s^(-2) prod(exp(u)): log = 2 log s - s - lgamma(3) - 2 log s + sum(u).
  want += sum_u - s - std::lgamma(3.0);
  CHECK(server.forward(b).m(0, 0) == Approx(want).epsilon(1e-13));
}

// Gaussian processes: gp_exp_quad_cov, diag_matrix, cholesky_decompose (also inside
// multi_normal), multi_normal_cholesky, diagonal, and a transformed parameter built in a block
// with locals (posteriordb's gp_regr and gp_pois_regr forms).
TEST_CASE("adjoints through gp_exp_quad_cov, cholesky_decompose and the multivariate normals match finite differences",
          "[adjoint]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_adjoint_gp", R"(data {
  int<lower=1> N;
  array[N] real x;
  vector[N] y;
  array[N] int k;
}
parameters {
  global real<lower=0> rho;
  global real<lower=0> alpha;
  global real<lower=0> sigma;
  global vector[N] z;
  global vector[N] mu;
}
transformed parameters {
  vector[N] f;
  {
    matrix[N, N] cov = gp_exp_quad_cov(x, alpha, rho) + diag_matrix(rep_vector(sigma, N));
    matrix[N, N] L_cov = cholesky_decompose(cov);
    f = L_cov * z;
  }
}
model {
  matrix[N, N] K = cov_exp_quad(x, alpha, rho) + diag_matrix(exp(mu / 4) + sigma);
  rho ~ gamma(5, 4);
  alpha ~ normal(0, 2);
  sigma ~ normal(0, 1);
  z ~ normal(0, 1);
  mu ~ multi_normal_cholesky(rep_vector(0, N), cholesky_decompose(K));
  y ~ multi_normal(mu, K);
  k ~ poisson_log(f + sum(diagonal(K)) / 10);
}
)");
  check_adjoints(m);
}
