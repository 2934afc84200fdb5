#include "analysis/conjugacy.h"

namespace fvic {

namespace {

bool reads_parameters(const Expr& e) {
  for (TaintKind k : {TaintKind::GlobalParam, TaintKind::LocalParam, TaintKind::SplitParam,
                      TaintKind::GlobalHyper, TaintKind::LocalHyper, TaintKind::SplitHyper})
    if (e.taint.has(k)) return true;
  return false;
}

}  // namespace

bool is_affine_in_parameters(const Expr& e, const SemanticModel& model) {
  if (!reads_parameters(e)) return true;
  switch (e.kind) {
    case ExprKind::Var: {
      const Symbol* s = model.find(e.name);
      return s && s->kind == SymbolKind::Parameter;
    }
    case ExprKind::Index:
      for (const Index& ix : e.indices)
        for (const Expr* part : {ix.lower.get(), ix.upper.get()})
          if (part && reads_parameters(*part)) return false;
      return is_affine_in_parameters(*e.args[0], model);
    case ExprKind::Unary:
      return e.name == "-" || e.name == "+" ? is_affine_in_parameters(*e.args[0], model) : false;
    case ExprKind::Transpose: return is_affine_in_parameters(*e.args[0], model);
    case ExprKind::Binary: {
      const Expr &a = *e.args[0], &b = *e.args[1];
      if (e.name == "+" || e.name == "-")
        return is_affine_in_parameters(a, model) && is_affine_in_parameters(b, model);
      if (e.name == "*" || e.name == ".*")
        return (!reads_parameters(a) && is_affine_in_parameters(b, model)) ||
               (!reads_parameters(b) && is_affine_in_parameters(a, model));
      if (e.name == "/" || e.name == "./")
        return !reads_parameters(b) && is_affine_in_parameters(a, model);
      return false;
    }
    default: return false;
  }
}

Conjugacy detect_conjugacy(const SemanticModel& model, const std::string& family, bool divergence_applies) {
  std::string loss = model.settings.name("loss", "nll");
  std::string divergence = divergence_applies ? model.settings.name("divergence", "kl") : "kl";
  if (loss != "nll" && loss != "score_matching")
    return {false, "the loss " + loss + " has no closed-form update"};
  if (divergence != "kl") return {false, "the divergence " + divergence + " has no closed-form update"};
  const Term* likelihood = nullptr;
  for (const Term& t : model.terms) {
    if (t.kind == TermKind::Target) return {false, "a `target +=` term is not recognised as conjugate"};
    if (t.kind == TermKind::Prior) {
      const Symbol* p = model.find(t.subject);
      if (!p || p->kind != SymbolKind::Parameter || t.distribution != "normal")
        return {false, "the prior of '" + t.subject + "' is not Gaussian"};
      // `mu ~ normal(a, b)` or `target += normal_lpdf(mu | a, b)`: the arguments after the outcome.
      bool via_target = t.stmt->kind == StmtKind::Target;
      const std::vector<ExprPtr>& args = via_target ? t.stmt->args[0]->args : t.stmt->args;
      for (size_t i = via_target ? 1 : 0; i < args.size(); ++i)
        if (reads_parameters(*args[i])) return {false, "the prior of '" + t.subject + "' depends on parameters"};
      const TypeDecl& type = p->decl->type;
      if (type.lower || type.upper || type.simplex || type.ordering != Ordering::None ||
          type.structure != MatrixStructure::None || type.affine())
        return {false, "'" + t.subject + "' is constrained, so its posterior is not Gaussian"};
      continue;
    }
    if (likelihood) return {false, "more than one likelihood term"};
    likelihood = &t;
  }
  if (!likelihood) return {false, "no likelihood term"};
  if (likelihood->distribution != "normal") return {false, "the likelihood is not Gaussian"};
  const Stmt& s = *likelihood->stmt;
  if (reads_parameters(*s.args[1])) return {false, "the noise scale is a parameter (unknown noise)"};
  if (!is_affine_in_parameters(*s.args[0], model))
    return {false, "the likelihood's mean is not linear in the parameters"};
  // Checked last: the model is conjugate, so the family is the one thing left to change. One
  // scalar parameter has no correlations to lose.
  int parameters = 0;
  bool scalar = true;
  for (const Symbol& p : model.symbols)
    if (p.kind == SymbolKind::Parameter) ++parameters, scalar = scalar && p.shape.elements().constant_value() == 1;
  if (family != "fullrank" && !(parameters == 1 && scalar))
    return {false, "the model is conjugate, but closed-form updates need `family = fullrank` (the exact "
                   "posterior is correlated)"};
  return {true, "Gaussian prior, likelihood linear in the parameters with known noise"};
}

}  // namespace fvic
