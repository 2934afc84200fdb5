#include "analysis/centring.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "analysis/occurrences.h"

namespace fvic {

namespace {

bool unconstrained(const Symbol& s) {
  if (!s.decl) return false;
  const TypeDecl& t = s.decl->type;
  return !t.lower && !t.upper && !t.simplex && t.ordering == Ordering::None && t.structure == MatrixStructure::None &&
         !t.affine() && t.array_sizes.empty();
}

bool global_parameter(const Symbol* s) {
  return s && s->kind == SymbolKind::Parameter && s->owner == Owner::Global && unconstrained(*s);
}

bool split_model(const SemanticModel& m) {
  return std::any_of(m.symbols.begin(), m.symbols.end(),
                     [](const Symbol& s) { return s.kind == SymbolKind::Parameter && s.owner == Owner::Split; });
}

// x itself, or one row of it, `x[n]` (a loop over the rows): centring every row of x centres
// whichever the index selects, so (x[n] - xbar) W + b_c = x[n] W + b as for the whole of x.
const Expr* data_or_row(const Expr* e) {
  if (!e) return nullptr;
  if (e->kind == ExprKind::Var) return e;
  if (e->kind != ExprKind::Index || e->args.size() != 1 || e->indices.size() != 1) return nullptr;
  const Index& i = e->indices[0];
  if (i.kind != IndexKind::Single || !i.lower || !i.lower->type.is_int()) return nullptr;
  const Expr* x = e->args[0].get();
  return x && x->kind == ExprKind::Var ? x : nullptr;
}

// `x * W` (or `W * x`, W a real and x a vector), x possibly one row `x[n]`: the data product an
// intercept is added to.
std::optional<Centring> product(const SemanticModel& m, const Expr* e, Base intercept) {
  if (!e || e->kind != ExprKind::Binary || e->name != "*" || e->args.size() != 2) return std::nullopt;
  for (int data_side : {0, 1}) {
    const Expr* x = data_or_row(e->args[data_side].get());
    const Expr* w = e->args[1 - data_side].get();
    if (!x || !w || w->kind != ExprKind::Var) continue;
    const Symbol* xs = m.find(x->name);
    const Symbol* ws = m.find(w->name);
    if (!xs || xs->kind != SymbolKind::Data || xs->owner != Owner::Silo || xs->type.array_dims != 0) continue;
    if (!global_parameter(ws)) continue;
    const Base xb = xs->type.base, wb = ws->decl->type.base;
    const bool fits = (xb == Base::Matrix && data_side == 0 && wb == Base::Matrix && intercept == Base::RowVector) ||
                      (xb == Base::Matrix && data_side == 0 && wb == Base::Vector && intercept == Base::Real) ||
                      (xb == Base::Vector && wb == Base::Real && intercept == Base::Real);
    if (fits) return Centring{x->name, w->name};
  }
  return std::nullopt;
}

bool is_sum(const Expr* e) {
  return e && !e->inlined && e->kind == ExprKind::Binary && e->args.size() == 2 && (e->name == "+" || e->name == "-");
}

// The terms of a chain of + and - (`o + a + x * b - c`), each with its sign. The depth is the
// expression's, which the parser bounds.
void sum_terms(const Expr* e, bool positive, std::vector<std::pair<const Expr*, bool>>& out) {
  if (is_sum(e)) {
    sum_terms(e->args[0].get(), positive, out);
    sum_terms(e->args[1].get(), e->name == "+" ? positive : !positive, out);
    return;
  }
  out.push_back({e, positive});
}

// Calls `visit` on the terms of every sum in the log density's blocks (a chain of + and - is one
// sum, however it associates), through inlined functions.
void each_sum(const SemanticModel& m, const std::function<void(const std::vector<std::pair<const Expr*, bool>>&)>& visit) {
  std::function<void(const Expr*)> walk = [&](const Expr* e) {
    if (!e) return;
    if (e->inlined) return walk(e->inlined.get());
    if (is_sum(e)) {
      std::vector<std::pair<const Expr*, bool>> terms;
      sum_terms(e, true, terms);
      visit(terms);
      for (const auto& [t, positive] : terms) walk(t);
      return;
    }
    for (const ExprPtr& a : e->args) walk(a.get());
    for (const Index& i : e->indices) walk(i.lower.get()), walk(i.upper.get());
  };
  std::function<void(const Stmt&)> walk_stmt = [&](const Stmt& st) {
    walk(st.lhs.get());
    for (const ExprPtr& a : st.args) walk(a.get());
    for (const StmtPtr& b : st.body)
      if (b) walk_stmt(*b);
    if (st.decl) walk(st.decl->init.get());
  };
  for (BlockKind kind : {BlockKind::TransformedParameters, BlockKind::Model})
    if (const Block* b = m.program ? m.program->find(kind) : nullptr) {
      for (const VarDeclPtr& d : b->decls) walk(d->init.get());
      for (const StmtPtr& st : b->stmts) walk_stmt(*st);
    }
}

// The number of b's reads in the server's own priors (evaluated at the written b).
int reads_in_server_priors(const SemanticModel& m, const Symbol& b) {
  int n = 0;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.owner == TermOwner::Server && !t.conditional) n += count_in(*t.stmt, b.name);
  return n;
}

// A vertical model: b is the intercept of the silos' summed partial predictors when one sum adds
// +b once and +silo_sum(...) (the call itself), and b is read nowhere else but in server priors.
std::optional<Centring> vertical_centring_of(const SemanticModel& m, const Symbol& b) {
  if (b.decl->type.base != Base::Real) return std::nullopt;
  int matches = 0;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0, sums = 0;
    for (const auto& [t, positive] : terms) {
      if (positive && is_var(t, b.name)) ++intercepts;
      if (positive && t->kind == ExprKind::Call && t->name == "silo_sum") ++sums;
    }
    if (intercepts == 1 && sums == 1) ++matches;
  });
  if (matches != 1 || uses_in_log_density(m, b.name) != 1 + reads_in_server_priors(m, b)) return std::nullopt;
  return Centring{std::string(kSiloSumCentring), ""};
}

// A silo's local a that is the intercept of x * W and whose prior's location is a global mu
// (`a ~ normal(mu, tau)`, `a + x * W`): a's data product and mu.
struct LocalIntercept {
  Centring centring;
  const Symbol* location = nullptr;
};

// Distributions whose density reads the variate and the location only through their difference,
// and the location's place among the arguments: shifting both by xbar W leaves the term as it is.
int location_argument(const std::string& distribution) {
  if (distribution == "normal" || distribution == "cauchy" || distribution == "double_exponential" ||
      distribution == "logistic")
    return 0;
  if (distribution == "student_t") return 1;
  return -1;
}

// a (a silo's local, a real or a row_vector) when every sum adding +a once holds +x * W (one x and
// W) and no other parameter's intercept; x is read only there; a only there and in its one prior
// statement `a ~ D(mu, ...)`, D a location family (location_argument), mu a global of a's type.
std::optional<LocalIntercept> local_intercept(const SemanticModel& m, const Symbol& a) {
  if (a.kind != SymbolKind::Parameter || a.owner != Owner::Silo || !unconstrained(a) || split_model(m))
    return std::nullopt;
  const Base base = a.decl->type.base;
  if (base != Base::Real && base != Base::RowVector) return std::nullopt;
  std::optional<Centring> found;
  int matches = 0;
  bool refused = false;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0, others = 0;
    std::optional<Centring> c;
    for (const auto& [t, positive] : terms) {
      if (positive && is_var(t, a.name)) ++intercepts;
      if (!c && positive) c = product(m, t, base);
      if (t->kind == ExprKind::Var && t->name != a.name)
        if (const Symbol* s = m.find(t->name); s && s->kind == SymbolKind::Parameter) ++others;
    }
    if (intercepts == 0) return;
    if (intercepts != 1 || !c || others > 0 || (found && (found->data != c->data || found->coefficient != c->coefficient)))
      refused = true;
    found = c;
    ++matches;
  });
  if (!found || refused || uses_in_log_density(m, found->data) != matches) return std::nullopt;
  const Term* prior = nullptr;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.subject == a.name) {
      if (prior) return std::nullopt;
      prior = &t;
    }
  if (!prior || prior->conditional || !prior->stmt || prior->stmt->kind != StmtKind::Tilde ||
      !is_var(prior->stmt->lhs.get(), a.name))
    return std::nullopt;
  const int at = location_argument(prior->stmt->name);
  if (at < 0 || size_t(at) >= prior->stmt->args.size()) return std::nullopt;
  const Expr* location = prior->stmt->args[size_t(at)].get();
  const Symbol* mu = location && location->kind == ExprKind::Var ? m.find(location->name) : nullptr;
  if (!global_parameter(mu) || mu->decl->type.base != base) return std::nullopt;
  if (uses_in_log_density(m, a.name) != matches + 1 || count_in(*prior->stmt, a.name) != 1) return std::nullopt;
  if (count_in(*prior->stmt, mu->name) != 1 || uses_in_log_density(m, mu->name) != 1 + reads_in_server_priors(m, *mu))
    return std::nullopt;
  return LocalIntercept{*found, mu};
}

std::optional<Centring> direct_centring_of(const SemanticModel& m, const Symbol& b) {
  if (!global_parameter(&b)) return std::nullopt;
  const Base base = b.decl->type.base;
  if (base != Base::Real && base != Base::RowVector) return std::nullopt;
  if (split_model(m)) return vertical_centring_of(m, b);
  // Every sum holding +b and +x * W (`b + x * W`, `x * W + b`, `o + b + x * W`), all of one x and W.
  std::optional<Centring> found;
  int matches = 0;
  bool mixed = false;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0;
    std::optional<Centring> c;
    for (const auto& [t, positive] : terms) {
      if (positive && is_var(t, b.name)) ++intercepts;
      if (!c && positive) c = product(m, t, base);
    }
    if (intercepts != 1 || !c) return;
    if (found && (found->data != c->data || found->coefficient != c->coefficient)) mixed = true;
    found = c;
    ++matches;
  });
  if (!found || mixed) return std::nullopt;
  // x is read there alone; b there and in the server's priors alone (evaluated at b = b_c - xbar W).
  if (uses_in_log_density(m, found->data) != matches) return std::nullopt;
  if (uses_in_log_density(m, b.name) != matches + reads_in_server_priors(m, b)) return std::nullopt;
  return found;
}

}  // namespace

std::optional<Centring> centring_of(const SemanticModel& m, const Symbol& b) {
  if (std::optional<Centring> c = direct_centring_of(m, b)) return c;
  if (!global_parameter(&b) || split_model(m)) return std::nullopt;
  // The location of one silo local intercept's prior: mu_c = mu + xbar W, shifted with a.
  std::optional<Centring> found;
  int locals = 0;
  for (const Symbol& a : m.symbols)
    if (std::optional<LocalIntercept> li = local_intercept(m, a); li && li->location == &b) {
      found = li->centring;
      ++locals;
    }
  if (locals != 1) return std::nullopt;
  return found;
}

std::optional<Centring> local_centring_of(const SemanticModel& m, const Symbol& a) {
  const std::optional<LocalIntercept> li = local_intercept(m, a);
  if (!li) return std::nullopt;
  const std::optional<Centring> c = centring_of(m, *li->location);
  if (!c || c->data != li->centring.data || c->coefficient != li->centring.coefficient) return std::nullopt;
  return li->centring;
}

}  // namespace fvic
