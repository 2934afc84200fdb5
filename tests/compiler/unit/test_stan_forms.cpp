// Stan's convenience forms (frontend/stan_forms.h): the GLM densities, std_normal and the binary
// log_sum_exp are rewritten into core forms before checking; each factor then computes the log
// density written out here, on random data and draws, and log_sum_exp(a, b) stays finite where
// exp(a) overflows.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/interpret.h"
#include "test_models.h"
#include "pipeline.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace stan_forms_test {

namespace {

const std::string kHead = R"(data {
  int<lower=1> D;
}
silo data {
  int<lower=0> N;
  matrix[N, D] x;
  array[N] int<lower=0, upper=1> b;
  array[N] int<lower=0> c;
  vector[N] y;
}
parameters {
  global real alpha;
  global vector[D] beta;
  global real<lower=0> sigma;
}
model {
  alpha ~ std_normal();
  target += std_normal_lpdf(beta);
  sigma ~ normal(0, 2);
)";

// The sum over rows of each density at eta = alpha + x beta, written out.
double bernoulli_logit(const Eigen::MatrixXd& b, const Eigen::VectorXd& eta) {
  double s = 0;
  for (Eigen::Index n = 0; n < eta.size(); ++n) s += b(n, 0) * eta(n) - std::log1p(std::exp(eta(n)));
  return s;
}
double poisson_log(const Eigen::MatrixXd& c, const Eigen::VectorXd& eta) {
  double s = 0;
  for (Eigen::Index n = 0; n < eta.size(); ++n) s += c(n, 0) * eta(n) - std::exp(eta(n)) - std::lgamma(c(n, 0) + 1);
  return s;
}
double normal(const Eigen::MatrixXd& y, const Eigen::VectorXd& eta, double sigma) {
  double s = 0;
  for (Eigen::Index n = 0; n < eta.size(); ++n)
    s += -0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow((y(n, 0) - eta(n)) / sigma, 2);
  return s;
}

}  // namespace

TEST_CASE("stan forms: GLM densities and std_normal compute the densities written out", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_stan_forms", kHead + R"(  b ~ bernoulli_logit_glm(x, alpha, beta);
  c ~ poisson_log_glm(x, alpha, beta);
  target += normal_id_glm_lpdf(y | x, alpha, beta, sigma);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  std::mt19937 rng(3);
  fvic::ir::Bindings data = fvic::test::random_bindings(*m.model, module, rng, /*draws=*/3);
  // Outcomes of their types: 0/1 and counts.
  for (double& v : data.data.at("b").m.reshaped()) v = v > 0 ? 1 : 0;
  for (double& v : data.data.at("c").m.reshaped()) v = std::floor(std::fabs(v) * 3);
  const auto& g = data.inputs.at("global");
  const auto& x = data.data.at("x").m;
  const long D = long(data.data.at("D").m(0, 0));

  fvic::ir::Interpreter bern(module, fvic::test::factor_named(module, "likelihood_b")), pois(module, fvic::test::factor_named(module, "likelihood_c_2"));
  const fvic::ir::RealTensor& lb = bern.forward(data);
  const fvic::ir::RealTensor& lc = pois.forward(data);
  fvic::ir::Interpreter silo(module, fvic::test::factor_named(module, "silo_density")), server(module, fvic::test::factor_named(module, "server_density"));
  const fvic::ir::RealTensor& ls = silo.forward(data);
  const fvic::ir::RealTensor& lp = server.forward(data);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    const double alpha = g.m(0, s), sigma = std::exp(g.m(D + 1, s));
    const Eigen::VectorXd eta = (x * g.m.col(s).segment(1, D)).array() + alpha;
    CHECK(lb.m.col(s).sum() == Approx(bernoulli_logit(data.data.at("b").m, eta)).epsilon(1e-12));
    CHECK(lc.m.col(s).sum() == Approx(poisson_log(data.data.at("c").m, eta)).epsilon(1e-12));
    CHECK(ls.m(0, s) == Approx(normal(data.data.at("y").m, eta, sigma)).epsilon(1e-12));
    // std_normal on alpha and on each beta, and sigma's normal(0, 2) with its log-Jacobian.
    double prior = -0.5 * alpha * alpha - 0.5 * std::log(2 * M_PI);
    for (long d = 0; d < D; ++d) prior += -0.5 * std::pow(g.m(1 + d, s), 2) - 0.5 * std::log(2 * M_PI);
    prior += -0.5 * std::log(2 * M_PI) - std::log(2.0) - 0.5 * std::pow(sigma / 2, 2) + g.m(D + 1, s);
    CHECK(lp.m(0, s) == Approx(prior).epsilon(1e-12));
  }
}

TEST_CASE("stan forms: log_sum_exp(a, b) is log(exp(a) + exp(b)), also where exp overflows", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_log_sum_exp", R"(data {
  real shift;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  target += log_sum_exp(mu + shift, 2 * mu - shift);
  y ~ normal(mu, 1);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  for (double shift : {0.0, 3.5, -800.0, 800.0}) {
    fvic::ir::Bindings b;
    b.data["shift"] = fvic::ir::RealTensor(1, 1, 1);
    b.data["shift"].m(0, 0) = shift;
    b.inputs["global"] = fvic::ir::RealTensor(1, 1, 3);
    b.inputs["global"].m << -1.3, 0.2, 2.0;
    fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
    const fvic::ir::RealTensor& lp = server.forward(b);
    for (Eigen::Index s = 0; s < 3; ++s) {
      const double mu = b.inputs["global"].m(0, s);
      const double a = mu + shift, c = 2 * mu - shift, top = std::max(a, c);
      const double want = -0.5 * mu * mu - 0.5 * std::log(2 * M_PI) + top + std::log(std::exp(a - top) + std::exp(c - top));
      INFO("shift " << shift << ", mu " << mu);
      REQUIRE(std::isfinite(lp.m(0, s)));
      CHECK(lp.m(0, s) == Approx(want).epsilon(1e-13));
    }
  }
}

TEST_CASE("stan forms: mean, variance and sd are the sample moments", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_moments", R"(silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global vector[3] b;
}
model {
  b ~ normal(0, 1);
  target += mean(b) + 10 * variance(b) + 100 * sd(b);
  y ~ normal(0, 1);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 2);
  b.inputs["global"].m << 1.0, -2.0, 0.5, 4.0, 3.0, 3.5;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  const fvic::ir::RealTensor& lp = server.forward(b);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const Eigen::VectorXd v = b.inputs["global"].m.col(s);
    const double mean = v.sum() / 3, variance = (v.array() - mean).square().sum() / 2;
    const double prior = -0.5 * v.squaredNorm() - 1.5 * std::log(2 * M_PI);
    CHECK(lp.m(0, s) == Approx(prior + mean + 10 * variance + 100 * std::sqrt(variance)).epsilon(1e-13));
  }
}

TEST_CASE("stan forms: log_mix, log10, log2 and Stan's constants compute their definitions", "[stan_forms]") {
  // In a loop, as mixture models write it: one mixture density per row.
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_log_mix", R"(data {
  real<lower=0, upper=1> theta;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  for (n in 1:N)
    target += log_mix(theta, normal_lpdf(y[n] | mu, 1), normal_lpdf(y[n] | -mu, 2));
  target += log10(exp(mu) + 1) + log2(exp(mu) + 3) + pi() + e() + sqrt2() + log10() + log2();
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["theta"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["theta"].m(0, 0) = 0.3;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 3;
  b.data["y"] = fvic::ir::RealTensor(3, 1, 1);
  b.data["y"].m << -1.0, 0.4, 2.5;
  b.inputs["global"] = fvic::ir::RealTensor(1, 1, 2);
  b.inputs["global"].m << -0.7, 1.1;
  auto normal = [](double y, double mu, double sd) {
    return std::exp(-0.5 * std::pow((y - mu) / sd, 2)) / (sd * std::sqrt(2 * M_PI));
  };
  double silo_total[2] = {0, 0}, server_total[2] = {0, 0};
  for (const fvic::ir::Factor& f : module.factors) {
    fvic::ir::Interpreter run(module, f);
    const fvic::ir::RealTensor& out = run.forward(b);
    for (Eigen::Index s = 0; s < 2; ++s)
      (f.owner == fvic::TermOwner::Server ? server_total : silo_total)[s] += out.m.col(s).sum();
  }
  for (Eigen::Index s = 0; s < 2; ++s) {
    const double mu = b.inputs["global"].m(0, s);
    double mixture = 0;
    for (double y : {-1.0, 0.4, 2.5}) mixture += std::log(0.3 * normal(y, mu, 1) + 0.7 * normal(y, -mu, 2));
    const double constants = std::log10(std::exp(mu) + 1) + std::log2(std::exp(mu) + 3) + M_PI + M_E + M_SQRT2 +
                             M_LN10 + M_LN2;
    INFO("mu " << mu);
    CHECK(silo_total[s] == Approx(mixture).epsilon(1e-13));
    CHECK(server_total[s] == Approx(std::log(normal(mu, 0, 1)) + constants).epsilon(1e-13));
  }
}

// A computed value on the left of `~` (Stan accepts it): its density is a `target +=` term of
// the party that may compute it, with a warning when it reads parameters (no Jacobian is added).
TEST_CASE("stan forms: a computed value on the left of ~ adds its density, with a warning", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_tilde_expression", R"(silo data {
  int<lower=0> N;
  vector[N] x;
}
parameters {
  global real mu;
  global real<lower=0> sigma;
}
model {
  mu ~ normal(0, 1);
  sigma ~ normal(0, 1);
  (x - mu) / sigma ~ normal(0, 1);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  CHECK_THAT(m.errors(), Catch::Contains("12:3: warning: the left side of '~' is computed from parameters"));
  size_t targets = 0;
  for (const fvic::Term& t : m.model->terms)
    if (t.kind == fvic::TermKind::Target) {
      ++targets;
      CHECK(t.owner == fvic::TermOwner::Silo);
      CHECK(t.loc.line == 12);
    }
  CHECK(targets == 1);
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 3;
  b.data["x"] = fvic::ir::RealTensor(3, 1, 1);
  b.data["x"].m << -0.4, 1.5, 0.2;
  b.inputs["global"] = fvic::ir::RealTensor(2, 1, 2);
  b.inputs["global"].m << 0.3, -1.0, -0.2, 0.6;  // draw s: mu, log sigma
  fvic::ir::Interpreter silo(module, fvic::test::factor_named(module, "silo_density"));
  const fvic::ir::RealTensor& lp = silo.forward(b);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const double mu = b.inputs["global"].m(0, s), sigma = std::exp(b.inputs["global"].m(1, s));
    double want = 0;
    for (double x : {-0.4, 1.5, 0.2}) want += -0.5 * std::log(2 * M_PI) - 0.5 * std::pow((x - mu) / sigma, 2);
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-13));
  }
}

// head, segment, sub_col and sub_row as the ranges they are, with bounds known from the data.
TEST_CASE("stan forms: head, segment, sub_col and sub_row select what Stan selects", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_slices", R"(data {
  int<lower=3> K;
  int<lower=3> N;
  matrix[N, K] X;
}
parameters {
  global vector[K] beta;
}
model {
  beta ~ normal(0, 1);
  target += 2 * sum(head(beta, 2)) + 3 * sum(segment(beta, 2, K - 1))
            + sum(sub_col(X, 2, 3, N - 1)) * beta[1] + sum(sub_row(X, 1, 2, 2)) * beta[3];
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 4;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 3;
  b.data["X"] = fvic::ir::RealTensor(3, 4, 1);
  b.data["X"].m << 1, 2, 3, 4,  //
      5, 6, 7, 8,               //
      9, 10, 11, 12;
  b.inputs["global"] = fvic::ir::RealTensor(4, 1, 1);
  b.inputs["global"].m << 0.5, -1.0, 2.0, 0.25;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  const double beta[4] = {0.5, -1.0, 2.0, 0.25};
  double prior = 0;
  for (double v : beta) prior += -0.5 * std::log(2 * M_PI) - 0.5 * v * v;
  // head(beta, 2) = beta[1:2]; segment(beta, 2, 3) = beta[2:4]; sub_col(X, 2, 3, 2) = X[2:3, 3]
  // = (7, 11); sub_row(X, 1, 2, 2) = X[1, 2:3] = (2, 3).
  const double want = prior + 2 * (beta[0] + beta[1]) + 3 * (beta[1] + beta[2] + beta[3]) + (7 + 11) * beta[0] +
                      (2 + 3) * beta[2];
  CHECK(server.forward(b).m(0, 0) == Approx(want).epsilon(1e-14));
}

TEST_CASE("stan forms: log_sum_exp, max, min and prod of a container are their definitions", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_reductions", R"(data {
  int<lower=1> K;
  vector[K] w;
}
parameters {
  global vector[K] a;
}
model {
  target += log_sum_exp(a + w) + max(a) - min(w) + prod(a);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 3;
  b.data["w"] = fvic::ir::RealTensor(3, 1, 1);
  b.data["w"].m << 800.0, -1.0, 799.0;  // exp overflows: log_sum_exp stays finite
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 1);
  b.inputs["global"].m << 0.5, -2.0, 1.5;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  // Written out: log(exp(800.5) + exp(-3) + exp(800.5)) = 800.5 + log(2 + exp(-803.5)).
  const double want = 800.5 + std::log(2 + std::exp(-803.5)) + 1.5 - (-1.0) + 0.5 * -2.0 * 1.5;
  CHECK(server.forward(b).m(0, 0) == Approx(want).epsilon(1e-14));
}

TEST_CASE("stan forms: tail(v, n) is v's last n elements", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_tail", R"(data {
  int<lower=3> K;
  vector[K] w;
}
parameters {
  global vector[K] a;
}
model {
  target += sum(tail(a, 2) .* tail(w, 2)) + tail(a, K - 1)[1] + num_elements(tail(w, K));
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 4;
  b.data["w"] = fvic::ir::RealTensor(4, 1, 1);
  b.data["w"].m << 1.0, 2.0, 3.0, 4.0;
  b.inputs["global"] = fvic::ir::RealTensor(4, 1, 1);
  b.inputs["global"].m << 0.5, -2.0, 1.5, 0.25;
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  CHECK(server.forward(b).m(0, 0) == Approx(1.5 * 3.0 + 0.25 * 4.0 + -2.0 + 4).epsilon(1e-14));
}

TEST_CASE("stan forms: categorical(theta) is categorical_logit(log(theta)), and categorical_rng draws one category", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_categorical", R"(data {
  int<lower=2> K;
  int<lower=0> N;
  array[N] int<lower=1, upper=K> y;
}
parameters {
  global simplex[K] theta;
}
model {
  y ~ categorical(theta);
  target += categorical_lpmf(y[1] | theta);
}
generated quantities {
  int draw = categorical_rng(theta);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 3;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 4;
  b.data["y"] = fvic::ir::RealTensor(4, 1, 1);
  b.data["y"].m << 1, 3, 3, 2;
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 1);
  b.inputs["global"].m << 0.2, -0.5, 1.0;  // theta = softmax
  const Eigen::ArrayXd e = b.inputs["global"].m.col(0).array().exp();
  const Eigen::ArrayXd theta = e / e.sum();
  fvic::ir::Interpreter likelihood(module, fvic::test::factor_named(module, "likelihood_y"));
  const double log_lik = std::log(theta(0)) + 2 * std::log(theta(2)) + std::log(theta(1));
  CHECK(likelihood.forward(b).m.sum() == Approx(log_lik).epsilon(1e-13));
  b.noise_key = 5;
  fvic::ir::Interpreter draw(module, fvic::test::factor_named(module, "quantity_draw"));
  const fvic::ir::RealTensor& d = draw.forward(b);
  REQUIRE(d.m.size() == 1);
  CHECK((d.m(0, 0) >= 1 && d.m(0, 0) <= 3));
}

TEST_CASE("stan forms: multinomial(theta) is multinomial_logit(log(theta))", "[stan_forms]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_multinomial", R"(data {
  int<lower=2> K;
  array[K] int<lower=0> counts;
}
parameters {
  global simplex[K] theta;
}
model {
  counts ~ multinomial(theta);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["K"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["K"].m(0, 0) = 3;
  b.data["counts"] = fvic::ir::RealTensor(3, 1, 1);
  b.data["counts"].m << 2, 0, 5;
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 1);
  b.inputs["global"].m << 0.2, -0.5, 1.0;  // theta = softmax
  const Eigen::ArrayXd e = b.inputs["global"].m.col(0).array().exp();
  const Eigen::ArrayXd theta = e / e.sum();
  // The multinomial's pmf: 7! / (2! 0! 5!) theta_1^2 theta_3^5.
  const double expected = std::lgamma(8) - std::lgamma(3) - std::lgamma(6) + 2 * std::log(theta(0)) + 5 * std::log(theta(2));
  fvic::ir::Interpreter likelihood(module, fvic::test::factor_named(module, "likelihood_counts"));
  CHECK(likelihood.forward(b).m.sum() == Approx(expected).epsilon(1e-13));
}

}  // namespace stan_forms_test
