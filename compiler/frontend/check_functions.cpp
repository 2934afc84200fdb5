// The checker (checker_impl.h) on user functions: each definition checked once with unknown sizes,
// each call checked against its arguments' types and inlined (functions.h) within bounds; the
// calls a function body may not make (recursion, a function defined below); `_rng` draws.
#include "frontend/checker_impl.h"

#include <set>

#include "frontend/functions.h"
#include "fvi/kernel/random.h"

namespace fvic {
namespace check_detail {

// ---- functions -----------------------------------------------------------------------------

// Each function is checked once with its arguments' declared types and unknown sizes, then
// inlined at every call (frontend/functions.h) and checked again there with the real ones.
void Checker::check_functions(const Block& b) {
  std::set<std::string> below;
  for (const FunctionDef& f : b.functions) below.insert(f.name);
  for (const FunctionDef& f : b.functions) {
    below.erase(f.name);
    later_functions_ = below;
    if (stdlib::find_function(f.name) || stdlib::find_distribution(f.name) ||
        stdlib::find_density_function(f.name, nullptr) || stdlib::find_ode_solver(f.name)) {
      diags_.error(f.loc, "'" + f.name + "' is a built-in function", "choose another name for the function");
      continue;
    }
    if (functions_.count(f.name)) {
      diags_.error(f.loc, "the function '" + f.name + "' is defined twice",
                   "it was defined on line " + std::to_string(functions_[f.name]->loc.line) +
                       "; overloading is not supported: give each function its own name");
      continue;
    }
    if (!check_function(f)) broken_functions_.insert(f.name);
    functions_[f.name] = &f;  // after its check: a call of itself in its body is refused_call's
  }
  later_functions_.clear();
}

bool Checker::check_function(const FunctionDef& f) {
  const int errors = diags_.error_count();
  if (f.returns_void) {
    diags_.error(f.return_loc, "'" + f.name + "' returns void: functions without a value are not supported yet",
                 "fvic inlines each call's value into the kernels; return the value the caller needs");
    return false;
  }
  std::vector<const VarDecl*> locals;
  const Expr* result = nullptr;
  std::string why;
  Loc where;
  std::set<std::string> names;
  for (const FunctionArg& a : f.args)
    if (!names.insert(a.name).second)
      diags_.error(a.loc, "the argument '" + a.name + "' of '" + f.name + "' appears twice", "rename one of them");
  const bool inlinable = function_body(f, locals, result, why, where);
  if (!inlinable && (!f.body || f.body->kind != StmtKind::Block)) {
    diags_.error(where, "the body of '" + f.name + "' cannot be inlined", why);
    return false;
  }
  // The arguments in scope, their sizes unknown until a call.
  current_function_ = &f;
  scopes_.emplace_back();
  for (const FunctionArg& a : f.args) {
    Symbol sym;
    sym.name = a.name;
    sym.kind = SymbolKind::LocalVariable;
    sym.owner = Owner::Scope;
    sym.block = BlockKind::Functions;
    sym.type = a.type;
    sym.shape.dims.assign(static_cast<size_t>(a.type.rank()), SymSize::unknown());
    sym.loc = a.loc;
    scopes_.back().push_back(sym);
  }
  if (inlinable) {
    for (const VarDecl* d : locals) declare(*d);
    expr(const_cast<Expr&>(*result));
    Shape unknown;
    unknown.dims.assign(static_cast<size_t>(f.return_type.rank()), SymSize::unknown());
    check_assignable(f.return_type, unknown, *result, "the value of '" + f.name + "'", result->loc);
  } else {
    // A body of statements, checked as a block's: each `return` against the declared type
    // (function_return); `~` and `target +=` are refused as outside the model block.
    stmt(*f.body);
    if (diags_.error_count() == errors) statement_functions_.insert(f.name);
  }
  scopes_.pop_back();
  current_function_ = nullptr;
  return diags_.error_count() == errors;
}

// `return e;` in a body of statements: e against the declared return type.
void Checker::function_return(const Stmt& s) {
  if (s.args.empty()) {
    diags_.error(s.loc, "'" + current_function_->name + "' returns a value: `return` needs one",
                 "return a value of type " + to_string(current_function_->return_type));
    return;
  }
  Expr& value = *s.args[0];
  expr(value);
  Shape unknown;
  unknown.dims.assign(static_cast<size_t>(current_function_->return_type.rank()), SymSize::unknown());
  check_assignable(current_function_->return_type, unknown, value, "the value of '" + current_function_->name + "'",
                   value.loc);
}

// A call of a user function (also `foo_lpdf(y | ...)`): its arguments against the declared
// types, then its inlined body.
void Checker::user_call(Expr& e, const FunctionDef& f) {
  if (e.args.size() != f.args.size()) {
    diags_.error(e.loc, "'" + f.name + "' takes " + std::to_string(f.args.size()) + " argument" +
                            (f.args.size() == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()),
                 "it is defined on line " + std::to_string(f.loc.line));
    return;
  }
  if (any_error(e)) return;
  bool ok = true;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const Type& want = f.args[i].type;
    const Expr& a = *e.args[i];
    bool promotes = want.base == Base::Real && a.type.base == Base::Int && want.array_dims == a.type.array_dims;
    if (a.type != want && !promotes) {
      diags_.error(a.loc, "argument '" + f.args[i].name + "' of '" + f.name + "' is " + to_string(want) +
                              ", got " + to_string(a.type),
                   "pass a value of type " + to_string(want));
      ok = false;
    } else if (f.args[i].data_only && (a.taint.bits & param_bits())) {
      unsigned bits = a.taint.bits & param_bits();
      unsigned k = 0;
      while (!(bits & (1u << k))) ++k;
      diags_.error(a.loc, "argument '" + f.args[i].name + "' of '" + f.name + "' is `data`, but this reads " +
                              taint_description(static_cast<K>(k)) + " '" + a.taint.witness[k] + "'",
                   "pass data, or drop `data` from the argument's declaration");
      ok = false;
    }
  }
  if (!ok || broken_functions_.count(f.name)) return;
  if (statement_functions_.count(f.name)) {
    // Run by a statement program (its sizes known when it runs): the declared type, and what
    // the arguments carry.
    e.type = f.return_type;
    e.shape.dims.assign(static_cast<size_t>(f.return_type.rank()), SymSize::unknown());
    for (const ExprPtr& a : e.args) e.taint.merge(a->taint);
    return;
  }
  if (current_function_) {
    // Inside another function's own check: the callee was checked already; its declared type
    // is enough (the sizes are unknown there anyway), and inlining waits for a real call.
    e.type = f.return_type;
    e.shape.dims.assign(static_cast<size_t>(f.return_type.rank()), SymSize::unknown());
    return;
  }
  std::vector<const Expr*> args;
  for (const ExprPtr& a : e.args) args.push_back(a.get());
  e.inlined = inline_call(f, args);
  const ExprSize size = expr_size(*e.inlined);
  if (size.depth > kMaxInlinedDepth) {
    diags_.error(e.loc, "the value of this call of '" + f.name + "' nests " + std::to_string(size.depth) +
                            " levels deep once its functions are inlined (at most " +
                            std::to_string(kMaxInlinedDepth) + ")",
                 "compute the inner values as local variables first");
    e.inlined.reset();
    return;
  }
  inlined_nodes_ += size.nodes;
  if (inlined_nodes_ > kMaxInlinedNodes) {
    if (!inlining_reported_)
      diags_.error(e.loc, "inlining the calls of user functions makes the model over " +
                              std::to_string(kMaxInlinedNodes) + " expression nodes",
                   "a function that calls another several times multiplies its size; compute a shared value "
                   "once as a local variable and pass it");
    inlining_reported_ = true;
    e.inlined.reset();
    return;
  }
  if (inline_nesting_ >= kMaxInlineNesting) {
    if (!inlining_reported_)
      diags_.error(e.loc, "calls of user functions nest more than " + std::to_string(kMaxInlineNesting) +
                              " deep (each inlined into the one that calls it)",
                   "fewer layers of functions that each call the next");
    inlining_reported_ = true;
    e.inlined.reset();
    return;
  }
  ++inline_nesting_;
  expr(*e.inlined);
  --inline_nesting_;
  if (e.inlined->type.is_error()) return;
  e.type = f.return_type;
  e.shape = e.inlined->shape;
  e.taint = e.inlined->taint;
}

// A call inside a function body of itself or of a function defined below it.
bool Checker::refused_call(const Expr& e) {
  if (!current_function_) return false;
  if (e.name == current_function_->name) {
    diags_.error(e.loc, "'" + e.name + "' calls itself: recursion is not supported",
                 "fvic inlines every call into straight-line kernels, so a function cannot call itself; "
                 "write the computation without recursion");
    return true;
  }
  if (later_functions_.count(e.name)) {
    diags_.error(e.loc, "'" + e.name + "' is defined below '" + current_function_->name + "'",
                 "a function may call only the functions defined above it (so no call can recurse); "
                 "move '" + e.name + "' up");
    return true;
  }
  return false;
}

// `normal_rng(...)`: a random draw, which only generated quantities may make (the log density
// must be a function of the parameters).
bool Checker::random_call(Expr& e) {
  const std::string suffix = "_rng";
  if (e.name.size() <= suffix.size() || e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string base = e.name.substr(0, e.name.size() - suffix.size());
  const stdlib::Distribution* dist = stdlib::find_distribution(base);
  if (!dist) return false;
  if (block_ != BlockKind::GeneratedQuantities) {
    diags_.error(e.loc, "'" + e.name + "' draws a random number: only 'generated quantities' may call it",
                 std::string("'") + block_name(block_) + "' must compute the same value every time it is "
                 "evaluated; draw replicates in a `generated quantities` block");
    return true;
  }
  if (!fvi::kernel::has_random_draws(base)) {
    diags_.error(e.loc, "random draws of " + base + " are not supported yet",
                 "_rng is available for normal, student_t, lognormal, cauchy, logistic, double_exponential, "
                 "exponential, gamma, inv_gamma, chi_square, inv_chi_square, scaled_inv_chi_square, beta, "
                 "beta_proportion, weibull, frechet, gumbel, pareto, pareto_type_2, rayleigh, uniform, bernoulli, "
                 "bernoulli_logit, poisson, poisson_log, binomial, binomial_logit, neg_binomial, neg_binomial_2, "
                 "neg_binomial_2_log, beta_binomial, categorical, categorical_logit, ordered_logistic, ordered_probit, "
                 "multi_normal and "
                 "multi_normal_cholesky");
    return true;
  }
  if (e.args.size() != dist->params.size()) {
    diags_.error(e.loc, e.name + " takes " + std::to_string(dist->params.size()) + " argument" +
                            (dist->params.size() == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()),
                 "pass the distribution's parameters, as after '~'");
    return true;
  }
  if (any_error(e)) return true;
  if (base == "multi_normal" || base == "multi_normal_cholesky") {  // a vector per mean vector
    const Type &mu = e.args[0]->type, &scale = e.args[1]->type;
    const bool vector_mean = mu.base == Base::Vector && mu.array_dims <= 1;
    if (!vector_mean || !(scale.base == Base::Matrix && scale.array_dims == 0)) {
      diags_.error(e.loc, e.name + " takes a vector (or an array of vectors) and a matrix, not (" + to_string(mu) +
                              ", " + to_string(scale) + ")",
                   "draw with `" + e.name + "(mu, " + (base == "multi_normal" ? "Sigma" : "L") + ")`");
      return true;
    }
    require_equal(e.args[0]->shape.dims.back(), e.args[1]->shape.dims[0], e.args[1]->loc,
                  "the mean's length and the covariance's rows in " + e.name);
    e.type = mu;
    e.shape = e.args[0]->shape;
    return true;
  }
  if (base == "categorical_logit") {  // one vector of logits: one category
    const Type& t = e.args[0]->type;
    if (!(t.array_dims == 0 && t.base == Base::Vector)) {
      diags_.error(e.args[0]->loc, e.name + " takes one vector of logits, not " + to_string(t),
                   "draw one category from a vector: `categorical_logit_rng(beta)`, `categorical_rng(theta)`");
      return true;
    }
    e.type = Type{Base::Int, 0};
    return true;
  }
  if (stdlib::ordinal_density(base)) {  // one eta and the cutpoints: one category
    const Type &eta = e.args[0]->type, &c = e.args[1]->type;
    if (!eta.is_scalar() || !(c.array_dims == 0 && c.base == Base::Vector)) {
      diags_.error(e.loc, e.name + " takes a real eta and a vector of cutpoints, not (" + to_string(eta) + ", " +
                              to_string(c) + ")",
                   "draw one category: `" + e.name + "(x[n] * beta, c)`");
      return true;
    }
    e.type = Type{Base::Int, 0};
    return true;
  }
  // Vectorised as in Stan: scalars, or vectors / 1-D arrays of one length, give one draw each.
  const Expr* container = nullptr;
  for (const ExprPtr& a : e.args) {
    const bool one_d = (a->type.array_dims == 0 && (a->type.base == Base::Vector || a->type.base == Base::RowVector)) ||
                       (a->type.array_dims == 1 && a->type.base_dims() == 0);
    if (!a->type.is_scalar() && !one_d) {
      diags_.error(a->loc, "an argument of " + e.name + " must be a scalar, a vector or a 1-D array, not " +
                               to_string(a->type),
                   "draw a matrix's replicates from to_vector(...)");
      return true;
    }
    if (one_d) {
      if (container) require_equal(container->shape.dims[0], a->shape.dims[0], a->loc, "the arguments of " + e.name);
      else container = a.get();
    }
  }
  e.type = Type{dist->discrete ? Base::Int : Base::Real, container ? 1 : 0};
  if (container) e.shape.dims = {container->shape.dims[0]};
  return true;
}

}  // namespace check_detail
}  // namespace fvic
