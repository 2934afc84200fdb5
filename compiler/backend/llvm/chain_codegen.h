#pragma once
// The LLVM backend's code generator: one fused chain (backend/graph/chain.h) as an LLVM function
// of one scalar type, `void NAME(int64 n, const T* const* leaves, T* const* nodes)`, the body of
// the chain's block loop. Runs of members with an inline form are one loop over the block's
// elements whose values stay in registers; the others call the runtime's block functions
// (runtime_calls.h), the members they read stored first; a member is stored when it escapes the
// chain or a call or a later loop reads it. chain_jit.cpp optimises and compiles the module.
#include <string>

#include "backend/graph/chain.h"

namespace llvm {
class Module;
}

namespace fvic::backend::llvm_jit {

struct EmitCounts {
  int inline_members = 0;   // computed in the generated loops
  int runtime_members = 0;  // through the runtime's block functions
};

// Adds chain `chain`'s function called `name` to `module`, in double or in float.
EmitCounts emit_chain(llvm::Module& module, const graph::Chain& chain, bool is_double, const std::string& name);

}  // namespace fvic::backend::llvm_jit
