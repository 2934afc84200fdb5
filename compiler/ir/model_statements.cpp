#include "ir/model_statements.h"

#include <set>

namespace fvic::ir {

namespace {

using LoopOf = std::map<const Stmt*, StatementLoop>;
using ConditionOf = std::map<const Stmt*, std::vector<Condition>>;
using LoopLocalsOf = std::map<const Stmt*, std::vector<std::pair<std::string, LocalValue>>>;
using VisibleOf = std::map<const Stmt*, size_t>;

// `for (i in 1:N)`'s N as a size, when the loop starts at 1 and N is a name or a number.
std::optional<SymSize> loop_rows(const Stmt& loop) {
  const Expr& lo = *loop.args[0];
  const Expr& hi = *loop.args[1];
  if (lo.kind != ExprKind::IntLit || lo.int_value != 1) return std::nullopt;
  if (hi.kind == ExprKind::Var) return SymSize::atom(hi.name);
  if (hi.kind == ExprKind::IntLit) return SymSize::constant(hi.int_value);
  return std::nullopt;
}

// The loop's statements: its block's, or its one statement.
std::vector<const Stmt*> loop_body(const Stmt& loop) {
  std::vector<const Stmt*> body;
  if (loop.body[0]->kind == StmtKind::Block)
    for (const StmtPtr& b : loop.body[0]->body) body.push_back(b.get());
  else
    body.push_back(loop.body[0].get());
  return body;
}

// Where a `~` or `target +=` stands: the loop around it (if any) and the tests of the `if`s.
struct TermPlace {
  std::optional<StatementLoop> loop;
  std::vector<Condition> conditions;
  // The loop's locals declared before the term (`int g = group[n];`, or `real mu;` then one
  // `mu = ...;`): element n's values, as the loop's other values.
  std::vector<std::pair<std::string, LocalValue>> locals;
};

constexpr int kMaxNesting = 64;  // ifs, loops and blocks around one term

// The `~` and `target +=` statements of `s`, each with its place: inside `if`s and blocks, and
// inside one `for (i in 1:N)` (each computed as one vectorised statement over N rows). False for
// another statement, a loop in a loop, or a loop of another form.
bool collect_terms(const Stmt& s, const TermPlace& place, std::vector<std::pair<const Stmt*, TermPlace>>& out, int depth) {
  if (depth > kMaxNesting) return false;
  switch (s.kind) {
    case StmtKind::Tilde:
    case StmtKind::Target: out.push_back({&s, place}); return true;
    case StmtKind::Empty: return true;
    case StmtKind::Block: {
      TermPlace inner = place;
      std::set<std::string> pending;  // a loop's locals declared without a value, not assigned yet
      // A block's locals: in a loop, element n's values; outside, values (`{ real h = s / 2; ... }`).
      auto local = [&](const Expr* value) {
        LocalValue v;
        v.value = value;
        if (inner.loop) v.loop_rows = inner.loop->rows, v.loop_var = inner.loop->var, v.in_loop = true;
        return v;
      };
      for (const StmtPtr& b : s.body) {
        if (b->kind == StmtKind::Decl) {
          if (!b->decl->init) {
            pending.insert(b->decl->name);
            continue;
          }
          inner.locals.push_back({b->decl->name, local(b->decl->init.get())});
          continue;
        }
        if (b->kind == StmtKind::Assign && b->name == "=" && b->lhs->kind == ExprKind::Var && pending.erase(b->lhs->name)) {
          inner.locals.push_back({b->lhs->name, local(b->args[0].get())});
          continue;
        }
        if (!collect_terms(*b, inner, out, depth + 1)) return false;
      }
      return pending.empty();
    }
    case StmtKind::If:
      for (size_t branch = 0; branch < s.body.size(); ++branch) {
        TermPlace inner = place;
        inner.conditions.push_back({s.args[0].get(), branch == 0});
        if (!collect_terms(*s.body[branch], inner, out, depth + 1)) return false;
      }
      return true;
    case StmtKind::For: {
      const std::optional<SymSize> rows = loop_rows(s);
      if (place.loop || !rows) return false;
      TermPlace inner = place;
      inner.loop = StatementLoop{s.name, *rows};
      return collect_terms(*s.body[0], inner, out, depth + 1);
    }
    default: return false;
  }
}

// A loop or an `if` of `~` and `target +=` statements: each statement's place recorded.
bool collect_placed(const Stmt& s, LoopOf& loops, ConditionOf& conditions, LoopLocalsOf& loop_locals,
                    VisibleOf& visible, size_t bindings, Diagnostics& diags) {
  std::vector<std::pair<const Stmt*, TermPlace>> terms;
  if (!collect_terms(s, TermPlace{}, terms, 0)) {
    if (s.kind == StmtKind::Block)
      diags.error(s.loc, "loops, conditionals and assignments are not supported by the code generator yet",
                  "give a local its value once: `vector[N] mu = ...;`, `mu = ...;` or "
                  "`for (i in 1:N) mu[i] = ...;`; write the rest with vectorised statements");
    else
      diags.error(s.loc, std::string(s.kind == StmtKind::If ? "this `if`" : "this loop") +
                             " is not supported by the code generator yet",
                  "a loop `for (i in 1:N)` over `~` and `target +=` statements that read element i of "
                  "containers of N elements is computed as one vectorised statement, and an `if` around such "
                  "statements selects where they count; other loops (a loop in a loop, a loop from 2, "
                  "assignments in a loop) are not vectorised");
    return false;
  }
  for (const auto& [stmt, place] : terms) {
    visible[stmt] = bindings;
    if (place.loop) loops[stmt] = *place.loop;
    if (!place.conditions.empty()) conditions[stmt] = place.conditions;
    if (!place.locals.empty()) loop_locals[stmt] = place.locals;
  }
  return true;
}


// `v[i] = e;` in `for (i in 1:N)`, v a pending local (declared without a value) of N elements:
// v's name, else "".
std::string element_assignment(const Stmt& loop, const Stmt& body, const std::map<std::string, const VarDecl*>& pending) {
  if (body.kind != StmtKind::Assign) return "";
  const Expr& lhs = *body.lhs;
  if (lhs.kind != ExprKind::Index || lhs.args[0]->kind != ExprKind::Var || lhs.indices.size() != 1) return "";
  const Index& ix = lhs.indices[0];
  if (ix.kind != IndexKind::Single || !ix.lower || ix.lower->kind != ExprKind::Var || ix.lower->name != loop.name)
    return "";
  auto it = pending.find(lhs.args[0]->name);
  if (it == pending.end()) return "";
  const TypeDecl& t = it->second->type;
  if (t.sizes.size() + t.array_sizes.size() != 1) return "";
  const Expr& size = t.array_sizes.empty() ? *t.sizes[0] : *t.array_sizes[0];
  const Expr& hi = *loop.args[1];
  const bool same = (size.kind == ExprKind::Var && hi.kind == ExprKind::Var && size.name == hi.name) ||
                    (size.kind == ExprKind::IntLit && hi.kind == ExprKind::IntLit && size.int_value == hi.int_value);
  return same ? it->first : "";
}

// `for (i in 1:N) { v[i] = ...; w[i] = ...; y[i] ~ ...; }` where each assignment gives a pending
// local its value element by element: those locals bound (in order; a later one may read an
// earlier one's element i), the `~` and `target +=` lowered as one vectorised statement each.
// False when the loop has another statement, or assigns no pending local.
// The latest binding of local `name` in `out` (then `more`), or null.
const LocalValue* latest(const std::string& name, const std::vector<Local>& out,
                                        const std::vector<Local>& more = {}) {
  for (const std::vector<Local>* list : {&more, &out})
    for (auto it = list->rbegin(); it != list->rend(); ++it)
      if (it->name == name) return &it->value;
  return nullptr;
}

// A new value of a local already bound (`previous`): `op` is "=", "+=", "-=", "*=" or "/=".
LocalValue next_value(const std::string& name, const LocalValue& previous,
                                     const std::string& op, const Expr* value) {
  LocalValue v;
  v.value = value;
  v.name = name;
  v.previous = std::make_shared<const LocalValue>(previous);
  if (op != "=") v.compound = op.substr(0, 1);
  return v;
}

bool collect_assignment_loop(const Stmt& loop, std::map<std::string, const VarDecl*>& pending,
                             const std::map<std::string, const VarDecl*>& declared, std::vector<Local>& out,
                             LoopOf& loops, VisibleOf& visible) {
  const std::optional<SymSize> rows = loop_rows(loop);
  if (!rows) return false;
  const std::vector<const Stmt*> body = loop_body(loop);
  std::map<std::string, const VarDecl*> left = pending;
  std::vector<Local> bound;
  for (const Stmt* b : body) {
    if (b->kind == StmtKind::Tilde || b->kind == StmtKind::Target || b->kind == StmtKind::Empty) continue;
    std::string name = element_assignment(loop, *b, left);
    LocalValue v;
    if (!name.empty() && b->name == "=") {
      v.value = b->args[0].get();
      left.erase(name);
    } else {
      // Every element of a local with a value assigned again: `sigma[n] = exp(sigma[n]);`.
      name = element_assignment(loop, *b, declared);
      const LocalValue* before = name.empty() || left.count(name) ? nullptr : latest(name, out, bound);
      if (!before) return false;
      v = next_value(name, *before, b->name, b->args[0].get());
    }
    v.loop_rows = *rows;
    v.loop_var = loop.name;
    bound.push_back({name, v});
  }
  if (bound.empty()) return false;
  out.insert(out.end(), bound.begin(), bound.end());
  for (const Stmt* b : body)
    if (b->kind == StmtKind::Tilde || b->kind == StmtKind::Target) {
      loops[b] = StatementLoop{loop.name, *rows};
      visible[b] = out.size();
    }
  pending = left;
  return true;
}

// The model block's local variables as bindings (declared with a value; or declared, then given
// their value by one assignment of the whole variable or by one loop over its elements, and
// never reassigned), and its loops' statements.
bool collect_locals(const Block* model, std::vector<Local>& out, LoopOf& loops, ConditionOf& conditions,
                    LoopLocalsOf& loop_locals, VisibleOf& visible, Diagnostics& diags) {
  if (!model) return true;
  bool ok = true;
  std::map<std::string, const VarDecl*> pending;   // declared without a value, not assigned yet
  std::map<std::string, const VarDecl*> declared;  // every local of the block so far
  for (const StmtPtr& s : model->stmts) {
    if (s->kind == StmtKind::Decl) declared[s->decl->name] = s->decl.get();
    if (s->kind == StmtKind::For) {
      if (!collect_assignment_loop(*s, pending, declared, out, loops, visible))
        ok &= collect_placed(*s, loops, conditions, loop_locals, visible, out.size(), diags);
    } else if (s->kind == StmtKind::If || s->kind == StmtKind::Block) {
      ok &= collect_placed(*s, loops, conditions, loop_locals, visible, out.size(), diags);
    } else if (s->kind == StmtKind::Tilde || s->kind == StmtKind::Target) {
      visible[s.get()] = out.size();
    } else if (s->kind == StmtKind::Decl) {
      if (!s->decl->init) {
        pending[s->decl->name] = s->decl.get();
      } else {
        LocalValue v;
        v.value = s->decl->init.get();
        out.push_back({s->decl->name, v});
      }
    } else if (s->kind == StmtKind::Assign && s->name == "=" && s->lhs->kind == ExprKind::Var &&
               pending.count(s->lhs->name)) {
      LocalValue v;
      v.value = s->args[0].get();
      out.push_back({s->lhs->name, v});
      pending.erase(s->lhs->name);
    } else if (s->kind == StmtKind::Assign && s->lhs->kind == ExprKind::Var && !pending.count(s->lhs->name) &&
               latest(s->lhs->name, out)) {
      // A local with a value assigned again as a whole: `mu = mu + z;`, `mu += z;`.
      out.push_back({s->lhs->name, next_value(s->lhs->name, *latest(s->lhs->name, out), s->name, s->args[0].get())});
    } else if (s->kind != StmtKind::Tilde && s->kind != StmtKind::Target && s->kind != StmtKind::Empty) {
      diags.error(s->loc, "loops, conditionals and assignments are not supported by the code generator yet",
                  "give a local its value once: `vector[N] mu = ...;`, `mu = ...;` or "
                  "`for (i in 1:N) mu[i] = ...;`; write the rest with vectorised statements");
      ok = false;
    }
  }
  for (const auto& [name, d] : pending) {
    diags.error(d->loc, "'" + name + "' is declared in the model block but never given its value",
                "give it its value once: `" + name + " = ...;` or `for (i in 1:N) " + name + "[i] = ...;`");
    ok = false;
  }
  return ok;
}

}  // namespace

bool collect_model_statements(const Block* model, ModelStatements& out, Diagnostics& diags) {
  return collect_locals(model, out.locals, out.loops, out.conditions, out.loop_locals, out.visible, diags);
}

namespace {

// Whether `s` is, or holds, the assignment whose value is `value`; on the way, `locals` gains the
// locals each enclosing block declares with a value before it. A loop's body is not searched: its
// locals are element i's values, not values.
// Whether s (or a statement inside it) assigns one of `names`: a local whose declared value is
// then not its value everywhere after.
bool assigns_any(const Stmt& s, const std::vector<Local>& names, int depth) {
  if (depth > kMaxNesting) return true;
  if (s.kind == StmtKind::Assign && s.lhs) {
    const Expr* target = s.lhs.get();
    for (int hops = 0; target->kind == ExprKind::Index && hops < kMaxNesting; ++hops) target = target->args[0].get();
    for (const Local& l : names)
      if (target->kind == ExprKind::Var && target->name == l.name) return true;
  }
  for (const StmtPtr& b : s.body)
    if (b && assigns_any(*b, names, depth + 1)) return true;
  return false;
}

// Finds the assignment whose value is `value`, collecting the locals declared with a value in the
// blocks around it; `modified` when a statement before it assigns one of them again (`for (n in
// 1:N) K[n, n] += jitter;`), so that its declared value is not the one the assignment reads.
bool search_assignment(const Stmt& s, const Expr* value, std::vector<Local>& locals, bool& modified, int depth) {
  if (depth > kMaxNesting) return false;
  switch (s.kind) {
    case StmtKind::Assign: return !s.args.empty() && s.args[0].get() == value;
    case StmtKind::If:
      for (const StmtPtr& branch : s.body)
        if (search_assignment(*branch, value, locals, modified, depth + 1)) return true;
      return false;
    case StmtKind::Block: {
      const size_t mark = locals.size();
      for (const StmtPtr& b : s.body) {
        if (b->kind == StmtKind::Decl && b->decl && b->decl->init) {
          LocalValue v;
          v.value = b->decl->init.get();
          locals.push_back({b->decl->name, v});
        } else if (search_assignment(*b, value, locals, modified, depth + 1)) {
          return true;
        } else if (assigns_any(*b, locals, depth + 1)) {
          modified = true;
        }
      }
      locals.resize(mark);
      return false;
    }
    default: return false;
  }
}

}  // namespace

std::vector<Local> locals_before(const Block* block, const Expr* value) {
  std::vector<Local> locals;
  if (!block || !value) return locals;
  bool modified = false;
  for (const StmtPtr& s : block->stmts)
    if (search_assignment(*s, value, locals, modified, 0)) return modified ? std::vector<Local>{} : locals;
  return {};
}

}  // namespace fvic::ir

