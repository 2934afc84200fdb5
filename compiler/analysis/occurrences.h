#pragma once
// Where a variable is read in the blocks that define the log density: the counts the analyses
// of a global's uses (class_shift.h, centring.h) compare, to prove that a variable is read only in
// the forms they recognise.
#include <string>

#include "frontend/semantic.h"

namespace fvic {

bool is_var(const Expr* e, const std::string& name);
// `0` or `0.0` as written.
bool is_zero_literal(const Expr* e);

// Occurrences of variable `name` in an expression or a statement, through inlined user functions
// (bounded by the expression's own depth, which the parser bounds).
int count_in(const Expr* e, const std::string& name);
int count_in(const Stmt& st, const std::string& name);

// Occurrences of `name` in the transformed parameters and the model block.
int uses_in_log_density(const SemanticModel& m, const std::string& name);

// Whether `e` reads a random parameter's value (a hyperparameter is a point estimate: one value
// at every draw, so it does not count).
bool reads_parameters(const Expr* e);

}  // namespace fvic
