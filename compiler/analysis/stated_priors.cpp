#include "analysis/stated_priors.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fvic {

namespace {

// The value of a number literal, `-2.5` included; NaN for anything else.
double literal(const Expr* e) {
  if (!e) return std::numeric_limits<double>::quiet_NaN();
  if (e->kind == ExprKind::IntLit) return double(e->int_value);
  if (e->kind == ExprKind::RealLit) return e->real_value;
  if (e->kind == ExprKind::Unary && e->name == "-" && e->args.size() == 1) return -literal(e->args[0].get());
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

nlohmann::ordered_json stated_priors_json(const Program& program) {
  nlohmann::ordered_json priors = nlohmann::ordered_json::array();
  const Block* parameters = program.find(BlockKind::Parameters);
  const Block* model = program.find(BlockKind::Model);
  if (!parameters || !model) return priors;
  for (const StmtPtr& s : model->stmts) {
    if (s->kind != StmtKind::Tilde || !s->lhs || s->lhs->kind != ExprKind::Var) continue;
    const auto decl = std::find_if(parameters->decls.begin(), parameters->decls.end(),
                                   [&](const VarDeclPtr& d) { return d->name == s->lhs->name; });
    if (decl == parameters->decls.end() || (*decl)->type.simplex || (*decl)->type.ordering != Ordering::None ||
        (*decl)->type.structure != MatrixStructure::None || (*decl)->type.affine())
      continue;
    nlohmann::ordered_json arguments = nlohmann::ordered_json::array();
    bool numbers = true;
    for (const ExprPtr& a : s->args) {
      const double x = literal(a.get());
      numbers = numbers && std::isfinite(x);
      arguments.push_back(x);
    }
    const auto bound = [&](const ExprPtr& e, bool& known) -> nlohmann::ordered_json {
      if (!e) return nullptr;
      const double x = literal(e.get());
      known = known && std::isfinite(x);
      return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
    };
    bool bounds_known = true;
    nlohmann::ordered_json lower = bound((*decl)->type.lower, bounds_known);
    nlohmann::ordered_json upper = bound((*decl)->type.upper, bounds_known);
    if (numbers && bounds_known)
      priors.push_back({{"variable", s->lhs->name}, {"distribution", s->name}, {"arguments", arguments},
                        {"lower", lower}, {"upper", upper}});
  }
  return priors;
}

}  // namespace fvic
