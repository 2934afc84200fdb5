#pragma once
// The graph backend: a model's kernel-ABI table (runtime/include/fvi/kernel/abi.h) built in memory
// from its IR, with no C++ compiler run. Its factors make the calls the C++ backend writes, in its
// order, on the runtime's kernel operations, and run its fused chains as block loops that
// interpret their members (graph_factor.h): the same values bit for bit at the same speed, so
// the engines, NAME-sim's driver and every output see the same model either way. Given a
// ChainCompiler (the LLVM backend, backend/llvm/chain_jit.h) its chains run as machine code
// instead, to rounding. `fvic run` and the generic programs (`fvi-sim MODEL.fvi`, fvi-server,
// fvi-client) run it, compiled by default.
//
// The ABI's create() takes no model, so each live GraphModel holds one of kSlots slots whose
// entry points know it; a process may hold that many at once.
#include <memory>
#include <string>
#include <vector>

#include "backend/abi_description.h"
#include "backend/graph/graph_factor.h"
#include "frontend/semantic.h"
#include "ir/ir.h"

namespace fvic::backend::graph {

class GraphModel {
 public:
  static constexpr int kSlots = 16;

  // Throws std::runtime_error when all slots are taken. With a compiler (the LLVM backend), every
  // fused chain runs as machine code; without, or when the compiler fails (jit_error() says why),
  // its members are interpreted block by block: the same model either way.
  GraphModel(ir::Module module, const SemanticModel& model, const ChainCompiler* compiler = nullptr);
  ~GraphModel();
  GraphModel(const GraphModel&) = delete;
  GraphModel& operator=(const GraphModel&) = delete;

  const fvi_model& table() const { return table_; }
  const ModelShapes& shapes() const { return shapes_; }
  // Why the compiler given could not compile the chains ("" when it did, or none was given).
  const std::string& jit_error() const { return jit_error_; }

 private:
  void build_table();

  ir::Module module_;
  ModelShapes shapes_;
  std::shared_ptr<void> code_;  // the compiler's, while the chains' code is in use
  std::string jit_error_;
  int slot_ = -1;
  // What the table points into.
  std::vector<VariableDescription> variable_descriptions_;
  std::vector<QuantityDescription> quantity_descriptions_;
  DataTableDescription data_description_;
  std::vector<int> group_kinds_, group_varies_;
  std::vector<std::vector<int>> factor_groups_;
  std::vector<fvi_factor_info> factors_;
  std::vector<fvi_variable_info> variables_;
  std::vector<fvi_quantity_info> quantities_;
  std::vector<std::vector<const char*>> data_dims_;
  std::vector<std::vector<const char*>> centring_more_data_;  // each variable's, into variable_descriptions_
  std::vector<fvi_data_declaration> data_declarations_;
  std::vector<fvi_size_check> size_checks_;
  fvi_data_table data_table_{};
  fvi_sparse_gp sparse_gp_{};
  fvi_model table_{};

  friend struct SlotAccess;
};

}  // namespace fvic::backend::graph
