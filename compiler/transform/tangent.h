#pragma once
// Forward-mode differentiation as an IR pass: the Jacobian-vector product of a factor's outputs
// with respect to one input group, in the direction the caller binds as that group's tangent
// (ir::Bindings::tangents). Seed 001's function-space priors need it: the linearised network's
// N(f(X; m), J Sigma J') is sampled as f(X; m) + J (eps .* sd), J never formed. The pass returns
// a new factor: the forward nodes, then one tangent node per forward node that depends on the
// group, its output and arguments the tangents of the factor's (an input the group does not reach
// has tangent 0). Throws std::invalid_argument naming an operation it has no JVP for yet.
#include "ir/ir.h"

namespace fvic::transform {

ir::Factor make_tangent(const ir::Factor& factor, fvi_group group);

}  // namespace fvic::transform
