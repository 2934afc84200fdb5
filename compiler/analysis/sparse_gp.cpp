#include "analysis/sparse_gp.h"

#include <algorithm>

namespace fvic {

namespace {

std::optional<double> number(const Expr& e) {
  if (e.kind == ExprKind::IntLit) return static_cast<double>(e.int_value);
  if (e.kind == ExprKind::RealLit) return e.real_value;
  return std::nullopt;
}

const char* role_name(int i) {
  static const char* names[] = {"the inputs x", "the inducing inputs Z", "the kernel's scale alpha",
                                "the lengthscale rho", "the noise sd sigma"};
  return names[i];
}

bool positive_lower_bound(const Symbol& s) {
  const TypeDecl& t = s.decl->type;
  if (!t.lower || t.upper) return false;
  const auto v = number(*t.lower);
  return v && *v == 0;
}

// Its prior, if it has one: a `~` statement about the whole parameter.
std::vector<const Term*> priors_of(const SemanticModel& m, const std::string& name) {
  std::vector<const Term*> out;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.subject == name) out.push_back(&t);
  return out;
}

}  // namespace

bool is_sparse_gp_term(const Term& t) { return t.distribution == "sparse_gp_normal"; }

std::optional<SparseGpModel> find_sparse_gp(const SemanticModel& m, Diagnostics& diags, bool* ok) {
  *ok = true;
  const Term* term = nullptr;
  for (const Term& t : m.terms) {
    if (!is_sparse_gp_term(t)) continue;
    if (term) {
      diags.error(t.loc, "a second sparse_gp_normal statement", "a model holds one sparse GP for now");
      *ok = false;
      return std::nullopt;
    }
    term = &t;
  }
  if (!term) return std::nullopt;
  auto fail = [&](const Loc& at, const std::string& message, const std::string& help) {
    diags.error(at, message, help);
    *ok = false;
    return std::nullopt;
  };
  const Stmt& s = *term->stmt;
  if (s.kind != StmtKind::Tilde || term->conditional || term->kind != TermKind::Likelihood ||
      term->owner != TermOwner::Silo || s.lhs->kind != ExprKind::Var)
    return fail(term->loc, "sparse_gp_normal's outcome must be a `silo data` vector, as in `y ~ sparse_gp_normal(x, Z, alpha, rho, sigma);`",
                "each silo holds its own rows of y and x; the statement stands alone, outside loops and ifs");
  SparseGpModel gp;
  gp.term = term;
  gp.line = term->loc.line;
  gp.outcome = s.lhs->name;
  const Symbol* y = m.find(gp.outcome);
  gp.rows = y->shape.elements();

  // x: silo data.
  const Expr& x = *s.args[0];
  const Symbol* xs = x.kind == ExprKind::Var ? m.find(x.name) : nullptr;
  if (!xs || xs->kind != SymbolKind::Data || xs->owner != Owner::Silo)
    return fail(x.loc, "the inputs x of sparse_gp_normal must be a variable of `silo data`",
                "name the silo's input matrix (or array of vectors) directly");
  gp.inputs = x.name;
  gp.dimensions = x.shape.dims.size() == 2 ? x.shape.dims[1] : SymSize::constant(1);
  const Expr& z = *s.args[1];
  gp.inducing_points = z.shape.dims.empty() ? SymSize::constant(1) : z.shape.dims[0];

  // Z, alpha, rho, sigma: a global parameter (Z: or a hyperparameter), public data, or a number.
  SparseGpArgument* roles[] = {&gp.inducing, &gp.scale, &gp.lengthscale, &gp.noise};
  for (int i = 1; i <= 4; ++i) {
    const Expr& a = *s.args[size_t(i)];
    SparseGpArgument& r = *roles[i - 1];
    const bool positive = i > 1;
    if (const auto v = number(a); v && positive) {
      r.kind = SparseGpArgument::Kind::Number;
      r.value = *v;
      continue;
    }
    const Symbol* v = a.kind == ExprKind::Var ? m.find(a.name) : nullptr;
    const std::string what = role_name(i);
    const std::string help = i == 1 ? "declare Z a `global` parameter (random, with its own factors), a hyperparameter "
                                      "(one point estimate the server averages) or `data` (fixed)"
                                    : "declare it a `global` parameter <lower=0> with a lognormal prior, give it in "
                                      "`data`, or write a number";
    if (!v) return fail(a.loc, what + " of sparse_gp_normal must be a variable or a number, not an expression", help);
    r.name = v->name;
    if (v->kind == SymbolKind::Data && v->owner == Owner::Public) {
      r.kind = SparseGpArgument::Kind::Data;
    } else if (v->kind == SymbolKind::Parameter && v->owner == Owner::Global) {
      r.kind = SparseGpArgument::Kind::Parameter;
      if (positive && !positive_lower_bound(*v))
        return fail(v->loc, "'" + v->name + "', " + what + " of sparse_gp_normal, must be declared <lower=0>",
                    "its prior is lognormal, Gaussian on the log scale where PVI holds it");
      if (!positive && (v->decl->type.lower || v->decl->type.upper))
        return fail(v->loc, "the inducing inputs '" + v->name + "' take no bounds", "declare them unconstrained");
    } else if (i == 1 && v->kind == SymbolKind::Hyperparameter && v->owner == Owner::Global) {
      r.kind = SparseGpArgument::Kind::Hyperparameter;
      if (!priors_of(m, v->name).empty())
        return fail(priors_of(m, v->name)[0]->loc, "the hyperparameter '" + v->name + "' takes no prior",
                    "a hyperparameter Z is one point estimate the server averages (seed 003 Algorithm 1); declare "
                    "Z a `global` parameter to give it a prior and factors");
    } else {
      return fail(a.loc, what + " of sparse_gp_normal cannot be '" + v->name + "' (" +
                             std::string(v->kind == SymbolKind::Data ? "data held by a party" : "not a global value") + ")",
                  help);
    }
    if (r.kind == SparseGpArgument::Kind::Parameter) {
      const auto priors = priors_of(m, v->name);
      const char* dist = positive ? "lognormal" : "normal";
      if (priors.empty())
        return fail(v->loc, "'" + v->name + "' needs a " + dist + " prior",
                    std::string("PVI starts from the prior, so it must be proper and Gaussian on the unconstrained scale: ") +
                        (positive ? "`" + v->name + " ~ lognormal(0, 1);` as in seed 003"
                                  : "`" + v->name + " ~ normal(0, 1);`, the base N(0, I) of seed 003"));
      for (const Term* p : priors) {
        bool constant_args = true;
        for (const ExprPtr& e : p->stmt->args)
          constant_args = constant_args && !e->taint.has(TaintKind::GlobalParam) && !e->taint.has(TaintKind::GlobalHyper);
        if (p->distribution != dist || !constant_args)
          return fail(p->loc, "the prior of '" + v->name + "' must be " + dist + "() with constant arguments",
                      "PVI holds the prior as a Gaussian on the unconstrained scale (log scale for <lower=0>)");
      }
    }
  }

  // Nothing else in the model: one likelihood, globals that the GP reads.
  for (const Term& t : m.terms)
    if (&t != term && (t.kind == TermKind::Likelihood || t.kind == TermKind::Target))
      return fail(t.loc, "a sparse GP model has no other likelihood or `target +=` term yet",
                  "the silos' bound is the sparse GP's alone (seed 003)");
  for (const Symbol& v : m.symbols) {
    const bool argument = std::any_of(std::begin(roles), std::end(roles), [&](const SparseGpArgument* r) {
      return r->kind != SparseGpArgument::Kind::Number && r->name == v.name;
    });
    if ((v.kind == SymbolKind::Parameter || v.kind == SymbolKind::Hyperparameter) && !argument)
      return fail(v.loc, "'" + v.name + "' is not an argument of sparse_gp_normal, so nothing but its prior would fit it",
                  "a sparse GP model's parameters are its inducing inputs, scale, lengthscales and noise");
    if (v.kind == SymbolKind::Transformed && v.block != BlockKind::TransformedData)
      return fail(v.loc, "transformed parameters and generated quantities are not computed for a sparse GP yet",
                  "the run writes the posterior of Z, alpha, rho and sigma and, with --test, its predictions");
  }
  return gp;
}

}  // namespace fvic
