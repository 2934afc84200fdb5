// Each acceptance model's factors, lowered, differentiated and interpreted, against the model's
// hand-written log joint (reference_models.h): the value per draw, and the gradient with respect
// to every input group against finite differences of the hand-written function.
//
// The interpreter's log joint of one silo's bindings is the sum of the density factors and of the
// likelihood factors summed over observations. A vertical model is evaluated as its augmented
// form with one silo: the coupling likelihood reads `z_sum`, set here to the contribution
// factor's output, so it sees the exact silo_sum; the gradient with respect to the `split` groups
// chains through z_sum (the contribution's vector-Jacobian product, seeded with the likelihood's
// adjoint of z_sum) and adds the split density's own gradient.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "ir/interpret.h"
#include "reference_models.h"
#include "support/gradient_check.h"
#include "test_models.h"
#include "pipeline.h"

using fvic::ir::FactorKind;
using fvic::ir::RealTensor;

namespace {

// The interpreter's log joint per draw and its gradient with respect to each input group.
struct Evaluation {
  Eigen::VectorXd total;                          // one per draw
  std::map<std::string, Eigen::MatrixXd> gradient;  // group -> size x draws (as the group)
};

// Adds a factor's gradient with respect to a group (shaped as the group) into the total.
void accumulate(Eigen::MatrixXd& into, const RealTensor& add) {
  REQUIRE(add.m.rows() == into.rows());
  REQUIRE(add.m.cols() == into.cols());
  into += add.m;
}

Evaluation interpret(const fvic::ir::Module& module, fvic::ir::Bindings b, long long draws) {
  using fvic::ir::Interpreter;
  Evaluation out;
  out.total = Eigen::VectorXd::Zero(draws);
  for (const auto& [name, x] : b.inputs) out.gradient[name] = Eigen::MatrixXd::Zero(x.m.rows(), x.m.cols());

  // Vertical models: silo_sum over one silo is the contribution itself.
  const fvic::ir::Factor* contribution = nullptr;
  for (const fvic::ir::Factor& f : module.factors)
    if (f.kind == FactorKind::Contribution) {
      REQUIRE(contribution == nullptr);  // one coupling likelihood in the acceptance models
      contribution = &f;
    }
  std::unique_ptr<Interpreter> contribution_interp;
  if (contribution) {
    contribution_interp = std::make_unique<Interpreter>(module, *contribution);
    RealTensor z = contribution_interp->forward(b);
    REQUIRE(z.rows == b.inputs.at("z_sum").rows);
    b.inputs["z_sum"] = z;
  }

  // Seeds: 1 for each output, 0 for each distribution argument.
  auto seeds_for = [](const fvic::ir::Factor& f, const Interpreter& interp, const RealTensor* output_seed) {
    std::vector<RealTensor> seeds;
    for (int s : f.seeds) {
      const fvic::ir::Node& n = f.nodes[s];
      if (n.name == "output") {
        if (output_seed) {
          seeds.push_back(*output_seed);
        } else {
          RealTensor one = RealTensor::zeros_like(interp.value(f.output));
          one.m.setOnes();
          seeds.push_back(one);
        }
      } else {
        seeds.push_back(RealTensor::zeros_like(interp.value(f.arguments.at(std::stoi(n.name.substr(9)) - 1))));
      }
    }
    return seeds;
  };

  RealTensor z_adjoint;
  bool have_z_adjoint = false;
  for (const fvic::ir::Factor& f : module.factors) {
    if (f.kind == FactorKind::Contribution) continue;
    INFO("factor " << f.name);
    Interpreter interp(module, f);
    const RealTensor& value = interp.forward(b);
    REQUIRE(value.cols == 1);
    REQUIRE((value.draws == draws || value.draws == 1));
    for (long long s = 0; s < draws; ++s) out.total[s] += value.draw(s).sum();
    auto grads = interp.backward(b, seeds_for(f, interp, nullptr));
    for (const auto& [group, g] : grads) {
      if (group == "z_sum") {
        REQUIRE_FALSE(have_z_adjoint);
        z_adjoint = g;
        have_z_adjoint = true;
        continue;
      }
      accumulate(out.gradient.at(group), g);
    }
  }
  if (contribution) {
    REQUIRE(have_z_adjoint);
    auto grads = contribution_interp->backward(b, seeds_for(*contribution, *contribution_interp, &z_adjoint));
    for (const auto& [group, g] : grads) accumulate(out.gradient.at(group), g);
  }
  out.gradient.erase("z_sum");
  return out;
}

}  // namespace

TEST_CASE("every acceptance model's factors agree with its hand-written log joint and gradient", "[reference]") {
  namespace ref = fvic::test::reference;
  const long long draws = 2;
  const bool report = std::getenv("FVIC_REFERENCE_REPORT") != nullptr;
  REQUIRE(fvic::test::acceptance_models().size() == ref::models().size());

  for (const std::string& path : fvic::test::acceptance_models()) {
    const std::string name = std::filesystem::path(path).stem().string();
    INFO("model " << name);
    REQUIRE(ref::models().count(name));
    ref::Model reference = ref::models().at(name);
    fvic::test::LoadedModel m(path);
    INFO(m.errors());
    REQUIRE(m.ok());
    fvic::ir::Module module;
    REQUIRE(fvic::build_ir(*m.model, module, m.diags));

    double worst_value = 0, worst_gradient = 0;
    // Unconstrained values of scale 0.5 (random_bindings), then of scale 4: scales and rates
    // exp(u) over several orders of magnitude, logits far into the tails.
    for (auto [seed, spread] : {std::pair{1u, 1.0}, {2u, 1.0}, {3u, 1.0}, {4u, 8.0}, {5u, 8.0}}) {
      INFO("seed " << seed << ", unconstrained values x " << spread);
      std::mt19937 rng(seed);
      fvic::ir::Bindings b = fvic::test::random_bindings(*m.model, module, rng, draws);
      for (auto& [group, x] : b.inputs) x.m *= spread;
      Evaluation e = interpret(module, b, draws);

      // The value, draw by draw, to the float error of a sum of terms of these magnitudes.
      for (long long s = 0; s < draws; ++s) {
        ref::LogJoint expected = reference(b.data, b.inputs, s);
        INFO("draw " << s << ": interpreter " << e.total[s] << ", reference " << expected.value << " (terms "
                     << expected.scale << ")");
        REQUIRE(std::isfinite(expected.value));
        double difference = std::abs(e.total[s] - expected.value);
        worst_value = std::max(worst_value, difference / expected.scale);
        CHECK(difference <= 1e-12 * expected.scale);
      }

      // The gradient with respect to each group, against finite differences of the reference.
      for (const auto& [group, analytic_m] : e.gradient) {
        INFO("group " << group);
        const RealTensor& x0 = b.inputs.at(group);
        double scale = 0;
        auto value = [&](const Eigen::VectorXd& x) {
          fvic::ir::Bindings moved = b;
          moved.inputs[group].m = Eigen::Map<const Eigen::MatrixXd>(x.data(), x0.m.rows(), x0.m.cols());
          double total = 0;
          for (long long s = 0; s < draws; ++s) total += reference(moved.data, moved.inputs, s).value;
          return total;
        };
        for (long long s = 0; s < draws; ++s) scale += reference(b.data, b.inputs, s).scale;
        fvi::test::GradientCheckOptions options;
        options.function_scale = scale;  // the reference is a sum of terms this large
        Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(x0.m.data(), x0.m.size());
        Eigen::VectorXd analytic = Eigen::Map<const Eigen::VectorXd>(analytic_m.data(), analytic_m.size());
        auto result = fvi::test::check_gradient(value, x, analytic, options);
        worst_gradient = std::max(worst_gradient, result.worst_ratio());
        INFO(result.report());
        CHECK(result.ok());
      }
    }
    if (report)
      std::printf("%-24s worst |value - reference| / sum|terms| = %.3g, worst gradient |error| / tol = %.3g\n",
                  name.c_str(), worst_value, worst_gradient);
  }
}
