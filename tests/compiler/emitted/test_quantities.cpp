// Transformed parameters and generated quantities through the kernel ABI (docs/kernel-abi.md,
// "Quantities"): the quantity table, each value per draw against its closed form and the IR
// interpreter, and the server's evaluation with its bound check (fvi/program/quantities.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "abi_data.h"
#include "fvi/data/dataset.h"
#include "fvi/program/quantities.h"
#include "ir/interpret.h"
#include "test_models.h"
#include "pipeline.h"

extern "C" const fvi_model* fvi_model_stan_blocks(void);

namespace {

int quantity(const fvi_model& m, const std::string& name) {
  for (int q = 0; q < m.quantity_count; ++q)
    if (name == m.quantities[q].name) return q;
  FAIL("no quantity " << name);
  return -1;
}

// The global group's draws: mu, then tau's unconstrained value log(tau).
Eigen::MatrixXd global_draws() {
  Eigen::MatrixXd u(2, 4);
  u << 0.3, -0.5, 1.2, 2.0,
       std::log(0.7), std::log(1.5), std::log(0.2), std::log(3.0);
  return u;
}

}  // namespace

TEST_CASE("quantities: the table names each one's block, owner and rank", "[quantities]") {
  const fvi_model& m = *fvi_model_stan_blocks();
  REQUIRE(m.quantity_count == 7);
  const fvi_quantity_info& tau2 = m.quantities[quantity(m, "tau2")];
  CHECK(tau2.block == FVI_TRANSFORMED_PARAMETERS);
  CHECK(tau2.owner == FVI_SERVER);
  CHECK(tau2.rank == 0);
  CHECK(tau2.factor >= m.factor_count);
  // theta reads the local eta: each silo's, never the server's.
  CHECK(m.quantities[quantity(m, "theta")].owner == FVI_SILO);
  const fvi_quantity_info& moments = m.quantities[quantity(m, "moments")];
  CHECK(moments.block == FVI_GENERATED_QUANTITIES);
  CHECK(moments.rank == 1);
  const fvi_quantity_info& positive = m.quantities[quantity(m, "mu_positive")];
  CHECK(positive.transform == FVI_LOWER);
  CHECK(positive.lower == 0);
  // fit = silo_sum(...): each silo computes its part, the server adds them up.
  const fvi_quantity_info& fit = m.quantities[quantity(m, "fit")];
  CHECK(fit.aggregate == 1);
  CHECK(fit.owner == FVI_SILO);
  CHECK(fit.rank == 0);
  for (int q = 0; q < m.quantity_count; ++q) CHECK((m.quantities[q].aggregate == 1) == (q == quantity(m, "fit")));
}

TEST_CASE("quantities: a silo's part of a silo_sum, its own values without it, and the server's sum",
          "[quantities]") {
  const fvi_model& m = *fvi_model_stan_blocks();
  const Eigen::MatrixXd u = global_draws();
  Eigen::MatrixXd eta(1, 4);
  eta << 0.1, -1.0, 0.5, 2.0;
  // Two silos' data: y_centred = y - 1 is what the likelihood and fit read.
  const std::vector<std::vector<double>> ys = {{0.5, 1.7, 2.2}, {-0.4, 3.1}};
  Eigen::MatrixXd sum = Eigen::MatrixXd::Zero(1, 4);
  for (size_t k = 0; k < ys.size(); ++k) {
    fvic::test::Data data;
    data.add("N", fvic::test::scalar(double(ys[k].size())));
    const Eigen::Map<const Eigen::VectorXd> y(ys[k].data(), Eigen::Index(ys[k].size()));
    data.add("y", y);
    // Transformed data the silo computes when it reads its data (the runtime's program): y - 1.
    data.add("y_centred", Eigen::VectorXd(y.array() - 1.0));
    const fvi_data& view = data.abi();
    const Eigen::MatrixXd part =
        fvi::program::silo_sum_parts(m, view, int(k + 1), {{FVI_GROUP_GLOBAL, u}, {FVI_GROUP_LOCAL, eta}}, 1, u.cols());
    REQUIRE(part.rows() == 1);
    for (Eigen::Index s = 0; s < u.cols(); ++s) {
      // sum_n log N(y_n - 1 | theta, 1), theta = mu + tau eta, computed here.
      const double theta = u(0, s) + std::exp(u(1, s)) * eta(0, s);
      double expected = 0;
      for (double y : ys[k]) expected += -0.5 * (y - 1 - theta) * (y - 1 - theta) - 0.5 * std::log(2 * M_PI);
      CHECK(part(0, s) == Approx(expected).epsilon(1e-13));
    }
    // The silo's own outputs hold theta, not its part of fit.
    std::vector<fvi::program::VariableLayout> layout;
    Eigen::MatrixXd values(0, u.cols());
    fvi::program::add_silo_quantities(m, view, int(k + 1), {{FVI_GROUP_GLOBAL, u}, {FVI_GROUP_LOCAL, eta}}, 1, layout, values);
    REQUIRE(layout.size() == 1);
    CHECK(layout[0].name == "theta");
    // On the wire, row by row, and added up by the server.
    std::vector<double> reply;
    fvi::program::append_parts(part, reply);
    REQUIRE(reply.size() == 4);
    fvi::program::add_parts(reply.data(), sum);
  }
  fvi::data::DataSet none;
  const auto layout = fvi::program::variable_layout(m, FVI_GROUP_GLOBAL, none.view());
  const fvi::program::QuantityDraws q =
      fvi::program::silo_sums(m, none.view(), sum, layout, fvi::program::constrain(layout, u), 7);
  REQUIRE(q.layout.size() == 1);
  CHECK(q.layout[0].name == "fit");
  CHECK(q.layout[0].offset == 7);
  CHECK(q.violations.empty());
  for (Eigen::Index s = 0; s < u.cols(); ++s) {
    const double theta = u(0, s) + std::exp(u(1, s)) * eta(0, s);
    double expected = 0;
    for (const auto& y_k : ys)
      for (double y : y_k) expected += -0.5 * (y - 1 - theta) * (y - 1 - theta) - 0.5 * std::log(2 * M_PI);
    CHECK(q.values(0, s) == Approx(expected).epsilon(1e-13));
  }
}

TEST_CASE("quantities: the server's values per draw match their closed forms and the IR interpreter", "[quantities]") {
  const fvi_model& m = *fvi_model_stan_blocks();
  const Eigen::MatrixXd u = global_draws();
  fvi::data::DataSet none;
  std::vector<std::string> skipped;
  const std::vector<fvi::program::VariableLayout> layout = fvi::program::variable_layout(m, FVI_GROUP_GLOBAL, none.view());
  const Eigen::MatrixXd x = fvi::program::constrain(layout, u);
  const fvi::program::QuantityDraws q =
      fvi::program::evaluate_quantities(m, FVI_SERVER, none.view(), {{FVI_GROUP_GLOBAL, u}}, layout, x, 2, 1, skipped);
  CHECK(skipped.empty());
  REQUIRE(q.layout.size() == 5);  // tau2, mu_positive, moments, replicate, noise: theta is the silos'
  CHECK(q.layout[0].name == "tau2");
  CHECK(q.layout[0].offset == 2);
  CHECK(q.layout[2].dims == std::vector<int64_t>{2});
  REQUIRE(q.values.rows() == 7);
  for (Eigen::Index s = 0; s < u.cols(); ++s) {
    const double mu = u(0, s), tau = std::exp(u(1, s));
    CHECK(q.values(0, s) == Approx(tau * tau).epsilon(1e-14));  // shifted_square(tau, 0), inlined
    CHECK(q.values(1, s) == mu);
    CHECK(q.values(2, s) == Approx(tau * tau).epsilon(1e-14));
    CHECK(q.values(3, s) == Approx(tau * tau).epsilon(1e-14));
  }

  // The IR interpreter on the same quantities (the ABI's other backend).
  fvic::test::LoadedModel loaded(std::string(FVIC_SOURCE_DIR) + "/tests/compiler/emitted/models/stan_blocks.fvi");
  REQUIRE(loaded.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*loaded.model, module, loaded.diags));
  fvic::ir::Bindings b;
  b.inputs["global"] = fvic::ir::RealTensor(2, 1, u.cols());
  for (Eigen::Index s = 0; s < u.cols(); ++s) b.inputs["global"].m.col(s) = u.col(s);
  for (const fvic::ir::Factor& f : module.quantities) {
    if (f.owner != fvic::TermOwner::Server) continue;
    // The random draws come from each quantity's own key (evaluate_quantities'): `replicate` and
    // `noise` draw some.
    b.noise_key = 1 ^ (0x9E3779B97F4A7C15ull * uint64_t(quantity(m, f.variable) + 1));
    fvic::ir::Interpreter interpreter(module, f);
    const fvic::ir::RealTensor& v = interpreter.forward(b);
    const fvi::program::VariableLayout* where = nullptr;
    for (const auto& l : q.layout)
      if (l.name == f.variable) where = &l;
    REQUIRE(where);
    for (Eigen::Index s = 0; s < u.cols(); ++s)
      for (int64_t e = 0; e < where->elements(); ++e)
        CHECK(v.m(e, v.draws == 1 ? 0 : s * v.cols) ==
              Approx(q.values(where->offset - 2 + e, s)).epsilon(1e-14));
  }
}

TEST_CASE("quantities: a declared bound broken at a draw is reported with the draw's values", "[quantities]") {
  const fvi_model& m = *fvi_model_stan_blocks();
  const Eigen::MatrixXd u = global_draws();  // mu = -0.5 at draw 2 breaks mu_positive's <lower=0>
  fvi::data::DataSet none;
  std::vector<std::string> skipped;
  const auto layout = fvi::program::variable_layout(m, FVI_GROUP_GLOBAL, none.view());
  const auto q = fvi::program::evaluate_quantities(m, FVI_SERVER, none.view(), {{FVI_GROUP_GLOBAL, u}}, layout,
                                                    fvi::program::constrain(layout, u), 2, 1, skipped);
  REQUIRE(q.violations.size() == 1);
  const std::string& v = q.violations[0];
  INFO(v);
  CHECK(v.find("transformed parameter mu_positive = -0.5 at draw 2") != std::string::npos);
  CHECK(v.find("mu = -0.5, tau = 1.5") != std::string::npos);
  CHECK(v.find("below its lower bound 0") != std::string::npos);
  CHECK(v.find("1 of 4 draws") != std::string::npos);
}

TEST_CASE("quantities: random draws are normal_rng's, the same in both backends, and keyed", "[quantities]") {
  const fvi_model& m = *fvi_model_stan_blocks();
  Eigen::MatrixXd u(2, 4000);
  for (Eigen::Index s = 0; s < u.cols(); ++s) u.col(s) << 1.0, std::log(2.0);  // mu = 1, tau = 2 at every draw
  fvi::data::DataSet none;
  std::vector<std::string> skipped;
  const auto layout = fvi::program::variable_layout(m, FVI_GROUP_GLOBAL, none.view());
  const Eigen::MatrixXd x = fvi::program::constrain(layout, u);
  const auto a = fvi::program::evaluate_quantities(m, FVI_SERVER, none.view(), {{FVI_GROUP_GLOBAL, u}}, layout, x, 2, 1, skipped);
  const auto b = fvi::program::evaluate_quantities(m, FVI_SERVER, none.view(), {{FVI_GROUP_GLOBAL, u}}, layout, x, 2, 2, skipped);
  const Eigen::ArrayXXd draws = a.values.middleRows(4, 2).array();  // replicate, 2 x 4000
  // normal(1, 2): mean within 5 standard errors (2 / sqrt(8000)), variance within 5 of its own
  // (sqrt(2 sigma^4 / n) for a normal).
  const double n = double(draws.size()), mean = draws.mean();
  const double variance = (draws - mean).square().sum() / (n - 1);
  CHECK(std::fabs(mean - 1.0) < 5 * 2 / std::sqrt(n));
  CHECK(std::fabs(variance - 4.0) < 5 * std::sqrt(2 * 16 / n));
  CHECK((a.values.middleRows(4, 2).array() != b.values.middleRows(4, 2).array()).count() > 7990);  // another key
  CHECK((a.values.topRows(4).array() == b.values.topRows(4).array()).all());  // no draws: the same
  // noise = normal_rng(0, 1) reads no parameter, and is still a new draw at every posterior draw:
  // standard normal moments within 5 standard errors (1 / sqrt(n); the variance's sqrt(2 / n)).
  const Eigen::ArrayXd noise = a.values.row(6).transpose().array();
  const double noise_mean = noise.mean();
  CHECK(std::fabs(noise_mean) < 5 / std::sqrt(4000.0));
  CHECK(std::fabs((noise - noise_mean).square().sum() / 3999 - 1) < 5 * std::sqrt(2 / 4000.0));
}
