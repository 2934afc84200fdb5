#include "frontend/data_products.h"

#include <map>
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
    if (s.kind == StmtKind::For) taken_.insert(s.name);
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
    if (e->kind == ExprKind::Binary && e->name == "*" && e->args.size() == 2)
      for (int data_side : {0, 1}) {
        const Expr* w = e->args[1 - data_side].get();
        if (w && w->kind == ExprKind::Var && parameters_.count(w->name)) hoist(e->args[data_side]);
      }
    for (ExprPtr& a : e->args) walk(a);
    for (Index& i : e->indices) walk(i.lower), walk(i.upper);
  }

  // The column `name` when it is one, else nullptr.
  const Column* column(const Expr* e) const {
    if (!e || e->kind != ExprKind::Var) return nullptr;
    auto it = columns_.find(e->name);
    return it == columns_.end() ? nullptr : &it->second;
  }

  // e's type and name when e is one of the forms taken (the header's), else no name.
  std::pair<TypeDecl, std::string> form(const Expr& e) const {
    TypeDecl t;
    t.loc = e.loc;
    if (e.kind == ExprKind::Call && e.args.size() == 1 && elementwise(e.name)) {
      if (const Column* x = column(e.args[0].get())) {
        t.base = Base::Vector;
        t.sizes.push_back(copy(x->size()));
        return {std::move(t), e.name + "_" + x->decl->name};
      }
    }
    if (e.kind == ExprKind::Binary && (e.name == ".*" || e.name == "./") && e.args.size() == 2) {
      const Column* a = column(e.args[0].get());
      const Column* b = column(e.args[1].get());
      if (a && b && to_source(a->size()) == to_source(b->size())) {
        t.base = Base::Vector;
        t.sizes.push_back(copy(a->size()));
        return {std::move(t), a->decl->name + (e.name == ".*" ? "_times_" : "_over_") + b->decl->name};
      }
    }
    if (e.kind == ExprKind::Index && e.args.size() == 1 && e.indices.size() == 1) {
      const Column* x = column(e.args[0].get());
      const Index& r = e.indices[0];
      if (x && r.kind == IndexKind::Range && r.lower && r.upper) {
        // (upper - lower) + 1 rows
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
        t.base = Base::Vector;
        t.sizes.push_back(std::move(rows));
        return {std::move(t), x->decl->name + "_rows"};
      }
    }
    return {std::move(t), ""};
  }

  // e, one of the forms, becomes the name of a transformed datum of its value (one per value).
  void hoist(ExprPtr& e) {
    if (!e) return;
    const std::string text = to_source(*e);
    auto seen = names_.find(text);
    std::string name;
    if (seen != names_.end()) {
      name = seen->second;
    } else {
      auto [type, base] = form(*e);
      if (base.empty()) return;
      name = base;
      for (int k = 2; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
      taken_.insert(name);
      names_.emplace(text, name);
      auto decl = std::make_unique<VarDecl>();
      decl->block = BlockKind::TransformedData;
      decl->type = std::move(type);
      decl->name = name;
      decl->name_loc = decl->loc = e->loc;
      decl->init = copy(*e);
      decl->from_product = true;
      auto s = std::make_unique<Stmt>(StmtKind::Decl, e->loc);
      s->decl = std::move(decl);
      hoisted_.push_back(std::move(s));
    }
    auto var = std::make_unique<Expr>(ExprKind::Var, e->loc);
    var->name = name;
    e = std::move(var);
  }

  Program& program_;
  std::map<std::string, Column> columns_;
  std::set<std::string> parameters_, taken_;
  std::map<std::string, std::string> names_;  // a value's text -> its datum
  std::vector<StmtPtr> hoisted_;
};

}  // namespace

void hoist_data_products(Program& program) { Hoister(program).run(); }

}  // namespace fvic
