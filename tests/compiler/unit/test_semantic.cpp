// The checker's classification of terms, on small programs whose answers are read off the
// rules of DESIGN.md §3 (not off the checker's output).
#include <catch2/catch.hpp>

#include <sstream>

#include "analysis/plan.h"
#include "frontend/parser.h"
#include "frontend/semantic.h"

namespace {

struct Checked {
  fvic::SourceFile source;
  fvic::Diagnostics diags;
  std::unique_ptr<fvic::Program> program;
  std::unique_ptr<fvic::SemanticModel> model;
  explicit Checked(const std::string& text) : source("test.fvi", text), diags(&source) {
    program = fvic::parse_program(source, diags);
    if (program) model = fvic::check_program(*program, diags);
  }
  std::string errors() const {
    std::ostringstream s;
    diags.print(s);
    return s.str();
  }
};

const char* kHier = R"(
data { int<lower=1> D; }
silo data { int<lower=0> N; matrix[N, D] x; array[N] int<lower=0, upper=1> y; }
parameters { global vector[D] beta; global real<lower=0> tau; local real alpha; }
model {
  beta ~ normal(0, 2);
  tau ~ normal(0, 1);
  alpha ~ normal(0, tau);
  y ~ bernoulli_logit(alpha + x * beta);
}
)";

}  // namespace

TEST_CASE("each term of a hierarchical model has its owner", "[semantic]") {
  Checked c(kHier);
  INFO(c.errors());
  REQUIRE_FALSE(c.diags.has_errors());
  const auto& terms = c.model->terms;
  REQUIRE(terms.size() == 4);
  CHECK(terms[0].owner == fvic::TermOwner::Server);  // global prior
  CHECK(terms[1].owner == fvic::TermOwner::Server);
  CHECK(terms[2].owner == fvic::TermOwner::Silo);    // local prior
  CHECK(terms[2].kind == fvic::TermKind::Prior);
  CHECK(terms[3].owner == fvic::TermOwner::Silo);    // likelihood of silo data
  CHECK(terms[3].kind == fvic::TermKind::Likelihood);
  CHECK(terms[3].subject == "y");
}

TEST_CASE("the likelihood's shape is x * beta: rows of x", "[semantic]") {
  Checked c(kHier);
  REQUIRE_FALSE(c.diags.has_errors());
  const fvic::Expr& mean = *c.model->terms[3].stmt->args[0];
  CHECK(fvic::to_string(mean.type) == "vector");
  REQUIRE(mean.shape.dims.size() == 1);
  CHECK(mean.shape.dims[0].str() == "N");
}

TEST_CASE("a global prior reading silo data is rejected", "[semantic]") {
  std::string text = kHier;
  text.replace(text.find("beta ~ normal(0, 2)"), 19, "beta ~ normal(sum(y), 2)");
  Checked c(text);
  CHECK(c.diags.error_count() == 1);
  CHECK_THAT(c.errors(), Catch::Contains("the prior of global parameter 'beta' uses silo data 'y'"));
}

TEST_CASE("the planner picks SFVI for a local parameter and PVI without it", "[plan]") {
  Checked hier(kHier);
  fvic::Plan plan;
  REQUIRE(fvic::make_plan(*hier.model, hier.diags, plan));
  CHECK(plan.method == fvic::Method::SFVI);

  Checked flat(R"(
data { int<lower=1> D; }
silo data { int<lower=0> N; matrix[N, D] x; vector[N] y; }
parameters { global vector[D] w; }
model { w ~ normal(0, 1); y ~ normal(x * w, 1); }
inference { family = fullrank; }
)");
  REQUIRE_FALSE(flat.diags.has_errors());
  fvic::Plan pvi;
  REQUIRE(fvic::make_plan(*flat.model, flat.diags, pvi));
  CHECK(pvi.method == fvic::Method::PVI);
  CHECK(pvi.conjugacy.closed_form);
  // Full-rank natural parameters of D values: D means plus D(D+1)/2 precision entries.
  REQUIRE(pvi.messages.size() == 2);
  auto doubles = pvi.messages[0].doubles.eval([](const std::string& n) -> std::optional<long long> {
    return n == "D" ? std::optional<long long>(4) : std::nullopt;
  });
  CHECK(doubles == 4 + 10);
}
