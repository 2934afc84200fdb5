#pragma once
// The runtime's block functions the LLVM backend's chains call for members with no inline form
// (chain_codegen.cpp emit_call): the graph backend's own (fvi/kernel/fused.h), behind C signatures.
// Each name takes the suffix _d (double) or _f (float).
#include <string>
#include <vector>

namespace fvic::backend::llvm_jit {

inline const std::string kUnaryBlock = "fvi_jit_unary";                       // (fn, x, n, out)
inline const std::string kUnaryDerivativeBlock = "fvi_jit_unary_derivative";  // (fn, x, y, n, out)
inline const std::string kLpdfBlock = "fvi_jit_lpdf";                         // (member, xs, count, n, out)
inline const std::string kLpdfVjpBlock = "fvi_jit_lpdf_vjp";                  // (member, g, xs, count, n, out)

struct RuntimeCall {
  std::string name;
  void* address;
};
// Every function above in both types, for the JIT's symbol table.
std::vector<RuntimeCall> runtime_calls();

}  // namespace fvic::backend::llvm_jit
