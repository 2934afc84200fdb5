// Which globals the IR marks with a class shift (ir::Slot::class_shift, analysis/class_shift.h):
// a matrix whose rows (1) or a vector whose elements (2) the likelihood sees only up to a shift
// along a softmax's classes, with a zero-mean normal prior of one scale; nothing else. Whether the
// compiled likelihood really is unchanged by the shift is checked on the kernels
// (tests/compiler/emitted/test_sfvi_engine.cpp, "[class_shift]").
#include <catch2/catch.hpp>

#include <string>

#include "pipeline.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace class_shift_test {

namespace {

// The class-shift mark of `name` in a softmax regression whose parameters and model blocks are
// `params` and `model` (data D, K; silo data N, x, y; hyperparameter s).
int mark(const std::string& params, const std::string& model, const std::string& name,
         const std::string& gq = "") {
  const std::string text =
      "data {\n  int<lower=1> D;\n  int<lower=2> K;\n}\nsilo data {\n  int<lower=0> N;\n  matrix[N, D] x;\n"
      "  array[N] int<lower=1, upper=K> y;\n}\nhyperparameters {\n  real<lower=0> s;\n}\nparameters {\n" +
      params + "}\nmodel {\n" + model + "}\n" + gq;
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_class_shift", text);
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  return fvic::test::slot_named(module, name).class_shift;
}

const std::string kParams = "  global matrix[D, K] W;\n  global row_vector[K] b;\n";
const std::string kPriors = "  W ~ normal(0, s);\n  b ~ normal(0, 2);\n";

}  // namespace

TEST_CASE("class shift: a softmax regression's weights (rows) and intercepts (all)", "[class_shift]") {
  const std::string model = kPriors + "  y ~ categorical_logit(x * W + b);\n";
  CHECK(mark(kParams, model, "W") == 1);
  CHECK(mark(kParams, model, "b") == 2);
  // The intercepts first, or none; a generated quantity does not change the posterior.
  CHECK(mark(kParams, kPriors + "  y ~ categorical_logit(b + x * W);\n", "W") == 1);
  CHECK(mark(kParams, kPriors + "  y ~ categorical_logit(b + x * W);\n", "b") == 2);
  // b in no likelihood: its posterior is its prior, nothing to mark; W alone still is.
  CHECK(mark(kParams, kPriors + "  y ~ categorical_logit(x * W);\n", "W") == 1);
  CHECK(mark(kParams, kPriors + "  y ~ categorical_logit(x * W);\n", "b") == 0);
  CHECK(mark("  global matrix[D, K] W;\n", "  W ~ normal(0, s);\n  y ~ categorical_logit(x * W);\n", "W") == 1);
  CHECK(mark(kParams, model, "W", "generated quantities {\n  real w11 = W[1, 1];\n}\n") == 1);
}

TEST_CASE("class shift: not marked where the likelihood or the prior sees the shift", "[class_shift]") {
  const std::string softmax = "  y ~ categorical_logit(x * W + b);\n";
  SECTION("a prior with a location") { CHECK(mark(kParams, "  W ~ normal(1, s);\n  b ~ normal(0, 2);\n" + softmax, "W") == 0); }
  SECTION("a prior that is not normal") {
    CHECK(mark(kParams, "  W ~ normal(0, s);\n  b ~ cauchy(0, 2);\n" + softmax, "b") == 0);
  }
  SECTION("a scale that is a random parameter") {
    CHECK(mark(kParams + "  global real<lower=0> t;\n", "  t ~ normal(0, 1);\n  W ~ normal(0, t);\n  b ~ normal(0, 2);\n" + softmax,
               "W") == 0);
  }
  SECTION("a second term on the global") {
    CHECK(mark(kParams, kPriors + "  W[1, 1] ~ normal(0, 1);\n" + softmax, "W") == 0);
  }
  SECTION("the global read elsewhere in the model") {
    CHECK(mark(kParams, kPriors + "  matrix[N, K] eta = x * W + b;\n  y ~ categorical_logit(eta);\n", "W") == 0);
  }
  SECTION("through a transformed parameter") {
    CHECK(mark(kParams + "}\ntransformed parameters {\n  matrix[D, K] V = 2 * W;\n",
               kPriors + "  y ~ categorical_logit(x * V + b);\n", "W") == 0);
  }
  SECTION("a product that scales the classes") {
    CHECK(mark(kParams, kPriors + "  y ~ categorical_logit((x * W) * 2 + b);\n", "W") == 0);
    CHECK(mark(kParams, kPriors + "  y ~ categorical_logit(x * W + b * 2);\n", "b") == 0);
  }
  SECTION("the weights on the left: W * x shifts each class by its own amount") {
    CHECK(mark("  global matrix[K, D] W;\n", "  W ~ normal(0, s);\n  for (n in 1:N) y[n] ~ categorical_logit(W * x[n]');\n",
               "W") == 0);
  }
  SECTION("not a softmax") {
    CHECK(mark("  global vector[D] w;\n  global real a;\n",
               "  w ~ normal(0, s);\n  a ~ normal(0, 1);\n  to_vector(y) ~ normal(x * w + a, 1);\n", "w") == 0);
  }
  SECTION("a target term that reads globals") {
    CHECK(mark(kParams, kPriors + softmax + "  target += -0.5 * sum(b);\n", "W") == 0);
  }
}

}  // namespace class_shift_test
