#pragma once
// Dead-code elimination on a factor's forward nodes: removes what no output reads — e.g. the
// log-Jacobian of a global computed while lowering a silo's local prior, which belongs to the
// server's factor. Run after lowering, before the mean-field variants and the adjoint pass
// (pipeline.h); the module's version covers its factors and its quantities.
#include "ir/ir.h"

namespace fvic::transform {

void eliminate_dead_code(ir::Factor& factor);
void eliminate_dead_code(ir::Module& module);

}  // namespace fvic::transform
