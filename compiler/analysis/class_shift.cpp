#include "analysis/class_shift.h"

#include "analysis/occurrences.h"

namespace fvic {

namespace {

// Whether the softmax's argument `e` holds `name` only up to the shift: as the logits themselves;
// `A * W`, or that plus or minus something without W (mode 1, W's rows); a term added to the
// logits, `A + b`, `b + A` or `A - b`, b a vector of the classes (mode 2).
bool shifts(const Expr* e, const std::string& name, int mode) {
  if (is_var(e, name)) return true;  // the logits themselves: each row (or the one vector) up to a shift
  if (!e || e->kind != ExprKind::Binary || e->args.size() != 2) return false;
  const Expr* l = e->args[0].get();
  const Expr* r = e->args[1].get();
  if (mode == 1 && e->name == "*") return is_var(r, name) && count_in(l, name) == 0;
  if (e->name != "+" && e->name != "-") return false;
  if (mode == 2) return (is_var(r, name) && count_in(l, name) == 0) || (e->name == "+" && is_var(l, name) && count_in(r, name) == 0);
  return (shifts(l, name, mode) && count_in(r, name) == 0) || (e->name == "+" && shifts(r, name, mode) && count_in(l, name) == 0);
}

}  // namespace

int class_shift_of(const SemanticModel& m, const Symbol& s) {
  if (s.kind != SymbolKind::Parameter || !s.decl) return 0;
  const TypeDecl& type = s.decl->type;
  if (type.lower || type.upper || type.simplex || type.ordering != Ordering::None ||
      type.structure != MatrixStructure::None || type.affine() || !type.array_sizes.empty())
    return 0;
  const int mode = type.base == Base::Matrix ? 1 : type.base == Base::Vector || type.base == Base::RowVector ? 2 : 0;
  if (mode == 0) return 0;
  int priors = 0, softmaxes = 0;
  for (const Term& t : m.terms) {
    if (t.kind == TermKind::Target && t.taint.has(TaintKind::GlobalParam)) return 0;
    const Stmt& st = *t.stmt;
    if (t.kind == TermKind::Prior && t.subject == s.name) {
      // `s ~ normal(0, scale)`: one scale for every element, read from no random parameter.
      if (t.conditional || st.kind != StmtKind::Tilde || t.distribution != "normal" || !is_var(st.lhs.get(), s.name) ||
          st.args.size() != 2 || !is_zero_literal(st.args[0].get()) || !st.args[1]->shape.dims.empty() ||
          reads_parameters(st.args[1].get()) || count_in(st.args[1].get(), s.name) != 0)
        return 0;
      ++priors;
    } else if (t.kind == TermKind::Likelihood && count_in(st, s.name) > 0) {
      if (t.conditional || st.kind != StmtKind::Tilde || t.distribution != "categorical_logit" || st.args.size() != 1 ||
          count_in(st.lhs.get(), s.name) != 0 || !shifts(st.args[0].get(), s.name, mode))
        return 0;
      ++softmaxes;
    }
  }
  // Its prior's left side and the softmax's argument are the only places it is read.
  return priors == 1 && softmaxes == 1 && uses_in_log_density(m, s.name) == 2 ? mode : 0;
}

}  // namespace fvic
