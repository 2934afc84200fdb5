// The checker (checker_impl.h) on the derived blocks, transformed data, transformed parameters and
// generated quantities: their statements, the sizes they may not give, silo_sum values, and who
// computes each value (inferred from what it reads).
#include "analysis/transformed_data.h"
#include "frontend/checker_impl.h"

namespace fvic {
namespace check_detail {

// ---- transformed data, transformed parameters, generated quantities ------------------------

bool Checker::is_silo_sum(const Expr& e) { return e.kind == ExprKind::Call && e.name == "silo_sum"; }

bool Checker::is_derived(BlockKind b) {
  return b == BlockKind::TransformedData || b == BlockKind::TransformedParameters ||
         b == BlockKind::GeneratedQuantities;
}

Symbol* Checker::derived_symbol(const std::string& name) {
  for (auto it = model_.symbols.rbegin(); it != model_.symbols.rend(); ++it)
    if (it->name == name) return it->kind == SymbolKind::Transformed ? &*it : nullptr;
  return nullptr;
}

const Expr* Checker::size_alias(const Symbol& s) const {
  if (s.kind != SymbolKind::Transformed || s.block != BlockKind::TransformedData || !s.value || s.loop ||
      !s.type.is_int() || s.type.array_dims != 0)
    return nullptr;
  return size_value(*s.value, model_) ? s.value : nullptr;
}

// Sizes are read from the data files before anything is computed; an int computed from sizes
// alone (`int Kc = K - 1;`) is known then too.
void Checker::reject_derived_size(const Expr& e, const VarDecl& d) {
  if (e.kind == ExprKind::Var) {
    const Symbol* s = model_.find(e.name);
    if (s && s->kind == SymbolKind::Transformed && !size_alias(*s))
      diags_.error(e.loc, "the size of '" + d.name + "' uses '" + e.name + "', declared in '" +
                              block_name(s->block) + "'",
                   "sizes are read from the data files before anything is computed; a size may use an int "
                   "given as + - * of data ints and literals (`int K2 = 2 * K;`), or declare '" + e.name +
                       "' in a data block");
    return;
  }
  for (const ExprPtr& a : e.args)
    if (a) reject_derived_size(*a, d);
}

void Checker::check_derived(const Block& b) {
  block_ = b.kind;
  scopes_.emplace_back();
  for (const StmtPtr& s : b.stmts) stmt(*s);
  scopes_.pop_back();
  block_ = BlockKind::Model;
  for (Symbol& sym : model_.symbols) {
    if (sym.kind != SymbolKind::Transformed || sym.block != b.kind) continue;
    sym.aggregate = sym.value && !sym.loop && is_silo_sum(*sym.value) && !sym.value->type.is_error();
    if (sym.taint.has(K::SiloSum) && !sym.aggregate) {
      const bool rejected = sym.value && sym.value->type.is_error();  // its silo_sum was reported already
      if (!rejected)
        diags_.error(sym.loc, "'" + sym.name + "' reads " + sym.taint.witness[static_cast<size_t>(K::SiloSum)] +
                                  ", a sum over the silos",
                     "a sum over the silos arrives at the server after every other value is computed; derived "
                     "values cannot read it yet");
      sym.owner = Owner::Global;
      continue;
    }
    infer_owner(sym);
    // A silo's value of data alone is computed once, when the silo reads its data (not an int: ints
    // size other declarations, from their values).
    sym.value_at_load = sym.block == BlockKind::TransformedData && sym.owner == Owner::Silo && sym.value &&
                        !sym.loop && sym.decl && sym.value == sym.decl->init.get() && !sym.type.is_int_valued() &&
                        !sym.value->type.is_error() && computable_at_load(model_, *sym.decl);
    // Values computed when the data is read have their bounds checked then (fvi/data/transformed_data.h).
    if (sym.block == BlockKind::TransformedData && (sym.decl->type.lower || sym.decl->type.upper) &&
        !computed_at_load(sym))
      diags_.warning(sym.decl->type.loc, "the bounds of transformed data '" + sym.name + "' are not checked yet",
                     "transformed data is computed inside the kernels that read it; check the data it is "
                     "computed from with bounds in its data block");
  }
}

// Who computes a derived value: whoever may read everything it reads (DESIGN.md §2's flow
// rules). Each silo its own when it reads silo data or locals; the server for globals and
// server data; every party for public data alone.
void Checker::infer_owner(Symbol& sym) {
  const Taint& t = sym.taint;
  auto first = [&](std::initializer_list<K> kinds) -> std::string {
    for (K k : kinds)
      if (t.has(k)) return taint_description(k) + std::string(" '") + t.witness[static_cast<size_t>(k)] + "'";
    return "";
  };
  std::string silo = first({K::SiloData, K::LocalParam, K::LocalHyper});
  std::string split = first({K::SplitData, K::SplitParam, K::SplitHyper});
  std::string server = first({K::ServerData});
  std::string a = !server.empty() ? server : silo, b = !server.empty() ? (!silo.empty() ? silo : split) : split;
  if (!a.empty() && !b.empty()) {
    diags_.error(sym.loc, "no party may compute '" + sym.name + "': it reads " + a + " and " + b,
                 "each value in '" + std::string(block_name(sym.block)) +
                     "' is computed by one party; compute a silo's part there and combine it with "
                     "silo_sum(...), or split the value in two");
    sym.owner = Owner::Global;
    return;
  }
  // A vertical silo never sees the globals' draws (the server holds q of them): a value of
  // both is nobody's.
  std::string global = first({K::GlobalParam, K::GlobalHyper});
  if (!split.empty() && !global.empty()) {
    const std::string own = first({K::SplitParam, K::SplitHyper, K::SplitData});  // the value over its size
    diags_.error(sym.loc, "no party may compute '" + sym.name + "': it reads " + own + " and " + global,
                 "split values stay with their silo and the globals' draws with the server; compute silo k's "
                 "part from its split values alone and the server's from the globals, as two values");
    sym.owner = Owner::Global;
    return;
  }
  if (!silo.empty()) sym.owner = Owner::Silo;
  else if (!split.empty()) sym.owner = Owner::Split;
  else if (sym.block == BlockKind::TransformedData) sym.owner = server.empty() ? Owner::Public : Owner::Server;
  else sym.owner = Owner::Global;
}

}  // namespace check_detail
}  // namespace fvic
