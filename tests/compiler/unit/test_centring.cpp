// Which global intercepts the IR marks to be fitted at the silos' centred data (ir::Slot::
// centring, analysis/centring.h): `b + x * W` where x and b are read
// nowhere else in the silos' terms; nothing else. That the compiled likelihood at the centred data
// and b_c equals the written one at the raw data and b is checked on the kernels
// (tests/compiler/emitted/test_centring.cpp).
#include <catch2/catch.hpp>

#include <string>

#include "pipeline.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace centring_test {

namespace {

// The model text's slot `name`: "x * W" when it is marked centred at data x by coefficient W
// ("x * W + v * b" with two products; "v * b by c" for groups' intercepts each centred at its own
// mean, c the groups' index), "silo_sum" for a vertical model's intercept, else "".
std::string mark_in(const std::string& text, const std::string& name) {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_centring", text);
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  const fvic::ir::Slot& s = fvic::test::slot_named(module, name);
  std::string out;
  for (const auto& [data, coefficient] : s.centring)
    out += (out.empty() ? "" : " + ") + data + (coefficient.empty() ? "" : " * " + coefficient);
  return out + (s.centring_group.empty() ? "" : " by " + s.centring_group);
}

// mark_in of a model over silo data x (matrix), v, y (vectors) and c (classes).
std::string mark(const std::string& params, const std::string& model, const std::string& name,
                 const std::string& extra_blocks = "") {
  return mark_in("data {\n  int<lower=1> D;\n  int<lower=2> K;\n}\nsilo data {\n  int<lower=0> N;\n  matrix[N, D] x;\n"
                 "  vector[N] v;\n  vector[N] y;\n  array[N] int<lower=1, upper=K> c;\n}\nparameters {\n" +
                     params + "}\nmodel {\n" + model + "}\n" + extra_blocks,
                 name);
}

const std::string kRegression = "  global real alpha;\n  global vector[D] beta;\n  global real<lower=0> sigma;\n";
const std::string kPriors = "  alpha ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  sigma ~ normal(0, 1);\n";

}  // namespace

TEST_CASE("centring: an intercept added to silo data times a global", "[centring]") {
  CHECK(mark(kRegression, kPriors + "  y ~ normal(alpha + x * beta, sigma);\n", "alpha") == "x * beta");
  CHECK(mark(kRegression, kPriors + "  y ~ normal(x * beta + alpha, sigma);\n", "alpha") == "x * beta");
  // Any prior on the intercept (the server evaluates it at the written value), any likelihood.
  CHECK(mark(kRegression, "  alpha ~ student_t(3, 0, 2.5);\n  beta ~ normal(0, 10);\n  sigma ~ normal(0, 1);\n"
                          "  y ~ normal(alpha + x * beta, sigma);\n",
             "alpha") == "x * beta");
  // One covariate: a vector times a real, either way round.
  const std::string one = "  global real a;\n  global real b;\n  global real<lower=0> sigma;\n";
  const std::string one_priors = "  a ~ normal(0, 10);\n  b ~ normal(0, 10);\n  sigma ~ normal(0, 1);\n";
  CHECK(mark(one, one_priors + "  y ~ normal(a + b * v, sigma);\n", "a") == "v * b");
  CHECK(mark(one, one_priors + "  y ~ normal(a + v * b, sigma);\n", "a") == "v * b");
  // A sum of more terms, however it associates: an offset first, a term subtracted.
  CHECK(mark(kRegression, kPriors + "  y ~ normal(v + alpha + x * beta, sigma);\n", "alpha") == "x * beta");
  CHECK(mark(kRegression, kPriors + "  y ~ normal(x * beta - v + alpha, sigma);\n", "alpha") == "x * beta");
  // A softmax's intercepts, with x * W a matrix and b a row_vector; a model-block local holding it.
  const std::string softmax = "  global matrix[D, K] W;\n  global row_vector[K] b;\n";
  const std::string softmax_priors = "  W ~ normal(0, 1);\n  b ~ normal(0, 1);\n";
  CHECK(mark(softmax, softmax_priors + "  c ~ categorical_logit(x * W + b);\n", "b") == "x * W");
  CHECK(mark(kRegression, kPriors + "  vector[N] mu = alpha + x * beta;\n  y ~ normal(mu, sigma);\n", "alpha") ==
        "x * beta");
  // A generated quantity reads the written values (the outputs are the written model's).
  CHECK(mark(kRegression, kPriors + "  y ~ normal(alpha + x * beta, sigma);\n", "alpha",
             "generated quantities {\n  vector[N] fit = alpha + x * beta;\n}\n") == "x * beta");
  // A silo's local effect added to the sum (a non-centred random intercept).
  CHECK(mark(kRegression + "  global real<lower=0> tau;\n  local real u;\n",
             kPriors + "  tau ~ normal(0, 1);\n  u ~ normal(0, tau);\n  y ~ normal(alpha + x * beta + u, sigma);\n",
             "alpha") == "x * beta");
  // The coefficient is never the one marked.
  CHECK(mark(kRegression, kPriors + "  y ~ normal(alpha + x * beta, sigma);\n", "beta").empty());
  // One row at a time in a loop, the sum deep inside a link and in both branches of a
  // conditional (a censored likelihood): every row of x is centred, so is the one read.
  CHECK(mark(kRegression, kPriors + "  for (n in 1:N)\n    y[n] ~ normal(alpha + x[n] * beta, sigma);\n", "alpha") ==
        "x * beta");
  CHECK(mark(kRegression,
             kPriors + "  for (n in 1:N) {\n    if (c[n] == 1)\n      y[n] ~ lognormal(-(alpha + x[n] * beta) / sigma, 1);\n"
                       "    else\n      target += lognormal_lccdf(y[n] | exp(x[n] * beta + alpha), 1);\n  }\n",
             "alpha") == "x * beta");
  CHECK(mark(one, one_priors + "  for (n in 1:N)\n    y[n] ~ normal(a + b * v[n], sigma);\n", "a") == "v * b");
}

TEST_CASE("centring: not marked where the data or the intercept is read otherwise", "[centring]") {
  const std::string likelihood = "  y ~ normal(alpha + x * beta, sigma);\n";
  SECTION("x read outside the sum") {
    CHECK(mark(kRegression + "  global vector[D] gamma;\n", kPriors + "  gamma ~ normal(0, 1);\n" + likelihood +
                                                               "  v ~ normal(x * gamma, 1);\n",
               "alpha")
              .empty());
  }
  SECTION("the intercept read outside the sum in a silo's term") {
    CHECK(mark(kRegression, kPriors + likelihood + "  v ~ normal(alpha, 1);\n", "alpha").empty());
  }
  SECTION("a constrained intercept or coefficient") {
    CHECK(mark("  global real<lower=0> alpha;\n  global vector[D] beta;\n  global real<lower=0> sigma;\n",
               kPriors + likelihood, "alpha")
              .empty());
    CHECK(mark("  global real alpha;\n  global vector<lower=0>[D] beta;\n  global real<lower=0> sigma;\n",
               kPriors + likelihood, "alpha")
              .empty());
  }
  SECTION("the intercept scaled, or subtracted") {
    CHECK(mark(kRegression, kPriors + "  y ~ normal(2 * alpha + x * beta, sigma);\n", "alpha").empty());
    CHECK(mark(kRegression, kPriors + "  y ~ normal(x * beta - alpha, sigma);\n", "alpha").empty());
    CHECK(mark(kRegression, kPriors + "  y ~ normal(v - (alpha + x * beta), sigma);\n", "alpha").empty());
    CHECK(mark(kRegression, kPriors + "  y ~ normal(alpha + alpha + x * beta, sigma);\n", "alpha").empty());
  }
  SECTION("two data matrices for one intercept") {
    CHECK(mark(kRegression, kPriors + likelihood + "  v ~ normal(alpha + x * beta, 1);\n", "alpha") == "x * beta");
    CHECK(mark(kRegression + "  global vector[D] gamma;\n",
               kPriors + "  gamma ~ normal(0, 1);\n" + likelihood + "  v ~ normal(alpha + x * gamma, 1);\n", "alpha")
              .empty());
  }
  SECTION("a silo's local prior reading the intercept") {
    CHECK(mark(kRegression + "  local real u;\n", kPriors + "  u ~ normal(alpha, 1);\n  y ~ normal(alpha + x * beta + u, sigma);\n",
               "alpha")
              .empty());
  }
  SECTION("x read by a column, a range of rows, twice in a sum or outside it") {
    CHECK(mark(kRegression, kPriors + "  y ~ normal(alpha + col(x, 1) * beta[1], sigma);\n", "alpha").empty());
    CHECK(mark(kRegression, kPriors + "  for (n in 1:N)\n    y[n] ~ normal(alpha + x[n] * beta + x[n] * beta, sigma);\n",
               "alpha")
              .empty());
    CHECK(mark(kRegression, kPriors + "  y[2:N] ~ normal(alpha + x[2:N] * beta, sigma);\n", "alpha").empty());
    CHECK(mark(kRegression, kPriors + "  for (n in 1:N)\n    y[n] ~ normal(alpha + x[n] * beta, sigma);\n"
                                      "  v ~ normal(x[1] * beta, 1);\n",
               "alpha")
              .empty());
  }
  SECTION("a transformed parameter reading the intercept") {
    CHECK(mark(kRegression + "}\ntransformed parameters {\n  real a2 = alpha;\n",
               kPriors + "  y ~ normal(a2 + x * beta, sigma);\n", "alpha")
              .empty());
  }
}

namespace {

// mark_in of a vertical model: split data x, server data y (and c), public offset.
std::string vertical_mark(const std::string& params, const std::string& model, const std::string& name,
                          const std::string& extra_blocks = "") {
  return mark_in("data {\n  int<lower=0> N;\n  vector[N] offset;\n}\nserver data {\n  vector[N] y;\n  array[N] int<lower=0, "
                 "upper=1> c;\n}\nsplit data {\n  int<lower=1> P;\n  matrix[N, P] x;\n}\nparameters {\n" +
                     params + "}\nmodel {\n" + model + "}\n" + extra_blocks,
                 name);
}

const std::string kVertical = "  global real b;\n  global real<lower=0> sigma;\n  split vector[P] beta;\n";
const std::string kVerticalPriors = "  b ~ normal(0, 1);\n  sigma ~ normal(0, 1);\n  beta ~ normal(0, 1);\n";

}  // namespace

TEST_CASE("centring: a vertical model's intercept of the silos' summed predictors", "[centring]") {
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(b + silo_sum(x * beta), sigma);\n", "b") == "silo_sum");
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(silo_sum(x * beta) + b, sigma);\n", "b") == "silo_sum");
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  c ~ bernoulli_logit(offset + b + silo_sum(x * beta));\n", "b") ==
        "silo_sum");
  // Any prior on b; a generated quantity reading it (the outputs are the written b's).
  CHECK(vertical_mark(kVertical, "  b ~ student_t(3, 0, 2.5);\n  sigma ~ normal(0, 1);\n  beta ~ normal(0, 1);\n"
                                 "  y ~ normal(b + silo_sum(x * beta), sigma);\n",
                      "b", "generated quantities {\n  real b2 = 2 * b;\n}\n") == "silo_sum");
  const std::string likelihood = "  y ~ normal(b + silo_sum(x * beta), sigma);\n";
  // Not marked: the sum scaled or subtracted, b read again, b scaled, b constrained.
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(b + 2 * silo_sum(x * beta), sigma);\n", "b").empty());
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(b - silo_sum(x * beta), sigma);\n", "b").empty());
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(2 * b + silo_sum(x * beta), sigma);\n", "b").empty());
  CHECK(vertical_mark(kVertical, kVerticalPriors + likelihood + "  y ~ normal(b, 10);\n", "b").empty());
  CHECK(vertical_mark(kVertical, kVerticalPriors + "  y ~ normal(b + silo_sum(x * beta), sigma * exp(b));\n", "b").empty());
  CHECK(vertical_mark("  global real<lower=0> b;\n  global real<lower=0> sigma;\n  split vector[P] beta;\n",
                      kVerticalPriors + likelihood, "b")
            .empty());
  // Neither the scale nor a split parameter is ever marked.
  CHECK(vertical_mark(kVertical, kVerticalPriors + likelihood, "sigma").empty());
  CHECK(vertical_mark(kVertical, kVerticalPriors + likelihood, "beta").empty());
}

TEST_CASE("centring: a hierarchy's intercepts, a silo's local and its prior's location", "[centring]") {
  const std::string hier = "  global real mu;\n  global vector[D] beta;\n  global real<lower=0> tau;\n"
                           "  global real<lower=0> sigma;\n  local real a;\n";
  const std::string priors = "  mu ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  tau ~ normal(0, 1);\n"
                             "  sigma ~ normal(0, 1);\n";
  const std::string likelihood = "  y ~ normal(a + x * beta, sigma);\n";
  CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood, "a") == "x * beta");
  CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood, "mu") == "x * beta");
  CHECK(mark(hier, priors + "  a ~ student_t(4, mu, tau);\n  y ~ normal(v + x * beta + a, sigma);\n", "a") == "x * beta");
  CHECK(mark(hier, priors + "  a ~ cauchy(mu, tau);\n" + likelihood, "mu") == "x * beta");
  // A frailty model's loop over the rows, censored: a and mu both marked.
  const std::string censored = priors + "  a ~ normal(mu, tau);\n  for (n in 1:N) {\n    if (c[n] == 1)\n"
                               "      y[n] ~ weibull(sigma, exp(-(a + x[n] * beta) / sigma));\n    else\n"
                               "      target += weibull_lccdf(y[n] | sigma, exp(-(a + x[n] * beta) / sigma));\n  }\n";
  CHECK(mark(hier, censored, "a") == "x * beta");
  CHECK(mark(hier, censored, "mu") == "x * beta");
  // Class intercepts: a local row_vector about a global row_vector.
  const std::string softmax = "  global matrix[D, K] W;\n  global row_vector[K] m;\n  local row_vector[K] b;\n";
  CHECK(mark(softmax, "  W ~ normal(0, 1);\n  m ~ normal(0, 1);\n  b ~ normal(m, 1);\n  c ~ categorical_logit(x * W + b);\n",
             "b") == "x * W");
  SECTION("not marked") {
    // No global location: the prior would read a's shift.
    CHECK(mark(hier, priors + "  a ~ normal(0, tau);\n" + likelihood, "a").empty());
    // The location not mu itself; mu not the location; mu read again; a read again; a scaled;
    // x read again.
    CHECK(mark(hier, priors + "  a ~ normal(2 * mu, tau);\n" + likelihood, "a").empty());
    CHECK(mark(hier, priors + "  a ~ normal(0, exp(mu));\n" + likelihood, "mu").empty());
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood + "  v ~ normal(mu, 10);\n", "mu").empty());
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood + "  v ~ normal(a, 10);\n", "a").empty());
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n  y ~ normal(2 * a + x * beta, sigma);\n", "a").empty());
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood + "  v ~ normal(x * beta, 10);\n", "mu").empty());
    // Another parameter in the sum: the shift would count twice.
    CHECK(mark(hier + "  global real g;\n", priors + "  g ~ normal(0, 1);\n  a ~ normal(mu, tau);\n"
                                             "  y ~ normal(g + a + x * beta, sigma);\n",
               "a").empty());
    // The scale or the coefficient, never; a constrained a; the non-centred form marks mu alone.
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood, "tau").empty());
    CHECK(mark(hier, priors + "  a ~ normal(mu, tau);\n" + likelihood, "beta").empty());
    CHECK(mark("  global real mu;\n  global vector[D] beta;\n  local real<lower=0> a;\n",
               "  mu ~ normal(0, 1);\n  beta ~ normal(0, 1);\n  a ~ normal(mu, 1);\n  y ~ normal(a + x * beta, 1);\n", "a")
              .empty());
    const std::string noncentred = priors + "  a ~ normal(0, tau);\n  y ~ normal(mu + x * beta + a, sigma);\n";
    CHECK(mark(hier, noncentred, "a").empty());
    CHECK(mark(hier, noncentred, "mu") == "x * beta");
  }
}

TEST_CASE("centring: groups' intercepts, a vector read as a[c], and their location", "[centring]") {
  const std::string globals = "  global real mu;\n  global vector[D] beta;\n  global real<lower=0> tau;\n"
                              "  global real<lower=0> sigma;\n";
  const std::string priors = "  mu ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  tau ~ normal(0, 1);\n"
                             "  sigma ~ normal(0, 1);\n";
  const std::string likelihood = "  y ~ normal(a[c] + x * beta, sigma);\n";
  for (const std::string owner : {"local", "global"}) {
    INFO(owner);
    const std::string params = globals + "  " + owner + " vector[K] a;\n";
    CHECK(mark(params, priors + "  a ~ normal(mu, tau);\n" + likelihood, "a") == "x * beta");
    CHECK(mark(params, priors + "  a ~ normal(mu, tau);\n" + likelihood, "mu") == "x * beta");
    // One covariate; the rows in a loop, each its group's; the prior in a loop over the groups.
    const std::string one = "  global real mu;\n  global real b;\n  global real<lower=0> tau;\n  " + owner +
                            " vector[K] a;\n";
    const std::string one_priors = "  mu ~ normal(0, 10);\n  b ~ normal(0, 10);\n  tau ~ normal(0, 1);\n";
    CHECK(mark(one, one_priors + "  a ~ normal(mu, tau);\n  y ~ normal(a[c] + b * v, 1);\n", "a") == "v * b");
    CHECK(mark(one, one_priors + "  a ~ normal(mu, tau);\n  for (n in 1:N)\n    y[n] ~ normal(a[c[n]] + v[n] * b, 1);\n",
               "mu") == "v * b");
    CHECK(mark(one, one_priors + "  for (k in 1:K)\n    a[k] ~ normal(mu, tau);\n  y ~ normal(a[c] + b * v, 1);\n",
               "a") == "v * b");
    // No global real location (a fixed one, or each group's own): a global a is still marked (the
    // server evaluates its prior at the written a); a silo's is not (its prior would read the shift).
    CHECK(mark(params, priors + "  a ~ normal(0, tau);\n" + likelihood, "a") == (owner == "global" ? "x * beta" : ""));
    CHECK(mark(globals + "  " + owner + " vector[K] a;\n  global vector[K] m;\n",
               priors + "  m ~ normal(0, 1);\n  a ~ normal(m, tau);\n" + likelihood, "a") ==
          (owner == "global" ? "x * beta" : ""));
    SECTION("not marked") {
      // a read again, a scaled, another global in the sum.
      CHECK(mark(params, priors + "  a ~ normal(mu, tau);\n" + likelihood + "  v ~ normal(a[c], 1);\n", "a").empty());
      CHECK(mark(params, priors + "  a ~ normal(mu, tau);\n  y ~ normal(2 * a[c] + x * beta, sigma);\n", "a").empty());
      CHECK(mark(params + "  global vector[K] d;\n",
                 priors + "  d ~ normal(0, 1);\n  a ~ normal(mu, tau);\n  y ~ normal(a[c] + d[c] + x * beta, sigma);\n",
                 "a").empty());
      // A range of groups is not one group per row.
      CHECK(mark(params, priors + "  a ~ normal(mu, tau);\n  y[1:K] ~ normal(a[1:K] + x[1:K] * beta, sigma);\n", "a")
                .empty());
    }
  }
  // Two global intercepts in one sum would both take the shift: neither is marked.
  const std::string two = "  global real b1;\n  global real b2;\n  global vector[D] beta;\n";
  const std::string two_priors = "  b1 ~ normal(0, 1);\n  b2 ~ normal(0, 1);\n  beta ~ normal(0, 1);\n";
  CHECK(mark(two, two_priors + "  y ~ normal(b1 + b2 + x * beta, 1);\n", "b1").empty());
  CHECK(mark(two, two_priors + "  y ~ normal(b1 + b2 + x * beta, 1);\n", "b2").empty());
  // A global intercept beside a global vector of group effects: the intercept alone is marked.
  const std::string crossed = "  global real b;\n  global vector[D] beta;\n  global vector[K] d;\n";
  const std::string crossed_model = "  b ~ normal(0, 1);\n  beta ~ normal(0, 1);\n  d ~ normal(0, 1);\n"
                                    "  y ~ normal(b + x * beta + d[c], 1);\n";
  CHECK(mark(crossed, crossed_model, "b") == "x * beta");
  CHECK(mark(crossed, crossed_model, "d").empty());
}

TEST_CASE("centring: a chain of silo locals to a global location (wards in hospitals)", "[centring]") {
  const std::string params = "  global real mu;\n  global vector[D] beta;\n  global real<lower=0> tau_h;\n"
                             "  global real<lower=0> tau_w;\n  local real a_h;\n  local vector[K] a_w;\n";
  const std::string priors = "  mu ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  tau_h ~ normal(0, 1);\n"
                             "  tau_w ~ normal(0, 1);\n";
  const std::string chain = priors + "  a_h ~ normal(mu, tau_h);\n  a_w ~ normal(a_h, tau_w);\n"
                                     "  y ~ normal(a_w[c] + x * beta, 1);\n";
  // Every level shifted by xbar beta: a_w - a_h and a_h - mu are as written.
  CHECK(mark(params, chain, "a_w") == "x * beta");
  CHECK(mark(params, chain, "a_h") == "x * beta");
  CHECK(mark(params, chain, "mu") == "x * beta");
  // Three levels: a region's r, a hospital's a_h about it, its wards' a_w about that.
  const std::string three = params + "  local real r;\n";
  const std::string three_model = priors + "  r ~ normal(mu, 1);\n  a_h ~ normal(r, tau_h);\n  a_w ~ normal(a_h, tau_w);\n"
                                           "  y ~ normal(a_w[c] + x * beta, 1);\n";
  for (const char* name : {"r", "a_h", "a_w", "mu"}) CHECK(mark(three, three_model, name) == "x * beta");
  SECTION("not marked") {
    // A link read again would see its shift; a link with a bound is no location family's variate;
    // a chain that ends at a fixed location has no global to shift with it.
    for (const std::string& model :
         {chain + "  v ~ normal(a_h, 1);\n", priors + "  a_h ~ normal(0, tau_h);\n  a_w ~ normal(a_h, tau_w);\n"
                                                       "  y ~ normal(a_w[c] + x * beta, 1);\n"}) {
      INFO(model);
      CHECK(mark(params, model, "a_w").empty());
      CHECK(mark(params, model, "a_h").empty());
    }
    // A link that another declaration reads (an offset) would move it.
    const std::string offset = params + "  local real<offset=a_h> u;\n";
    CHECK(mark(offset, chain + "  u ~ normal(0, 1);\n", "a_w").empty());
    CHECK(mark(offset, chain + "  u ~ normal(0, 1);\n", "a_h").empty());
    const std::string bounded = "  global real mu;\n  global vector[D] beta;\n  local real<lower=0> a_h;\n"
                                "  local vector[K] a_w;\n";
    const std::string bounded_model = "  mu ~ normal(0, 1);\n  beta ~ normal(0, 1);\n  a_h ~ normal(mu, 1);\n"
                                      "  a_w ~ normal(a_h, 1);\n  y ~ normal(a_w[c] + x * beta, 1);\n";
    CHECK(mark(bounded, bounded_model, "a_w").empty());
    CHECK(mark(bounded, bounded_model, "a_h").empty());
    CHECK(mark(bounded, bounded_model, "mu").empty());
  }
}

TEST_CASE("centring: an intercept of several products, each x at its own means", "[centring]") {
  // `a + b * v + x * beta`: a regression on two raw covariates written apart (age, income), each
  // centred (brms centres every column); the products in the order the sum writes them.
  const std::string params = "  global real a;\n  global real b;\n  global vector[D] beta;\n  global real<lower=0> sigma;\n";
  const std::string priors = "  a ~ normal(0, 10);\n  b ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  sigma ~ normal(0, 1);\n";
  CHECK(mark(params, priors + "  y ~ normal(a + b * v + x * beta, sigma);\n", "a") == "v * b + x * beta");
  CHECK(mark(params, priors + "  y ~ normal(x * beta + a + v * b, sigma);\n", "a") == "x * beta + v * b");
  // Two sums, the products in either order in each.
  CHECK(mark(params, priors + "  y ~ normal(a + b * v + x * beta, sigma);\n  target += normal_lpdf(y | x * beta + v * b + a, 1);\n",
             "a") == "v * b + x * beta");
  // A product in one sum only is not centred (its x would read x - xbar in the other sum, which
  // adds no xbar W to undo the shift); the common one is.
  CHECK(mark(params, priors + "  y ~ normal(a + b * v + x * beta, sigma);\n  target += normal_lpdf(y | a + x * beta, 1);\n",
             "a") == "x * beta");
  // An x read elsewhere too: that product is left at the raw data, the other centred.
  CHECK(mark(params, priors + "  y ~ normal(a + b * v + x * beta, sigma);\n  v ~ normal(0, 1);\n", "a") == "x * beta");
  // One x twice in a sum: neither product is centred.
  const std::string shared = "  global real a;\n  global real b;\n  global real b2;\n";
  const std::string shared_priors = "  a ~ normal(0, 1);\n  b ~ normal(0, 1);\n  b2 ~ normal(0, 1);\n";
  CHECK(mark(shared, shared_priors + "  y ~ normal(a + b * v + b2 * v, 1);\n", "a").empty());
  // A hierarchy: the local intercept and its prior's location take both shifts.
  const std::string hierarchy = "  global real mu;\n  global real b;\n  global vector[D] beta;\n"
                                "  global real<lower=0> tau;\n  local real u;\n";
  const std::string hierarchy_model = "  mu ~ normal(0, 10);\n  b ~ normal(0, 1);\n  beta ~ normal(0, 1);\n"
                                      "  tau ~ normal(0, 1);\n  u ~ normal(mu, tau);\n"
                                      "  y ~ normal(u + b * v + x * beta, 1);\n";
  CHECK(mark(hierarchy, hierarchy_model, "u") == "v * b + x * beta");
  CHECK(mark(hierarchy, hierarchy_model, "mu") == "v * b + x * beta");
}

TEST_CASE("centring: one coefficient of a different x in each sum, the x pooled (companions)", "[centring]") {
  // A right-censored survival model written Stan's other way: the observed rows and the censored
  // rows in two vectors, each sum reading its own with the same beta. Both x are centred at one
  // constant (their pooled mean), so each sum takes the same shift: both marked, in order.
  const std::string data = "silo data {\n  int<lower=0> N;\n  int<lower=0> M;\n  vector[N] x_obs;\n"
                           "  vector[M] x_cen;\n  vector[N] t_obs;\n  vector[M] t_cen;\n  vector[N] v;\n}\n";
  const std::string params = "parameters {\n  global real<lower=0> k;\n  global real mu;\n  global real beta;\n"
                             "  global real gamma;\n  global real<lower=0> tau;\n  local real u;\n}\n";
  const std::string priors = "  k ~ gamma(2, 1);\n  mu ~ normal(0, 5);\n  beta ~ normal(0, 1);\n"
                             "  gamma ~ normal(0, 1);\n  tau ~ normal(0, 1);\n";
  const std::string both = "  t_obs ~ weibull(k, exp(u + beta * x_obs));\n"
                           "  target += weibull_lccdf(t_cen | k, exp(u + beta * x_cen));\n";
  const std::string hierarchy = data + params + "model {\n" + priors + "  u ~ normal(mu, tau);\n" + both + "}\n";
  CHECK(mark_in(hierarchy, "u") == "x_obs * beta + x_cen * beta");
  CHECK(mark_in(hierarchy, "mu") == "x_obs * beta + x_cen * beta");
  // A global intercept (mu itself in each sum).
  CHECK(mark_in(data + params + "model {\n" + priors + "  u ~ normal(0, 1);\n  t_obs ~ weibull(k, exp(mu + beta * x_obs));\n"
                "  target += weibull_lccdf(t_cen | k, exp(mu + beta * x_cen));\n}\n", "mu") == "x_obs * beta + x_cen * beta");
  // A silo's local slope read with two x.
  const std::string local = "parameters {\n  local real a;\n  local real b;\n}\n";
  CHECK(mark_in(data + local + "model {\n  t_obs ~ normal(a + b * x_obs, 1);\n  t_cen ~ normal(a + b * x_cen, 1);\n}\n",
                "a") == "x_obs * b + x_cen * b");
  SECTION("not marked") {
    // An x read elsewhere too: the other sum's x alone would take the shift.
    CHECK(mark_in(data + params + "model {\n" + priors + "  u ~ normal(mu, tau);\n" + both + "  x_cen ~ normal(0, 1);\n}\n",
                  "u").empty());
    // u read again outside the sums: there its shift would not be undone.
    CHECK(mark_in(data + params + "model {\n" + priors + "  u ~ normal(mu, tau);\n" + both +
                  "  v ~ normal(u, 1);\n}\n", "u").empty());
    // The two x with different coefficients are their own products, each in one sum only.
    CHECK(mark_in(data + params + "model {\n" + priors + "  u ~ normal(mu, tau);\n"
                  "  t_obs ~ weibull(k, exp(u + beta * x_obs));\n"
                  "  target += weibull_lccdf(t_cen | k, exp(u + gamma * x_cen));\n}\n", "u").empty());
    // One x with the coefficient in one sum and another x with it twice in the other.
    CHECK(mark_in(data + params + "model {\n" + priors + "  u ~ normal(mu, tau);\n"
                  "  t_obs ~ weibull(k, exp(u + beta * x_obs));\n"
                  "  target += weibull_lccdf(t_cen | k, exp(u + beta * x_cen + beta * x_cen));\n}\n", "u").empty());
  }
}

TEST_CASE("centring: an array of reals read a row at a time is a column, as a vector is", "[centring]") {
  const std::string hierarchy = "parameters {\n  global real mu;\n  global real beta;\n  global real<lower=0> tau;\n"
                                "  local real u;\n}\n";
  const std::string hierarchy_priors = "  mu ~ normal(0, 5);\n  beta ~ normal(0, 1);\n  tau ~ normal(0, 1);\n";
  // Stan's older style, `array[N] real x` read a row at a time, is a column as a vector is.
  const std::string arrays = "silo data {\n  int<lower=0> N;\n  array[N] real age;\n  array[N] int<lower=0, upper=1> y;\n"
                             "  array[N] int<lower=1, upper=3> g;\n}\n";
  const std::string loop = "  for (n in 1:N)\n    y[n] ~ bernoulli_logit(u + beta * age[n]);\n";
  CHECK(mark_in(arrays + hierarchy + "model {\n" + hierarchy_priors + "  u ~ normal(mu, tau);\n" + loop + "}\n", "u") == "age * beta");
  CHECK(mark_in(arrays + hierarchy + "model {\n" + hierarchy_priors + "  u ~ normal(mu, tau);\n" + loop + "}\n", "mu") == "age * beta");
  CHECK(mark_in(arrays + "parameters {\n  local real a;\n  local real b;\n}\nmodel {\n  for (n in 1:N)\n"
                "    y[n] ~ bernoulli_logit(a + b * age[n]);\n}\n", "a") == "age * b");
  CHECK(mark_in(arrays + "parameters {\n  local vector[3] a;\n  local vector[3] b;\n}\nmodel {\n  for (n in 1:N)\n"
                "    y[n] ~ bernoulli_logit(a[g[n]] + b[g[n]] * age[n]);\n}\n", "a") == "age * b by g");
}

TEST_CASE("centring: a silo's transformed data computed when it reads its data is centred as data", "[centring]") {
  const std::string data = "silo data {\n  int<lower=0> N;\n  vector[N] age;\n  vector[N] y;\n}\n";
  const std::string rest = "parameters {\n  global real a;\n  global real b1;\n  global real b2;\n"
                           "  global real<lower=0> sigma;\n}\nmodel {\n  a ~ normal(0, 10);\n  b1 ~ normal(0, 1);\n"
                           "  b2 ~ normal(0, 1);\n  sigma ~ normal(0, 1);\n  y ~ normal(a + b1 * age + b2 * age2, sigma);\n}\n";
  // Built by statements: computed from the raw age when the silo reads its data, then held as data.
  CHECK(mark_in(data + "transformed data {\n  vector[N] age2;\n  for (n in 1:N)\n    age2[n] = age[n] * age[n];\n}\n" + rest,
                "a") == "age * b1 + age2 * b2");
  // Given by its value, computed so too where the runtime can.
  CHECK(mark_in(data + "transformed data {\n  vector[N] age2 = square(age);\n}\n" + rest, "a") == "age * b1 + age2 * b2");
  // Written inline, the product of an expression of the data is such a datum (frontend/data_products.h).
  std::string inline_square = rest;
  inline_square.replace(inline_square.find("b2 * age2"), 9, "b2 * square(age)");
  CHECK(mark_in(data + inline_square, "a") == "age * b1 + square_age * b2");
  // A row at a time in a loop, too.
  std::string loop_square = rest;
  loop_square.replace(loop_square.find("  y ~ normal(a + b1 * age + b2 * age2, sigma);"), 47,
                      "  for (n in 1:N)\n    y[n] ~ normal(a + b1 * age[n] + b2 * square(age[n]), sigma);");
  CHECK(mark_in(data + loop_square, "a") == "age * b1 + square_age * b2");
  // Nor a value reading one the kernels compute: w2 from w, which reads age.
  CHECK(mark_in(data + "transformed data {\n  vector[N] w = softmax(age);\n  vector[N] age2 = square(w);\n}\n" + rest,
                "a").empty());
  // Where it cannot (softmax), the kernels compute the value from the age they read: with age
  // centred it would read age - its mean, another model. age is not centred, nor the value.
  CHECK(mark_in(data + "transformed data {\n  vector[N] age2 = softmax(age);\n}\n" + rest, "a").empty());
  CHECK(mark_in(data + "transformed data {\n  vector[N] age2 = softmax(age);\n}\n" +
                    "parameters {\n  global real a;\n  global real b1;\n  global real<lower=0> sigma;\n}\n"
                    "model {\n  y ~ normal(a + b1 * age, sigma);\n  target += -0.5 * dot_self(age2) * sigma;\n}\n",
                "a").empty());
}

TEST_CASE("centring: a non-centred hierarchy's location carried by a transformed parameter", "[centring]") {
  // Stan's non-centred form: `real a = mu + tau * z;` (z a silo's local) in transformed
  // parameters, `a + beta * x` in the likelihood. mu reaches the sum through a, once: it is
  // centred (a_c = mu_c + tau z), and a's outputs are the written ones (the runtime's).
  const std::string data = "data {\n  int<lower=1> J;\n}\nsilo data {\n  int<lower=0> N;\n  vector[N] x;\n  vector[N] y;\n"
                           "  array[N] int<lower=1, upper=J> g;\n}\n";
  const std::string params = "parameters {\n  global real mu;\n  global real beta;\n  global real<lower=0> tau;\n"
                             "  local real z;\n  local vector[J] w;\n}\n";
  const std::string priors = "  mu ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  tau ~ normal(0, 5);\n  z ~ std_normal();\n"
                             "  w ~ std_normal();\n";
  const auto model = [&](const std::string& tp, const std::string& likelihood) {
    return data + params + "transformed parameters {\n" + tp + "}\nmodel {\n" + priors + likelihood + "}\n";
  };
  const std::string one = "  real a = mu + tau * z;\n";
  CHECK(mark_in(model(one, "  y ~ normal(a + beta * x, 1);\n"), "mu") == "x * beta");
  CHECK(mark_in(model(one, "  y ~ normal(x * beta + a, 1);\n"), "mu") == "x * beta");
  CHECK(mark_in(model("  real a;\n  a = mu + tau * z;\n", "  y ~ normal(a + beta * x, 1);\n"), "mu") == "x * beta");
  // Groups within the silo: a vector read as a[g].
  const std::string groups = "  vector[J] a = mu + tau * w;\n";
  CHECK(mark_in(model(groups, "  y ~ normal(a[g] + beta * x, 1);\n"), "mu") == "x * beta");
  CHECK(mark_in(model(groups, "  for (n in 1:N)\n    y[n] ~ normal(a[g[n]] + beta * x[n], 1);\n"), "mu") == "x * beta");
  CHECK(mark_in(model("  vector[J] a;\n  for (j in 1:J)\n    a[j] = mu + tau * w[j];\n", "  y ~ normal(a[g] + beta * x, 1);\n"),
                "mu") == "x * beta");
  // Stan's affine form, `real<offset=mu, multiplier=tau> a` with its prior about mu: a = mu + tau z,
  // z the fit's coordinate, so mu_c gives a_c with no map of a's own.
  const auto affine_model = [&](const std::string& local, const std::string& body) {
    return data + "parameters {\n  global real mu;\n  global real beta;\n  global real<lower=0> tau;\n" + local +
           "}\nmodel {\n  mu ~ normal(0, 10);\n  beta ~ normal(0, 10);\n  tau ~ normal(0, 5);\n" + body + "}\n";
  };
  const std::string affine_a = "  local real<offset=mu, multiplier=tau> a;\n";
  const std::string affine_v = "  local vector<offset=mu, multiplier=tau>[J] v;\n";
  CHECK(mark_in(affine_model(affine_a, "  a ~ normal(mu, tau);\n  y ~ normal(a + beta * x, 1);\n"), "mu") == "x * beta");
  CHECK(mark_in(affine_model(affine_v, "  v ~ normal(mu, tau);\n  y ~ normal(v[g] + beta * x, 1);\n"), "mu") ==
        "x * beta");
  // Not its own map: a is not marked (mu_c moves it already).
  CHECK(mark_in(affine_model(affine_a, "  a ~ normal(mu, tau);\n  y ~ normal(a + beta * x, 1);\n"), "a").empty());
  SECTION("not marked") {
    // An affine a whose prior is not about mu (it would read a_c alone), or read again; another
    // parameter whose offset reads mu (its value would be read at mu_c).
    CHECK(mark_in(affine_model(affine_a, "  a ~ normal(0, 10);\n  y ~ normal(a + beta * x, 1);\n"), "mu").empty());
    CHECK(mark_in(affine_model(affine_a, "  a ~ normal(mu, tau);\n  y ~ normal(a + beta * x, 1);\n"
                                         "  target += normal_lpdf(y | a, 10);\n"), "mu").empty());
    CHECK(mark_in(affine_model(affine_a + affine_v, "  a ~ normal(mu, tau);\n  v ~ normal(0, 1);\n"
                                                    "  y ~ normal(a + beta * x, 1);\n"), "mu").empty());
    CHECK(mark_in(affine_model("  global real<offset=mu> w;\n", "  w ~ normal(0, 1);\n  y ~ normal(mu + beta * x, 1);\n"),
                  "mu").empty());
    // Without w the same sum marks mu (the test can fail).
    CHECK(mark_in(affine_model("", "  y ~ normal(mu + beta * x, 1);\n"), "mu") == "x * beta");
    // a read outside the sums, or subtracted; mu read again in a silo's term; a's definition reading
    // another global whole, or mu twice; a constrained a (its bound would be checked at a_c).
    CHECK(mark_in(model(one, "  y ~ normal(a + beta * x, 1);\n  target += normal_lpdf(a | 0, 10);\n"), "mu").empty());
    CHECK(mark_in(model(one, "  y ~ normal(beta * x - a, 1);\n"), "mu").empty());
    CHECK(mark_in(model(one, "  y ~ normal(a + beta * x, 1);\n  target += normal_lpdf(y | mu, 10);\n"), "mu").empty());
    CHECK(mark_in(model("  real a = mu + beta + tau * z;\n", "  y ~ normal(a + beta * x, 1);\n"), "mu").empty());
    CHECK(mark_in(model("  real a = mu + mu * tau * z;\n", "  y ~ normal(a + beta * x, 1);\n"), "mu").empty());
    CHECK(mark_in(model("  real<lower=-100> a = mu + tau * z;\n", "  y ~ normal(a + beta * x, 1);\n"), "mu").empty());
    // A sum reading a that holds no product: a's b would be shifted there with nothing to undo it.
    CHECK(mark_in(model(one, "  y ~ normal(a + beta * x, 1);\n  target += normal_lpdf(y | a + 1, 1);\n"), "mu").empty());
  }
}

TEST_CASE("centring: a silo's intercept of its own local slopes, at the silo's own means", "[centring]") {
  // Random intercepts and slopes: a and b a silo's locals about global means. The silo's map
  // a = a_c - xbar b is exact for any prior on a, so a's prior is not looked at.
  const std::string slopes = "  global real mu_a;\n  global real mu_b;\n  global vector[D] beta;\n"
                             "  global real<lower=0> tau;\n  local real a;\n  local real b;\n  local vector[D] g;\n";
  const std::string priors = "  mu_a ~ normal(0, 10);\n  mu_b ~ normal(0, 10);\n  beta ~ normal(0, 1);\n"
                             "  tau ~ normal(0, 1);\n  a ~ normal(mu_a, tau);\n  b ~ normal(mu_b, tau);\n"
                             "  g ~ normal(0, 1);\n";
  CHECK(mark(slopes, priors + "  y ~ normal(a + b * v, 1);\n", "a") == "v * b");
  CHECK(mark(slopes, priors + "  y ~ normal(v * b + a, 1);\n", "a") == "v * b");
  // A matrix of covariates with a local vector of slopes; a loop over the rows.
  CHECK(mark(slopes, priors + "  y ~ normal(a + x * g, 1);\n", "a") == "x * g");
  CHECK(mark(slopes, priors + "  for (n in 1:N)\n    y[n] ~ normal(a + v[n] * b, 1);\n", "a") == "v * b");
  // a without a global location (hier_logreg's form).
  CHECK(mark(slopes, "  beta ~ normal(0, 1);\n  tau ~ normal(0, 1);\n  a ~ normal(0, tau);\n  b ~ normal(0, 1);\n"
                     "  y ~ normal(a + b * v, 1);\n",
             "a") == "v * b");
  // A global product beside the local one: the pooled centring's first, then the silo's.
  CHECK(mark(slopes, priors + "  y ~ normal(a + x * beta + b * v, 1);\n", "a") == "x * beta + v * b");
  // The slope and the locations are not marked by it.
  CHECK(mark(slopes, priors + "  y ~ normal(a + b * v, 1);\n", "b").empty());
  CHECK(mark(slopes, priors + "  y ~ normal(a + b * v, 1);\n", "mu_a").empty());
  SECTION("not marked") {
    // x read elsewhere; a added twice; a product in one of a's sums only; a scaled intercept.
    CHECK(mark(slopes, priors + "  y ~ normal(a + b * v, 1);\n  v ~ normal(0, 1);\n", "a").empty());
    CHECK(mark(slopes, priors + "  y ~ normal(a + a + b * v, 1);\n", "a").empty());
    CHECK(mark(slopes, priors + "  y ~ normal(a + b * v, 1);\n  target += normal_lpdf(y | a + 1, 1);\n", "a").empty());
    CHECK(mark(slopes, priors + "  y ~ normal(2 * a + b * v, 1);\n", "a").empty());
    // A constrained intercept or slope (a vector of groups' intercepts: the next test case).
    CHECK(mark("  local real<lower=0> a;\n  local real b;\n", "  y ~ normal(a + b * v, 1);\n", "a").empty());
    CHECK(mark("  local real a;\n  local real<lower=0> b;\n", "  y ~ normal(a + b * v, 1);\n", "a").empty());
    // A chain: b is itself the intercept of a slope (b + e * y), or a is another's slope.
    const std::string chain = "silo data {\n  int<lower=0> N;\n  vector[N] v;\n  vector[N] w;\n  vector[N] y;\n"
                              "  vector[N] z;\n}\nparameters {\n  local real a;\n  local real b;\n  local real e;\n}\n";
    CHECK(mark_in(chain + "model {\n  y ~ normal(a + b * v, 1);\n  z ~ normal(b + e * w, 1);\n}\n", "a").empty());
    CHECK(mark_in(chain + "model {\n  y ~ normal(a + b * v, 1);\n  z ~ normal(e + a * w, 1);\n}\n", "a").empty());
    // Without the chain the same text marks a (the test can fail).
    CHECK(mark_in(chain + "model {\n  y ~ normal(a + b * v, 1);\n  z ~ normal(e * w, 1);\n}\n", "a") == "v * b");
    // center = off: the compiler still marks (the engines read the setting); a split model, never.
  }
}

TEST_CASE("centring: a silo's groups' intercepts of their own slopes, each at its group's own mean", "[centring]") {
  // Varying intercepts and slopes by group within each silo: a[c] and b[c], c the row's group.
  const std::string groups = "  global real mu_a;\n  global real mu_b;\n  global real<lower=0> tau;\n"
                             "  local vector[K] a;\n  local vector[K] b;\n  local real e;\n";
  const std::string priors = "  mu_a ~ normal(0, 10);\n  mu_b ~ normal(0, 10);\n  tau ~ normal(0, 1);\n"
                             "  a ~ normal(mu_a, tau);\n  b ~ normal(mu_b, tau);\n  e ~ normal(0, 1);\n";
  CHECK(mark(groups, priors + "  y ~ normal(a[c] + b[c] .* v, 1);\n", "a") == "v * b by c");
  CHECK(mark(groups, priors + "  y ~ normal(v .* b[c] + a[c], 1);\n", "a") == "v * b by c");
  // A loop over the rows; one local slope shared by the groups.
  CHECK(mark(groups, priors + "  for (n in 1:N)\n    y[n] ~ normal(a[c[n]] + b[c[n]] * v[n], 1);\n", "a") ==
        "v * b by c");
  CHECK(mark(groups, priors + "  y ~ normal(a[c] + e * v, 1);\n", "a") == "v * e by c");
  // Beside a global slope (the pooled centring, every group shifted alike) the groups' own.
  CHECK(mark(groups + "  global vector[D] beta;\n", priors + "  beta ~ normal(0, 1);\n  y ~ normal(a[c] + x * beta + b[c] .* v, 1);\n",
             "a") == "x * beta + v * b by c");
  // The slopes, the locations and the one-slope local are not marked by it.
  for (const char* other : {"b", "mu_a", "e"})
    CHECK(mark(groups, priors + "  y ~ normal(a[c] + b[c] .* v, 1);\n", other).empty());
  SECTION("not marked") {
    const std::string two = "silo data {\n  int<lower=0> N;\n  vector[N] v;\n  vector[N] y;\n  vector[N] z;\n"
                            "  array[N] int<lower=1, upper=3> c;\n  array[N] int<lower=1, upper=3> d;\n}\n"
                            "parameters {\n  local vector[3] a;\n  local vector[3] b;\n  local vector[3] e;\n}\n";
    // The slope read by another index, or a by two; a row's slope at every row's index.
    CHECK(mark_in(two + "model {\n  y ~ normal(a[c] + b[d] .* v, 1);\n}\n", "a").empty());
    CHECK(mark_in(two + "model {\n  y ~ normal(a[c] + b[c] .* v, 1);\n  z ~ normal(a[d] + e[d] .* v, 1);\n}\n",
                  "a").empty());
    CHECK(mark_in(two + "model {\n  for (n in 1:N)\n    y[n] ~ normal(a[c[n]] + b[c[n]] * v[1], 1);\n}\n", "a").empty());
    CHECK(mark_in(two + "model {\n  for (n in 1:N)\n    y[n] ~ normal(a[c[n]] + b[c[n]] * v[n], 1);\n}\n", "a") ==
          "v * b by c");
    // A constrained intercept or slope.
    CHECK(mark("  local vector<lower=0>[K] a;\n  local vector[K] b;\n", "  y ~ normal(a[c] + b[c] .* v, 1);\n", "a")
              .empty());
    CHECK(mark("  local vector[K] a;\n  local vector<lower=0>[K] b;\n", "  y ~ normal(a[c] + b[c] .* v, 1);\n", "a")
              .empty());
    // x read elsewhere; a added twice; a matrix x (each group's column means are not kept).
    CHECK(mark(groups, priors + "  y ~ normal(a[c] + b[c] .* v, 1);\n  v ~ normal(0, 1);\n", "a").empty());
    CHECK(mark(groups, priors + "  y ~ normal(a[c] + a[c] + b[c] .* v, 1);\n", "a").empty());
    CHECK(mark("  local vector[K] a;\n  local vector[D] g;\n", "  y ~ normal(a[c] + x * g, 1);\n", "a").empty());
    // A chain: b is itself the groups' intercept of a slope.
    CHECK(mark_in(two + "model {\n  y ~ normal(a[c] + b[c] .* v, 1);\n  z ~ normal(b[c] + e[c] .* v, 1);\n}\n",
                  "a").empty());
    // Without it the same text marks a (the test can fail).
    CHECK(mark_in(two + "model {\n  y ~ normal(a[c] + b[c] .* v, 1);\n  z ~ normal(b[c] + e[c], 1);\n}\n", "a") ==
          "v * b by c");
  }
}

}  // namespace centring_test
