#include "frontend/data_products.h"

#include <map>
#include <memory>
#include <tuple>
#include <set>
#include <string>
#include <utility>

#include "frontend/functions.h"
#include "fvi/data/transformed_data.h"

namespace fvic {
namespace {

// The runtime's functions of one real that apply element by element (a vector's value is a
// vector of the same size).
bool elementwise(const std::string& f) {
  static const std::set<std::string> names = {
      "exp",   "log",    "log1p", "expm1", "log1m",     "sqrt",  "square", "inv",     "inv_sqrt", "fabs",
      "abs",   "tanh",   "erf",   "erfc",  "inv_logit", "logit", "Phi",    "log10",   "log2",     "cbrt",
      "exp2",  "log1p_exp", "log_inv_logit", "log1m_inv_logit", "inv_cloglog", "Phi_approx", "atan", "sinh",
      "asinh", "cosh"};
  return names.count(f) > 0 && fvi::data::transformed_data_function(f);
}

ExprPtr copy(const Expr& e) { return substitute(e, {}); }

// One silo data column the rewrite may read, `vector[N] x` (an array of reals times a parameter is
// no product the checker takes).
struct Column {
  const VarDecl* decl;
  const Expr& size() const { return *decl->type.sizes[0]; }
};

class Hoister {
 public:
  explicit Hoister(Program& p) : program_(p) {
    if (const Block* silo = p.find(BlockKind::SiloData))
      for (const VarDeclPtr& d : silo->decls) {
        const TypeDecl& t = d->type;
        if (t.base == Base::Vector && t.array_sizes.empty() && t.sizes.size() == 1 && t.sizes[0])
          columns_.emplace(d->name, Column{d.get()});
      }
    for (const Block& b : p.blocks) {
      for (const VarDeclPtr& d : b.decls) {
        taken_.insert(d->name);
        if (b.kind == BlockKind::Parameters) parameters_.insert(d->name);
      }
      for (const FunctionDef& f : b.functions) taken_.insert(f.name);
    }
    for (const Block& b : p.blocks)
      for (const StmtPtr& s : b.stmts) note_names(*s);
  }

  void run() {
    if (columns_.empty() || parameters_.empty()) return;
    for (BlockKind kind : {BlockKind::TransformedParameters, BlockKind::Model})
      if (Block* b = program_.find(kind)) {
        for (VarDeclPtr& d : b->decls) walk(d->init);
        for (StmtPtr& s : b->stmts) walk(*s);
      }
    if (hoisted_.empty()) return;
    Block* data = program_.find(BlockKind::TransformedData);
    if (!data) {
      auto at = program_.blocks.begin();
      while (at != program_.blocks.end() && at->kind < BlockKind::TransformedData) ++at;
      Block b;
      b.kind = BlockKind::TransformedData;
      b.loc = hoisted_.front()->loc;
      data = &*program_.blocks.insert(at, std::move(b));
    }
    for (StmtPtr& s : hoisted_) data->stmts.push_back(std::move(s));
  }

 private:
  // Every name a statement declares (locals, loop variables): a new name must not meet one.
  void note_names(const Stmt& s) {
    if (s.kind == StmtKind::For) taken_.insert(s.name), loop_variables_.insert(s.name);
    if (s.decl) taken_.insert(s.decl->name);
    for (const StmtPtr& b : s.body)
      if (b) note_names(*b);
  }

  void walk(Stmt& s) {
    walk(s.lhs);
    for (ExprPtr& a : s.args) walk(a);
    for (StmtPtr& b : s.body)
      if (b) walk(*b);
    if (s.decl) walk(s.decl->init);
  }

  // The depth is the expression's, which the parser bounds.
  void walk(ExprPtr& e) {
    if (!e) return;
    regroup(e);
    if (e->kind == ExprKind::Binary && e->name == "*" && e->args.size() == 2)
      for (int data_side : {0, 1}) {
        if (parameter(e->args[1 - data_side].get())) hoist(e->args[data_side]);
      }
    for (ExprPtr& a : e->args) walk(a);
    for (Index& i : e->indices) walk(i.lower), walk(i.upper);
  }

  bool parameter(const Expr* e) const { return e && e->kind == ExprKind::Var && parameters_.count(e->name); }

  // `w * x[n] * v[n]` parses as (w * x[n]) * v[n]: regrouped as w * (x[n] * v[n]) where that is a
  // form (likewise `(w * income) .* age`), the product the user means, equal but for rounding.
  void regroup(ExprPtr& e) {
    if (e->kind != ExprKind::Binary || (e->name != "*" && e->name != ".*") || e->args.size() != 2) return;
    Expr* left = e->args[0].get();
    if (!left || left->kind != ExprKind::Binary || left->name != "*" || left->args.size() != 2 ||
        !parameter(left->args[0].get()))
      return;
    auto inner = std::make_unique<Expr>(ExprKind::Binary, e->loc);
    inner->name = e->name;
    inner->args.push_back(copy(*left->args[1]));
    inner->args.push_back(copy(*e->args[1]));
    if (form(*inner).name.empty()) return;
    auto outer = std::make_unique<Expr>(ExprKind::Binary, e->loc);
    outer->name = "*";
    outer->args.push_back(std::move(left->args[0]));
    outer->args.push_back(std::move(inner));
    e = std::move(outer);
  }

  // The column `name` when it is one, else nullptr.
  const Column* column(const Expr* e) const {
    if (!e || e->kind != ExprKind::Var) return nullptr;
    auto it = columns_.find(e->name);
    return it == columns_.end() ? nullptr : &it->second;
  }

  // A hoisted value: the datum's type, name and value, and the index it is read at where written
  // (`square(age[n])` is `square_age[n]`; null: read whole).
  struct Form {
    TypeDecl type;
    std::string name;  // "": not a form taken
    ExprPtr value;
    const Index* index = nullptr;
  };

  // One row (or rows: an int array) of a column, `x[i]`: the column, and the index.
  std::pair<const Column*, const Index*> row_of(const Expr* e) const {
    if (!e || e->kind != ExprKind::Index || e->args.size() != 1 || e->indices.size() != 1 ||
        e->indices[0].kind != IndexKind::Single || !e->indices[0].lower)
      return {nullptr, nullptr};
    const Column* x = column(e->args[0].get());
    return {x, x ? &e->indices[0] : nullptr};
  }

  static Form vector_form(const Expr& e, const Column& like, std::string name, ExprPtr value, const Index* index) {
    Form f;
    f.type.loc = e.loc;
    f.type.base = Base::Vector;
    f.type.sizes.push_back(copy(like.size()));
    f.name = std::move(name);
    f.value = std::move(value);
    f.index = index;
    return f;
  }

  // f(x) of the column x, or f(x[i]) (elementwise: f(x)[i]).
  Form call_form(const Expr& e) const {
    if (e.kind != ExprKind::Call || e.args.size() != 1 || !elementwise(e.name)) return {};
    const Column* x = column(e.args[0].get());
    const Index* index = nullptr;
    if (!x) std::tie(x, index) = row_of(e.args[0].get());
    if (!x) return {};
    auto value = std::make_unique<Expr>(ExprKind::Call, e.loc);
    value->name = e.name;
    auto arg = std::make_unique<Expr>(ExprKind::Var, e.loc);
    arg->name = x->decl->name;
    value->args.push_back(std::move(arg));
    return vector_form(e, *x, e.name + "_" + x->decl->name, std::move(value), index);
  }

  // a .* b or a ./ b of two columns of one size; or the same rows of each, `a[i] * b[i]`,
  // `a[i] / b[i]` (or .* and ./): (a .* b)[i].
  Form product_form(const Expr& e) const {
    if (e.kind != ExprKind::Binary || e.args.size() != 2) return {};
    const bool times = e.name == ".*" || e.name == "*", over = e.name == "./" || e.name == "/";
    if (!times && !over) return {};
    const Column* a = column(e.args[0].get());
    const Column* b = column(e.args[1].get());
    const Index* index = nullptr;
    if (a || b) {
      if (e.name == "*" || e.name == "/") return {};  // whole columns: only the elementwise operators
    } else {
      auto [ra, ia] = row_of(e.args[0].get());
      auto [rb, ib] = row_of(e.args[1].get());
      if (!ra || !rb || to_source(*ia->lower) != to_source(*ib->lower)) return {};
      // `*` and `/` of rows picked by an int array would be no valid product: the index must be
      // surely one int (a loop's variable or a literal), so the rewrite never makes one valid.
      const Expr& i = *ia->lower;
      if ((e.name == "*" || e.name == "/") &&
          !(i.kind == ExprKind::IntLit || (i.kind == ExprKind::Var && loop_variables_.count(i.name))))
        return {};
      a = ra, b = rb, index = ia;
    }
    if (!a || !b || to_source(a->size()) != to_source(b->size())) return {};
    auto value = std::make_unique<Expr>(ExprKind::Binary, e.loc);
    value->name = times ? ".*" : "./";
    for (const Column* c : {a, b}) {
      auto v = std::make_unique<Expr>(ExprKind::Var, e.loc);
      v->name = c->decl->name;
      value->args.push_back(std::move(v));
    }
    return vector_form(e, *a, a->decl->name + (times ? "_times_" : "_over_") + b->decl->name, std::move(value), index);
  }

  // x[l:u], both bounds written: (u - l) + 1 rows.
  Form range_form(const Expr& e) const {
    if (e.kind != ExprKind::Index || e.args.size() != 1 || e.indices.size() != 1) return {};
    const Column* x = column(e.args[0].get());
    const Index& r = e.indices[0];
    if (!x || r.kind != IndexKind::Range || !r.lower || !r.upper) return {};
    auto diff = std::make_unique<Expr>(ExprKind::Binary, e.loc);
    diff->name = "-";
    diff->args.push_back(copy(*r.upper));
    diff->args.push_back(copy(*r.lower));
    auto one = std::make_unique<Expr>(ExprKind::IntLit, e.loc);
    one->int_value = 1;
    one->text = "1";
    auto rows = std::make_unique<Expr>(ExprKind::Binary, e.loc);
    rows->name = "+";
    rows->args.push_back(std::move(diff));
    rows->args.push_back(std::move(one));
    Form f;
    f.type.loc = e.loc;
    f.type.base = Base::Vector;
    f.type.sizes.push_back(std::move(rows));
    f.name = x->decl->name + "_rows";
    f.value = copy(e);
    return f;
  }

  // e's form when it is one of those taken (the header's), else one with no name.
  Form form(const Expr& e) const {
    for (Form (Hoister::*taken)(const Expr&) const : {&Hoister::call_form, &Hoister::product_form, &Hoister::range_form})
      if (Form f = (this->*taken)(e); !f.name.empty()) return f;
    return {};
  }

  // e, one of the forms, becomes the name of a transformed datum of its value (one per value), or
  // the rows of it that e read.
  void hoist(ExprPtr& e) {
    if (!e) return;
    Form f = form(*e);
    if (f.name.empty()) return;
    const std::string text = to_source(*f.value);
    auto seen = names_.find(text);
    std::string name;
    if (seen != names_.end()) {
      name = seen->second;
    } else {
      name = f.name;
      for (int k = 2; taken_.count(name); ++k) name = f.name + "_" + std::to_string(k);
      taken_.insert(name);
      names_.emplace(text, name);
      auto decl = std::make_unique<VarDecl>();
      decl->block = BlockKind::TransformedData;
      decl->type = std::move(f.type);
      decl->name = name;
      decl->name_loc = decl->loc = e->loc;
      decl->init = std::move(f.value);
      decl->from_product = true;
      auto s = std::make_unique<Stmt>(StmtKind::Decl, e->loc);
      s->decl = std::move(decl);
      hoisted_.push_back(std::move(s));
    }
    auto var = std::make_unique<Expr>(ExprKind::Var, e->loc);
    var->name = name;
    if (f.index) {
      auto row = std::make_unique<Expr>(ExprKind::Index, e->loc);
      row->args.push_back(std::move(var));
      Index i;
      i.kind = IndexKind::Single;
      i.lower = copy(*f.index->lower);
      i.loc = f.index->loc;
      row->indices.push_back(std::move(i));
      e = std::move(row);
    } else {
      e = std::move(var);
    }
  }

  Program& program_;
  std::map<std::string, Column> columns_;
  std::set<std::string> parameters_, taken_, loop_variables_;
  std::map<std::string, std::string> names_;  // a value's text -> its datum
  std::vector<StmtPtr> hoisted_;
};

}  // namespace

void hoist_data_products(Program& program) { Hoister(program).run(); }

}  // namespace fvic
