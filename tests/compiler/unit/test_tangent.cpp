// The forward-mode pass (transform/tangent.h), end to end: every factor of every acceptance model
// and of the adjoint tests' forms, in the direction of a random tangent for each group it reads.
// Its Jacobian-vector products, projected on random seeds u, equal the adjoint pass's
// vector-Jacobian products projected on the tangent, <u, J v> = <J'u, v>, to 1e-10 relative
// (two routes through different kernels, so that only float rounding separates them), and the
// derivative of <u, outputs(x + s v)> at s = 0 by finite differences (tests/support/gradient_check.h).
#include <catch2/catch.hpp>

#include <random>

#include "ir/interpret.h"
#include "pipeline.h"
#include "support/gradient_check.h"
#include "test_models.h"
#include "transform/tangent.h"

using fvic::ir::RealTensor;

namespace {

// <u_k, value of node k> summed over the factor's output and arguments.
double projected(const fvic::ir::Interpreter& interp, const std::vector<int>& nodes, const std::vector<RealTensor>& u) {
  double total = 0;
  for (size_t k = 0; k < nodes.size(); ++k) total += fvi::kernel::mul(u[k], interp.value(nodes[k])).m.sum();
  return total;
}

void check_tangents(fvic::test::LoadedModel& m) {
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  std::mt19937 rng(23);
  std::normal_distribution<double> normal;
  const fvic::ir::Bindings b = fvic::test::random_bindings(*m.model, module, rng, /*draws=*/2);
  for (const fvic::ir::Factor& f : module.factors) {
    INFO("factor " << f.name);
    fvic::ir::Interpreter forward(module, f);
    forward.forward(b);
    // The outputs seeded: the factor's output and each distribution argument, as the adjoint's.
    std::vector<int> outputs;
    std::vector<RealTensor> u;
    for (int s : f.seeds) {
      const fvic::ir::Node& n = f.nodes[size_t(s)];
      const int target = n.name == "output" ? f.output : f.arguments[size_t(std::stoi(n.name.substr(9)) - 1)];
      RealTensor t = RealTensor::zeros_like(forward.value(target));
      for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = normal(rng);
      outputs.push_back(target);
      u.push_back(t);
    }
    const auto vjp = forward.backward(b, u);
    for (fvi_group kind : f.groups) {
      const std::string group = fvi_group_name(kind);
      INFO("group " << group);
      fvic::ir::Bindings with = b;
      RealTensor v = RealTensor::zeros_like(b.inputs.at(group));
      for (Eigen::Index i = 0; i < v.m.size(); ++i) v.m.data()[i] = normal(rng);
      with.tangents[group] = v;

      const fvic::ir::Factor tangent = fvic::transform::make_tangent(f, kind);
      std::vector<int> tangent_outputs;  // in the seeds' order: the output's tangent, then each argument's
      for (int s : f.seeds) {
        const fvic::ir::Node& n = f.nodes[size_t(s)];
        tangent_outputs.push_back(n.name == "output" ? tangent.output
                                                     : tangent.arguments[size_t(std::stoi(n.name.substr(9)) - 1)]);
      }
      fvic::ir::Interpreter jvp(module, tangent);
      jvp.forward(with);
      const double u_jv = projected(jvp, tangent_outputs, u);
      const double jtu_v = fvi::kernel::mul(vjp.at(group), v).m.sum();
      INFO("<u, J v> " << u_jv << ", <J'u, v> " << jtu_v);
      CHECK(std::abs(u_jv - jtu_v) <= 1e-10 * std::max(1.0, std::abs(jtu_v)));

      // d/ds <u, outputs(x + s v)> at 0.
      auto along = [&](const Eigen::VectorXd& s) {
        fvic::ir::Bindings moved = b;
        moved.inputs[group].m += s[0] * v.m;
        fvic::ir::Interpreter again(module, f);
        again.forward(moved);
        return projected(again, outputs, u);
      };
      const auto result = fvi::test::check_gradient(along, Eigen::VectorXd::Zero(1), Eigen::VectorXd::Constant(1, u_jv));
      INFO(result.report());
      CHECK(result.ok());
    }
  }
}

}  // namespace

TEST_CASE("JVPs of every acceptance model's factors equal their VJPs and finite differences", "[tangent]") {
  for (const std::string& path : fvic::test::acceptance_models()) {
    INFO(path);
    fvic::test::LoadedModel m(path);
    check_tangents(m);
  }
}

TEST_CASE("JVPs through Stan's forms, softmax, reductions, concatenation and loop locals", "[tangent]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_tangent_forms", fvic::test::kFormsModel);
  check_tangents(m);
}

TEST_CASE("JVPs through conv2d, max_pool2d and avg_pool2d", "[tangent][conv]") {
  fvic::test::LoadedModel m(fvic::test::conv_model_path());
  check_tangents(m);
}

TEST_CASE("an operation without a JVP yet is refused by name", "[tangent]") {
  fvic::test::LoadedModel m = fvic::test::load_text("fvic_test_tangent_refused", R"(data {
  matrix[2, 2] A;
}
silo data {
  int<lower=0> N;
  array[N] vector[2] y;
}
parameters {
  global cov_matrix[2] Sigma;
}
model {
  Sigma ~ inv_wishart(4, A);
  y ~ multi_normal(rep_vector(0, 2), Sigma);
}
)");
  INFO(m.errors());
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  bool refused = false;
  for (const fvic::ir::Factor& f : module.factors) {
    try {
      fvic::transform::make_tangent(f, FVI_GROUP_GLOBAL);
    } catch (const std::invalid_argument& e) {
      refused = true;
      CHECK(std::string(e.what()).find("no Jacobian-vector product for matrix_constrain") != std::string::npos);
    }
  }
  CHECK(refused);
}
