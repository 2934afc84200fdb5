#include "analysis/occurrences.h"

namespace fvic {

bool is_var(const Expr* e, const std::string& name) { return e && e->kind == ExprKind::Var && e->name == name; }

bool is_zero_literal(const Expr* e) {
  return e && ((e->kind == ExprKind::IntLit && e->int_value == 0) || (e->kind == ExprKind::RealLit && e->real_value == 0));
}

int count_in(const Expr* e, const std::string& name) {
  if (!e) return 0;
  if (e->inlined) return count_in(e->inlined.get(), name);
  int n = is_var(e, name) ? 1 : 0;
  for (const ExprPtr& a : e->args) n += count_in(a.get(), name);
  for (const Index& i : e->indices) n += count_in(i.lower.get(), name) + count_in(i.upper.get(), name);
  return n;
}

int count_in(const Stmt& st, const std::string& name) {
  int n = count_in(st.lhs.get(), name);
  for (const ExprPtr& a : st.args) n += count_in(a.get(), name);
  for (const StmtPtr& b : st.body)
    if (b) n += count_in(*b, name);
  if (st.decl) n += count_in(st.decl->init.get(), name);
  return n;
}

int uses_in_log_density(const SemanticModel& m, const std::string& name) {
  int n = 0;
  for (BlockKind kind : {BlockKind::TransformedParameters, BlockKind::Model})
    if (const Block* b = m.program ? m.program->find(kind) : nullptr) {
      for (const VarDeclPtr& d : b->decls) n += count_in(d->init.get(), name);
      for (const StmtPtr& st : b->stmts) n += count_in(*st, name);
    }
  return n;
}

bool reads_parameters(const Expr* e) {
  return e && (e->taint.has(TaintKind::GlobalParam) || e->taint.has(TaintKind::LocalParam) ||
               e->taint.has(TaintKind::SplitParam));
}

}  // namespace fvic
