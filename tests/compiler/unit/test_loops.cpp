// Loops over a container's elements (`for (i in 1:N) y[i] ~ ...`, `for (n in 1:N) v[n] = ...`),
// lowered as one vectorised statement: each factor of a program written with loops computes what
// the same program written with vectors computes, on the same random data and draws; a loop's
// generated quantity is each element's value (checked against the normal log density written
// out here); and the loops the code generator refuses say why.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "ir/interpret.h"
#include "test_models.h"
#include "pipeline.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace loops_test {

namespace {

// The declarations both forms share.
const std::string kHead = R"(data {
  int<lower=1> D;
}
silo data {
  int<lower=0> N;
  matrix[N, D] x;
  vector[N] y;
}
parameters {
  global real alpha;
  global vector[D] beta;
  global real<lower=0> sigma;
}
)";

const std::string kLoops = kHead + R"(model {
  alpha ~ normal(0, 5);
  for (d in 1:D) beta[d] ~ normal(0, 2);
  sigma ~ normal(0, 2);
  for (n in 1:N) {
    y[n] ~ normal(alpha + x[n] * beta, sigma);
    target += -0.5 * square(y[n] - alpha);
  }
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | alpha + x[n] * beta, sigma);
}
)";

const std::string kVectors = kHead + R"(model {
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  y ~ normal(alpha + x * beta, sigma);
  target += -0.5 * sum(square(y - alpha));
}
)";

// Factor `name` of module a and of module b give the same values on the same data and draws.
void check_same_factor(const fvic::ir::Module& a, const fvic::ir::Module& b, const fvic::ir::Bindings& data,
                       const std::string& name) {
  INFO(name);
  fvic::ir::Interpreter x(a, fvic::test::factor_named(a, name)), y(b, fvic::test::factor_named(b, name));
  const fvic::ir::RealTensor& u = x.forward(data);
  const fvic::ir::RealTensor& v = y.forward(data);
  REQUIRE(u.m.rows() == v.m.rows());
  REQUIRE(u.m.cols() == v.m.cols());
  CHECK((u.m - v.m).cwiseAbs().maxCoeff() <= 1e-12 * (1 + v.m.cwiseAbs().maxCoeff()));
}

// The IR of a program written with loops and of the same program written with vectors, and
// random data and draws (3) for both.
struct LoopsAndVectors {
  fvic::ir::Module loops, vectors;
  fvic::ir::Bindings data;
};

LoopsAndVectors build_both(const std::string& loops_text, const std::string& vectors_text, unsigned seed) {
  fvic::test::LoadedModel loops = fvic::test::load_text("fvic_test_loops", loops_text);
  fvic::test::LoadedModel vectors = fvic::test::load_text("fvic_test_vectors", vectors_text);
  INFO(loops.errors() << vectors.errors());
  REQUIRE(loops.ok());
  REQUIRE(vectors.ok());
  LoopsAndVectors out;
  REQUIRE(fvic::build_ir(*loops.model, out.loops, loops.diags));
  REQUIRE(fvic::build_ir(*vectors.model, out.vectors, vectors.diags));
  std::mt19937 rng(seed);
  out.data = fvic::test::random_bindings(*loops.model, out.loops, rng, /*draws=*/3);
  return out;
}

}  // namespace

TEST_CASE("loops: a loop over elements computes what the vectorised statement computes", "[loops]") {
  const LoopsAndVectors both = build_both(kLoops, kVectors, 5);
  const fvic::ir::Module &a = both.loops, &b = both.vectors;
  const fvic::ir::Bindings& data = both.data;
  for (const char* name : {"server_density", "silo_density", "likelihood_y"}) check_same_factor(a, b, data, name);
  // log_lik[n]: each row's normal log density, written out here.
  fvic::ir::Interpreter q(a, fvic::test::factor_named(a, "quantity_log_lik"));
  const fvic::ir::RealTensor& lik = q.forward(data);
  const auto& y = data.data.at("y").m;
  const auto& x = data.data.at("x").m;
  const auto& g = data.inputs.at("global");
  const long D = long(data.data.at("D").m(0, 0));
  REQUIRE(lik.rows == y.rows());
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    const double alpha = g.m(0, s), sigma = std::exp(g.m(D + 1, s));
    for (Eigen::Index n = 0; n < y.rows(); ++n) {
      const double mu = alpha + x.row(n).dot(g.m.col(s).segment(1, D));
      const double want = -0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow((y(n, 0) - mu) / sigma, 2);
      CHECK(lik.m(n, s) == Approx(want).epsilon(1e-12));
    }
  }
}

TEST_CASE("loops: x[n, j] of a matrix in a loop is column j of x", "[loops]") {
  // Stan's common loop form, one coefficient per column, against col(x, j) written out.
  const std::string head = "silo data {\n  int<lower=0> N;\n  matrix[N, 3] x;\n  vector[N] y;\n}\n"
                           "parameters {\n  global real alpha;\n  global vector[3] beta;\n"
                           "  global real<lower=0> sigma;\n}\nmodel {\n  alpha ~ normal(0, 5);\n"
                           "  beta ~ normal(0, 2);\n  sigma ~ normal(0, 2);\n";
  const LoopsAndVectors both =
      build_both(head + "  for (n in 1:N)\n    y[n] ~ normal(alpha + beta[1] * x[n, 1] + x[n, 3] * beta[3], sigma);\n}\n",
                 head + "  y ~ normal(alpha + beta[1] * col(x, 1) + col(x, 3) * beta[3], sigma);\n}\n", 7);
  const fvic::ir::Module &a = both.loops, &b = both.vectors;
  const fvic::ir::Bindings& data = both.data;
  check_same_factor(a, b, data, "likelihood_y");
  // And against the normal log density written out here.
  fvic::ir::Interpreter q(a, fvic::test::factor_named(a, "likelihood_y"));
  const fvic::ir::RealTensor& lik = q.forward(data);
  const auto& y = data.data.at("y").m;
  const auto& x = data.data.at("x").m;
  const auto& g = data.inputs.at("global");
  REQUIRE(lik.m.cols() == g.draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    const double alpha = g.m(0, s), sigma = std::exp(g.m(4, s));
    double want = 0;
    for (Eigen::Index n = 0; n < y.rows(); ++n) {
      const double mu = alpha + g.m(1, s) * x(n, 0) + x(n, 2) * g.m(3, s);
      want += -0.5 * std::log(2 * M_PI) - std::log(sigma) - 0.5 * std::pow((y(n, 0) - mu) / sigma, 2);
    }
    CHECK(lik.m.col(s).sum() == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("loops: loops the vectorised forms refuse run as the silos' statements beside the server's prior", "[loops]") {
  // Each refused loop holds silo terms only: it runs in the silos' statement program, the prior in
  // the server's. Both values against the densities written out here.
  const std::string head = "silo data {\n  int<lower=0> N;\n  vector[N] y;\n}\n"
                           "parameters {\n  global real mu;\n}\nmodel {\n  mu ~ normal(0, 1);\n";
  const auto normal_lpdf = [](double y, double mu) { return -0.5 * std::log(2 * M_PI) - 0.5 * (y - mu) * (y - mu); };
  const std::vector<std::pair<std::string, int>> cases = {
      {"  for (n in 2:N) y[n] ~ normal(mu, 1);\n", 0},       // from the second row
      {"  for (n in 1:N) y[n] ~ normal(mu * n, 1);\n", 1},   // the loop variable as a value
  };
  for (const auto& [body, kind] : cases) {
    INFO(body);
    fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_refused_loop", head + body + "}\n");
    REQUIRE(m.ok());
    fvic::ir::Module module;
    INFO(m.errors());
    REQUIRE(fvic::build_ir(*m.model, module, m.diags));
    std::mt19937 rng(11);
    const fvic::ir::Bindings data = fvic::test::random_bindings(*m.model, module, rng, /*draws=*/3);
    fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
    fvic::ir::Interpreter silo(module, fvic::test::factor_named(module, "silo_density"));
    const fvic::ir::RealTensor& prior = server.forward(data);
    const fvic::ir::RealTensor& likelihood = silo.forward(data);
    const auto& y = data.data.at("y").m;
    const auto& g = data.inputs.at("global").m;
    REQUIRE(y.rows() >= 2);
    for (Eigen::Index s = 0; s < g.cols(); ++s) {
      const double mu = g(0, s);
      double want = 0;
      for (Eigen::Index n = kind == 0 ? 1 : 0; n < y.rows(); ++n) want += normal_lpdf(y(n, 0), kind == 0 ? mu : mu * double(n + 1));
      CHECK(prior.m(0, s) == Approx(normal_lpdf(mu, 0)).epsilon(1e-12));
      CHECK(likelihood.m(0, s) == Approx(want).epsilon(1e-12));
    }
  }
}

TEST_CASE("loops: a refused loop holding the server's and the silos' terms says why", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_bad_loop", R"(data {
  int<lower=1> K;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  for (k in 2:K) {
    mu ~ normal(0, 1);
    y ~ normal(mu, 1);
  }
}
)");
  REQUIRE(m.ok());
  fvic::ir::Module module;
  CHECK_FALSE(fvic::build_ir(*m.model, module, m.diags));
  INFO(m.errors());
  CHECK(m.errors().find("this loop is not supported by the code generator yet") != std::string::npos);
  CHECK(m.errors().find("each statement of the model block holds the terms of one party") != std::string::npos);
}

TEST_CASE("loops: model-block locals given their value by an assignment or a loop over elements", "[loops]") {
  // The regression with its mean as locals, then a varying intercept read through an index:
  // each written as Stan users do and as one vectorised statement.
  const std::string assigned = kHead + R"(model {
  vector[N] mu;
  vector[N] fitted;
  real centre;
  centre = alpha;
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  for (n in 1:N) {
    fitted[n] = x[n] * beta;
    mu[n] = centre + fitted[n];
    y[n] ~ normal(mu[n], sigma);
  }
  target += -0.5 * sum(square(y - alpha));
}
)";
  const std::string indexed_head = R"(data {
  int<lower=1> J;
}
silo data {
  int<lower=0> N;
  array[N] int<lower=1, upper=J> group;
  vector[N] y;
}
parameters {
  global vector[J] a;
  global real<lower=0> sigma;
}
model {
  a ~ normal(0, 1);
  sigma ~ normal(0, 2);
)";
  const std::string indexed_loop = indexed_head + R"(  vector[N] y_hat;
  for (i in 1:N) {
    y_hat[i] = a[group[i]];
  }
  y ~ normal(y_hat, sigma);
}
)";
  const std::string indexed_vector = indexed_head + "  y ~ normal(a[group], sigma);\n}\n";
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> pairs = {
      {"fvic_test_assigned", assigned, "fvic_test_vectors", kVectors},
      {"fvic_test_indexed_loop", indexed_loop, "fvic_test_indexed_vector", indexed_vector},
  };
  for (const auto& [a_name, a_text, b_name, b_text] : pairs) {
    INFO(a_name);
    fvic::test::LoadedModel loops = fvic::test::load_text(a_name, a_text), vectors = fvic::test::load_text(b_name, b_text);
    INFO(loops.errors() << vectors.errors());
    REQUIRE(loops.ok());
    REQUIRE(vectors.ok());
    fvic::ir::Module a, b;
    REQUIRE(fvic::build_ir(*loops.model, a, loops.diags));
    REQUIRE(fvic::build_ir(*vectors.model, b, vectors.diags));
    std::mt19937 rng(9);
    const fvic::ir::Bindings data = fvic::test::random_bindings(*loops.model, a, rng, /*draws=*/3);
    REQUIRE(a.factors.size() == b.factors.size());
    for (const fvic::ir::Factor& f : a.factors) check_same_factor(a, b, data, f.name);
  }
}

TEST_CASE("loops: a model-block local read but never given its value is named", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_unassigned", kHead + R"(model {
  vector[N] mu;
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  y ~ normal(mu, sigma);
}
)");
  REQUIRE(m.ok());
  fvic::ir::Module module;
  CHECK_FALSE(fvic::build_ir(*m.model, module, m.diags));
  CHECK(m.errors().find("'mu' is declared in the model block but never given its value") != std::string::npos);
  // Declared and never read: Stan accepts it, and so do we.
  fvic::test::LoadedModel unused = fvic::test::load_text("fvic_test_unused", kHead + R"(model {
  vector[N] mu;
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  y ~ normal(alpha + x * beta, sigma);
}
)");
  REQUIRE(unused.ok());
  fvic::ir::Module built;
  INFO(unused.errors());
  CHECK(fvic::build_ir(*unused.model, built, unused.diags));
}

// Comparisons and logical operators in a loop over elements (as Stan programs build indicator
// columns: `work2[i] = mom_work[i] == 2;`): 1 where true, 0 where false, checked element by
// element against the same comparisons in C++.
TEST_CASE("loops: comparisons and logical operators give 1 or 0 per element", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_compare", R"(silo data {
  int<lower=0> N;
  array[N] int g;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  y ~ normal(mu, 1);
}
generated quantities {
  vector[N] flags;
  for (n in 1:N)
    flags[n] = (g[n] == 2) + 2 * (g[n] != 2) * (y[n] < mu) + 4 * (y[n] >= 0 && g[n] > 0) + 8 * (y[n] <= mu || !(g[n] >= 1));
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 6;
  b.data["g"] = fvic::ir::RealTensor(6, 1, 1);
  b.data["g"].m << 2, 0, 1, 2, 3, -1;
  b.data["y"] = fvic::ir::RealTensor(6, 1, 1);
  b.data["y"].m << -0.5, 0.3, 1.2, 0.0, -2.0, 0.7;
  b.inputs["global"] = fvic::ir::RealTensor(1, 1, 2);
  b.inputs["global"].m << 0.1, -1.0;
  fvic::ir::Interpreter q(module, fvic::test::factor_named(module, "quantity_flags"));
  const fvic::ir::RealTensor& flags = q.forward(b);
  REQUIRE(flags.rows == 6);
  REQUIRE(flags.draws == 2);
  for (Eigen::Index s = 0; s < 2; ++s) {
    const double mu = b.inputs["global"].m(0, s);
    for (Eigen::Index n = 0; n < 6; ++n) {
      const double g = b.data["g"].m(n, 0), y = b.data["y"].m(n, 0);
      const double want = (g == 2) + 2 * (g != 2) * (y < mu) + 4 * (y >= 0 && g > 0) + 8 * (y <= mu || !(g >= 1));
      CHECK(flags.m(n, s) == want);
    }
  }
}

// `if`/`else` around terms (inside a loop, testing element n), the conditional operator, a loop's
// own locals, and the CDFs: the factor computes the log density written out here, element by
// element as Stan would run the loop.
TEST_CASE("loops: ifs, ?:, loop locals and CDFs compute what Stan's loop computes", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_if_in_loop", R"(data {
  int<lower=0, upper=1> robust;
}
silo data {
  int<lower=0> N;
  array[N] int<lower=1, upper=2> g;
  array[N] int<lower=0> s;
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
    int k = g[n];
    real mu;
    mu = a[k];
    if (s[n] > 0)
      target += normal_lpdf(y[n] | mu, sigma) + normal_lcdf(y[n] | mu, 1);
    else
      target += log_sum_exp(logistic_lccdf(y[n] | mu, sigma), std_normal_lcdf(mu));
    if (robust)
      y[n] ~ cauchy(mu, sigma);
    target += s[n] > 1 ? log(normal_cdf(y[n] | 0, 2)) : 0.5;
  }
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  const std::vector<double> g = {1, 2, 2, 1}, s = {0, 3, 1, 2}, y = {0.3, -1.1, 2.4, 0.9};
  auto column = [](const std::vector<double>& v) {
    fvic::ir::RealTensor t(static_cast<Eigen::Index>(v.size()), 1, 1);
    for (size_t i = 0; i < v.size(); ++i) t.m(static_cast<Eigen::Index>(i), 0) = v[i];
    return t;
  };
  b.data["robust"] = column({1});
  b.data["N"] = column({4});
  b.data["g"] = column(g);
  b.data["s"] = column(s);
  b.data["y"] = column(y);
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 2);
  b.inputs["global"].m << 0.4, -0.7, -0.3, -1.2, 0.5, 0.2;  // draw d: a[1], a[2], log sigma
  const auto Phi = [](double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); };
  const auto log_normal = [](double x, double mu, double sd) {
    return -0.5 * std::log(2 * M_PI) - std::log(sd) - 0.5 * std::pow((x - mu) / sd, 2);
  };
  fvic::ir::Interpreter server(module, fvic::test::factor_named(module, "server_density"));
  fvic::ir::Interpreter silo(module, fvic::test::factor_named(module, "silo_density"));
  const fvic::ir::RealTensor& server_lp = server.forward(b);
  const fvic::ir::RealTensor& silo_lp = silo.forward(b);
  for (Eigen::Index d = 0; d < 2; ++d) {
    const double a[2] = {b.inputs["global"].m(0, d), b.inputs["global"].m(1, d)};
    const double sigma = std::exp(b.inputs["global"].m(2, d));
    // student_t(3, 0, 2) at sigma, its half above 0 normalised (log 1/2), and the Jacobian.
    const double t3 = std::lgamma(2.0) - std::lgamma(1.5) - 0.5 * std::log(3 * M_PI) - std::log(2.0) -
                      2.0 * std::log1p(std::pow(sigma / 2, 2) / 3);
    double want_server = log_normal(a[0], 0, 1) + log_normal(a[1], 0, 1) + t3 - std::log(0.5) + std::log(sigma);
    CHECK(server_lp.m(0, d) == Approx(want_server).epsilon(1e-12));
    double want = 0;
    for (size_t n = 0; n < 4; ++n) {
      const double mu = a[static_cast<int>(g[n]) - 1];
      if (s[n] > 0) {
        want += log_normal(y[n], mu, sigma) + std::log(Phi(y[n] - mu));
      } else {
        const double upper = std::log(1 / (1 + std::exp((y[n] - mu) / sigma))), lower = std::log(Phi(mu));
        want += std::log(std::exp(upper) + std::exp(lower));
      }
      want += -std::log(M_PI * sigma) - std::log1p(std::pow((y[n] - mu) / sigma, 2));  // robust = 1
      want += s[n] > 1 ? std::log(Phi(y[n] / 2)) : 0.5;
    }
    CHECK(silo_lp.m(0, d) == Approx(want).epsilon(1e-12));
  }
}

TEST_CASE("loops: a term in a loop that does not read the loop variable counts once per element", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_loop_constant_term", R"(silo data {
  int<lower=0> N;
}
parameters {
  global real mu;
}
model {
  mu ~ normal(0, 1);
  for (n in 1:N) target += -0.5 * square(mu);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings b;
  b.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  b.data["N"].m(0, 0) = 5;
  b.inputs["global"] = fvic::ir::RealTensor(1, 1, 1);
  b.inputs["global"].m(0, 0) = 0.8;
  fvic::ir::Interpreter silo(module, fvic::test::factor_named(module, "silo_density"));
  CHECK(silo.forward(b).m(0, 0) == Approx(5 * -0.5 * 0.64).epsilon(1e-14));
}

TEST_CASE("cdfs: an argument without a derivative may not read a parameter; unknown CDFs are named", "[loops]") {
  const std::string head = "silo data {\n  int<lower=0> N;\n  vector[N] y;\n}\nparameters {\n  global real<lower=0> nu;\n"
                           "}\nmodel {\n  nu ~ gamma(2, 0.1);\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  target += student_t_lccdf(0 | nu, 0, 1);\n",
       "argument nu of student_t_lccdf reads a parameter, and its derivative in nu is not available"},
      {"  target += gamma_lcdf(y | nu, 1);\n", "'gamma_lcdf' is not available: cumulative distribution functions"},
      {"  target += normal_lcdf(y, nu, 1);\n", "'normal_lcdf' separates its outcome from the parameters with '|'"},
  };
  for (const auto& [body, message] : cases) {
    fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_bad_cdf", head + body + "}\n");
    INFO(m.errors());
    CHECK_FALSE(m.ok());
    CHECK(m.errors().find(message) != std::string::npos);
  }
}

// Element i's vector in a loop (a row of a 2-D array or a matrix) is row i of one N x K value:
// the item response model of posteriordb's irt_2pl, a row density with a vector every element
// reads, and categorical_logit over a matrix's transposed rows, against the loop written out.
TEST_CASE("loops: rows of 2-D arrays and matrices as each element's vector", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_loop_rows", R"(data {
  int<lower=1> I;
  int<lower=1> J;
  array[I, J] int<lower=0, upper=1> y;
  matrix[I, J] x;
  array[I] int<lower=1, upper=J> c;
}
parameters {
  global vector[J] theta;
  global vector[I] a;
  global vector[I] b;
}
model {
  theta ~ normal(0, 1);
  a ~ normal(0, 1);
  b ~ normal(0, 1);
  for (i in 1:I) {
    y[i] ~ bernoulli_logit(exp(a[i]) * (theta - b[i]));
    target += normal_lpdf(x[i] | theta, 2) + bernoulli_logit_lpmf(y[i] | theta' * a[i]);
    c[i] ~ categorical_logit((x[i] .* theta')');
  }
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  const int I = 3, J = 2;
  fvic::ir::Bindings bind;
  auto scalar = [](double v) {
    fvic::ir::RealTensor t(1, 1, 1);
    t.m(0, 0) = v;
    return t;
  };
  bind.data["I"] = scalar(I);
  bind.data["J"] = scalar(J);
  bind.data["y"] = fvic::ir::RealTensor(I, J, 1);
  bind.data["y"].m << 1, 0, 0, 1, 1, 1;  // column-major: rows {1, 0}, {0, 1}, {1, 1}
  bind.data["x"] = fvic::ir::RealTensor(I, J, 1);
  bind.data["x"].m << 0.2, -1.0, 0.5, 1.5, 0.3, -0.7;
  bind.data["c"] = fvic::ir::RealTensor(I, 1, 1);
  bind.data["c"].m << 2, 1, 2;
  bind.inputs["global"] = fvic::ir::RealTensor(J + 2 * I, 1, 2);
  bind.inputs["global"].m << 0.4, -0.3, 0.1, -0.5, 0.9, 0.2, -0.1, 0.6,  // draw 1: theta, a, b
      -0.2, 0.7, 0.3, 0.0, -0.4, -0.6, 0.5, 0.1;                          // draw 2
  auto log1p_exp = [](double v) { return std::log1p(std::exp(v)); };
  // The rows' terms are the server's density; c, one category per element, is its likelihood.
  fvic::ir::Interpreter density(module, fvic::test::factor_named(module, "server_density"));
  fvic::ir::Interpreter likelihood(module, fvic::test::factor_named(module, "likelihood_c"));
  const fvic::ir::RealTensor& density_lp = density.forward(bind);
  const fvic::ir::RealTensor& likelihood_lp = likelihood.forward(bind);
  REQUIRE(likelihood_lp.rows == I);
  for (Eigen::Index d = 0; d < 2; ++d) {
    const auto g = [&](int k) { return bind.inputs["global"].m(k, d); };
    const double lp = density_lp.m(0, d) + likelihood_lp.draw(d).sum();
    double want = 0;
    for (int k = 0; k < J + 2 * I; ++k) want += -0.5 * std::log(2 * M_PI) - 0.5 * g(k) * g(k);
    for (int i = 0; i < I; ++i) {
      const double a = g(J + i), b = g(J + I + i);
      double logits[J];
      for (int j = 0; j < J; ++j) {
        const double y = bind.data["y"].m(i, j), x = bind.data["x"].m(i, j), theta = g(j);
        const double eta = std::exp(a) * (theta - b);
        want += y * eta - log1p_exp(eta);
        want += -0.5 * std::log(2 * M_PI) - std::log(2.0) - 0.5 * std::pow((x - theta) / 2, 2);
        want += y * theta * a - log1p_exp(theta * a);
        logits[j] = x * theta;
      }
      const int chosen = static_cast<int>(bind.data["c"].m(i, 0)) - 1;
      want += logits[chosen] - std::log(std::exp(logits[0]) + std::exp(logits[1]));
    }
    CHECK(lp == Approx(want).epsilon(1e-12));
  }
}

// A model-block local assigned again (`mu += b;`, `for (n in 1:N) mu[n] = exp(mu[n]);`, brms's
// inverse link): each statement reads the value the local has where the statement stands.
TEST_CASE("loops: a local assigned again has its new value after the assignment only", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_local_versions", R"(silo data {
  int<lower=0> N;
  vector[N] y;
  vector[N] z;
}
parameters {
  global real a;
  global real b;
}
model {
  vector[N] mu = rep_vector(a, N);
  a ~ normal(0, 1);
  b ~ normal(0, 1);
  y ~ normal(mu, 1);
  mu += b;
  z ~ normal(mu, 2);
  for (n in 1:N) mu[n] = exp(mu[n]);
  target += -sum(mu);
  mu = mu * 3;
  target += normal_lpdf(y | mu, 5);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  fvic::ir::Bindings bind;
  bind.data["N"] = fvic::ir::RealTensor(1, 1, 1);
  bind.data["N"].m(0, 0) = 2;
  bind.data["y"] = fvic::ir::RealTensor(2, 1, 1);
  bind.data["y"].m << 0.5, -0.2;
  bind.data["z"] = fvic::ir::RealTensor(2, 1, 1);
  bind.data["z"].m << 1.5, 0.1;
  bind.inputs["global"] = fvic::ir::RealTensor(2, 1, 1);
  bind.inputs["global"].m << 0.3, -0.6;
  const double a = 0.3, b = -0.6;
  auto log_normal = [](double x, double mu, double sd) {
    return -0.5 * std::log(2 * M_PI) - std::log(sd) - 0.5 * std::pow((x - mu) / sd, 2);
  };
  double want = 0;
  for (double y : {0.5, -0.2}) want += log_normal(y, a, 1) + log_normal(y, 3 * std::exp(a + b), 5);
  for (double z : {1.5, 0.1}) want += log_normal(z, a + b, 2);
  want += -2 * std::exp(a + b);
  double got = 0;  // the silos' terms (the priors are the server's)
  for (const char* name : {"silo_density", "likelihood_y", "likelihood_z_2"}) {
    fvic::ir::Interpreter f(module, fvic::test::factor_named(module, name));
    got += f.forward(bind).m.sum();
  }
  CHECK(got == Approx(want).epsilon(1e-13));
}

}  // namespace loops_test
