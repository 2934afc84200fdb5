// The emitter's fusion plan (backend/fuse.h) on every factor of every acceptance model, and
// its mean-field variant: chains hold fusable nodes of one shape, the schedule emits every node
// once and after everything it reads, and a member is written to memory exactly when something
// outside its chain reads it. The numbers fused code computes are checked in
// tests/compiler/emitted/ (against the interpreter) and tests/runtime/kernel/fused_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>

#include "backend/fuse.h"
#include "test_models.h"
#include "pipeline.h"

namespace {

using fvic::backend::FusionPlan;
using fvic::ir::Op;

void check_plan(const fvic::ir::Factor& f, int begin, int end) {
  const std::set<int> pinned = fvic::backend::pinned_nodes(f);
  FusionPlan plan = fvic::backend::plan_fusion(f, begin, end, pinned);
  for (const auto& chain : plan.chains) {
    REQUIRE(chain.nodes.size() >= 2);
    for (int m : chain.nodes) {
      const fvic::ir::Node& n = f.nodes[m];
      CHECK(fvic::backend::fusable(n));
      CHECK(n.rows.equals(f.nodes[chain.nodes[0]].rows));
      CHECK(n.cols.equals(f.nodes[chain.nodes[0]].cols));
      CHECK(n.varies == f.nodes[chain.nodes[0]].varies);
    }
  }
  // Emitted in schedule order, every node once, after its arguments.
  std::vector<bool> done(f.nodes.size(), false);
  for (int i = 0; i < begin; ++i) done[i] = true;  // the forward pass, before a backward one
  auto emit = [&](int node) {
    for (int a : f.nodes[node].args) {
      INFO("node " << node << " reads " << a);
      CHECK(done[a]);
    }
    CHECK_FALSE(done[node]);
    done[node] = true;
  };
  for (const auto& step : fvic::backend::schedule(plan, begin, end)) {
    if (step.chain < 0) {
      emit(step.node);
      continue;
    }
    for (int m : plan.chains[step.chain].nodes) emit(m);
  }
  for (int i = begin; i < end; ++i) CHECK(done[i]);
  // Written exactly when read outside the chain.
  for (size_t c = 0; c < plan.chains.size(); ++c)
    for (int m : plan.chains[c].nodes) {
      bool outside = pinned.count(m) > 0;
      for (size_t r = 0; r < f.nodes.size(); ++r)
        if (plan.chain_of[r] != int(c) && std::count(f.nodes[r].args.begin(), f.nodes[r].args.end(), m)) outside = true;
      CHECK(plan.chains[c].escaping.count(m) == (outside ? 1u : 0u));
    }
}

}  // namespace

TEST_CASE("fusion plans are valid schedules for every factor of every acceptance model", "[fuse]") {
  for (const std::string& path : fvic::test::acceptance_models()) {
    fvic::test::LoadedModel m(path);
    INFO(path);
    REQUIRE(m.ok());
    fvic::ir::Module module;
    REQUIRE(fvic::build_ir(*m.model, module, m.diags));
    for (auto* factors : {&module.factors, &module.meanfield})
      for (const fvic::ir::Factor& f : *factors) {
        INFO("factor " << f.name);
        check_plan(f, 0, f.forward_end);
        check_plan(f, f.forward_end, static_cast<int>(f.nodes.size()));
      }
  }
}

TEST_CASE("logistic regression's linear predictor and log density are one loop each way", "[fuse]") {
  fvic::test::LoadedModel m(std::string(FVIC_SOURCE_DIR) + "/examples/acceptance/robust_logreg.fvi");
  REQUIRE(m.ok());
  fvic::ir::Module module;
  REQUIRE(fvic::build_ir(*m.model, module, m.diags));
  for (const fvic::ir::Factor& f : module.factors) {
    if (f.kind != fvic::ir::FactorKind::Likelihood) continue;
    FusionPlan forward = fvic::backend::plan_fusion(f, 0, f.forward_end, fvic::backend::pinned_nodes(f));
    REQUIRE(forward.chains.size() == 1);
    const auto& chain = forward.chains[0];
    REQUIRE(chain.nodes.size() == 2);
    CHECK(f.nodes[chain.nodes[0]].op == Op::Add);  // x * w + b
    CHECK(f.nodes[chain.nodes[1]].op == Op::Lpdf);
    CHECK(chain.escaping.size() == 2);  // the argument and the output
    FusionPlan backward =
        fvic::backend::plan_fusion(f, f.forward_end, static_cast<int>(f.nodes.size()), fvic::backend::pinned_nodes(f));
    REQUIRE(backward.chains.size() == 1);
    CHECK(f.nodes[backward.chains[0].nodes[0]].op == Op::LpdfVjp);
  }
}
