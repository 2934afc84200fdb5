#pragma once
// Reverse-mode differentiation as an IR pass (Taichi's make_adjoint, done at compile time): for
// each factor, appends the nodes that compute the vector-Jacobian product of its outputs with
// respect to every input group it reads. The caller supplies the output's adjoint as a Seed node
// (for a likelihood, also one per distribution argument, so a robust loss computed from the
// arguments can be chained through); each Input node gets its adjoint in input_adjoints.
#include "ir/ir.h"

namespace fvic::transform {

void make_adjoint(ir::Factor& factor);
void make_adjoints(ir::Module& module);

}  // namespace fvic::transform
