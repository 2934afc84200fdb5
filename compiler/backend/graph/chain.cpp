#include "backend/graph/chain.h"

#include <algorithm>

namespace fvic::backend::graph {

Chain::Chain(const ir::Factor& f, const FusedChain& c) : leaves(c.leaves) {
  auto position = [](const std::vector<int>& v, int x) { return int(std::find(v.begin(), v.end(), x) - v.begin()); };
  for (int m : c.nodes) {
    const ir::Node& n = f.nodes[size_t(m)];
    Member member{n.op, n.name, {}, n.k, {}};
    if (n.op == ir::Op::Unary || n.op == ir::Op::UnaryDerivative) member.fn = fvi::kernel::unary_fn(n.name);
    for (int a : n.args) {
      const int at = position(c.nodes, a);
      member.operands.push_back(at < int(c.nodes.size()) ? Operand{true, at} : Operand{false, position(leaves, a)});
    }
    members.push_back(std::move(member));
    out_of_node.push_back(c.escaping.count(m) ? int(outs.size()) : -1);
    if (c.escaping.count(m)) outs.push_back(m);
  }
}

Section::Section(const ir::Factor& f, int begin, int end, const std::set<int>& pinned) {
  const FusionPlan plan = plan_fusion(f, begin, end, pinned);
  steps = schedule(plan, begin, end);
  for (const FusedChain& c : plan.chains) chains.emplace_back(f, c);
}

PassPlan::PassPlan(const ir::Factor& f) {
  const std::set<int> pinned = pinned_nodes(f);
  forward = Section(f, 0, f.forward_end, pinned);
  backward = Section(f, f.forward_end, int(f.nodes.size()), pinned);
}

std::vector<FactorPlan> plan_factors(const ir::Module& m) {
  std::vector<FactorPlan> plans;
  for (size_t i = 0; i < m.factors.size(); ++i) plans.push_back({PassPlan(m.factors[i]), PassPlan(m.meanfield.at(i))});
  for (const ir::Factor& q : m.quantities) plans.push_back({PassPlan(q), PassPlan()});
  return plans;
}

std::vector<Chain*> all_chains(std::vector<FactorPlan>& plans) {
  std::vector<Chain*> chains;
  for (FactorPlan& p : plans)
    for (PassPlan* pass : {&p.draws, &p.meanfield})
      for (Section* s : {&pass->forward, &pass->backward})
        for (Chain& c : s->chains) chains.push_back(&c);
  return chains;
}

}  // namespace fvic::backend::graph
