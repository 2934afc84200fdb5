#pragma once
// The kernel tables a kernel benchmark times side by side, in one run: the model's generated C++
// (linked into the benchmark), and the graph backend's table built from the same .fvi file at start
// (compiler/backend/graph/graph_model.h: the same kernel operations and fused loops), its loops
// interpreted per block or compiled by the LLVM backend (compiler/backend/llvm/chain_jit.h).
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "generic/compiled_model.h"

namespace bench {

struct KernelTables {
  std::optional<fvic::generic::CompiledModel> compiled, jit;  // own the graph tables
  std::vector<std::pair<const char*, const fvi_model*>> tables;
};

// `generated` and the graph table of examples/acceptance/NAME.fvi (FVI_SOURCE_DIR).
inline KernelTables kernel_tables(const fvi_model* generated, const std::string& model_file) {
  KernelTables k;
  k.compiled = fvic::generic::compile_model(model_file, "bench", std::cerr, false);
  k.jit = fvic::generic::compile_model(model_file, "bench", std::cerr, true);
  if (!k.compiled || !k.jit) std::exit(1);
  k.tables = {{"generated C++", generated},
              {"graph backend", &k.compiled->graph->table()},
              {"LLVM backend", &k.jit->graph->table()}};
  return k;
}

}  // namespace bench
