// The checker (checker_impl.h) on statements: the model block and the derived blocks' statements,
// loops, conditions, assignments, and the size equalities that assignments and operands require.
#include "frontend/checker_impl.h"

namespace fvic {
namespace check_detail {

// ---- model block ---------------------------------------------------------------------------

void Checker::check_model(const Block& b) {
  scopes_.emplace_back();
  for (const StmtPtr& s : b.stmts) stmt(*s);
  scopes_.pop_back();
}

void Checker::stmt(const Stmt& s) {
  if (block_ != BlockKind::Model && (s.kind == StmtKind::Tilde || s.kind == StmtKind::Target)) {
    diags_.error(s.loc, std::string(s.kind == StmtKind::Tilde ? "'~'" : "'target +='") + " is not allowed in '" +
                            block_name(block_) + "'",
                 "the log density is written in the model block; '" + std::string(block_name(block_)) +
                     "' computes values");
    return;
  }
  switch (s.kind) {
    case StmtKind::Tilde: tilde(s); break;
    case StmtKind::Target: target(s); break;
    case StmtKind::Assign: assign(s); break;
    case StmtKind::For: for_loop(s); break;
    case StmtKind::If: if_stmt(s); break;
    case StmtKind::Block:
      scopes_.emplace_back();
      for (const StmtPtr& b : s.body) stmt(*b);
      scopes_.pop_back();
      break;
    case StmtKind::Decl: declare(*s.decl); break;
    case StmtKind::Return:
      if (current_function_) {
        function_return(s);
        break;
      }
      diags_.error(s.loc, "'return' outside a function", block_ == BlockKind::Model
                                                             ? "the model block adds to the log density with "
                                                               "`~` and `target +=`"
                                                             : "a block's values are its declarations");
      break;
    case StmtKind::Empty: break;
  }
}

// What decides whether and how often a statement runs: its ifs' conditions and its loops' bounds
// (a term repeated N times reads N).
Taint Checker::context_taint() const {
  Taint t;
  for (const Taint& c : context_) t.merge(c);
  for (const Stmt* loop : loops_)
    for (const ExprPtr& bound : loop->args) t.merge(bound->taint);
  return t;
}

void Checker::for_loop(const Stmt& s) {
  for (const ExprPtr& bound : s.args) {
    expr(*bound);
    if (!bound->type.is_error() && !bound->type.is_int())
      diags_.error(bound->loc, "a loop bound must be an int, not " + to_string(bound->type),
                   "write `for (i in 1:N)` with int bounds");
  }
  if (const Symbol* hidden = lookup(s.name))
    diags_.error(s.name_loc, "the loop variable '" + s.name + "' hides another variable",
                 "'" + s.name + "' is declared on line " + std::to_string(hidden->loc.line) +
                     "; choose another name for the loop variable");
  Symbol var;
  var.name = s.name;
  var.kind = SymbolKind::LoopVariable;
  var.owner = Owner::Scope;
  var.block = BlockKind::Model;
  var.type = scalar(Base::Int);
  var.loc = s.name_loc;
  var.taint.merge(s.args[0]->taint);
  var.taint.merge(s.args[1]->taint);
  scopes_.emplace_back();
  scopes_.back().push_back(var);
  loops_.push_back(&s);
  stmt(*s.body[0]);
  loops_.pop_back();
  scopes_.pop_back();
}

void Checker::if_stmt(const Stmt& s) {
  Expr& cond = *s.args[0];
  expr(cond);
  if (!cond.type.is_error() && !cond.type.is_scalar())
    diags_.error(cond.loc, "a condition must be an int or real, not " + to_string(cond.type),
                 "compare scalars, e.g. `if (N > 0)`");
  context_.push_back(cond.taint);
  for (const StmtPtr& b : s.body) stmt(*b);
  context_.pop_back();
}

void Checker::assign(const Stmt& s) {
  Expr& lhs = *s.lhs;
  Expr& rhs = *s.args[0];
  if (s.name == "=" && rhs.kind == ExprKind::Call && stdlib::find_distribution(rhs.name) &&
      !stdlib::find_function(rhs.name)) {
    // `mu = normal(0, 1);`: a distribution statement written with '='.
    expr(lhs);
    for (const ExprPtr& a : rhs.args) expr(*a);
    const Expr* base = &lhs;
    while (base->kind == ExprKind::Index) base = base->args[0].get();
    if (base->kind == ExprKind::Var)
      if (const Symbol* sym = lookup(base->name);
          sym && (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter))
        prior_attempts_.insert(sym->name);
    diags_.error(s.name_loc, "'=' assigns a value, but " + rhs.name + " is a distribution",
                 "a distribution statement uses '~': write `" + to_source(lhs) + " ~ " + to_source(rhs) +
                     ";`");
    return;
  }
  expr(lhs);
  // `total = silo_sum(e);`, the whole value of a generated quantity declared without one.
  aggregate_root_ = lhs.kind == ExprKind::Var && s.name == "=" && loops_.empty() && is_silo_sum(rhs) ? &rhs : nullptr;
  expr(rhs);
  aggregate_root_ = nullptr;
  const Expr* base = &lhs;
  while (base->kind == ExprKind::Index) base = base->args[0].get();
  if (base->kind != ExprKind::Var) {
    diags_.error(lhs.loc, "the left side of an assignment must be a variable",
                 "assign to a variable declared in the model block");
    return;
  }
  Symbol* local = lookup_local(base->name);
  if (!local && block_ != BlockKind::Model) {
    // A derived block assigns its own declarations; the one assignment of a whole variable,
    // when it was declared without a value, is its value.
    Symbol* derived = derived_symbol(base->name);
    if (derived && derived->block == block_) {
      bool whole = &lhs == base && s.name == "=";
      bool first = !derived->decl->init && assigned_.insert(derived->name).second;
      derived->value = whole && first && loops_.empty() ? &rhs : nullptr;
      derived->loop = nullptr;
      // `for (i in 1:N) v[i] = e;`: e is element i's value (lowered as one vectorised value).
      const Stmt* loop = loops_.size() == 1 ? loops_.back() : nullptr;
      if (first && s.name == "=" && loop && lhs.kind == ExprKind::Index && lhs.args[0].get() == base &&
          lhs.indices.size() == 1 && lhs.indices[0].kind == IndexKind::Single && lhs.indices[0].lower &&
          lhs.indices[0].lower->kind == ExprKind::Var && lhs.indices[0].lower->name == loop->name &&
          loop->args[0]->kind == ExprKind::IntLit && loop->args[0]->int_value == 1 && !derived->shape.dims.empty()) {
        derived->value = &rhs;
        derived->loop = loop;
        require_equal(derived->shape.dims[0], size_of(*loop->args[1]), loop->args[1]->loc,
                      "the loop over '" + derived->name + "' (it must assign every element)");
      }
      local = derived;
    }
  }
  if (!local || (local->kind != SymbolKind::LocalVariable && local->kind != SymbolKind::Transformed)) {
    const Symbol* sym = lookup(base->name);
    if (sym) {
      // `b = normal(0, 1)` is a prior written wrongly: no "has no prior" on top.
      if (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter)
        prior_attempts_.insert(sym->name);
      std::string what = sym->kind == SymbolKind::LoopVariable  ? "a loop variable"
                         : sym->kind == SymbolKind::Data        ? "data"
                         : sym->kind == SymbolKind::Transformed ? std::string("declared in '") + block_name(sym->block) + "'"
                                                                : "a parameter";
      std::string help =
          sym->kind == SymbolKind::Transformed  ? "a derived value is computed in its own block"
          : sym->kind == SymbolKind::LoopVariable ? "a loop variable changes only with its loop"
          : sym->kind == SymbolKind::Data
              ? "data is read from the data files; declare a new variable in the model block and "
                "assign that"
              : "its value comes from inference; to fix it at a known value, declare it in "
                "`data` instead";
      diags_.error(lhs.loc, "'" + base->name + "' is " + what + " and cannot be assigned", help);
    }
    return;
  }
  if (lhs.type.is_error() || rhs.type.is_error()) return;
  if (s.name == "=") {
    check_assignable(lhs.type, lhs.shape, rhs, "'" + to_source(lhs) + "'", rhs.loc);
  } else {
    std::string op = s.name.substr(0, 1);
    Expr probe(ExprKind::Binary, s.loc);
    Type t;
    Shape sh;
    binary_type(op, lhs, rhs, s.loc, t, sh);
    if (!t.is_error() && t != lhs.type)
      diags_.error(s.loc, "'" + s.name + "' would change the type of '" + to_source(lhs) + "' to " +
                              to_string(t),
                   "assign a value of type " + to_string(lhs.type));
  }
  local->taint.merge(rhs.taint);
  local->taint.merge(context_taint());
  local->taint.merge(lhs.taint);
}

void Checker::check_assignable(const Type& to, const Shape& to_shape, const Expr& value,
                               const std::string& what, const Loc& loc) {
  if (value.type.is_error()) return;
  bool ok = value.type == to ||
            (to.base == Base::Real && value.type.base == Base::Int && to.array_dims == value.type.array_dims);
  if (!ok) {
    diags_.error(loc, "cannot assign " + to_string(value.type) + " to " + what + " of type " + to_string(to),
                 "declare " + what + " as " + to_string(value.type) + ", or compute a value of type " +
                     to_string(to));
    return;
  }
  require_same_dims(to_shape, value.shape, loc, what);
}

void Checker::require_same_dims(const Shape& a, const Shape& b, const Loc& loc, const std::string& what) {
  if (a.dims.size() != b.dims.size()) return;
  for (size_t i = 0; i < a.dims.size(); ++i) require_equal(a.dims[i], b.dims[i], loc, what);
}

void Checker::require_equal(const SymSize& a, const SymSize& b, const Loc& loc, const std::string& what) {
  if (a.is_unknown() || b.is_unknown() || a.equals(b)) return;
  if (a.provably_different(b)) {
    diags_.error(loc, "size mismatch in " + what + ": " + a.str() + " vs " + b.str(),
                 "the sizes must agree");
    return;
  }
  model_.size_checks.push_back({a, b, loc, what});
}

}  // namespace check_detail
}  // namespace fvic
