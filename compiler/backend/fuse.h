#pragma once
// Fusion planning, for every backend: which elementwise nodes of a factor's pass are computed
// together in one loop (runtime/include/fvi/kernel/fused.h): a generated loop in the C++ backend,
// an interpreted one in the graph backend, a compiled one in the LLVM backend.
//
// A chain is a set of elementwise nodes of one shape (rows, cols and draws as the IR knows them)
// in one pass (forward or backward). Each member after the first reads at least one earlier
// member; the chain is emitted where its last member stood, and the nodes between its first and
// last members that read a member (a sum of one, say) move after it, unless a member reads them
// (then the node does not join). A member read by anything
// outside the chain (another node, the other pass, the output, the arguments, the gradients) is
// written to memory; the others live only in a block of cache.
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace fvic::backend {

struct FusedChain {
  std::vector<int> nodes;   // members, in node order
  std::vector<int> leaves;  // nodes read by members and not members, in first-use order
  std::set<int> escaping;   // members read outside the chain
  std::vector<int> deferred;  // nodes between the members, emitted after the chain
};

struct FusionPlan {
  std::vector<FusedChain> chains;     // each with at least two members
  std::vector<int> chain_of;          // node -> its chain, or -1
  std::vector<int> deferred_after;    // node -> the chain it is emitted after, or -1
  bool emits_at(int node) const;      // whether node is the last member of its chain
};

// The nodes generated code reads outside f's node list: the output, the outcome, the arguments
// and the input adjoints. A chain writes these to memory.
std::set<int> pinned_nodes(const ir::Factor& f);

// Chains of nodes [begin, end) of f.
FusionPlan plan_fusion(const ir::Factor& f, int begin, int end, const std::set<int>& pinned);

// The order of the generated statements of nodes [begin, end): each step is one node's
// statement or one chain's loop (emitted where its last member stood, its deferred nodes after it).
struct Step {
  int node = -1;   // a node outside every chain
  int chain = -1;  // or a chain of plan.chains
};
std::vector<Step> schedule(const FusionPlan& plan, int begin, int end);

// Whether node n can be a member of a chain.
bool fusable(const ir::Node& n);

// Whether node k's value is only the left operand of products (or gives a noise its rows, a
// gradient its draws), and not the output, the outcome or an argument: a minibatch of it can be
// read in place as a block of rows. Hoisted data transforms of it do not count (they read the
// bound data when it is bound).
bool only_feeds_products(const ir::Factor& f, int k);

// Whether node k of f is a data transform the kernel computes once, when its data are bound: an
// elementwise function of a batched data matrix (square(x) of local reparameterisation) that
// only feeds products. Its minibatch is then read in place from the bound transform, like data's.
bool hoisted_data(const ir::Factor& f, int k);

}  // namespace fvic::backend
