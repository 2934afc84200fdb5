// Which globals the IR marks with a prior scale (ir::Slot::prior_scale): a global whose only
// prior is `x ~ normal(0, h)`, h a scalar `real<lower=0>` hyperparameter; nothing else.
#include <catch2/catch.hpp>

#include <string>

#include "test_models.h"
#include "pipeline.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace prior_scale_test {

namespace {

// The prior-scale mark of global `name` in the model whose hyperparameter and model blocks are
// `hyper` and `model` (globals w, v; data N, y).
std::string mark(const std::string& hyper, const std::string& params, const std::string& model,
                 const std::string& name) {
  const std::string text = "data {\n  int<lower=0, upper=1> flag;\n}\nsilo data {\n  int<lower=0> N;\n  vector[N] y;\n}\nhyperparameters {\n" + hyper +
                           "}\nparameters {\n" + params + "}\nmodel {\n" + model +
                           "  y ~ normal(sum(w), 1);\n}\n";
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_prior_scale", text);
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  return fvic::test::slot_named(module, name).prior_scale;
}

const std::string kTwo = "  real<lower=0> s;\n  real<lower=0> t;\n";
const std::string kParams = "  global vector[3] w;\n  global real v;\n";

}  // namespace

TEST_CASE("prior scale: marked where a hyperparameter is the scale of a global's only normal prior", "[prior_scale]") {
  CHECK(mark(kTwo, kParams, "  w ~ normal(0, s);\n  v ~ normal(1, t);\n", "w") == "s");
  CHECK(mark(kTwo, kParams, "  w ~ normal(0.0, s);\n  v ~ normal(0, t);\n", "w") == "s");
  CHECK(mark(kTwo, kParams, "  w ~ normal(0, s);\n  v ~ normal(0, t);\n", "v") == "t");
}

TEST_CASE("prior scale: not marked for other priors, scales or parameters", "[prior_scale]") {
  SECTION("a literal scale") { CHECK(mark(kTwo, kParams, "  w ~ normal(0, 2);\n  v ~ normal(0, t + s);\n", "w").empty()); }
  SECTION("a computed scale") { CHECK(mark(kTwo, kParams, "  w ~ normal(0, 2 * s);\n  v ~ normal(0, t);\n", "w").empty()); }
  SECTION("a location other than 0") {  // q's means are measured in units of h about 0
    CHECK(mark(kTwo, kParams, "  w ~ normal(0, s);\n  v ~ normal(1, t);\n", "v").empty());
    CHECK(mark(kTwo, kParams, "  w ~ normal(v, s);\n  v ~ normal(0, 1);\n", "w").empty());
  }
  SECTION("not normal") { CHECK(mark(kTwo, kParams, "  w ~ cauchy(0, s);\n  v ~ normal(0, t);\n", "w").empty()); }
  SECTION("a second term on the global") {
    CHECK(mark(kTwo, kParams, "  w ~ normal(0, s);\n  w[1] ~ normal(0, 1);\n  v ~ normal(0, t);\n", "w").empty());
  }
  SECTION("the hyperparameter's lower bound is not 0") {
    CHECK(mark("  real<lower=1> s;\n  real<lower=0> t;\n", kParams, "  w ~ normal(0, s);\n  v ~ normal(0, t);\n", "w")
              .empty());
  }
  SECTION("a vector of scales") {
    CHECK(mark("  vector<lower=0>[3] s;\n  real<lower=0> t;\n", kParams, "  w ~ normal(0, s);\n  v ~ normal(0, t);\n",
               "w")
              .empty());
  }
  SECTION("a constrained global") {
    CHECK(mark(kTwo, "  global vector<lower=0>[3] w;\n  global real v;\n", "  w ~ normal(0, s);\n  v ~ normal(0, t);\n",
               "w")
              .empty());
  }
  SECTION("a prior under an if") {
    CHECK(mark(kTwo, kParams, "  if (flag == 1) w ~ normal(0, s);\n  v ~ normal(0, t);\n", "w").empty());
  }
}

}  // namespace prior_scale_test
