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

}  // namespace

TEST_CASE("loops: a loop over elements computes what the vectorised statement computes", "[loops]") {
  fvic::test::LoadedModel loops = fvic::test::load_text("fvic_test_loops", kLoops), vectors = fvic::test::load_text("fvic_test_vectors", kVectors);
  INFO(loops.errors() << vectors.errors());
  REQUIRE(loops.ok());
  REQUIRE(vectors.ok());
  fvic::ir::Module a, b;
  REQUIRE(fvic::build_ir(*loops.model, a, loops.diags));
  REQUIRE(fvic::build_ir(*vectors.model, b, vectors.diags));
  std::mt19937 rng(5);
  const fvic::ir::Bindings data = fvic::test::random_bindings(*loops.model, a, rng, /*draws=*/3);
  for (const std::string& name : {"server_density", "silo_density", "likelihood_y"}) check_same_factor(a, b, data, name);
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

TEST_CASE("loops: the loops the code generator refuses say why", "[loops]") {
  const std::string head = "data {\n  int<lower=1> K;\n}\nsilo data {\n  int<lower=0> N;\n  vector[N] y;\n}\n"
                           "parameters {\n  global real mu;\n}\nmodel {\n  mu ~ normal(0, 1);\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  for (n in 2:N) y[n] ~ normal(mu, 1);\n", "this loop is not supported by the code generator yet"},
      {"  for (n in 1:N) y[n] ~ normal(mu * n, 1);\n", "the loop variable 'n' used as a value"},
      {"  for (k in 1:K) y[k] ~ normal(mu, 1);\n", "a loop over 1:K reading 'y' of N rows"},
  };
  for (const auto& [body, message] : cases) {
    fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_bad_loop", head + body + "}\n");
    REQUIRE(m.ok());
    fvic::ir::Module module;
    CHECK_FALSE(fvic::build_ir(*m.model, module, m.diags));
    INFO(m.errors());
    CHECK(m.errors().find(message) != std::string::npos);
  }
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

TEST_CASE("loops: a model-block local never given its value is named", "[loops]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_unassigned", kHead + R"(model {
  vector[N] mu;
  alpha ~ normal(0, 5);
  beta ~ normal(0, 2);
  sigma ~ normal(0, 2);
  y ~ normal(alpha + x * beta, sigma);
}
)");
  REQUIRE(m.ok());
  fvic::ir::Module module;
  CHECK_FALSE(fvic::build_ir(*m.model, module, m.diags));
  CHECK(m.errors().find("'mu' is declared in the model block but never given its value") != std::string::npos);
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
