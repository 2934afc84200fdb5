// The checker's classification of terms, on small programs whose answers are read off the
// rules of DESIGN.md §3 (not off the checker's output).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
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
  // Full-rank natural parameters of D values: D means plus D(D+1)/2 precision entries; the
  // request holds q_s and t_k and whether it is the silo's first update; then the round's
  // objective: q down, one number up.
  REQUIRE(pvi.messages.size() == 4);
  auto at_4 = [](const fvic::SymSize& size) {
    return size.eval([](const std::string& n) -> std::optional<long long> {
      return n == "D" ? std::optional<long long>(4) : std::nullopt;
    });
  };
  CHECK(at_4(pvi.messages[0].doubles) == 1 + 2 * (4 + 10));
  CHECK(at_4(pvi.messages[1].doubles) == 4 + 10);
  CHECK(at_4(pvi.messages[2].doubles) == 4 + 10);
  CHECK(pvi.messages[2].from == "server");
  CHECK(at_4(pvi.messages[3].doubles) == 1);
  CHECK(pvi.messages[3].from == "silo k");
}

// Issue 27 item 3: a left-associative chain or a run of indexes deepens the tree by one level per
// operator with no bracket; every pass recurses on it. 10,000 terms overflowed the checker's stack.
TEST_CASE("a statement with too many operators is refused before any pass recurses on it", "[semantic][limits]") {
  const auto model_with = [](const std::string& target) {
    return std::string(R"(
silo data { int<lower=0> N; vector[N] y; }
parameters { global real b; }
model {
  b ~ normal(0, 1);
  y ~ normal(b, 1);
)") + target + "\n}\n";
  };
  std::string chain = "  target += b";
  for (int i = 0; i < 10000; ++i) chain += " + b";
  const Checked long_chain(model_with(chain + ";"));
  CHECK(long_chain.program == nullptr);
  CHECK_THAT(long_chain.errors(), Catch::Contains("more than 2000 operators") && Catch::Contains("test.fvi:7:"));

  std::string indexes = "  target += b";
  for (int i = 0; i < 5000; ++i) indexes += "[1]";
  CHECK_THAT(Checked(model_with(indexes + ";")).errors(), Catch::Contains("more than 2000 operators"));

  // Under the limit: checked like any statement (1,990 '+', each statement counted afresh).
  std::string fine = "  target += 0.001 * (b";
  for (int i = 0; i < 1990; ++i) fine += " + b";
  fine += ");\n" + fine + ");";
  const Checked under(model_with(fine));
  CHECK(under.errors().empty());
  REQUIRE(under.model != nullptr);

  // Comments and strings hold no operators: a ruler of dashes is not a chain.
  std::string ruled;
  for (int line = 0; line < 100; ++line) ruled += "  // " + std::string(80, '-') + "\n  /* " + std::string(80, '+') + " */\n";
  const Checked comments(model_with(ruled));
  CHECK(comments.errors().empty());
}

// Issue 27 item 12: `fvic check DIR` said "no 'model' block" (a directory opens as an empty stream).
TEST_CASE("a directory or a device given as the model is named for what it is", "[semantic][limits]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(fvic::SourceFile::read(dir), Catch::Contains(dir) && Catch::Contains("is a directory"));
  CHECK_THROWS_WITH(fvic::SourceFile::read("/dev/zero"), Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(fvic::SourceFile::read(dir + "/fvi-no-such-model.fvi"), Catch::Contains("cannot open"));
}

// Lines and the code generator's tables count in int: a file over the cap (a data file given as
// the model, say) is refused by size before it is read; one at the cap is read.
TEST_CASE("a model file larger than 16 MiB is refused, naming its size", "[semantic][limits]") {
  const std::string path = (std::filesystem::temp_directory_path() / "fvi-too-large.fvi").string();
  {
    std::ofstream out(path, std::ios::binary);
    const std::string block(1 << 20, ' ');
    for (int i = 0; i < 16; ++i) out << block;
  }
  CHECK(fvic::SourceFile::read(path).text().size() == fvic::SourceFile::kMaxSourceBytes);
  std::ofstream(path, std::ios::binary | std::ios::app) << "x";
  CHECK_THROWS_WITH(fvic::SourceFile::read(path),
                    Catch::Contains(path) && Catch::Contains("16 MiB") && Catch::Contains("at most 16 MiB"));
  std::filesystem::remove(path);
}
