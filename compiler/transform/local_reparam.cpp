#include "transform/local_reparam.h"

#include <algorithm>

namespace fvic::transform {

using ir::Node;
using ir::Op;

ir::Factor meanfield_variant(const ir::Module& module, size_t index) {
  const ir::Factor& f = module.factors[index];
  const int n = f.forward_end;
  std::vector<int> uses(n, 0);
  for (int i = 0; i < n; ++i)
    for (int a : f.nodes[i].args) ++uses[a];
  for (int root : {f.output, f.outcome})
    if (root >= 0) ++uses[root];
  for (int a : f.arguments) ++uses[a];

  // Eligible products and the Input each one consumes.
  std::vector<bool> product(n, false), consumed(n, false);
  for (int i = 0; i < n; ++i) {
    const Node& m = f.nodes[i];
    if (m.op != Op::MatMul) continue;
    const Node &x = f.nodes[m.args[0]], &w = f.nodes[m.args[1]];
    const ir::Group* g = w.op == Op::Input ? module.group(w.group) : nullptr;
    if (x.active || x.varies || !g || !g->varies || uses[m.args[1]] != 1) continue;
    product[i] = consumed[m.args[1]] = true;
  }

  ir::Factor v = f;
  v.nodes.clear();
  v.seeds.clear();
  v.input_adjoints.clear();
  std::vector<int> renumber(n, -1);
  auto add = [&](Node node) {
    v.nodes.push_back(std::move(node));
    return static_cast<int>(v.nodes.size()) - 1;
  };
  auto make = [&](Op op, std::vector<int> args, const SymSize& rows, const SymSize& cols, bool varies, bool active,
                  const std::string& name = "") {
    Node node{op};
    node.args = std::move(args);
    node.rows = rows;
    node.cols = cols;
    node.varies = varies;
    node.active = active;
    node.name = name;
    return add(node);
  };
  int streams = 0;
  for (int i = 0; i < n; ++i) {
    if (consumed[i]) continue;
    const Node& old = f.nodes[i];
    if (!product[i]) {
      Node copy = old;
      for (int& a : copy.args) a = renumber[a];
      renumber[i] = add(copy);
      continue;
    }
    const Node& w = f.nodes[old.args[1]];
    const int x = renumber[old.args[0]];
    // x's shape by value: add() appends to v.nodes and may reallocate it, so a reference into
    // v.nodes held across the adds below would be read after it was freed (found by ASan).
    const SymSize x_rows = v.nodes[x].rows, x_cols = v.nodes[x].cols;
    auto leaf = [&](Op op) {
      Node l{op};
      l.group = w.group;
      l.offset = w.offset;
      l.rows = w.rows;
      l.cols = w.cols;
      l.active = true;
      return add(l);
    };
    int mean = leaf(Op::Mean), sd = leaf(Op::Sd);
    int location = make(Op::MatMul, {x, mean}, old.rows, old.cols, false, true);
    int x2 = make(Op::Unary, {x}, x_rows, x_cols, false, false, "square");
    int sd2 = make(Op::Unary, {sd}, w.rows, w.cols, false, true, "square");
    int variance = make(Op::MatMul, {x2, sd2}, old.rows, old.cols, false, true);
    int scale = make(Op::Unary, {variance}, old.rows, old.cols, false, true, "safe_sqrt");
    Node eps{Op::Noise};
    eps.args = {x};
    eps.rows = old.rows;
    eps.cols = old.cols;
    eps.varies = true;
    // Rows of a likelihood's observations follow the minibatch; the noise of row r is the same
    // whatever the batch (fvi/kernel/noise.h).
    eps.batched = (f.kind == ir::FactorKind::Likelihood || f.kind == ir::FactorKind::Contribution) && old.rows.equals(f.rows);
    eps.k = static_cast<int>(((index + 1) << 16) | static_cast<size_t>(streams++));
    eps.ints = {old.args[0], old.args[1]};
    int noise = add(eps);
    int spread = make(Op::Mul, {scale, noise}, old.rows, old.cols, true, true);
    renumber[i] = make(Op::Add, {location, spread}, old.rows, old.cols, true, true);
  }
  auto remap = [&](int& id) {
    if (id >= 0) id = renumber[id];
  };
  remap(v.output);
  remap(v.outcome);
  for (int& a : v.arguments) remap(a);
  v.forward_end = static_cast<int>(v.nodes.size());
  return v;
}

void make_meanfield_variants(ir::Module& module) {
  module.meanfield.clear();
  for (size_t i = 0; i < module.factors.size(); ++i) module.meanfield.push_back(meanfield_variant(module, i));
}

}  // namespace fvic::transform
