#include "transform/dead_code.h"

#include <algorithm>

namespace fvic::transform {

void eliminate_dead_code(ir::Factor& f) {
  int n = f.forward_end;
  std::vector<bool> live(n, false);
  std::vector<int> roots{f.output, f.outcome};
  roots.insert(roots.end(), f.arguments.begin(), f.arguments.end());
  for (int r : roots)
    if (r >= 0) live[r] = true;
  for (int i = n - 1; i >= 0; --i)
    if (live[i])
      for (int a : f.nodes[i].args) live[a] = true;
  std::vector<int> renumber(n, -1);
  std::vector<ir::Node> kept;
  for (int i = 0; i < n; ++i) {
    if (!live[i]) continue;
    renumber[i] = static_cast<int>(kept.size());
    ir::Node node = f.nodes[i];
    for (int& a : node.args) a = renumber[a];
    kept.push_back(std::move(node));
  }
  auto remap = [&](int& id) {
    if (id >= 0) id = renumber[id];
  };
  remap(f.output);
  remap(f.outcome);
  for (int& a : f.arguments) remap(a);
  f.nodes = std::move(kept);
  f.forward_end = static_cast<int>(f.nodes.size());
  // The groups and data the factor still reads, in order of first use.
  f.groups.clear();
  f.data.clear();
  for (const ir::Node& node : f.nodes) {
    if (node.op == ir::Op::Input && std::find(f.groups.begin(), f.groups.end(), node.group) == f.groups.end())
      f.groups.push_back(node.group);
    bool reads_data = (node.op == ir::Op::Data || node.op == ir::Op::Index) && !node.name.empty();
    if (reads_data && std::find(f.data.begin(), f.data.end(), node.name) == f.data.end()) f.data.push_back(node.name);
  }
}

void eliminate_dead_code(ir::Module& module) {
  for (ir::Factor& f : module.factors) eliminate_dead_code(f);
  for (ir::Factor& q : module.quantities) eliminate_dead_code(q);
}

}  // namespace fvic::transform
