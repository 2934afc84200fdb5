// Statements the vectorised forms refuse, run one at a time (ir/statement_program.h on
// fvi/kernel/machine.h): a recursion over time, nested loops filling locals and transformed
// parameters, ifs on the data, ranges. Each program's value is checked against the same model
// written out in C++ here, and its gradient against finite differences (check_adjoints).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fvi/kernel/machine.h"
#include "ir/interpret.h"
#include "pipeline.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace statement_programs_test {

namespace {

using fvic::ir::RealTensor;

double normal_lpdf(double y, double mu, double sigma) {
  return -0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow((y - mu) / sigma, 2);
}
double cauchy_lpdf(double y, double mu, double sigma) {
  return -std::log(M_PI) - std::log(sigma) - std::log1p(std::pow((y - mu) / sigma, 2));
}

bool has_program(const fvic::ir::Factor& f) {
  for (const fvic::ir::Node& n : f.nodes)
    if (n.op == fvic::ir::Op::Program) return true;
  return false;
}

struct Built {
  fvic::test::LoadedModel model;
  fvic::ir::Module module = {};
  fvic::ir::Bindings data = {};
};

void build(Built& b, unsigned seed) {
  INFO(b.model.errors());
  REQUIRE(b.model.ok());
  REQUIRE(fvic::build_ir(*b.model.model, b.module, b.model.diags));
  std::mt19937 rng(seed);
  b.data = fvic::test::random_bindings(*b.model.model, b.module, rng, /*draws=*/3);
}

}  // namespace

// posteriordb's arma11: err[t] reads err[t - 1], which no vectorised form computes.
const char* const kArma = R"(data {
  int<lower=1> T;
  array[T] real y;
}
parameters {
  global real mu;
  global real phi;
  global real theta;
  global real<lower=0> sigma;
}
model {
  vector[T] nu;
  vector[T] err;
  mu ~ normal(0, 10);
  phi ~ normal(0, 2);
  theta ~ normal(0, 2);
  sigma ~ cauchy(0, 2.5);
  nu[1] = mu + phi * mu;
  err[1] = y[1] - nu[1];
  for (t in 2:T) {
    nu[t] = mu + phi * y[t - 1] + theta * err[t - 1];
    err[t] = y[t] - nu[t];
  }
  err ~ normal(0, sigma);
}
)";

TEST_CASE("statement programs: a recursion over time computes ARMA(1,1)'s log density", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_arma", kArma)};
  build(b, 3);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  CHECK(has_program(f));
  fvic::ir::Interpreter interp(b.module, f);
  const RealTensor lp = interp.forward(b.data);
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    const double mu = g(0, s), phi = g(1, s), theta = g(2, s), sigma = std::exp(g(3, s));
    double want = normal_lpdf(mu, 0, 10) + normal_lpdf(phi, 0, 2) + normal_lpdf(theta, 0, 2) +
                  cauchy_lpdf(sigma, 0, 2.5) + g(3, s);  // + log |d sigma / d u|
    double err = y(0, 0) - (mu + phi * mu);
    want += normal_lpdf(err, 0, sigma);
    for (Eigen::Index t = 1; t < y.rows(); ++t) {
      err = y(t, 0) - (mu + phi * y(t - 1, 0) + theta * err);
      want += normal_lpdf(err, 0, sigma);
    }
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// normal_mixture_k: a local array filled by an inner loop, then log_sum_exp of it, per row.
TEST_CASE("statement programs: a mixture's log_sum_exp over an array filled per row", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_mixture", R"(data {
  int<lower=1> K;
  int<lower=1> N;
  array[N] real y;
}
parameters {
  global simplex[K] theta;
  global array[K] real mu;
  global array[K] real<lower=0> sigma;
}
model {
  array[K] real ps;
  mu ~ normal(0, 10);
  sigma ~ lognormal(0, 1);
  for (n in 1:N) {
    for (k in 1:K) {
      ps[k] = log(theta[k]) + normal_lpdf(y[n] | mu[k], sigma[k]);
    }
    target += log_sum_exp(ps);
  }
}
)")};
  build(b, 4);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  REQUIRE(has_program(f));
  // The program's own value (the node before the log-Jacobians are added): the mixture written out.
  fvic::ir::Interpreter interp(b.module, f);
  interp.forward(b.data);
  int program = -1;
  for (size_t i = 0; i < f.nodes.size(); ++i)
    if (f.nodes[i].op == fvic::ir::Op::Program) program = int(i);
  const RealTensor& value = interp.value(program);
  // theta's value as the factor computed it: the operand of K rows whose draws each sum to 1.
  const Eigen::Index K = Eigen::Index(b.data.data.at("K").m(0, 0));
  const RealTensor* theta_ptr = nullptr;
  for (int a : f.nodes[program].args) {
    const RealTensor& v = interp.value(a);
    if (v.rows == K && v.cols == 1 && v.draws == 3 && (v.m.colwise().sum().array() - 1).abs().maxCoeff() < 1e-12)
      theta_ptr = &v;
  }
  REQUIRE(theta_ptr);
  const RealTensor& theta = *theta_ptr;
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    // The group: theta (K unconstrained: lower.cpp constrain_simplex), mu (K), sigma (K, log scale).
    double mixture = 0;
    for (Eigen::Index n = 0; n < y.rows(); ++n) {
      double top = -INFINITY, total = 0;
      std::vector<double> ps(static_cast<size_t>(K));
      for (Eigen::Index k = 0; k < K; ++k) {
        const double mu = g(K + k, s), sigma = std::exp(g(2 * K + k, s));
        ps[size_t(k)] = std::log(theta.draw(s)(k, 0)) + normal_lpdf(y(n, 0), mu, sigma);
        top = std::max(top, ps[size_t(k)]);
      }
      for (double p : ps) total += std::exp(p - top);
      mixture += top + std::log(total);
    }
    double priors = 0;
    for (Eigen::Index k = 0; k < K; ++k) {
      const double mu = g(K + k, s), sigma = std::exp(g(2 * K + k, s));
      priors += normal_lpdf(mu, 0, 10) - 0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow(std::log(sigma), 2);
    }
    CHECK(value.m(0, s) == Approx(priors + mixture).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// dogs: transformed parameters built by nested loops, each row a recursion over the data; the
// model reads them element by element.
const char* const kDogs = R"(data {
  int<lower=0> n_dogs;
  int<lower=0> n_trials;
  array[n_dogs, n_trials] int<lower=0, upper=1> y;
}
parameters {
  global vector[3] beta;
}
transformed parameters {
  matrix[n_dogs, n_trials] n_avoid;
  matrix[n_dogs, n_trials] n_shock;
  matrix[n_dogs, n_trials] p;
  for (j in 1:n_dogs) {
    n_avoid[j, 1] = 0;
    n_shock[j, 1] = 0;
    for (t in 2:n_trials) {
      n_avoid[j, t] = n_avoid[j, t - 1] + 1 - y[j, t - 1];
      n_shock[j, t] = n_shock[j, t - 1] + y[j, t - 1];
    }
    for (t in 1:n_trials) {
      p[j, t] = beta[1] + beta[2] * n_avoid[j, t] + beta[3] * n_shock[j, t];
    }
  }
}
model {
  beta ~ normal(0, 100);
  for (i in 1:n_dogs) {
    for (j in 1:n_trials) {
      y[i, j] ~ bernoulli_logit(p[i, j]);
    }
  }
}
)";

TEST_CASE("statement programs: transformed parameters built by nested loops, read element by element", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_dogs", kDogs)};
  build(b, 5);
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index dogs = y.rows(), trials = y.cols();
  fvic::ir::Interpreter q(b.module, fvic::test::factor_named(b.module, "quantity_p"));
  const RealTensor& p = q.forward(b.data);
  REQUIRE(p.rows == dogs);
  REQUIRE(p.cols == trials);
  fvic::ir::Interpreter d(b.module, fvic::test::factor_named(b.module, "server_density"));
  const RealTensor& lp = d.forward(b.data);
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    double want = 0;
    for (int k = 0; k < 3; ++k) want += normal_lpdf(g(k, s), 0, 100);
    for (Eigen::Index j = 0; j < dogs; ++j) {
      double avoid = 0, shock = 0;
      for (Eigen::Index t = 0; t < trials; ++t) {
        if (t > 0) {
          avoid += 1 - y(j, t - 1);
          shock += y(j, t - 1);
        }
        const double eta = g(0, s) + g(1, s) * avoid + g(2, s) * shock;
        CHECK(p.draw(s)(j, t) == Approx(eta).epsilon(1e-12));
        want += y(j, t) * eta - std::log1p(std::exp(eta));
      }
    }
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// Ifs on the data, ?:, int arithmetic, a range of a parameter vector and a compound assignment.
TEST_CASE("statement programs: ifs on the data, ranges and compound assignments", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_branches", R"(data {
  int<lower=3> n;
  vector[n] y;
  array[n] int<lower=0, upper=1> flag;
}
parameters {
  global vector[n] s;
  global real<lower=0> tau;
}
model {
  real acc = 0;
  tau ~ normal(0, 1);
  s[1:2] ~ normal(0, 1);
  for (t in 3:n) {
    s[t] ~ normal(-sum(s[t - 2:t - 1]) / 2, tau);
  }
  for (t in 1:n) {
    if (flag[t] == 1) {
      y[t] ~ normal(s[t], 1);
    } else {
      acc += flag[t] == 0 && t % 2 == 0 ? square(y[t] - s[t]) : 0.5 * square(y[t] - s[t]);
    }
  }
  target += -acc;
}
)")};
  build(b, 6);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  REQUIRE(has_program(f));
  fvic::ir::Interpreter interp(b.module, f);
  const RealTensor& lp = interp.forward(b.data);
  const auto& y = b.data.data.at("y").m;
  const auto& flag = b.data.data.at("flag").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index n = y.rows();
  for (Eigen::Index d = 0; d < g.cols(); ++d) {
    auto s = [&](Eigen::Index t) { return g(t, d); };
    const double tau = std::exp(g(n, d));
    double want = normal_lpdf(tau, 0, 1) + g(n, d) + normal_lpdf(s(0), 0, 1) + normal_lpdf(s(1), 0, 1);
    for (Eigen::Index t = 2; t < n; ++t) want += normal_lpdf(s(t), -(s(t - 2) + s(t - 1)) / 2, tau);
    double acc = 0;
    for (Eigen::Index t = 0; t < n; ++t) {
      if (flag(t, 0) == 1) want += normal_lpdf(y(t, 0), s(t), 1);
      else acc += (t + 1) % 2 == 0 ? std::pow(y(t, 0) - s(t), 2) : 0.5 * std::pow(y(t, 0) - s(t), 2);
    }
    CHECK(lp.m(0, d) == Approx(want - acc).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

TEST_CASE("statement programs: what they refuse is named, located, and a test on a parameter stops the run", "[programs]") {
  // One statement holding terms of two parties: neither party's program can hold it; the
  // vectorised refusal stays, with why.
  fvic::test::LoadedModel mixed = fvic::test::load_text("fvic_test_mixed_loop", R"(data {
  int<lower=2> K;
}
silo data {
  int<lower=2> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  for (k in 2:K) {
    mu ~ normal(0, 1);
    y[k] ~ normal(mu + y[k - 1], 1);
  }
}
)");
  REQUIRE(mixed.ok());
  fvic::ir::Module m1;
  CHECK_FALSE(fvic::build_ir(*mixed.model, m1, mixed.diags));
  INFO(mixed.errors());
  CHECK(mixed.errors().find("this loop is not supported by the code generator yet") != std::string::npos);
  CHECK(mixed.errors().find("each statement of the model block holds the terms of one party") != std::string::npos);

  // A branch on a parameter: the same in every draw only by chance, so the machine refuses it.
  Built b{fvic::test::load_text("fvic_test_branch_on_parameter", R"(data {
  int<lower=1> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  for (n in 2:N) {
    if (mu > 0) y[n] ~ normal(mu + y[n - 1], 1);
  }
}
)")};
  build(b, 7);
  fvic::ir::Interpreter interp(b.module, fvic::test::factor_named(b.module, "server_density"));
  CHECK_THROWS_WITH(interp.forward(b.data), Catch::Contains("line 11") && Catch::Contains("depends on a parameter"));

  // A container larger than a run may hold: refused by its size, before anything is allocated.
  Built big{fvic::test::load_text("fvic_test_program_big", R"(data {
  int<lower=1> K;
  vector[K] y;
}
parameters {
  global real mu;
}
model {
  vector[K * K * K] cube;
  mu ~ normal(0, 1);
  for (k in 2:K) y[k] ~ normal(mu + y[k - 1], 1);
}
)")};
  build(big, 11);
  big.data.data["K"] = RealTensor::constant(2000);
  big.data.data["y"] = RealTensor(2000, 1, 1);
  fvic::ir::Interpreter huge(big.module, fvic::test::factor_named(big.module, "server_density"));
  CHECK_THROWS_WITH(huge.forward(big.data), Catch::Contains("line 9") && Catch::Contains("8000000000 x 1 elements"));

  // A function the machine does not have, located.
  fvic::test::LoadedModel unknown = fvic::test::load_text("fvic_test_program_function", R"(data {
  int<lower=2> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  for (n in 2:N) y[n] ~ normal(mu + append_row(y, y)[n - 1], 1);
}
)");
  REQUIRE(unknown.ok());
  fvic::ir::Module m2;
  CHECK_FALSE(fvic::build_ir(*unknown.model, m2, unknown.diags));
  INFO(unknown.errors());
  CHECK(unknown.errors().find(":10:") != std::string::npos);
  CHECK(unknown.errors().find("'append_row' is not supported in statements run one at a time") != std::string::npos);
}

// Ranges and multi-indices of matrices, a column assigned whole, nested indexing, rep_*, prod,
// cumulative_sum, to_vector and max, in a transformed parameter; its value written out here and
// the gradient of a model reading it element by element.
TEST_CASE("statement programs: ranges, multi-indices, columns and the container functions", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_selections", R"(data {
  int<lower=3> n;
  array[n] int<lower=1, upper=n> pick;
  vector[n] y;
}
parameters {
  global vector[n] a;
  global real<lower=0> sigma;
}
transformed parameters {
  matrix[n, 2] m;
  array[n] vector[2] rows;
  m[:, 1] = a;
  m[1:n, 2] = cumulative_sum(a[pick]);
  for (i in 1:n) {
    rows[i][1] = m[i, 2] - max(a);
    rows[i, 2] = prod(rep_vector(1.5, 2)) * sum(to_vector(m[i, 1:2]));
  }
}
model {
  a ~ normal(0, 1);
  sigma ~ normal(0, 1);
  for (i in 2:n) y[i] ~ normal(rows[i, 1] + rows[i - 1, 2], sigma);
}
)")};
  build(b, 8);
  const auto& y = b.data.data.at("y").m;
  const auto& pick = b.data.data.at("pick").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index n = y.rows();
  fvic::ir::Interpreter q(b.module, fvic::test::factor_named(b.module, "quantity_rows"));
  const RealTensor& rows = q.forward(b.data);
  REQUIRE(rows.rows == n);
  REQUIRE(rows.cols == 2);
  fvic::ir::Interpreter d(b.module, fvic::test::factor_named(b.module, "server_density"));
  const RealTensor& lp = d.forward(b.data);
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    Eigen::VectorXd a = g.col(s).head(n);
    const double sigma = std::exp(g(n, s));
    Eigen::MatrixXd m(n, 2), r(n, 2);
    double running = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      m(i, 0) = a(i);
      running += a(Eigen::Index(pick(i, 0)) - 1);
      m(i, 1) = running;
    }
    for (Eigen::Index i = 0; i < n; ++i) {
      r(i, 0) = m(i, 1) - a.maxCoeff();
      r(i, 1) = 2.25 * (m(i, 0) + m(i, 1));
      CHECK(rows.draw(s)(i, 0) == Approx(r(i, 0)).epsilon(1e-12));
      CHECK(rows.draw(s)(i, 1) == Approx(r(i, 1)).epsilon(1e-12));
    }
    double want = normal_lpdf(sigma, 0, 1) + g(n, s);
    for (Eigen::Index i = 0; i < n; ++i) want += normal_lpdf(a(i), 0, 1);
    for (Eigen::Index i = 1; i < n; ++i) want += normal_lpdf(y(i, 0), r(i, 0) + r(i - 1, 1), sigma);
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// `_rng` in a generated quantity built by statements: each posterior draw's value is a draw of
// the distribution at that draw's parameters (bernoulli: 0 or 1; over many draws, its mean),
// and the draws repeat with the noise key.
TEST_CASE("statement programs: _rng draws in generated quantities built by statements", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_program_rng", R"(data {
  int<lower=1> n;
  vector[n] y;
}
parameters {
  global real<lower=0, upper=1> p;
}
model {
  real total = 0;
  for (i in 1:n) total += y[i];
  target += total * log(p);
}
generated quantities {
  array[n] int z;
  for (i in 1:n) {
    if (i % 2 == 0) z[i] = bernoulli_rng(p);
    else z[i] = 1 - bernoulli_rng(p);
  }
}
)")};
  build(b, 9);
  // Many posterior draws of p, all equal to 0.3: z[i] of even i is 1 in 30% of them.
  const long long S = 4000;
  const double p = 0.3;
  b.data.inputs["global"] = RealTensor(1, 1, S);
  b.data.inputs["global"].m.setConstant(std::log(p / (1 - p)));  // logit: the unconstrained scale
  b.data.noise_key = 42;
  fvic::ir::Interpreter q(b.module, fvic::test::factor_named(b.module, "quantity_z"));
  const RealTensor z = q.forward(b.data);
  REQUIRE(z.draws == S);
  const Eigen::Index n = z.rows;
  for (Eigen::Index i = 0; i < n; ++i) {
    double ones = 0;
    for (Eigen::Index s = 0; s < S; ++s) {
      const double v = z.draw(s)(i, 0);
      REQUIRE((v == 0 || v == 1));
      ones += v;
    }
    // Binomial(S, 0.3) or (S, 0.7): within 4.5 standard deviations.
    const double want = (i + 1) % 2 == 0 ? p : 1 - p, sd = std::sqrt(want * (1 - want) / double(S));
    CHECK(std::abs(ones / double(S) - want) < 4.5 * sd);
  }
  fvic::ir::Interpreter again(b.module, fvic::test::factor_named(b.module, "quantity_z"));
  CHECK((again.forward(b.data).m - z.m).cwiseAbs().maxCoeff() == 0);
}

// The rest of the machine's functions, each in a term written out here: softmax, log_softmax,
// mean, min, dot_product, dot_self, a transpose, rep_matrix, rep_array, rep_row_vector, a row_vector
// literal, and a matrix product.
TEST_CASE("statement programs: softmax, log_softmax, mean, min, products and the rep_ functions", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_program_functions", R"(data {
  int<lower=2> n;
  vector[n] y;
}
parameters {
  global vector[n] a;
}
model {
  real total = 0;
  matrix[2, n] m = rep_matrix(a', 2);
  for (i in 1:1) {
    total += dot_product(softmax(a), y) + sum(log_softmax(a)) * 0.1;
    total += mean(a) - min(a) + dot_self(a) * 0.01;
    total += sum(m * y) * 0.5 + sum(rep_array(a[1], 3)) + sum(rep_row_vector(a[2], 2) * [1, 2]');
    total += sum(m[1]' .* y) * 0.25;
  }
  target += total;
}
)")};
  build(b, 10);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  REQUIRE(has_program(f));
  fvic::ir::Interpreter interp(b.module, f);
  const RealTensor& lp = interp.forward(b.data);
  const Eigen::VectorXd y = b.data.data.at("y").m.col(0);
  const auto& g = b.data.inputs.at("global").m;
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    const Eigen::VectorXd a = g.col(s);
    const Eigen::VectorXd e = (a.array() - a.maxCoeff()).exp();
    const Eigen::VectorXd softmax = e / e.sum();
    const Eigen::VectorXd log_softmax = softmax.array().log();
    double want = softmax.dot(y) + 0.1 * log_softmax.sum();
    want += a.mean() - a.minCoeff() + 0.01 * a.squaredNorm();
    want += 0.5 * 2 * a.dot(y) + 3 * a[0] + a[1] * 3;
    want += 0.25 * a.dot(y);
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// posteriordb's ldaK2: arrays of simplexes as parameters (row m of an M x K value is simplex m,
// each with the simplex's own map and log-Jacobian, lower.cpp constrain_simplex_rows) read by
// nested loops; the log joint written out here, and its gradient.
TEST_CASE("statement programs: arrays of simplexes in a topic model", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_lda", R"(data {
  int<lower=2> V;
  int<lower=1> M;
  int<lower=1> N;
  array[N] int<lower=1, upper=V> w;
  array[N] int<lower=1, upper=M> doc;
}
transformed data {
  int<lower=1> K = 2;
  vector<lower=0>[K] alpha = rep_vector(1.5, K);
  vector<lower=0>[V] beta = rep_vector(0.5, V);
}
parameters {
  global array[M] simplex[K] theta;
  global array[K] simplex[V] phi;
}
model {
  for (m in 1:M) theta[m] ~ dirichlet(alpha);
  for (k in 1:K) phi[k] ~ dirichlet(beta);
  for (n in 1:N) {
    array[K] real gamma;
    for (k in 1:K) gamma[k] = log(theta[doc[n], k]) + log(phi[k, w[n]]);
    target += log_sum_exp(gamma);
  }
}
)")};
  build(b, 12);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  REQUIRE(has_program(f));
  fvic::ir::Interpreter interp(b.module, f);
  const RealTensor& lp = interp.forward(b.data);
  const Eigen::Index V = Eigen::Index(b.data.data.at("V").m(0, 0)), M = Eigen::Index(b.data.data.at("M").m(0, 0));
  const auto& w = b.data.data.at("w").m;
  const auto& doc = b.data.data.at("doc").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index K = 2;
  auto dirichlet = [](const Eigen::VectorXd& x, double a) {
    const double n = double(x.size());
    return std::lgamma(n * a) - n * std::lgamma(a) + (a - 1) * x.array().log().sum();
  };
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    // theta: M x K column-major from offset 0; phi: K x V from offset M K.
    const Eigen::MatrixXd u_theta = Eigen::Map<const Eigen::MatrixXd>(g.col(s).data(), M, K);
    const Eigen::MatrixXd u_phi = Eigen::Map<const Eigen::MatrixXd>(g.col(s).data() + M * K, K, V);
    double want = 0;
    auto rows = [&](const Eigen::MatrixXd& u, double a, Eigen::MatrixXd& x) {
      x = u.array().exp();
      for (Eigen::Index i = 0; i < u.rows(); ++i) {
        // the log-Jacobian of simplex i: sum(u) - sum(exp(u)) - lgamma(K)
        want += u.row(i).sum() - x.row(i).sum() - std::lgamma(double(u.cols()));
        x.row(i) /= x.row(i).sum();
        want += dirichlet(x.row(i).transpose(), a);
      }
    };
    Eigen::MatrixXd theta, phi;
    rows(u_theta, 1.5, theta);
    rows(u_phi, 0.5, phi);
    for (Eigen::Index n = 0; n < w.rows(); ++n) {
      const Eigen::Index d = Eigen::Index(doc(n, 0)) - 1, v = Eigen::Index(w(n, 0)) - 1;
      double total = 0;
      for (Eigen::Index k = 0; k < K; ++k) total += theta(d, k) * phi(k, v);
      want += std::log(total);
    }
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// posteriordb's hierarchical_gp's block: a covariance from gp_exp_quad_cov, a jitter added on
// its diagonal by a loop, its Cholesky factor times standard normals; against Eigen's LLT of the
// same matrix built here, and the gradient through the Cholesky factor. (The block's local K is
// assigned again after its declaration, so its declared value is not what the last statement
// reads: the vectorised form, which read it so, refuses it now.)
TEST_CASE("statement programs: a Gaussian process built by statements", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_program_gp", R"(data {
  int<lower=2> N;
  array[N] real x;
  vector[N] y;
}
parameters {
  global real<lower=0> alpha;
  global real<lower=0> rho;
  global vector[N] z;
}
transformed parameters {
  vector[N] f;
  {
    matrix[N, N] K = gp_exp_quad_cov(x, alpha, rho);
    for (n in 1:N) K[n, n] = K[n, n] + 0.1;
    f = cholesky_decompose(K) * z;
  }
}
model {
  alpha ~ normal(0, 1);
  rho ~ normal(0, 1);
  z ~ normal(0, 1);
  for (n in 1:N) y[n] ~ normal(f[n], 0.5);
}
)")};
  build(b, 13);
  const auto& x = b.data.data.at("x").m;
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index N = x.rows();
  fvic::ir::Interpreter q(b.module, fvic::test::factor_named(b.module, "quantity_f"));
  const RealTensor& f = q.forward(b.data);
  fvic::ir::Interpreter d(b.module, fvic::test::factor_named(b.module, "server_density"));
  const RealTensor& lp = d.forward(b.data);
  fvic::ir::Interpreter l(b.module, fvic::test::factor_named(b.module, "likelihood_y"));
  const RealTensor& lik = l.forward(b.data);
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    const double alpha = std::exp(g(0, s)), rho = std::exp(g(1, s));
    const Eigen::VectorXd z = g.col(s).segment(2, N);
    Eigen::MatrixXd K(N, N);
    for (Eigen::Index i = 0; i < N; ++i)
      for (Eigen::Index j = 0; j < N; ++j)
        K(i, j) = alpha * alpha * std::exp(-std::pow(x(i, 0) - x(j, 0), 2) / (2 * rho * rho)) + (i == j ? 0.1 : 0);
    const Eigen::VectorXd want_f = Eigen::MatrixXd(K.llt().matrixL()) * z;
    double want = normal_lpdf(alpha, 0, 1) + g(0, s) + normal_lpdf(rho, 0, 1) + g(1, s);
    for (Eigen::Index n = 0; n < N; ++n) {
      CHECK(f.draw(s)(n, 0) == Approx(want_f[n]).epsilon(1e-12));
      want += normal_lpdf(z[n], 0, 1);
      // the likelihood (its own factor: the model's loop is vectorised) at this draw's f
      CHECK(lik.draw(s)(n, 0) == Approx(normal_lpdf(y(n, 0), want_f[n], 0.5)).epsilon(1e-12));
    }
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

// A user function whose body is statements (a loop, an if, a return from inside the loop, a
// local container filled element by element), called from a loop: in line in the program, its
// arguments copied; posteriordb's multi_occupancy builds its covariance so.
TEST_CASE("statement programs: user functions with loops, ifs and returns", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_program_functions_body", R"(functions {
  matrix cov_2d(vector sigma, real rho) {
    matrix[2, 2] S;
    S[1, 1] = square(sigma[1]);
    S[2, 2] = square(sigma[2]);
    S[1, 2] = sigma[1] * sigma[2] * rho;
    S[2, 1] = S[1, 2];
    return S;
  }
  real head_sum(vector v, int k) {
    real total = 0;
    for (i in 1:rows(v)) {
      if (i > k) return total;
      total += v[i];
    }
    return total;
  }
}
data {
  int<lower=2> N;
  array[N] vector[2] uv;
  vector[N] y;
}
parameters {
  global vector<lower=0>[2] sigma;
  global real<lower=-1, upper=1> rho;
  global vector[N] a;
}
model {
  sigma ~ normal(0, 1);
  a ~ normal(0, 1);
  for (n in 1:dims(uv)[1]) {  // dims(uv) = {N, 2}
    uv[n] ~ multi_normal(rep_vector(0, dims(uv)[2]), cov_2d(sigma, rho));
    y[n] ~ normal(head_sum(a, n), 1);
  }
}
)")};
  build(b, 14);
  const fvic::ir::Factor& f = fvic::test::factor_named(b.module, "server_density");
  REQUIRE(has_program(f));
  fvic::ir::Interpreter interp(b.module, f);
  const RealTensor& lp = interp.forward(b.data);
  const auto& uv = b.data.data.at("uv").m;
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  const Eigen::Index N = y.rows();
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    const double s1 = std::exp(g(0, s)), s2 = std::exp(g(1, s));
    const double u_rho = g(2, s), rho = -1 + 2 / (1 + std::exp(-u_rho));
    const Eigen::VectorXd a = g.col(s).segment(3, N);
    double want = normal_lpdf(s1, 0, 1) + normal_lpdf(s2, 0, 1) + g(0, s) + g(1, s);
    // rho = -1 + 2 inv_logit(u): log|J| = log 2 + log_inv_logit(u) + log1m_inv_logit(u)
    want += std::log(2.0) - std::log1p(std::exp(-u_rho)) - std::log1p(std::exp(u_rho));
    Eigen::Matrix2d S;
    S << s1 * s1, s1 * s2 * rho, s1 * s2 * rho, s2 * s2;
    const Eigen::Matrix2d inverse = S.inverse();
    for (Eigen::Index n = 0; n < N; ++n) {
      want += normal_lpdf(a[n], 0, 1);
      const Eigen::Vector2d x(uv(n, 0), uv(n, 1));
      want += -std::log(2 * M_PI) - 0.5 * std::log(S.determinant()) - 0.5 * x.dot(inverse * x);
      want += normal_lpdf(y(n, 0), a.head(n + 1).sum(), 1);
    }
    CHECK(lp.m(0, s) == Approx(want).epsilon(1e-11));
  }
  check_adjoints(b.model);
}

// A federated model whose statements the vectorised forms refuse in both parties: each
// statement runs in the program of the party whose terms it holds (ir/lower.cpp), the server's
// prior (its scale from a function with statements) in the server's, the silos' user density
// with a loop and a branch on the data, over a local declared from the silo's data, in theirs.
TEST_CASE("statement programs: the server's and the silos' statements each in their own factor", "[programs]") {
  Built b{fvic::test::load_text("fvic_test_program_parties", R"(functions {
  real prior_scale(int k) {
    if (k > 2) return 10;
    return 2;
  }
  real gauss_lpdf(vector y, vector r, real s) {
    real t = 0;
    for (n in 1:num_elements(r)) {
      if (y[n] > 1e6) t += -1e9;
      else t += normal_lpdf(r[n] | 0, s);
    }
    return t;
  }
}
data {
  int<lower=1> K;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
  global real<lower=0> sigma;
}
model {
  vector[N] r = y - mu;
  mu ~ normal(0, prior_scale(K));
  sigma ~ normal(0, 1);
  y ~ gauss(r, sigma);
}
)")};
  build(b, 15);
  const fvic::ir::Factor& server = fvic::test::factor_named(b.module, "server_density");
  const fvic::ir::Factor& silo = fvic::test::factor_named(b.module, "silo_density");
  REQUIRE(has_program(server));
  REQUIRE(has_program(silo));
  // The server's program reads nothing of a silo's: not the local r, not y, not N.
  fvic::ir::Bindings server_data = b.data;
  for (const char* name : {"y", "N"}) server_data.data.erase(name);
  fvic::ir::Interpreter prior(b.module, server);
  fvic::ir::Interpreter likelihood(b.module, silo);
  const RealTensor& lp_server = prior.forward(server_data);
  const RealTensor& lp_silo = likelihood.forward(b.data);
  const auto& y = b.data.data.at("y").m;
  const auto& g = b.data.inputs.at("global").m;
  const double scale = b.data.data.at("K").m(0, 0) > 2 ? 10 : 2;
  for (Eigen::Index s = 0; s < g.cols(); ++s) {
    const double mu = g(0, s), sigma = std::exp(g(1, s));
    // + log |d sigma / d u|, the server's own parameter's
    CHECK(lp_server.m(0, s) == Approx(normal_lpdf(mu, 0, scale) + normal_lpdf(sigma, 0, 1) + g(1, s)).epsilon(1e-12));
    double want = 0;
    for (Eigen::Index n = 0; n < y.rows(); ++n) want += normal_lpdf(y(n, 0) - mu, 0, sigma);
    CHECK(lp_silo.m(0, s) == Approx(want).epsilon(1e-12));
  }
  check_adjoints(b.model);
}

}  // namespace statement_programs_test
