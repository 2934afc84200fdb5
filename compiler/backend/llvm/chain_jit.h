#pragma once
// The LLVM backend: every fused chain of a graph model (backend/graph/chain.h) lowered to an LLVM
// function per scalar type, optimised by LLVM's pass pipeline (loop vectorisation on, the host's
// CPU), and compiled in memory by ORC's LLJIT. The block loops, matrix products and everything
// outside the chains stay the graph backend's calls into the runtime; a chain's block becomes
// one loop whose members live in registers, only the members read outside the chain stored.
// Members with no inline form (lgamma, digamma, most log densities) call the runtime's block
// functions, the graph backend's own.
#include <memory>
#include <string>
#include <vector>

#include "backend/graph/chain.h"

namespace fvic::backend::llvm_jit {

// What one compile() did, for `fvic run`'s header and the bench.
struct JitStatistics {
  int chains = 0;             // chains compiled (each in both scalar types)
  int inline_members = 0;     // members computed in the generated loop
  int runtime_members = 0;    // members that call the runtime's block functions
  double seconds = 0;         // generation, optimisation and machine code, wall
};

class LlvmChainCompiler final : public graph::ChainCompiler {
 public:
  std::shared_ptr<void> compile(std::vector<graph::FactorPlan>& plans) const override;
  const JitStatistics& statistics() const { return statistics_; }

 private:
  mutable JitStatistics statistics_;
};

// What a program prints when a graph model's compiler failed (GraphModel::jit_error): the model
// still runs, its loops interpreted.
inline std::string interpreted_warning(const std::string& why) {
  return "warning: the LLVM backend could not compile the model's loops (" + why +
         "); they run interpreted, as with --backend graph\n";
}

}  // namespace fvic::backend::llvm_jit
