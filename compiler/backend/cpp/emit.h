#pragma once
// The C++ backend: one readable source file per model. Each factor becomes a class whose
// forward() and backward() are the IR's nodes in order, one fvi::kernel call per line, and the
// file ends with the model's C ABI table (runtime/include/fvi/kernel/abi.h, docs/kernel-abi.md):
//   extern "C" const fvi_model* fvi_model_<name>(void);
// and, when compiled with -DFVI_MODEL_ENTRY, the same table as `fvi_model_entry`.
#include <string>

#include "ir/ir.h"

namespace fvic::backend {

// Fails (returns false, reporting through `diags`) on a size the C++ cannot spell.
bool emit_cpp(const ir::Module& module, const SemanticModel& model, std::string& out, Diagnostics& diags);

}  // namespace fvic::backend
