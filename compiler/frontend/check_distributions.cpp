// The checker (checker_impl.h) on `~` and `target +=`: each becomes a term of the log joint
// (classified by ownership.cpp); a distribution's arguments, their values and sizes, and its
// support against the constraint of the parameter it is a prior of.
#include "frontend/checker_impl.h"

#include "frontend/ownership.h"

namespace fvic {
namespace check_detail {

// ---- `~` and `target +=` -------------------------------------------------------------------

void Checker::tilde(const Stmt& s) {
  Expr& lhs = *s.lhs;
  expr(lhs);
  for (const ExprPtr& a : s.args) expr(*a);
  const Expr* base = &lhs;
  // `to_vector(B) ~ normal(0, 1)`: the density of B's elements in one vector, as Stan reads it.
  if (lhs.kind == ExprKind::Call && (lhs.name == "to_vector" || lhs.name == "to_row_vector") && lhs.args.size() == 1 &&
      lhs.args[0]->kind == ExprKind::Var)
    base = lhs.args[0].get();
  while (base->kind == ExprKind::Index) base = base->args[0].get();
  const Symbol* subject = base->kind == ExprKind::Var ? lookup(base->name) : nullptr;
  bool on_parameter = subject && (subject->kind == SymbolKind::Parameter ||
                                  subject->kind == SymbolKind::Hyperparameter);
  // A prior rejected for any reason was still written: no "has no prior" error on top of it.
  if (on_parameter) prior_attempts_.insert(subject->name);
  if (base->kind == ExprKind::Var && !subject) prior_of_unknown_ = true;
  bool suffix_ok = false;
  const stdlib::Distribution* dist = stdlib::find_distribution(s.name);
  if (!dist) {
    if (stdlib::find_density_function(s.name, &suffix_ok)) {
      std::string base = s.name.substr(0, s.name.rfind('_'));
      diags_.error(s.name_loc, "'" + s.name + "' is a density function, not a distribution",
                   "`~` takes the distribution's name: write `" + to_source(lhs) + " ~ " + base + "(" +
                       args_source(s.args) + ")`");
    } else {
      std::vector<std::string> names;
      for (const auto& d : stdlib::distributions()) names.push_back(d.name);
      std::string near = closest(s.name, names);
      diags_.error(s.name_loc, "unknown distribution '" + s.name + "'",
                   near.empty() ? "see the language reference for the distributions available"
                                : "did you mean '" + near + "'?");
    }
    return;
  }
  if (on_parameter && dist->discrete && subject->decl) {
    // Not "declare the outcome as int": an int parameter is an error of its own.
    check_support(*dist, *subject, s.name_loc);
    return;
  }
  std::vector<const Expr*> args;
  for (const ExprPtr& a : s.args) args.push_back(a.get());
  bool typed = check_distribution_call(*dist, lhs, args, s.name_loc);

  // Transformed data is data: a density of it is a likelihood, computed by its owner.
  const bool on_data = subject && (subject->kind == SymbolKind::Data ||
                                   (subject->kind == SymbolKind::Transformed &&
                                    subject->block == BlockKind::TransformedData));
  if (!subject || (!on_data && !on_parameter)) {
    // A computed value on the left (`sum(phi) ~ normal(0, 0.01)`, a model local): as in Stan, its
    // density is added to the target, `target += dist_lpdf(lhs | ...)`, with no Jacobian.
    if (lhs.type.is_error() || !typed) return;
    TermFacts facts;
    facts.stmt = &s;
    facts.kind = TermKind::Target;
    facts.loc = s.loc;
    facts.context = context_taint();
    facts.rhs = lhs.taint;
    facts.rhs.merge(context_taint());
    for (const Expr* a : args) {
      facts.rhs.merge(a->taint);
      facts.uses_silo_sum |= a->taint.has(K::SiloSum);
    }
    if (lhs.taint.reads_parameters())
      diags_.warning(lhs.loc, "the left side of '~' is computed from parameters: its density is added to the target "
                              "as it is, with no Jacobian",
                     "if it is a non-linear transform of a parameter, add the log absolute Jacobian of the transform "
                     "with `target += ...` (as in Stan)");
    if (auto term = classify_term(facts, diags_)) model_.terms.push_back(*term);
    return;
  }
  TermFacts facts;
  facts.stmt = &s;
  facts.subject = subject;
  facts.distribution = s.name;
  facts.kind = on_data ? TermKind::Likelihood : TermKind::Prior;
  // Counted only where its conditions hold: a term of the log density like `target +=`, not a
  // likelihood an engine may batch or update in closed form, nor a prior an engine starts from.
  // A row per element of a loop (`for (i in 1:I) y[i] ~ ...` with y[i] a vector) is a `target +=`
  // term too: each row's elements, not one observation per row.
  const bool conditional = !context_.empty() || (!loops_.empty() && facts.kind == TermKind::Likelihood &&
                                                 !lhs.type.is_error() && !lhs.type.is_scalar() && lhs.kind == ExprKind::Index);
  facts.loc = s.loc;
  facts.context = context_taint();
  facts.lhs = lhs.taint;
  facts.rhs = context_taint();
  for (const Expr* a : args) {
    facts.rhs.merge(a->taint);
    facts.uses_silo_sum |= a->taint.has(K::SiloSum);
  }
  if (facts.kind == TermKind::Prior) {
    // Whatever the left side's indices read is part of what the prior reads.
    Taint index_taint = lhs.taint;
    index_taint.bits &= ~(1u << static_cast<unsigned>(taint_kind(subject->kind, subject->owner)));
    facts.rhs.merge(index_taint);
    facts.lhs = Taint{};
    facts.lhs.add(taint_kind(subject->kind, subject->owner), subject->name);
    if (typed) check_support(*dist, *subject, s.name_loc);
  }
  std::optional<Term> term = classify_term(facts, diags_);
  if (term && conditional) {
    term->kind = TermKind::Target;
    term->conditional = !context_.empty();
    term->subject.clear();
    term->distribution.clear();
  }
  if (term) model_.terms.push_back(*term);
}

void Checker::target(const Stmt& s) {
  Expr& e = *s.args[0];
  expr(e);
  // `target += normal_lpdf(theta | ...)` on a parameter is its prior, even when rejected.
  const Symbol* density_of = nullptr;
  if ((e.kind == ExprKind::CondCall || e.kind == ExprKind::Call) && !e.args.empty() &&
      e.args[0]->kind == ExprKind::Var) {
    const Symbol* sym = lookup(e.args[0]->name);
    if (sym && (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter)) {
      prior_attempts_.insert(sym->name);
      bool cdf = false;  // `target += normal_lccdf(theta | ...)` is not theta's prior
      stdlib::find_cdf_function(e.name, &cdf);
      if (e.kind == ExprKind::CondCall && !cdf) density_of = sym;
    }
  }
  if (e.type.is_error()) return;
  TermFacts facts;
  facts.stmt = &s;
  facts.kind = TermKind::Target;
  facts.loc = s.loc;
  facts.context = context_taint();
  facts.rhs = e.taint;
  facts.rhs.merge(context_taint());
  facts.uses_silo_sum = e.taint.has(K::SiloSum);
  if (const Symbol* sym = density_of) {
    facts.kind = TermKind::Prior;
    facts.subject = sym;
    facts.distribution = e.name.substr(0, e.name.rfind('_'));
    facts.lhs = Taint{};
    facts.lhs.add(taint_kind(sym->kind, sym->owner), sym->name);
    facts.rhs = context_taint();
    for (size_t i = 1; i < e.args.size(); ++i) facts.rhs.merge(e.args[i]->taint);
    if (const stdlib::Distribution* dist = stdlib::find_distribution(facts.distribution))
      if (sym->decl) check_support(*dist, *sym, e.loc);
  }
  if (auto term = classify_term(facts, diags_)) model_.terms.push_back(*term);
}

// A distribution's outcome support against a parameter's declared constraint.
void Checker::check_support(const stdlib::Distribution& dist, const Symbol& p, const Loc& at) {
  const TypeDecl& t = p.decl->type;
  // A bound that is not a literal (e.g. data) is taken to be right; checked when data is read.
  double lower = t.lower ? literal_value(*t.lower).value_or(0) : 0;
  double upper = t.upper ? literal_value(*t.upper).value_or(1) : 1;
  using S = stdlib::Support;
  std::string name = "'" + p.name + "'";
  switch (dist.support) {
    case S::Positive:
      if (!t.lower || lower < 0)
        diags_.error(at, std::string(dist.name) + " is a distribution on positive values, but " +
                                     name + " is not constrained to be positive",
                     "declare it with `<lower=0>`");
      break;
    case S::Unit:
      if (!t.lower || !t.upper || lower < 0 || upper > 1)
        diags_.error(at, std::string(dist.name) + " is a distribution on (0, 1), but " + name +
                                     " is not constrained to that interval",
                     "declare it with `<lower=0, upper=1>`");
      break;
    case S::Bounded:
      if (!t.lower || !t.upper)
        diags_.error(at, "uniform has bounded support, but " + name + " is not bounded",
                     "declare it with `<lower=a, upper=b>` matching the uniform's bounds");
      break;
    case S::CholeskyCorr:
      if (t.structure != MatrixStructure::CholeskyCorr)
        diags_.error(at, std::string(dist.name) + " is a distribution on Cholesky factors of correlation matrices, but " +
                             name + " is not one",
                     "declare it as `cholesky_factor_corr[K] " + p.name + ";`");
      break;
    case S::CorrMatrix:
    case S::CovMatrix: {
      const bool corr = dist.support == S::CorrMatrix;
      if (t.structure != (corr ? MatrixStructure::Corr : MatrixStructure::Cov))
        diags_.error(at, std::string(dist.name) + " is a distribution on " + (corr ? "correlation" : "covariance") +
                             " matrices, but " + name + " is not one",
                     std::string("declare it as `") + (corr ? "corr_matrix" : "cov_matrix") + "[K] " + p.name + ";`");
      break;
    }
    case S::Simplex:
      if (!t.simplex)
        diags_.error(at, "dirichlet is a distribution on simplexes, but " + name + " is not a simplex",
                     "declare it as `simplex[K] " + p.name + ";`");
      break;
    case S::Int:
    case S::NonNegativeInt:
    case S::Binary:
    case S::Category:
      diags_.error(at, std::string(dist.name) + " is a distribution on integers; parameter " +
                                   name + " is continuous",
                   "discrete parameters are not supported; use a continuous prior");
      break;
    case S::Real:
      break;
  }
}

bool Checker::matches(Arg arg, const Type& t) const {
  switch (arg) {
    case Arg::Reals: return true;
    case Arg::Ints: return t.base == Base::Int;
    case Arg::Int: return t.is_int();
    case Arg::Real: return t.is_scalar();
    case Arg::Vector: return t.base == Base::Vector && t.array_dims == 0;
    case Arg::VectorLike:
      return (t.base == Base::Vector || t.base == Base::RowVector) && t.array_dims == 0;
    case Arg::Matrix: return t.base == Base::Matrix && t.array_dims == 0;
    case Arg::VectorOrMatrix:
      return (t.base == Base::Vector || t.base == Base::Matrix) && t.array_dims == 0;
    case Arg::Any: return true;
  }
  return false;
}

namespace {
// multi_normal and multi_normal_cholesky take a vector or an array of vectors (one density each).
bool multivariate_normal(const std::string& name) { return name == "multi_normal" || name == "multi_normal_cholesky"; }
bool vector_or_vectors(const Type& t) {
  return (t.base == Base::Vector || t.base == Base::RowVector) && t.array_dims <= 1;
}
}  // namespace

// Checks arity, argument types, constant argument values and vectorised sizes.
bool Checker::check_distribution_call(const stdlib::Distribution& dist, const Expr& outcome,
                                      const std::vector<const Expr*>& args, const Loc& at) {
  if (args.size() != dist.params.size()) {
    std::string sig = std::string(dist.name) + "(";
    for (size_t i = 0; i < dist.params.size(); ++i) sig += (i ? ", " : "") + std::string(dist.params[i].name);
    sig += ")";
    diags_.error(at, std::string(dist.name) + " takes " + std::to_string(dist.params.size()) +
                         (dist.params.size() == 1 ? " argument" : " arguments") + ", got " +
                         std::to_string(args.size()),
                 "write " + sig);
    return false;
  }
  bool ok = true;
  if (!outcome.type.is_error()) {
    bool outcome_ok = matches(dist.outcome, outcome.type);
    if (dist.name == std::string("multinomial_logit")) outcome_ok = outcome.type.is_int_array() && outcome.type.array_dims == 1;
    if (dist.name == std::string("dirichlet")) outcome_ok = outcome.type.base == Base::Vector && outcome.type.array_dims == 0;
    if (multivariate_normal(dist.name)) outcome_ok = vector_or_vectors(outcome.type);
    if (!outcome_ok) {
      diags_.error(outcome.loc, std::string(dist.name) + " is a distribution over " +
                                    (dist.discrete ? "ints" : "reals") + ", but '" + to_source(outcome) +
                                    "' is " + to_string(outcome.type),
                   dist.discrete ? "declare the outcome as `int` or `array[N] int`"
                                 : std::string("the outcome must be ") + stdlib::arg_description(dist.outcome));
      ok = false;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Expr& a = *args[i];
    const stdlib::DistParam& p = dist.params[i];
    if (a.type.is_error()) {
      ok = false;
      continue;
    }
    if (!matches(p.arg, a.type) && !(multivariate_normal(dist.name) && i == 0 && vector_or_vectors(a.type))) {
      std::string help = std::string("pass ") + stdlib::arg_description(p.arg);
      if (a.kind == ExprKind::Var)
        if (const Symbol* sym = lookup(a.name); sym && sym->kind == SymbolKind::Data)
          help = "declare '" + a.name + "' as " +
                 (p.arg == Arg::Ints ? std::string("`int` or `array[...] int`")
                                     : std::string(stdlib::arg_description(p.arg)));
      diags_.error(a.loc, "argument " + std::string(p.name) + " of " + dist.name + " must be " +
                              stdlib::arg_description(p.arg) + ", not " + to_string(a.type),
                   help);
      ok = false;
      continue;
    }
    if (auto v = literal_value(a)) {
      const char* need = nullptr;
      if (p.requires_ == stdlib::Requires::Positive && !(*v > 0)) need = "positive";
      if (p.requires_ == stdlib::Requires::NonNegative && !(*v >= 0)) need = "non-negative";
      if (p.requires_ == stdlib::Requires::Unit && !(*v >= 0 && *v <= 1)) need = "in [0, 1]";
      if (need) {
        diags_.error(a.loc, std::string("argument ") + p.name + " of " + dist.name + " must be " + need +
                                ", got " + to_source(a),
                     std::string("give ") + p.name + " a " + need + " value");
        ok = false;
      }
    }
  }
  if (!ok) return false;
  // Vectorised arguments must have as many elements as the outcome (or be scalars).
  const std::string name = dist.name;
  if (name == "categorical_logit") {
    const Expr& logits = *args[0];
    if (logits.type.base == Base::Matrix) {
      if (outcome.type.is_int()) {
        diags_.error(logits.loc, "categorical_logit with a matrix of logits needs an array of outcomes",
                     "give one row of logits per outcome, or a vector of logits for one outcome");
        return false;
      }
      require_equal(outcome.shape.elements(), logits.shape.dims[0], logits.loc,
                    "the outcomes of categorical_logit and the rows of its logits");
    }
    return true;
  }
  if (stdlib::ordinal_density(name)) {
    // eta one value per outcome, or one for all; the cutpoints one vector of any length.
    const Expr& eta = *args[0];
    if (!eta.type.is_scalar())
      require_equal(outcome.shape.elements(), eta.shape.elements(), eta.loc,
                    "the outcomes of " + name + " and its eta");
    // Cutpoints that are a parameter of their own must be declared increasing: a plain vector's
    // draws are out of order at once, where the density has no value.
    const Expr& c = *args[1];
    if (c.kind == ExprKind::Var)
      if (const Symbol* sym = lookup(c.name);
          sym && sym->kind == SymbolKind::Parameter && sym->decl && sym->decl->type.ordering != Ordering::Ordered) {
        diags_.error(c.loc, "the cutpoints of " + name + " must be increasing, but '" + c.name +
                                "' is not declared ordered",
                     "declare it as `ordered[K - 1] " + c.name + ";`");
        return false;
      }
    return true;
  }
  if (name == "multi_normal" || name == "multi_normal_cholesky") {
    // y and mu K-vectors, or arrays of N of them (mu may be one K-vector for every y), the
    // covariance (or its Cholesky factor) K x K.
    const SymSize k = outcome.shape.dims.empty() ? SymSize::constant(1) : outcome.shape.dims.back();
    if (!args[0]->shape.elements().equals(k))
      require_equal(outcome.shape.elements(), args[0]->shape.elements(), args[0]->loc,
                    "the outcome of " + name + " and its mean");
    require_equal(k, args[1]->shape.dims[0], args[1]->loc,
                  "the outcome of " + name + " (each vector) and the rows of its matrix");
    require_equal(args[1]->shape.dims[0], args[1]->shape.dims[1], args[1]->loc,
                  "the rows and columns of " + name + "'s matrix");
    return true;
  }
  if (name == "sparse_gp_normal") return check_sparse_gp_shapes(outcome, args);
  if (name == "lkj_corr" || name == "lkj_corr_cholesky" || name == "wishart" || name == "inv_wishart") {
    // A square outcome; wishart's and inv_wishart's scale matrix of its shape.
    if (outcome.shape.dims.size() == 2)
      require_equal(outcome.shape.dims[0], outcome.shape.dims[1], outcome.loc,
                    "the rows and columns of " + name + "'s outcome");
    if (args.size() == 2 && args[1]->shape.dims.size() == 2 && !outcome.shape.dims.empty()) {
      require_equal(outcome.shape.dims[0], args[1]->shape.dims[0], args[1]->loc,
                    "the outcome of " + name + " and the rows of its scale matrix");
      require_equal(args[1]->shape.dims[0], args[1]->shape.dims[1], args[1]->loc,
                    "the rows and columns of " + name + "'s scale matrix");
    }
    return true;
  }
  if (name == "multinomial_logit" || name == "dirichlet") {
    require_equal(outcome.shape.elements(), args[0]->shape.elements(), args[0]->loc,
                  "the outcome of " + name + " and its parameter");
    return true;
  }
  SymSize n = outcome.shape.elements();
  bool outcome_scalar = outcome.type.is_scalar();
  for (const Expr* a : args) {
    if (a->type.is_scalar()) continue;
    if (outcome_scalar) {
      diags_.error(a->loc, "'" + to_source(outcome) + "' is a scalar but this argument of " + name +
                               " is " + to_string(a->type),
                   "a vectorised argument needs a container of outcomes of the same size");
      return false;
    }
    require_equal(n, a->shape.elements(), a->loc,
                  "the outcome '" + to_source(outcome) + "' of " + name + " and this argument");
  }
  return true;
}

// sparse_gp_normal(y | x, Z, alpha, rho, sigma): x N points and Z M points of the same D dimensions
// (a matrix with one point per row, an array of vectors, or an array of reals for D = 1), rho one
// lengthscale or D of them.
bool Checker::check_sparse_gp_shapes(const Expr& outcome, const std::vector<const Expr*>& args) {
  auto points = [&](const Expr& e, SymSize& rows, SymSize& cols) {
    const Type& t = e.type;
    const auto& d = e.shape.dims;
    if (t.base == Base::Matrix && t.array_dims == 0 && d.size() == 2) return rows = d[0], cols = d[1], true;
    if (t.base == Base::Vector && t.array_dims == 1 && d.size() == 2) return rows = d[0], cols = d[1], true;
    if (t.base == Base::Real && t.array_dims == 1 && d.size() == 1) return rows = d[0], cols = SymSize::constant(1), true;
    diags_.error(e.loc, "'" + to_source(e) + "' is " + to_string(t) + "; sparse_gp_normal's points are one per row",
                 "declare it `matrix[N, D]`, `array[N] vector[D]` or `array[N] real`");
    return false;
  };
  SymSize n, d, m, dz;
  if (!points(*args[0], n, d) || !points(*args[1], m, dz)) return false;
  require_equal(outcome.shape.elements(), n, args[0]->loc, "the outcomes of sparse_gp_normal and the rows of its inputs");
  require_equal(d, dz, args[1]->loc, "the dimensions of sparse_gp_normal's inputs and of its inducing inputs");
  const Expr& rho = *args[3];
  if (!rho.type.is_scalar()) {
    if (!(rho.type.base == Base::Vector && rho.type.array_dims == 0)) {
      diags_.error(rho.loc, "the lengthscale rho of sparse_gp_normal is real or vector[D], not " + to_string(rho.type),
                   "give one lengthscale, or one per input dimension");
      return false;
    }
    require_equal(rho.shape.elements(), d, rho.loc, "the lengthscales of sparse_gp_normal and its input dimensions");
  }
  return true;
}

}  // namespace check_detail
}  // namespace fvic
