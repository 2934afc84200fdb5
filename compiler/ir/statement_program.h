#pragma once
// Statements that lowering cannot vectorise — a recursion over time (`err[t] = y[t] - nu[t]` with
// nu[t] reading err[t - 1]), nested loops filling a local, a density per element inside an `if`
// on the data — translated into a statement program (fvi/kernel/bytecode.h) that the kernels'
// machine runs one statement at a time on all draws at once and differentiates by its tape. The
// program is one IR node (Op::Program) whose operands are the variables it reads; lowering
// (ir/lower.cpp) uses it where its own vectorised forms refuse a block.
#include <string>
#include <vector>

#include "frontend/diagnostics.h"
#include "frontend/semantic.h"
#include "fvi/kernel/bytecode.h"

namespace fvic::ir {

struct StatementProgram {
  fvi::kernel::Program code;
  std::vector<std::string> operands;  // the variables it reads: operand k is operands[k]
  std::vector<std::string> outputs;   // the declarations it outputs, in Output order
};

// Translates `stmts` (a block's statements, in order). With log_density, the program's result is
// the sum of its `~` and `target +=` terms; otherwise it outputs the final value of each name of
// `outputs` (declarations among the statements). Reports what it cannot translate, located, and
// returns false then.
bool compile_statements(const SemanticModel& model, const std::vector<const Stmt*>& stmts, bool log_density,
                        const std::vector<std::string>& outputs, StatementProgram& out, Diagnostics& diags);

}  // namespace fvic::ir
