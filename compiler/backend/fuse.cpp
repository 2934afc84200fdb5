#include "backend/fuse.h"

#include "builtins.h"

#include <algorithm>

namespace fvic::backend {

using ir::Node;
using ir::Op;

namespace {

bool scalar_distribution(const std::string& d) {
  return d != "categorical_logit" && !stdlib::ordinal_density(d) && !stdlib::joint_density(d);
}

bool same_shape(const Node& a, const Node& b) {
  return a.rows.equals(b.rows) && a.cols.equals(b.cols) && a.varies == b.varies;
}

bool is_scalar(const Node& n) { return n.rows.str() == "1" && n.cols.str() == "1"; }

// Whether node i can join chain c (first member `first`): the chain is emitted where i stands, so
// every node between that reads a member — directly or through another such node — moves after
// the chain (`deferred`). That needs each of them to be outside every chain and none of them to
// be read by i.
bool can_join(const ir::Factor& f, const std::vector<int>& chain_of, int c, int first, int i, std::vector<int>& deferred) {
  std::set<int> moved;
  for (int m = first + 1; m < i; ++m) {
    if (chain_of[m] == c) continue;
    bool reads = false;
    for (int x : f.nodes[m].args) reads |= chain_of[x] == c || moved.count(x) > 0;
    if (!reads) continue;
    if (chain_of[m] >= 0) return false;
    moved.insert(m);
  }
  for (int x : f.nodes[i].args)
    if (moved.count(x)) return false;
  deferred.assign(moved.begin(), moved.end());
  return true;
}

}  // namespace

std::set<int> pinned_nodes(const ir::Factor& f) {
  std::set<int> out{f.output};
  if (f.outcome >= 0) out.insert(f.outcome);
  out.insert(f.arguments.begin(), f.arguments.end());
  for (const auto& [input, adjoint] : f.input_adjoints) out.insert(adjoint);
  return out;
}

std::vector<Step> schedule(const FusionPlan& plan, int begin, int end) {
  std::vector<Step> out;
  for (int i = begin; i < end; ++i) {
    if (plan.deferred_after[i] >= 0) continue;
    if (plan.chain_of[i] < 0) out.push_back({i, -1});
    if (!plan.emits_at(i)) continue;
    out.push_back({-1, plan.chain_of[i]});
    for (int m : plan.chains[plan.chain_of[i]].deferred) out.push_back({m, -1});
  }
  return out;
}

bool FusionPlan::emits_at(int node) const {
  int c = chain_of[node];
  return c >= 0 && chains[c].nodes.back() == node;
}

bool fusable(const Node& n) {
  switch (n.op) {
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Neg:
    case Op::Pow:
    case Op::Unary:
    case Op::UnaryDerivative: return true;
    case Op::Lpdf: return scalar_distribution(n.name);
    case Op::LpdfVjp: return scalar_distribution(n.name);
    default: return false;
  }
}

bool only_feeds_products(const ir::Factor& f, int k) {
  if (k == f.output || k == f.outcome) return false;
  if (std::find(f.arguments.begin(), f.arguments.end(), k) != f.arguments.end()) return false;
  for (size_t u = 0; u < f.nodes.size(); ++u) {
    const Node& user = f.nodes[u];
    for (size_t a = 0; a < user.args.size(); ++a) {
      if (user.args[a] != k) continue;
      bool product_left = a == 0 && (user.op == Op::MatMul || user.op == Op::MatMulGradRight);
      bool rows_only = a == 0 && user.op == Op::Noise;            // reads .rows
      bool draws_only = a == 2 && user.op == Op::MatMulGradLeft;  // reads .draws
      if (!product_left && !rows_only && !draws_only && !hoisted_data(f, int(u))) return false;
    }
  }
  return true;
}

bool hoisted_data(const ir::Factor& f, int k) {
  const Node& n = f.nodes[k];
  if (n.op != Op::Unary || n.args.size() != 1) return false;
  const Node& x = f.nodes[n.args[0]];
  return x.op == Op::Data && x.batched && only_feeds_products(f, k);
}

FusionPlan plan_fusion(const ir::Factor& f, int begin, int end, const std::set<int>& pinned) {
  const int count = static_cast<int>(f.nodes.size());
  FusionPlan plan;
  plan.chain_of.assign(count, -1);
  plan.deferred_after.assign(count, -1);
  // readers[i]: the nodes that read node i.
  std::vector<std::vector<int>> readers(count);
  for (int i = 0; i < count; ++i)
    for (int a : f.nodes[i].args) readers[a].push_back(i);

  // A vjp's operands must not be broadcast to a larger shape than its own, where the unfused
  // lpdf_vjp sums the partials back down (sum_like): each operand has the node's shape or is a
  // scalar, and does not vary when the node does not.
  auto operands_fit = [&](const Node& n) {
    if (n.op != Op::LpdfVjp) return true;
    for (int a : n.args) {
      const Node& x = f.nodes[a];
      if (x.varies && !n.varies) return false;
      if (!(x.rows.equals(n.rows) && x.cols.equals(n.cols)) && !is_scalar(x)) return false;
    }
    return true;
  };

  std::vector<FusedChain> chains;
  for (int i = begin; i < end; ++i) {
    const Node& n = f.nodes[i];
    if (!fusable(n) || !operands_fit(n) || hoisted_data(f, i)) continue;
    int joined = -1;
    for (int a : n.args) {
      int c = plan.chain_of[a];
      if (c < 0 || a < begin || !same_shape(f.nodes[a], n)) continue;
      std::vector<int> deferred;
      if (can_join(f, plan.chain_of, c, chains[c].nodes.front(), i, deferred)) {
        joined = c;
        chains[c].deferred = deferred;
        break;
      }
    }
    if (joined < 0) {
      joined = static_cast<int>(chains.size());
      chains.push_back({});
    }
    chains[joined].nodes.push_back(i);
    plan.chain_of[i] = joined;
  }

  // Keep chains of two or more; find their leaves and escaping members. A single node keeps its
  // place: nothing was deferred for it.
  std::vector<int> renumber(chains.size(), -1);
  for (size_t c = 0; c < chains.size(); ++c) {
    if (chains[c].nodes.size() < 2) continue;
    for (int m : chains[c].deferred) plan.deferred_after[m] = static_cast<int>(plan.chains.size());
    renumber[c] = static_cast<int>(plan.chains.size());
    plan.chains.push_back(std::move(chains[c]));
  }
  for (int& c : plan.chain_of)
    if (c >= 0) c = renumber[c];
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    FusedChain& chain = plan.chains[c];
    for (int m : chain.nodes) {
      for (int a : f.nodes[m].args)
        if (plan.chain_of[a] != static_cast<int>(c) && std::find(chain.leaves.begin(), chain.leaves.end(), a) == chain.leaves.end())
          chain.leaves.push_back(a);
      bool escapes = pinned.count(m) > 0;
      for (int r : readers[m])
        if (plan.chain_of[r] != static_cast<int>(c)) escapes = true;
      if (escapes) chain.escaping.insert(m);
    }
  }
  return plan;
}

}  // namespace fvic::backend
