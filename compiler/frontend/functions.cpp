#include "frontend/functions.h"

#include <set>

#include "builtins.h"

namespace fvic {

bool function_body(const FunctionDef& f, std::vector<const VarDecl*>& locals, const Expr*& result,
                   std::string& why, Loc& where) {
  locals.clear();
  result = nullptr;
  where = f.body ? f.body->loc : f.loc;
  const Stmt* body = f.body.get();
  if (!body) {
    why = "a function needs a body";
    return false;
  }
  std::vector<const Stmt*> stmts;
  if (body->kind == StmtKind::Block)
    for (const StmtPtr& s : body->body) stmts.push_back(s.get());
  else
    stmts.push_back(body);
  for (size_t i = 0; i < stmts.size(); ++i) {
    const Stmt& s = *stmts[i];
    where = s.loc;
    bool last = i + 1 == stmts.size();
    if (s.kind == StmtKind::Empty) continue;
    if (s.kind == StmtKind::Decl && s.decl->init && !last) {
      locals.push_back(s.decl.get());
      continue;
    }
    if (s.kind == StmtKind::Return && last && !s.args.empty()) {
      result = s.args[0].get();
      return true;
    }
    why = s.kind == StmtKind::Decl && !s.decl->init ? "declare each variable of a function with its value"
          : s.kind == StmtKind::Return             ? "a function ends with one `return` of a value"
                                                   : "a function body is declarations with values and one final "
                                                     "`return` (loops, conditionals and assignments in functions "
                                                     "are not supported yet)";
    return false;
  }
  why = "a function ends with `return` of its value";
  return false;
}

ExprPtr substitute(const Expr& e, const std::map<std::string, const Expr*>& bindings) {
  if (e.kind == ExprKind::Var) {
    auto it = bindings.find(e.name);
    if (it != bindings.end()) return substitute(*it->second, {});
  }
  auto copy = std::make_unique<Expr>(e.kind, e.loc);
  copy->name = e.name;
  copy->text = e.text;
  copy->int_value = e.int_value;
  copy->real_value = e.real_value;
  for (const ExprPtr& a : e.args) copy->args.push_back(a ? substitute(*a, bindings) : nullptr);
  for (const Index& ix : e.indices) {
    Index c;
    c.kind = ix.kind;
    c.loc = ix.loc;
    if (ix.lower) c.lower = substitute(*ix.lower, bindings);
    if (ix.upper) c.upper = substitute(*ix.upper, bindings);
    copy->indices.push_back(std::move(c));
  }
  return copy;
}

ExprPtr inline_call(const FunctionDef& f, const std::vector<const Expr*>& args) {
  std::vector<const VarDecl*> locals;
  const Expr* result = nullptr;
  std::string why;
  Loc where;
  if (!function_body(f, locals, result, why, where)) return nullptr;
  std::map<std::string, const Expr*> bindings;
  for (size_t i = 0; i < f.args.size() && i < args.size(); ++i) bindings[f.args[i].name] = args[i];
  // Each declaration's value with the arguments and the earlier declarations substituted.
  std::vector<ExprPtr> values;
  for (const VarDecl* d : locals) {
    values.push_back(substitute(*d->init, bindings));
    bindings[d->name] = values.back().get();
  }
  return substitute(*result, bindings);
}

ExprSize expr_size(const Expr& e) {
  // An explicit stack: an inlined expression may be deeper than a recursion should go.
  ExprSize size;
  std::vector<std::pair<const Expr*, long long>> todo{{&e, 1}};
  while (!todo.empty()) {
    auto [x, depth] = todo.back();
    todo.pop_back();
    ++size.nodes;
    size.depth = std::max(size.depth, depth);
    for (const ExprPtr& a : x->args)
      if (a) todo.push_back({a.get(), depth + 1});
    for (const Index& ix : x->indices) {
      if (ix.lower) todo.push_back({ix.lower.get(), depth + 1});
      if (ix.upper) todo.push_back({ix.upper.get(), depth + 1});
    }
  }
  return size;
}

namespace {

void desugar(Stmt& s, const std::set<std::string>& densities) {
  for (StmtPtr& b : s.body)
    if (b) desugar(*b, densities);
  if (s.kind != StmtKind::Tilde || stdlib::find_distribution(s.name)) return;
  std::string density;
  for (const char* suffix : {"_lpdf", "_lpmf"})
    if (densities.count(s.name + suffix)) density = s.name + suffix;
  if (density.empty()) return;
  auto call = std::make_unique<Expr>(ExprKind::CondCall, s.name_loc);
  call->name = density;
  call->args.push_back(std::move(s.lhs));
  for (ExprPtr& a : s.args) call->args.push_back(std::move(a));
  s.args.clear();
  s.args.push_back(std::move(call));
  s.kind = StmtKind::Target;
}

}  // namespace

void desugar_user_densities(Program& program) {
  std::set<std::string> densities;
  for (const Block& b : program.blocks)
    for (const FunctionDef& f : b.functions) densities.insert(f.name);
  if (densities.empty()) return;
  for (Block& b : program.blocks)
    for (StmtPtr& s : b.stmts) desugar(*s, densities);
}

}  // namespace fvic
