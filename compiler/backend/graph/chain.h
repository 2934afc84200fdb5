#pragma once
// The fusion plan (backend/fuse.h) as the graph backend runs it: each factor's
// passes as steps (a node, or a fused chain of elementwise nodes run block by block), planned once
// per model. A chain may carry machine code for its block (backend/llvm/: the JIT); without it the
// graph factor interprets the members (graph_factor.cpp run_block).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/fuse.h"
#include "fvi/kernel/ops_unary.h"
#include "ir/ir.h"

namespace fvic::backend::graph {

// A fused chain: its leaves and the members written to memory, and each member's operation with
// its operands (a leaf, or an earlier member, by position).
struct Chain {
  struct Operand {
    bool member;
    int at;
  };
  struct Member {
    ir::Op op;
    std::string name;  // the unary function or distribution
    fvi::kernel::UnaryFn fn{};
    int k = 0;         // LpdfVjp: the operand differentiated
    std::vector<Operand> operands;
  };
  std::vector<int> leaves, outs;  // node numbers: read, and written to memory (escaping members)
  std::vector<int> out_of_node;   // per member: its place in outs, or -1 (a block of scratch)
  std::vector<Member> members;

  // One block of n elements: leaves[l][i] read, nodes[m][i] written for every member m that
  // escapes (a member that does not may be left unwritten). Compiled by the JIT, for each type.
  using BlockDouble = void (*)(long long n, const double* const* leaves, double* const* nodes);
  using BlockFloat = void (*)(long long n, const float* const* leaves, float* const* nodes);
  BlockDouble code_double = nullptr;
  BlockFloat code_float = nullptr;

  Chain(const ir::Factor& f, const FusedChain& c);
};

// Nodes [begin, end) of a factor in the generated code's order (fuse.h schedule).
struct Section {
  std::vector<Step> steps;
  std::vector<Chain> chains;
  Section() = default;
  Section(const ir::Factor& f, int begin, int end, const std::set<int>& pinned);
};

// A factor's forward and backward nodes.
struct PassPlan {
  Section forward, backward;
  PassPlan() = default;
  explicit PassPlan(const ir::Factor& f);
};

// Factor i of a module (a quantity: factors.size() + i): its draws pass and, for a factor, its
// mean-field variant's.
struct FactorPlan {
  PassPlan draws, meanfield;
};
std::vector<FactorPlan> plan_factors(const ir::Module& m);

// Every chain of the plans (each factor's passes, forward and backward), in one fixed order.
std::vector<Chain*> all_chains(std::vector<FactorPlan>& plans);

// What turns the chains' members into machine code (backend/llvm/chain_jit.h). compile() sets
// every chain's code_double and code_float, and returns what must live as long as that code.
class ChainCompiler {
 public:
  virtual ~ChainCompiler() = default;
  virtual std::shared_ptr<void> compile(std::vector<FactorPlan>& plans) const = 0;
};

}  // namespace fvic::backend::graph
