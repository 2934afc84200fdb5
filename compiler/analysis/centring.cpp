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

bool local_parameter(const Symbol* s) {
  return s && s->kind == SymbolKind::Parameter && s->owner == Owner::Silo && unconstrained(*s);
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

// A silo vector x of one column: `vector[N] x`, or `array[N] real x` read a row at a time (`x[n]`,
// Stan's older style; the runtime holds both as N x 1).
bool column_data(const Symbol& x) {
  return (x.type.base == Base::Vector && x.type.array_dims == 0) || (x.type.base == Base::Real && x.type.array_dims == 1);
}

// A silo's data, or its transformed data computed from the raw data when the silo reads it (built
// by statements, or a value the runtime can compute: semantic.h computed_at_load), then held as
// data is: centred as data is.
bool silo_data(const Symbol* s) {
  return s && s->owner == Owner::Silo && (s->kind == SymbolKind::Data || computed_at_load(*s));
}

// Whether x is read in the value of a transformed datum the kernels compute (`vector[N] x2 =
// square(x);`): with x centred that value would read x - xbar, and the fit be of another model.
bool read_by_kernel_transformed_data(const SemanticModel& m, const std::string& x) {
  return std::any_of(m.symbols.begin(), m.symbols.end(), [&](const Symbol& s) {
    return s.kind == SymbolKind::Transformed && s.block == BlockKind::TransformedData && !computed_at_load(s) &&
           count_in(s.value, x) > 0;
  });
}

// Whose coefficients a product may have: a global W (the server's centring) or a silo's local b
// (a local slope, centred by the silo alone: local_slope_centring_of).
enum class Coefficient { Global, Local };

// `x * W` (or `W * x`, W a real and x a vector), x possibly one row `x[n]`: the data product an
// intercept is added to.
std::optional<CentringProduct> product(const SemanticModel& m, const Expr* e, Base intercept,
                                       Coefficient owner = Coefficient::Global) {
  if (!e || e->kind != ExprKind::Binary || e->name != "*" || e->args.size() != 2) return std::nullopt;
  for (int data_side : {0, 1}) {
    const Expr* x = data_or_row(e->args[data_side].get());
    const Expr* w = e->args[1 - data_side].get();
    if (!x || !w || w->kind != ExprKind::Var) continue;
    const Symbol* xs = m.find(x->name);
    const Symbol* ws = m.find(w->name);
    if (!silo_data(xs)) continue;
    if (xs->type.array_dims != 0 && !column_data(*xs)) continue;
    if (owner == Coefficient::Global ? !global_parameter(ws) : !local_parameter(ws)) continue;
    const Base xb = xs->type.array_dims == 0 ? xs->type.base : Base::Vector, wb = ws->decl->type.base;
    const bool fits = (xb == Base::Matrix && data_side == 0 && wb == Base::Matrix && intercept == Base::RowVector) ||
                      (xb == Base::Matrix && data_side == 0 && wb == Base::Vector && intercept == Base::Real) ||
                      (xb == Base::Vector && wb == Base::Real && intercept == Base::Real);
    if (fits) return CentringProduct{x->name, w->name};
  }
  return std::nullopt;
}

// `a[i]` (i an int: a row's group) or `a[g]` (g an int array: every row's group) of a vector a: the
// group's intercept. Every element of a takes the same shift, so whichever the index selects,
// a_c[i] + (x - xbar) W = a[i] + x W.
bool group_read(const Expr* e, const std::string& a) {
  if (!e || e->kind != ExprKind::Index || e->args.size() != 1 || e->indices.size() != 1 || !is_var(e->args[0].get(), a))
    return false;
  const Index& i = e->indices[0];
  return i.kind == IndexKind::Single && i.lower && (i.lower->type.is_int() || (i.lower->type.is_int_array() &&
                                                                               i.lower->type.array_dims == 1));
}

// The group index of a read `a[g]` (g a silo int array: every row's group) or `a[g[n]]` (one
// row's, n an int): g's name, and the index's text ("g", "g[n]") so that two reads select the same
// group only when they are indexed alike.
struct GroupIndex {
  std::string data, text;
};
std::optional<GroupIndex> group_index(const SemanticModel& m, const Expr* read, const std::string& a) {
  if (!group_read(read, a)) return std::nullopt;
  const Expr* g = read->indices[0].lower.get();
  std::string row;
  if (g->kind == ExprKind::Index && g->args.size() == 1 && g->indices.size() == 1) {
    const Index& n = g->indices[0];
    if (n.kind != IndexKind::Single || !n.lower || n.lower->kind != ExprKind::Var || !n.lower->type.is_int())
      return std::nullopt;
    row = "[" + n.lower->name + "]";
    g = g->args[0].get();
  }
  if (!g || g->kind != ExprKind::Var) return std::nullopt;
  const Symbol* s = m.find(g->name);
  if (!s || s->kind != SymbolKind::Data || s->owner != Owner::Silo || !s->type.is_int_array() || s->type.array_dims != 1)
    return std::nullopt;
  return GroupIndex{g->name, g->name + row};
}

// `b[i] .* x` or `x .* b[i]` (x a silo vector, i = g: every row's group) or `b[i] * x[n]` /
// `x[n] * b[i]` (one row, i = g[n]), b a silo's local vector of the groups' slopes indexed as the
// intercept is (`index`, group_index's text).
std::optional<CentringProduct> group_slope_product(const SemanticModel& m, const Expr* e, const std::string& index) {
  if (!e || e->kind != ExprKind::Binary || e->args.size() != 2 || (e->name != ".*" && e->name != "*"))
    return std::nullopt;
  const bool every_row = index.find('[') == std::string::npos;
  for (int data_side : {0, 1}) {
    const Expr* x = data_or_row(e->args[data_side].get());
    const Expr* w = e->args[1 - data_side].get();
    if (!x || !w || w->kind != ExprKind::Index || w->args.size() != 1 || !w->args[0] ||
        w->args[0]->kind != ExprKind::Var)
      continue;
    const Symbol* ws = m.find(w->args[0]->name);
    if (!local_parameter(ws) || ws->decl->type.base != Base::Vector) continue;
    const std::optional<GroupIndex> gi = group_index(m, w, ws->name);
    const Symbol* xs = m.find(x->name);
    if (!gi || gi->text != index || !silo_data(xs) || !column_data(*xs))
      continue;
    // The whole of x with every row's group (`.*`), or row n of x with row n's group (`*`).
    const Expr* read = e->args[data_side].get();
    const bool whole_x = x == read;
    const bool same_row = whole_x || (read->indices[0].lower->kind == ExprKind::Var &&
                                      gi->text == gi->data + "[" + read->indices[0].lower->name + "]");
    if (whole_x == every_row && (e->name == ".*") == every_row && same_row) return CentringProduct{x->name, ws->name};
  }
  return std::nullopt;
}

// The parameter a sum's term reads as a whole, `b` or `b[i]`, or nullptr.
const Symbol* parameter_term(const SemanticModel& m, const Expr* t) {
  if (t && t->kind == ExprKind::Index && t->args.size() == 1) t = t->args[0].get();
  if (!t || t->kind != ExprKind::Var) return nullptr;
  const Symbol* s = m.find(t->name);
  return s && s->kind == SymbolKind::Parameter ? s : nullptr;
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

// The products `x * W` an intercept's sums add (each sum's positive terms that `product` reads), and
// those common to every sum: a centred x is x - xbar wherever it is read, so it must be read in
// each of the sums, once, and nowhere else; its W in each the same, and no W twice. Or one W with
// a different x in different sums (`u + beta * age_obs` and `u + beta * age_cen`, a censored
// survival model's two sets of rows): every sum holds W once, each x read only in its sums; then
// the x are centred at their pooled mean, one constant, so that every sum takes the same shift.
class ProductTally {
 public:
  explicit ProductTally(Base intercept, Coefficient owner = Coefficient::Global) : intercept_(intercept), owner_(owner) {}
  // One sum's terms; call for every sum that adds the intercept once. False when the sum adds no
  // product (then nothing is tallied: it is no sum that centring could keep equal).
  // `group_index`: the intercept is a vector of groups' local intercepts read so (group_index's
  // text): then a product is a group's own slope (group_slope_product) or one local real slope
  // times a vector x, each x its own (each group's mean is of the rows of one x).
  bool add_sum(const SemanticModel& m, const std::vector<std::pair<const Expr*, bool>>& terms,
               const std::string& group_index = "") {
    std::vector<CentringProduct> own;
    if (!group_index.empty()) companions_ = false;
    for (const auto& [t, positive] : terms) {
      if (!positive) continue;
      std::optional<CentringProduct> p =
          group_index.empty() ? product(m, t, intercept_, owner_) : group_slope_product(m, t, group_index);
      if (!p && !group_index.empty())
        if (p = product(m, t, Base::Real, Coefficient::Local); p && !column_data(*m.find(p->data)))
          p.reset();
      if (!p) continue;
      for (const CentringProduct& q : own)
        if (q.data == p->data || q.coefficient == p->coefficient) repeated_.push_back(p->data), repeated_.push_back(q.data);
      own.push_back(*p);
    }
    for (const CentringProduct& p : own) {
      auto at = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.product == p; });
      if (at == entries_.end()) entries_.push_back({p, 0}), at = entries_.end() - 1;
      ++at->sums;
    }
    return !own.empty();
  }
  // The products in all `sums` sums whose x is read there alone, in the order first written, and
  // the companions: one W's products whose x differ, every sum holding one of them (each x read in
  // its sums alone, all of one type: their columns are pooled). A W shared by two products of one
  // sum was caught there (repeated_).
  Centring common(const SemanticModel& m, int sums) const {
    Centring c;
    std::vector<std::string> done;  // the coefficients seen
    for (const Entry& e : entries_) {
      const std::string& w = e.product.coefficient;
      if (std::find(done.begin(), done.end(), w) != done.end()) continue;
      done.push_back(w);
      std::vector<const Entry*> of_w;
      for (const Entry& f : entries_)
        if (f.product.coefficient == w) of_w.push_back(&f);
      int covered = 0;
      bool alone = true;
      for (const Entry* f : of_w) {
        const Symbol* x = m.find(f->product.data);
        const Symbol* first = m.find(of_w[0]->product.data);
        covered += f->sums;
        alone = alone && std::find(repeated_.begin(), repeated_.end(), f->product.data) == repeated_.end() &&
                uses_in_log_density(m, f->product.data) == f->sums &&
                !read_by_kernel_transformed_data(m, f->product.data) && x && first &&
                (column_data(*x) ? column_data(*first) : x->type.base == first->type.base);
      }
      if (covered != sums || !alone || (of_w.size() > 1 && !companions_)) continue;
      for (const Entry* f : of_w) c.products.push_back(f->product);
    }
    return c;
  }

 private:
  struct Entry {
    CentringProduct product;
    int sums;
  };
  Base intercept_;
  Coefficient owner_;
  bool companions_ = true;  // one W with several x in different sums may be centred (not by groups)
  std::vector<Entry> entries_;
  std::vector<std::string> repeated_;  // an x read twice in one sum, or sharing its W with another there
};

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
  return Centring{{{std::string(kSiloSumCentring), ""}}, ""};
}

// A silo's local a that is the intercept of x * W and whose prior's location is a global mu
// (`a ~ normal(mu, tau)`, `a + x * W`): a's data product and mu.
struct LocalIntercept {
  Centring centring;
  const Symbol* location = nullptr;
  std::vector<const Symbol*> links;  // the silo locals between a and mu (prior_location), nearest first
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

// a's one prior statement `a ~ D(l, ...)` (`a[c] ~ D(l, ...)` in a loop for a vector of groups'), D
// a location family (location_argument), reading a once, its location a variable l read there
// once: l's symbol (any kind); nullptr else.
const Symbol* prior_location_symbol(const SemanticModel& m, const Symbol& a) {
  const Term* prior = nullptr;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.subject == a.name) {
      if (prior) return nullptr;
      prior = &t;
    }
  if (!prior || prior->conditional || !prior->stmt || prior->stmt->kind != StmtKind::Tilde) return nullptr;
  const Expr* variate = prior->stmt->lhs.get();
  const bool one_group = a.decl->type.base == Base::Vector && group_read(variate, a.name) &&
                         variate->indices[0].lower->type.is_int();
  if (!is_var(variate, a.name) && !one_group) return nullptr;
  const int at = location_argument(prior->stmt->name);
  if (at < 0 || size_t(at) >= prior->stmt->args.size() || count_in(*prior->stmt, a.name) != 1) return nullptr;
  const Expr* location = prior->stmt->args[size_t(at)].get();
  const Symbol* l = location && location->kind == ExprKind::Var ? m.find(location->name) : nullptr;
  if (!l || count_in(*prior->stmt, l->name) != 1) return nullptr;
  return l;
}

// A nesting no user writes deeper (wards in hospitals in regions in ...): the walk is a loop, and
// this bounds it.
constexpr int kMaxLinks = 8;

int reads_in_declarations(const SemanticModel& m, const Symbol& b);

// h links a hierarchy to the level above: a silo's unconstrained local of type `base`, read only as
// the location of the prior below it and as the variate of its own (`a_w ~ normal(a_h, tau_w)`,
// `a_h ~ normal(mu, tau_h)`), in no declaration's bound, offset or multiplier. Shifted by xbar W
// with the rest of the chain, every difference the priors read (a_w - a_h, a_h - mu) stays as
// written.
bool link(const SemanticModel& m, const Symbol& h, Base base) {
  return local_parameter(&h) && h.decl->type.base == base && uses_in_log_density(m, h.name) == 2 &&
         reads_in_declarations(m, h) == 0;
}

// a's one prior's location mu (prior_location_symbol) when it is a global of type `location_base`
// read there once and otherwise only in the server's priors; nullptr else. With `links`, the
// location may be a chain of silo locals (link) ending at such a mu, nearest first, each added.
const Symbol* prior_location(const SemanticModel& m, const Symbol& a, Base location_base,
                             std::vector<const Symbol*>* links = nullptr) {
  const Symbol* mu = prior_location_symbol(m, a);
  for (int depth = 0; mu && links && depth < kMaxLinks && link(m, *mu, location_base); ++depth) {
    links->push_back(mu);
    mu = prior_location_symbol(m, *mu);
  }
  if (!global_parameter(mu) || mu->decl->type.base != location_base) return nullptr;
  // The prior that reads mu (a's, or the last link's); that of a global a is itself one of the server's.
  const Symbol& below = links && !links->empty() ? *links->back() : a;
  const Term* prior = nullptr;
  for (const Term& t : m.terms)
    if (t.kind == TermKind::Prior && t.subject == below.name) prior = &t;
  const int other_server_reads = reads_in_server_priors(m, *mu) - (prior->owner == TermOwner::Server ? 1 : 0);
  if (uses_in_log_density(m, mu->name) != 1 + other_server_reads) return nullptr;
  return mu;
}

// a (a silo's local: a real, a row_vector, or a vector of groups' intercepts read as a, a[i] or
// a[g]) when every sum adding +a once holds +x * W (one x and W) and no other parameter; x is
// read only there; a only there and in its one prior (prior_location), whose location mu is a
// global of a's type (a real for a vector: one location for every group).
std::optional<LocalIntercept> local_intercept(const SemanticModel& m, const Symbol& a) {
  if (a.kind != SymbolKind::Parameter || a.owner != Owner::Silo || !unconstrained(a) || split_model(m))
    return std::nullopt;
  const Base base = a.decl->type.base;
  if (base != Base::Real && base != Base::RowVector && base != Base::Vector) return std::nullopt;
  const bool groups = base == Base::Vector;
  // A group's intercept is one number added to each row's x * W: a real intercept's product.
  const Base row_base = groups ? Base::Real : base;
  ProductTally tally(row_base);
  int matches = 0;
  bool refused = false;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0, others = 0;
    for (const auto& [t, positive] : terms) {
      const bool reads_a = is_var(t, a.name) || (groups && group_read(t, a.name));
      if (positive && reads_a) ++intercepts;
      if (const Symbol* s = parameter_term(m, t); s && s != &a) ++others;
    }
    if (intercepts == 0) return;
    if (intercepts != 1 || others > 0 || !tally.add_sum(m, terms)) refused = true;
    ++matches;
  });
  if (refused || matches == 0) return std::nullopt;
  Centring found = tally.common(m, matches);
  if (found.products.empty() || uses_in_log_density(m, a.name) != matches + 1) return std::nullopt;
  std::vector<const Symbol*> links;
  const Symbol* mu = prior_location(m, a, row_base, &links);
  if (!mu) return std::nullopt;
  return LocalIntercept{std::move(found), mu, std::move(links)};
}

// b's reads in the parameters' declared bounds, offsets and multipliers (`real<lower=mu> w`,
// `<offset=mu>`): transforms that read b's value, which uses_in_log_density does not count.
int reads_in_declarations(const SemanticModel& m, const Symbol& b) {
  int n = 0;
  for (const Symbol& s : m.symbols)
    if (s.kind == SymbolKind::Parameter && s.decl)
      for (const ExprPtr* e : {&s.decl->type.lower, &s.decl->type.upper, &s.decl->type.offset, &s.decl->type.multiplier})
        n += count_in(e->get(), b.name);
  return n;
}

// A silo's local declared `real<offset=b, multiplier=s> a` (or a vector of groups', read as a[g]):
// Stan's non-centred form, a = b + s * z with z the fit's coordinate, b a real global. Its one
// prior must be a location family about b (`a ~ normal(b, s)`, reading a - b alone), so that
// a_c = b_c + s z leaves it as written; s must not read b.
bool affine_carrier(const SemanticModel& m, const Symbol& a, const Symbol& b) {
  if (a.kind != SymbolKind::Parameter || a.owner != Owner::Silo || !a.decl || split_model(m)) return false;
  const TypeDecl& t = a.decl->type;
  if (!is_var(t.offset.get(), b.name) || count_in(t.multiplier.get(), b.name) != 0 || t.lower || t.upper ||
      t.simplex || t.ordering != Ordering::None || t.structure != MatrixStructure::None || !t.array_sizes.empty() ||
      (t.base != Base::Real && t.base != Base::Vector))
    return false;
  return prior_location(m, a, Base::Real) == &b;
}

// The transformed parameters that carry a real global b into sums: `real a = mu + tau * z;` (or
// `vector[J] a = mu + tau * z;`, or element by element in a loop, read as a[g]: groups), unconstrained, defined whole by one sum
// that adds +b once and reads it nowhere else there, with no other global read whole and no data
// product in it. A sum that adds +a (or +a[g]) adds b: the non-centred hierarchy of Stan's
// transformed parameters (eight schools), `y ~ normal(a + x * beta, sigma)`.
std::vector<const Symbol*> carriers_of(const SemanticModel& m, const Symbol& b) {
  std::vector<const Symbol*> out;
  if (b.decl->type.base != Base::Real) return out;
  for (const Symbol& t : m.symbols) {
    if (affine_carrier(m, t, b)) {
      out.push_back(&t);
      continue;
    }
    // A vector's value may be element j's, `for (j in 1:J) a[j] = mu + tau * z[j];` (its one
    // assignment): each element reads b once there too.
    if (t.kind != SymbolKind::Transformed || t.block != BlockKind::TransformedParameters || !t.value ||
        (t.loop && t.type.base != Base::Vector) || !unconstrained(t) ||
        (t.type.base != Base::Real && t.type.base != Base::Vector) || !is_sum(t.value) ||
        count_in(t.value, b.name) != 1)
      continue;
    std::vector<std::pair<const Expr*, bool>> terms;
    sum_terms(t.value, true, terms);
    int intercepts = 0, others = 0, products = 0;
    for (const auto& [e, positive] : terms) {
      if (positive && is_var(e, b.name)) ++intercepts;
      if (const Symbol* s = parameter_term(m, e); s && s != &b && s->owner == Owner::Global && e->kind == ExprKind::Var)
        ++others;
      if (product(m, e, Base::Real) || product(m, e, Base::Real, Coefficient::Local)) ++products;
    }
    if (intercepts == 1 && others == 0 && products == 0) out.push_back(&t);
  }
  return out;
}

// A global intercept b: a real or row_vector read whole (`b + x * W`), or a vector of groups'
// intercepts read as b[i] or b[g] (each group's b plus x * W, W a real or vector); a real b also
// through its carriers (carriers_of: `a + x * W`, a = b + tau * z). A sum that adds another global
// parameter read whole (`b1 + b2 + x * W`: both would shift), or, for a vector of groups', any
// other global parameter, is refused.
std::optional<Centring> direct_centring_of(const SemanticModel& m, const Symbol& b) {
  if (!global_parameter(&b)) return std::nullopt;
  const Base base = b.decl->type.base;
  if (base != Base::Real && base != Base::RowVector && base != Base::Vector) return std::nullopt;
  if (split_model(m)) return base == Base::Real ? vertical_centring_of(m, b) : std::nullopt;
  const bool groups = base == Base::Vector;
  const Base row_base = groups ? Base::Real : base;
  // Every sum holding +b and products +x * W (`b + x * W`, `x * W + b`, `o + b + x * W + v * c`).
  ProductTally tally(row_base);
  const std::vector<const Symbol*> carriers = carriers_of(m, b);
  std::vector<int> carried(carriers.size(), 0);  // each carrier's reads in the matched sums
  int matches = 0;
  bool refused = false;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0, others = 0;
    size_t via = carriers.size();
    for (const auto& [t, positive] : terms) {
      if (positive && (is_var(t, b.name) || (groups && group_read(t, b.name)))) ++intercepts;
      for (size_t c = 0; c < carriers.size(); ++c)
        if (positive && (is_var(t, carriers[c]->name) ||
                         (carriers[c]->type.base == Base::Vector && group_read(t, carriers[c]->name))))
          ++intercepts, via = c;
      if (const Symbol* s = parameter_term(m, t); s && s != &b && s->owner == Owner::Global &&
                                                   (groups || t->kind == ExprKind::Var))
        ++others;
    }
    if (intercepts != 1 || !tally.add_sum(m, terms)) return;
    if (others > 0) refused = true;
    ++matches;
    if (via < carriers.size()) ++carried[via];
  });
  if (refused || matches == 0) return std::nullopt;
  // Each x read there alone (ProductTally); b there, in its carriers' definitions and in the
  // server's priors alone (evaluated at b = b_c - sum_j xbar_j W_j); each carrier read only in
  // the matched sums (elsewhere its b would be shifted with nothing to undo it).
  Centring found = tally.common(m, matches);
  if (found.products.empty()) return std::nullopt;
  int direct = matches;
  for (size_t c = 0; c < carriers.size(); ++c) {
    // (A carrier defined by its one assignment, not its declaration, names itself there once more;
    // an affine local is read in its prior too, which reads b: a - b, the same in the fit.)
    const bool affine = carriers[c]->kind == SymbolKind::Parameter;
    const int defining = affine || (carriers[c]->decl && carriers[c]->decl->init) ? 0 : 1;
    if (uses_in_log_density(m, carriers[c]->name) - defining - (affine ? 1 : 0) != carried[c]) return std::nullopt;
    direct -= carried[c];
  }
  // b's reads: the matched sums' own, one in each transformed carrier's definition or affine
  // carrier's prior, and the server's priors; in declarations, only the affine carriers' offsets
  // (any other transform reading b would read b_c).
  int affine = 0;
  for (const Symbol* c : carriers) affine += c->kind == SymbolKind::Parameter ? 1 : 0;
  if (uses_in_log_density(m, b.name) != direct + int(carriers.size()) + reads_in_server_priors(m, b) ||
      reads_in_declarations(m, b) != affine)
    return std::nullopt;
  return found;
}

// The products `x * b` of a silo's local real a with its own local slopes b, in every sum adding +a
// once (each x read there alone, ProductTally), chains not yet refused (local_slope_centring_of).
Centring slope_products(const SemanticModel& m, const Symbol& a) {
  if (a.kind != SymbolKind::Parameter || a.owner != Owner::Silo || !unconstrained(a) ||
      a.decl->type.base != Base::Real || split_model(m))
    return {};
  ProductTally tally(Base::Real, Coefficient::Local);
  int matches = 0;
  bool refused = false;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0;
    for (const auto& [t, positive] : terms)
      if (positive && is_var(t, a.name)) ++intercepts;
    if (intercepts == 0) return;
    if (intercepts != 1 || !tally.add_sum(m, terms)) refused = true;
    ++matches;
  });
  if (refused || matches == 0) return {};
  Centring c = tally.common(m, matches);
  for (const CentringProduct& p : c.products)
    if (p.coefficient == a.name) return {};
  return c;
}

// The products of a silo's local vector a of groups' intercepts with their own slopes, in every sum
// adding +a[g] (or +a[g[n]]) once, every such read of a indexed by the same silo int array g (each
// x read there alone, ProductTally); Centring::group is g. Chains not yet refused.
Centring group_slope_products(const SemanticModel& m, const Symbol& a) {
  if (a.kind != SymbolKind::Parameter || a.owner != Owner::Silo || !unconstrained(a) ||
      a.decl->type.base != Base::Vector || split_model(m))
    return {};
  ProductTally tally(Base::Real, Coefficient::Local);
  int matches = 0;
  bool refused = false;
  std::string group;
  each_sum(m, [&](const std::vector<std::pair<const Expr*, bool>>& terms) {
    int intercepts = 0;
    std::optional<GroupIndex> index;
    for (const auto& [t, positive] : terms)
      if (positive && group_read(t, a.name)) ++intercepts, index = group_index(m, t, a.name);
    if (intercepts == 0) return;
    if (intercepts != 1 || !index || (!group.empty() && index->data != group) || !tally.add_sum(m, terms, index->text))
      refused = true;
    else
      group = index->data;
    ++matches;
  });
  if (refused || matches == 0) return {};
  Centring c = tally.common(m, matches);
  for (const CentringProduct& p : c.products)
    if (p.coefficient == a.name) return {};
  if (!c.products.empty()) c.group = group;
  return c;
}

// A local's own slopes' products, as a real intercept's or a vector of groups'.
Centring own_slope_products(const SemanticModel& m, const Symbol& a) {
  Centring c = slope_products(m, a);
  return c.products.empty() ? group_slope_products(m, a) : c;
}

}  // namespace

std::string CentredCoefficient::data_text() const {
  std::string text;
  for (size_t i = 0; i < data.size(); ++i)
    text += (i == 0 ? "" : i + 1 == data.size() ? " and " : ", ") + data[i];
  return text;
}

std::string CentredCoefficient::product_text() const {
  std::string x;
  for (size_t i = 0; i < data.size(); ++i) x += (i == 0 ? "" : " or ") + data[i];
  return (data.size() > 1 ? "(" + x + ")" : x) + " * " + coefficient;
}

std::vector<CentredCoefficient> by_coefficient(const Centring& c) {
  std::vector<CentredCoefficient> out;
  for (const CentringProduct& p : c.products) {
    auto at = std::find_if(out.begin(), out.end(), [&](const CentredCoefficient& e) { return e.coefficient == p.coefficient; });
    if (at == out.end()) out.push_back({{p.data}, p.coefficient});
    else at->data.push_back(p.data);
  }
  return out;
}

std::optional<Centring> centring_of(const SemanticModel& m, const Symbol& b) {
  if (std::optional<Centring> c = direct_centring_of(m, b)) return c;
  if (!global_parameter(&b) || split_model(m)) return std::nullopt;
  // The location of one intercept's prior: mu_c = mu + xbar W, shifted with a (a silo's local, or
  // a global vector of groups' intercepts, itself centred).
  std::optional<Centring> found;
  int intercepts = 0;
  for (const Symbol& a : m.symbols) {
    if (std::optional<LocalIntercept> li = local_intercept(m, a); li && li->location == &b) {
      found = li->centring;
      ++intercepts;
    } else if (&a != &b && global_parameter(&a) && a.decl->type.base == Base::Vector &&
               prior_location(m, a, Base::Real) == &b) {
      if (std::optional<Centring> c = direct_centring_of(m, a)) {
        found = c;
        ++intercepts;
      }
    }
  }
  if (intercepts != 1) return std::nullopt;
  return found;
}

std::optional<Centring> local_centring_of(const SemanticModel& m, const Symbol& a) {
  // a itself, or a link of one local intercept's chain to its mu (shifted with it).
  std::optional<LocalIntercept> li = local_intercept(m, a);
  for (auto s = m.symbols.begin(); !li && local_parameter(&a) && s != m.symbols.end(); ++s)
    if (std::optional<LocalIntercept> below = local_intercept(m, *s);
        below && std::find(below->links.begin(), below->links.end(), &a) != below->links.end())
      li = below;
  if (!li) return std::nullopt;
  const std::optional<Centring> c = centring_of(m, *li->location);
  if (!c || *c != li->centring) return std::nullopt;
  return li->centring;
}

std::optional<Centring> local_slope_centring_of(const SemanticModel& m, const Symbol& a) {
  Centring c = own_slope_products(m, a);
  if (c.products.empty()) return std::nullopt;
  // No chains: a slope that is itself an intercept of slopes, or a that is another's slope, would
  // make the maps depend on each other's order.
  for (const CentringProduct& p : c.products)
    if (const Symbol* b = m.find(p.coefficient); !b || !own_slope_products(m, *b).products.empty()) return std::nullopt;
  for (const Symbol& s : m.symbols) {
    if (&s == &a || s.kind != SymbolKind::Parameter || s.owner != Owner::Silo) continue;
    for (const CentringProduct& p : own_slope_products(m, s).products)
      if (p.coefficient == a.name) return std::nullopt;
  }
  return c;
}

}  // namespace fvic
