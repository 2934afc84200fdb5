#pragma once
// User functions (`functions { ... }`), inlined: the kernels are straight-line tensor code, so a
// call becomes its body's value with the arguments substituted, which the checker then checks
// like any expression and the IR lowers like any other (DESIGN.md §6b). A body is declarations
// with values and one final `return`; a function may call only the functions defined above it,
// so no call can recurse and every inlining is bounded by the number of functions.
#include <map>
#include <string>
#include <vector>

#include "frontend/ast.h"

namespace fvic {

// The body's shape: its declarations (in order) and its returned expression. False, with `why`
// and the statement's location, when the body is not of the inlinable form.
bool function_body(const FunctionDef& f, std::vector<const VarDecl*>& locals, const Expr*& result,
                   std::string& why, Loc& where);

// A deep copy of `e` in which each variable named in `bindings` is replaced by a copy of its
// binding (bindings are not substituted into again). Checker annotations are not copied.
ExprPtr substitute(const Expr& e, const std::map<std::string, const Expr*>& bindings);

// The value of `f` called with `args`: the returned expression with the body's declarations and
// the arguments substituted. Every node keeps its location in the body.
ExprPtr inline_call(const FunctionDef& f, const std::vector<const Expr*>& args);

// An expression's nodes and depth (the inlining budgets: nested calls multiply sizes, and the
// checker and lowering recurse once per level).
struct ExprSize {
  long long nodes = 0;
  long long depth = 0;
};
ExprSize expr_size(const Expr& e);

// `y ~ foo(a, b)` where `foo` is no built-in distribution and the program defines `foo_lpdf` or
// `foo_lpmf`: rewritten as `target += foo_lpdf(y | a, b);` (Stan's meaning of `~`).
void desugar_user_densities(Program& program);

}  // namespace fvic
