// Transformed data built by statements (analysis/transformed_data.h): the programs each party
// runs when its data is read, run by the runtime (fvi/data/transformed_data.h), and a factor
// reading their values as data computes the log density of the data transformed by hand here.
#include <catch2/catch.hpp>

#include <cmath>

#include "fvi/data/transformed_data.h"
#include "ir/interpret.h"
#include "pipeline.h"
#include "test_models.h"

namespace {

using fvic::test::data_variable;

}  // namespace

TEST_CASE("transformed data: statements run where their data is, and factors read the values", "[transformed]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_transformed_statements", R"(data {
  int<lower=2> K;
}
silo data {
  int<lower=0> N;
  matrix[N, K] X;
  vector[N] y;
}
transformed data {
  int Kc = K - 1;
  matrix[N, Kc] Xc;
  vector[Kc] means_X;
  real offset = 0;
  for (i in 2:K) {
    means_X[i - 1] = mean(X[:, i]);
    Xc[:, i - 1] = X[:, i] - means_X[i - 1];
  }
  for (n in 1:N)
    if (y[n] > 0) offset += 1;
}
parameters {
  global real a;
  global vector[Kc] b;
}
model {
  a ~ normal(0, 1);
  b ~ normal(0, 1);
  y ~ normal(a + Xc * b + offset, 1);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  // Kc reads public data only: the public program; the rest reads X and y: each silo's.
  CHECK_THAT(module.transformed_data[FVI_DATA_PUBLIC], Catch::Contains("(decl 10 Kc int"));
  CHECK_THAT(module.transformed_data[FVI_DATA_SILO], Catch::Contains("(decl 11 Xc real m 0 1"));
  CHECK_THAT(module.transformed_data[FVI_DATA_SILO], Catch::Contains("(decl 13 offset real"));
  CHECK(module.transformed_data[FVI_DATA_SILO].find("(decl 10 Kc") == std::string::npos);
  CHECK(module.transformed_data[FVI_DATA_SERVER].empty());

  fvi::data::DataSet pub, silo;
  pub.add(data_variable("K", {}, {3}));
  const std::vector<double> X = {1, 0, 2, 2, 5, 1, 4, -1, 0};  // 3 x 3, column-major
  const std::vector<double> y = {0.5, -1.0, 2.0};
  silo.add(data_variable("N", {}, {3}));
  silo.add(data_variable("X", {3, 3}, X));
  silo.add(data_variable("y", {3}, y));
  fvi::data::compute_transformed_data(module.transformed_data[FVI_DATA_PUBLIC], pub, fvi::data::DataSet());
  fvi::data::compute_transformed_data(module.transformed_data[FVI_DATA_SILO], silo, pub);
  REQUIRE(pub.find("Kc"));
  REQUIRE(silo.find("Xc"));
  REQUIRE(silo.find("offset"));
  CHECK(silo.find("offset")->values[0] == 2);

  fvic::ir::Bindings b;
  for (const auto* set : {&pub, &silo})
    for (const fvi::data::Variable& v : set->variables()) b.data[v.name] = fvic::test::tensor_of(v);
  b.inputs["global"] = fvic::ir::RealTensor(3, 1, 1);
  b.inputs["global"].m << 0.3, -0.4, 0.9;  // a, b[1], b[2]
  fvic::ir::Interpreter likelihood(module, fvic::test::factor_named(module, "likelihood_y"));
  const fvic::ir::RealTensor& lp = likelihood.forward(b);
  double want = 0;
  for (int n = 0; n < 3; ++n) {
    double mu = 0.3 + 2;  // a + offset
    for (int k = 1; k < 3; ++k) {
      const double mean = (X[3 * k] + X[3 * k + 1] + X[3 * k + 2]) / 3;
      mu += (X[n + 3 * k] - mean) * b.inputs["global"].m(k, 0);
    }
    want += -0.5 * std::log(2 * M_PI) - 0.5 * (y[n] - mu) * (y[n] - mu);
  }
  CHECK(lp.m.sum() == Approx(want).epsilon(1e-13));
}

TEST_CASE("transformed data: what the load-time statements cannot compute is named", "[transformed]") {
  const std::string head = "data {\n  int<lower=1> K;\n  vector[K] x;\n}\ntransformed data {\n  vector[K] z;\n";
  const std::string tail = "}\nparameters {\n  global real mu;\n}\nmodel {\n  mu ~ normal(0, 1);\n}\n";
  fvic::test::LoadedModel m =
      fvic::test::load_text("fvic_test_transformed_refused", head + "  z = softmax(x);\n  z[1] = 0;\n" + tail);
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  CHECK_FALSE(fvic::build_ir(*m.model, module, m.diags));
  CHECK_THAT(m.errors(), Catch::Contains("7:7: error: the function 'softmax' in transformed data built by statements is "
                                         "not supported yet"));
}
