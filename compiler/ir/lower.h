#pragma once
// Lowering: checked AST -> IR factors (ir.h). The log joint is split by who evaluates each term
// (the checker's TermOwner): one density factor per party kind (priors, their log-Jacobians and
// `target +=`), one likelihood factor per likelihood statement, and for vertical models one
// contribution factor per silo_sum operand, whose sum reaches the coupling likelihood as the
// input group `z_sum`. Each parameter's log-Jacobian is added once, in the density factor of
// its own party — never once per silo for a global; hyperparameters (point estimates) have none.
// Lowering only builds the factors: dead code, mean-field variants and adjoints are later passes
// (pipeline.h runs them in order).
#include "frontend/diagnostics.h"
#include "frontend/semantic.h"
#include "ir/ir.h"

namespace fvic::ir {

// Reports constructs the code generator does not handle yet; returns false if it did.
bool lower(const SemanticModel& model, Module& module, Diagnostics& diags);

}  // namespace fvic::ir
