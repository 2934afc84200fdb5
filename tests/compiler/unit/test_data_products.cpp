// A parameter times an expression of one silo's data (frontend/data_products.h): rewritten before
// checking into the parameter times a silo's transformed datum of that value, computed when the
// silo reads its data; what is not surely such a product is left as written. The factor reading
// the datum computes the log density written out here with the expression evaluated by hand.
#include <catch2/catch.hpp>

#include <cmath>

#include "fvi/data/transformed_data.h"
#include "ir/interpret.h"
#include "pipeline.h"
#include "test_models.h"

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace data_products_test {

namespace {

const std::string kData = "silo data {\n  int<lower=2> N;\n  vector[N] age;\n  vector[N] income;\n  vector[N] y;\n"
                          "  array[N] real w;\n}\n";
const std::string kParameters = "parameters {\n  global real a;\n  global real b;\n  global real c;\n"
                                "  global real<lower=0> s;\n}\n";

// The model whose model block is `model`, after the data (with `extra_data`) and parameters above.
fvic::test::LoadedModel load(const std::string& model, const std::string& extra_data = "") {
  return fvic::test::load_text("fvic_test_data_products", kData.substr(0, kData.size() - 2) + extra_data + "}\n" +
                                                              kParameters + "model {\n" + model + "}\n");
}

// `fvic dump --ast` of load(model, extra_data).
std::string ast_of(const std::string& model, const std::string& extra_data = "") {
  fvic::test::LoadedModel m = load(model, extra_data);
  INFO(m.errors());
  REQUIRE(m.ok());
  return fvic::dump_ast(*m.program);
}

}  // namespace

TEST_CASE("data products: a parameter times an expression of a silo's data reads a transformed datum", "[hoist]") {
  const std::string quadratic = ast_of("  y ~ normal(a + b * age + c * square(age), s);\n");
  CHECK_THAT(quadratic, Catch::Contains("block transformed data"));
  CHECK_THAT(quadratic, Catch::Contains("decl vector[N] square_age = square(age)"));
  CHECK_THAT(quadratic, Catch::Contains("a + b * age + c * square_age"));
  // Either way round; an interaction of two columns; the same value twice is one datum.
  const std::string interaction =
      ast_of("  y ~ normal(a + (income .* age) * b + c * (income .* age), s);\n  y ~ normal(log(age) * c, s);\n");
  CHECK_THAT(interaction, Catch::Contains("decl vector[N] income_times_age = income .* age"));
  CHECK_THAT(interaction, Catch::Contains("a + income_times_age * b + c * income_times_age"));
  CHECK_THAT(interaction, Catch::Contains("decl vector[N] log_age = log(age)"));
  CHECK(interaction.find("income_times_age_2") == std::string::npos);
  // A range of rows (an autoregression's lag), sized from its bounds.
  const std::string lag = ast_of("  y[2:N] ~ normal(a + b * y[1:(N - 1)], s);\n");
  CHECK_THAT(lag, Catch::Contains("decl vector[N - 1 - 1 + 1] y_rows = y[1:N - 1]"));
  CHECK_THAT(lag, Catch::Contains("a + b * y_rows"));
  CHECK_THAT(ast_of("  y ~ normal(a + b * to_vector(exp(w)), s);\n"), !Catch::Contains("exp_w"));
  CHECK_THAT(ast_of("  target += b * sum(exp(w));\n  y ~ normal(a + c * exp(w)[1], s);\n"), !Catch::Contains("exp_w"));
  // One row in a loop, f(x[n]) and x[n] * v[n] (as `b * x[n] * v[n]` parses, too): the datum's row,
  // one datum with the whole column's value.
  const std::string rows = ast_of("  for (n in 1:N)\n    y[n] ~ normal(a + c * square(age[n]) + b * income[n] * age[n], s);\n"
                                  "  y ~ normal(c * square(age) + (income[1] * age[1]) * b, s);\n");
  CHECK_THAT(rows, Catch::Contains("decl vector[N] square_age = square(age)"));
  CHECK_THAT(rows, Catch::Contains("decl vector[N] income_times_age = income .* age"));
  CHECK_THAT(rows, Catch::Contains("a + c * square_age[n] + b * income_times_age[n]"));
  CHECK_THAT(rows, Catch::Contains("c * square_age + income_times_age[1] * b"));
  CHECK(rows.find("square_age_2") == std::string::npos);
  // Rows picked by an int array: `.*` of them is (income .* age)[k]; `*` of them is no product of
  // two numbers, and stays the error it is.
  const std::string k = "  array[N] int<lower=1, upper=N> k;\n";
  CHECK_THAT(ast_of("  y ~ normal(a + c * (income[k] .* age[k]), s);\n", k), Catch::Contains("c * income_times_age[k]"));
  CHECK_FALSE(load("  y ~ normal(a + c * (income[k] * age[k]), s);\n", k).ok());
  // A name taken is not reused.
  CHECK_THAT(ast_of("  y ~ normal(a + c * square(age) + b * square_age, s);\n", "  vector[N] square_age;\n"),
             Catch::Contains("decl vector[N] square_age_2 = square(age)"));
}

TEST_CASE("data products: what is not surely one silo's data times a parameter is left as written", "[hoist]") {
  for (const char* model : {
           "  y ~ normal(a + c * square(a), s);\n",                 // a parameter's value
           "  y ~ normal(a + c * softmax(age), s);\n",              // not element by element
           "  for (n in 1:N)\n    y[n] ~ normal(a + c * (income[n] * age[1]), s);\n",  // not one row of each
           "  y[2:N] ~ normal(a + c * square(age[2:N]), s);\n",  // a function of a range
           "  real k = 2;\n  y ~ normal(a + k * square(age), s);\n",  // a model local
           "  y[2:N] ~ normal(a + c * y[2:], s);\n",                // a bound not written
       }) {
    INFO(model);
    const std::string ast = ast_of(model);
    CHECK(ast.find("block transformed data") == std::string::npos);
  }
}

TEST_CASE("data products: the factor reads the value the silo computes when it reads its data", "[hoist]") {
  fvic::test::LoadedModel m = fvic::test::load_text(
      "fvic_test_data_products_value",
      kData + kParameters + "model {\n  y[2:N] ~ normal(a + b * y[1:(N - 1)] + c * square(age[2:N]), s);\n"
                            "  y ~ normal(c * (income .* age), s);\n  for (n in 1:N)\n"
                            "    y[n] ~ normal(b * income[n] * age[n] + c * square(age[n]), s);\n}\n");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  CHECK_THAT(module.transformed_data[FVI_DATA_SILO], Catch::Contains("y_rows"));
  CHECK_THAT(module.transformed_data[FVI_DATA_SILO], Catch::Contains("income_times_age"));

  const std::vector<double> age = {30, 41, 52.5, 64}, income = {12, 55, 8, 31}, y = {1.5, -0.3, 2.2, 0.7};
  fvi::data::DataSet silo;
  silo.add(fvic::test::data_variable("N", {}, {4}));
  silo.add(fvic::test::data_variable("age", {4}, age));
  silo.add(fvic::test::data_variable("income", {4}, income));
  silo.add(fvic::test::data_variable("y", {4}, y));
  silo.add(fvic::test::data_variable("w", {4}, {0, 0, 0, 0}));
  fvi::data::compute_transformed_data(module.transformed_data[FVI_DATA_SILO], silo, fvi::data::DataSet());
  REQUIRE(silo.find("y_rows"));
  REQUIRE(silo.find("income_times_age"));

  fvic::ir::Bindings bind;
  for (const fvi::data::Variable& v : silo.variables()) bind.data[v.name] = fvic::test::tensor_of(v);
  bind.inputs["global"] = fvic::ir::RealTensor(4, 1, 1);
  const double a = 0.3, b = -0.4, c = 0.02, log_s = std::log(1.7);
  bind.inputs["global"].m << a, b, c, log_s;
  const double s = std::exp(log_s);
  auto normal = [&](double v, double mean) {
    return -0.5 * std::log(2 * M_PI) - std::log(s) - 0.5 * (v - mean) * (v - mean) / (s * s);
  };
  double want = 0;
  for (int n = 1; n < 4; ++n) want += normal(y[n], a + b * y[n - 1] + c * age[n] * age[n]);
  for (int n = 0; n < 4; ++n) want += normal(y[n], c * income[n] * age[n]);
  for (int n = 0; n < 4; ++n) want += normal(y[n], b * income[n] * age[n] + c * age[n] * age[n]);
  double got = 0;
  for (const fvic::ir::Factor& f : module.factors)
    if (f.name.rfind("likelihood", 0) == 0) got += fvic::ir::Interpreter(module, f).forward(bind).m.sum();
  CHECK(got == Approx(want).epsilon(1e-13));
}

}  // namespace data_products_test
