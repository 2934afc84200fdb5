// The checker (checker_impl.h) on declarations: owners and marks, sizes and bounds and what they
// may read, the symbol each declaration adds; and the scopes names are looked up in.
#include "frontend/checker_impl.h"

namespace fvic {
namespace check_detail {

// ---- declarations --------------------------------------------------------------------------

Owner Checker::owner_of(const VarDecl& d) {
  switch (d.block) {
    case BlockKind::Data: return Owner::Public;
    case BlockKind::ServerData: return Owner::Server;
    case BlockKind::SiloData: return Owner::Silo;
    case BlockKind::SplitData: return Owner::Split;
    case BlockKind::Hyperparameters:
    case BlockKind::Parameters:
      return d.mark == Mark::Local ? Owner::Silo : d.mark == Mark::Split ? Owner::Split
                                                                         : Owner::Global;
    default: return Owner::Scope;
  }
}

K Checker::taint_kind(SymbolKind kind, Owner owner) {
  if (kind == SymbolKind::Data) {
    switch (owner) {
      case Owner::Server: return K::ServerData;
      case Owner::Silo: return K::SiloData;
      case Owner::Split: return K::SplitData;
      default: return K::PublicData;
    }
  }
  bool hyper = kind == SymbolKind::Hyperparameter;
  switch (owner) {
    case Owner::Silo: return hyper ? K::LocalHyper : K::LocalParam;
    case Owner::Split: return hyper ? K::SplitHyper : K::SplitParam;
    default: return hyper ? K::GlobalHyper : K::GlobalParam;
  }
}

// What a declaration's sizes and bounds may read, by where it is declared.
unsigned Checker::allowed_size_taint(const VarDecl& d, Owner owner) const {
  unsigned pub = 1u << static_cast<unsigned>(K::PublicData);
  switch (d.block) {
    case BlockKind::Data: return pub;
    case BlockKind::ServerData: return pub | (1u << static_cast<unsigned>(K::ServerData));
    case BlockKind::SiloData: return pub | (1u << static_cast<unsigned>(K::SiloData));
    case BlockKind::SplitData: return pub | (1u << static_cast<unsigned>(K::SplitData));
    case BlockKind::Model:
    case BlockKind::Functions:
    case BlockKind::TransformedData:
    case BlockKind::TransformedParameters:
    case BlockKind::GeneratedQuantities: return ~0u & ~param_bits();
    default:
      if (owner == Owner::Silo) return pub | (1u << static_cast<unsigned>(K::SiloData));
      if (owner == Owner::Split) return pub | (1u << static_cast<unsigned>(K::SplitData));
      return pub;
  }
}

unsigned Checker::param_bits() {
  unsigned b = 0;
  for (K k : {K::GlobalParam, K::LocalParam, K::SplitParam, K::GlobalHyper, K::LocalHyper,
              K::SplitHyper, K::SiloSum})
    b |= 1u << static_cast<unsigned>(k);
  return b;
}

// The owner an unmarked parameter's sizes suggest: local if they read silo data, split if
// split data, else global.
Owner Checker::unmarked_owner(const VarDecl& d) {
  Taint t;
  for (const std::vector<ExprPtr>* sizes : {&d.type.array_sizes, &d.type.sizes})
    for (const ExprPtr& s : *sizes) {
      expr(*s);
      t.merge(s->taint);
    }
  if (t.has(K::SiloData) && has_silo_data_) return Owner::Silo;
  if (t.has(K::SplitData) && has_split_data_) return Owner::Split;
  return Owner::Global;
}

void Checker::check_marks(const VarDecl& d, Owner guessed) {
  bool is_param_block = d.block == BlockKind::Parameters || d.block == BlockKind::Hyperparameters;
  if (!is_param_block) {
    if (d.mark != Mark::None) {
      std::string where = d.block == BlockKind::Model ? "a model-block variable"
                                                      : std::string("'") + block_name(d.block) + "'";
      bool derived = d.block == BlockKind::TransformedData || d.block == BlockKind::TransformedParameters ||
                     d.block == BlockKind::GeneratedQuantities;
      diags_.error(d.mark_loc, std::string("the mark '") + mark_name(d.mark) + "' is not allowed on " + where,
                   derived ? "fvic infers who computes a derived value from what it reads"
                           : "marks say who holds a parameter; data blocks already say who holds their values");
    }
    return;
  }
  if (d.block == BlockKind::Parameters && d.mark == Mark::None) {
    std::string help = "start the declaration with `global` (shared by all silos)";
    if (has_silo_data_) help += " or `local` (one per silo, never leaves it)";
    if (has_split_data_) help += " or `split` (one block per silo)";
    if (guessed == Owner::Silo) help = "its size uses silo data, so it is probably `local`: " + help;
    if (guessed == Owner::Split) help = "its size uses split data, so it is probably `split`: " + help;
    diags_.error(d.loc, "parameter '" + d.name + "' needs a mark: global, local or split", help);
  }
  if (d.mark == Mark::Local && !has_silo_data_)
    diags_.error(d.mark_loc, "'" + d.name + "' is local, but the model has no 'silo data'",
                 "local parameters belong to silos holding rows; declare a `silo data` block or "
                 "make '" + d.name + "' global");
  if (d.mark == Mark::Split && !has_split_data_)
    diags_.error(d.mark_loc, "'" + d.name + "' is split, but the model has no 'split data'",
                 "split values belong to silos holding columns; declare a `split data` block "
                 "or make '" + d.name + "' global");
}

// cholesky_factor_corr[K] and the other structured matrices: a cholesky_factor_corr parameter
// (its transform and log-Jacobian are in the lowering), or any of the four as a transformed
// parameter or generated quantity, whose structure is checked at each output draw
// (fvi/program/quantities.h). Data and transformed data of these types are not checked yet.
void Checker::check_structured_matrix(const VarDecl& d, const Symbol& sym, bool derived) {
  const std::string name = structure_name(d.type.structure);
  const bool parameter = sym.kind == SymbolKind::Parameter || sym.kind == SymbolKind::Hyperparameter;
  const bool quantity = derived && d.block != BlockKind::TransformedData && sym.kind == SymbolKind::Transformed;
  if (!parameter && !quantity) {
    diags_.error(d.type.loc, "a " + name + " in '" + block_name(d.block) + "' is not " +
                                 (derived ? "checked yet" : "supported yet"),
                 d.type.structure == MatrixStructure::UnitVector ? "declare it as `vector[K]`" : "declare it as `matrix[K, K]`");
    return;
  }
  if (!d.type.array_sizes.empty())
    diags_.error(d.type.loc, "arrays of " + name + " are not supported yet",
                 "declare each factor as its own `" + name + "[K]`");
}

// <offset=a, multiplier=b> on a parameter (Stan's affine transform x = a + b u): not with bounds,
// a and b scalars or of the parameter's shape, read only what the parameter's owner may read
// (public data, and parameters: globals for any, a silo's own data and locals for a local).
void Checker::check_affine(const VarDecl& d, const Symbol& sym) {
  if (sym.kind != SymbolKind::Parameter && sym.kind != SymbolKind::Hyperparameter) {
    diags_.error(d.type.loc, "an offset or multiplier is allowed on parameters only",
                 "the affine transform reparameterises a parameter; compute a derived value instead");
    return;
  }
  if (d.type.lower || d.type.upper || d.type.simplex || d.type.ordering != Ordering::None ||
      d.type.structure != MatrixStructure::None || d.type.base == Base::Int) {
    diags_.error(d.type.loc, "'" + d.name + "' has an offset or multiplier with another constraint",
                 "use either bounds or `<offset=..., multiplier=...>`, as in Stan");
    return;
  }
  unsigned allowed = allowed_size_taint(d, sym.owner);
  for (K k : {K::GlobalParam, K::GlobalHyper}) allowed |= 1u << static_cast<unsigned>(k);
  if (sym.owner == Owner::Silo)
    for (K k : {K::LocalParam, K::LocalHyper, K::SiloData}) allowed |= 1u << static_cast<unsigned>(k);
  for (const ExprPtr* part : {&d.type.offset, &d.type.multiplier}) {
    if (!*part) continue;
    Expr& e = **part;
    expr(e);
    if (e.type.is_error()) continue;
    if (!e.type.is_scalar() && !e.shape.elements().equals(sym.shape.elements()))
      diags_.error(e.loc, std::string("the ") + (part == &d.type.offset ? "offset" : "multiplier") + " of '" +
                              d.name + "' must be a scalar or have its " + sym.shape.str() + " elements",
                   "write one number, or a container of its shape");
    for (unsigned i = 0; i < static_cast<unsigned>(K::Count); ++i) {
      if (!(e.taint.bits & (1u << i)) || (allowed & (1u << i))) continue;
      diags_.error(e.loc, std::string("the ") + (part == &d.type.offset ? "offset" : "multiplier") + " of '" + d.name +
                              "' uses " + taint_description(static_cast<K>(i)) + " '" + e.taint.witness[i] + "'",
                   "whoever holds '" + d.name + "' must be able to read it: public data, global parameters" +
                       std::string(sym.owner == Owner::Silo ? ", or the silo's own data and locals" : ""));
      break;
    }
  }
}

SymSize Checker::size_of(const Expr& e) {
  if (auto v = literal_value(e); v && e.kind != ExprKind::RealLit)
    return SymSize::constant(static_cast<long long>(*v));
  if (auto known = size_value(e, model_)) return *known;
  if (e.kind == ExprKind::Var) return SymSize::atom(e.name);
  if (e.kind == ExprKind::Binary && (e.name == "+" || e.name == "-" || e.name == "*")) {
    SymSize a = size_of(*e.args[0]), b = size_of(*e.args[1]);
    return e.name == "+" ? a + b : e.name == "-" ? a - b : a * b;
  }
  return SymSize::atom("(" + to_source(e) + ")");
}

// True if the size is an int that the declaration may read.
bool Checker::check_size_expr(Expr& e, const VarDecl& d, Owner owner, const char* what) {
  expr(e);
  if (e.type.is_error()) return false;
  if (!e.type.is_int()) {
    diags_.error(e.loc, std::string("the ") + what + " of '" + d.name + "' must be an int, not " +
                            to_string(e.type),
                 "sizes are integers known from data");
    return false;
  }
  if (auto v = literal_value(e); v && *v < 0) {
    diags_.error(e.loc, std::string("the ") + what + " of '" + d.name + "' must not be negative, got " +
                            to_source(e),
                 "a size counts elements: 0 or more");
    return false;
  }
  return check_decl_reads(e, d, owner, what);
}

bool Checker::check_decl_reads(const Expr& e, const VarDecl& d, Owner owner, const char* what) {
  unsigned allowed = allowed_size_taint(d, owner);
  for (unsigned i = 0; i < static_cast<unsigned>(K::Count); ++i) {
    if (!(e.taint.bits & (1u << i)) || (allowed & (1u << i))) continue;
    K k = static_cast<K>(i);
    std::string who = e.taint.witness[i];
    std::string help;
    if (param_bits() & (1u << i)) {
      help = "sizes and bounds are fixed before inference; use data";
    } else if (owner == Owner::Global) {
      help = "every silo must agree on a global's shape; size it with public `data`";
    } else if (d.block == BlockKind::Data) {
      help = "public data can only depend on public data";
    } else if (owner == Owner::Silo || owner == Owner::Split) {
      help = std::string("each silo holds its own '") + d.name + "' and cannot see " +
             taint_description(k) + "; use public `data` or `" +
             (owner == Owner::Silo ? "silo data" : "split data") + "`";
    } else {
      help = std::string("'") + who + "' is not visible to whoever holds '" + d.name + "'";
    }
    std::string kind = d.block == BlockKind::Parameters
                           ? (d.mark == Mark::None ? "" : std::string(mark_name(d.mark)) + " ") + "parameter"
                       : d.block == BlockKind::Hyperparameters ? "hyperparameter"
                                                                : "variable";
    diags_.error(e.loc, std::string("the ") + what + " of " + kind + " '" + d.name + "' uses " +
                            taint_description(k) + " '" + who + "'",
                 help);
    return false;
  }
  return true;
}

void Checker::declare(const VarDecl& d) {
  bool unmarked = d.block == BlockKind::Parameters && d.mark == Mark::None;
  Owner guessed = unmarked ? unmarked_owner(d) : Owner::Global;
  check_marks(d, guessed);
  Symbol sym;
  sym.name = d.name;
  sym.decl = &d;
  sym.block = d.block;
  sym.loc = d.name_loc;
  const bool derived = is_derived(d.block);
  sym.kind = d.block == BlockKind::Parameters        ? SymbolKind::Parameter
             : d.block == BlockKind::Hyperparameters ? SymbolKind::Hyperparameter
             : derived && scopes_.size() == 1        ? SymbolKind::Transformed
             : d.block == BlockKind::Model || d.block == BlockKind::Functions || derived
                 ? SymbolKind::LocalVariable
                 : SymbolKind::Data;
  sym.owner = owner_of(d);
  // A mark check_marks rejected: treat the value as global so its uses add no follow-on errors.
  if ((d.mark == Mark::Local && !has_silo_data_) || (d.mark == Mark::Split && !has_split_data_))
    sym.owner = Owner::Global;
  if (unmarked) sym.owner = guessed;  // likewise for a missing mark
  sym.type = Type{d.type.base, static_cast<int>(d.type.array_sizes.size())};

  bool sizes_ok = true;
  for (const ExprPtr& s : d.type.array_sizes) {
    check_size_expr(*s, d, sym.owner, "size");
    sizes_ok &= !s->type.is_error();
    sym.shape.dims.push_back(size_of(*s));
  }
  Taint size_taint;  // what the sizes read, when they may read it
  for (const ExprPtr& s : d.type.sizes) {
    if (check_size_expr(*s, d, sym.owner, "size")) size_taint.merge(s->taint);
    sym.shape.dims.push_back(size_of(*s));
  }
  // cholesky_factor_corr[K] (and cov_matrix[K], ...) is K x K; cholesky_factor_cov[M] is M x M.
  if (d.type.structure != MatrixStructure::None && d.type.structure != MatrixStructure::UnitVector &&
      d.type.sizes.size() == 1)
    sym.shape.dims.push_back(sym.shape.dims.back());
  for (const ExprPtr* bound : {&d.type.lower, &d.type.upper}) {
    if (!*bound) continue;
    Expr& b = **bound;
    expr(b);
    if (b.type.is_error()) continue;
    if (!b.type.is_scalar())
      diags_.error(b.loc, "the bound of '" + d.name + "' must be a scalar, not " + to_string(b.type),
                   "write one number, e.g. `<lower=0>`");
    else
      check_decl_reads(b, d, sym.owner, "bound");
  }
  if (d.type.affine()) check_affine(d, sym);
  if (d.type.lower && d.type.upper) {
    auto lo = literal_value(*d.type.lower), hi = literal_value(*d.type.upper);
    if (lo && hi && *lo >= *hi)
      diags_.error(d.type.loc, "the lower bound of '" + d.name + "' is not below its upper bound",
                   "write `<lower=a, upper=b>` with a < b");
  }
  if (d.type.ordering != Ordering::None) {
    const char* name = d.type.ordering == Ordering::Ordered ? "ordered" : "positive_ordered";
    if (!d.type.array_sizes.empty())
      diags_.error(d.type.loc, std::string("arrays of ") + name + " vectors are not supported yet",
                   std::string("declare each vector as its own ") + name + "[K]");
    else if (derived)
      diags_.error(d.type.loc, std::string("a ") + name + " vector in '" + block_name(d.block) + "' is not checked yet",
                   "declare it as a vector; its order follows from what it is computed from");
  }
  if (d.type.structure != MatrixStructure::None) check_structured_matrix(d, sym, derived);
  if ((sym.kind == SymbolKind::Parameter || sym.kind == SymbolKind::Hyperparameter) &&
      d.type.base == Base::Int)
    diags_.error(d.type.loc, "'" + d.name + "' is an int, but parameters must be continuous",
                 "declare it as `real` (discrete parameters must be marginalised out)");

  if (d.init) {
    if (d.block != BlockKind::Model && d.block != BlockKind::Functions && !derived) {
      diags_.error(d.init->loc, "'" + d.name + "' cannot be given a value here",
                   std::string("values of '") + block_name(d.block) +
                       "' come from the data files or from inference");
    } else {
      aggregate_root_ = is_silo_sum(*d.init) ? d.init.get() : nullptr;
      expr(*d.init);
      aggregate_root_ = nullptr;
      check_assignable(sym.type, sym.shape, *d.init, "'" + d.name + "'", d.init->loc);
      sym.taint.merge(d.init->taint);
      sym.value = d.init.get();
    }
  }
  for (const std::vector<ExprPtr>* sizes : {&d.type.array_sizes, &d.type.sizes})
    for (const ExprPtr& e : *sizes) reject_derived_size(*e, d);
  if (sym.kind != SymbolKind::LocalVariable && sym.kind != SymbolKind::Transformed)
    sym.taint.add(taint_kind(sym.kind, sym.owner), d.name);
  sym.taint.merge(size_taint);

  if (const Symbol* prior = lookup(d.name)) {
    diags_.error(d.name_loc, "'" + d.name + "' is already declared",
                 "it was declared on line " + std::to_string(prior->loc.line) +
                     "; choose another name");
    return;
  }
  if (sym.kind == SymbolKind::LocalVariable) {
    scopes_.back().push_back(sym);
  } else {
    model_.symbols.push_back(sym);
  }
}

// ---- scopes --------------------------------------------------------------------------------

const Symbol* Checker::lookup(const std::string& name) const {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
    for (const Symbol& sym : *s)
      if (sym.name == name) return &sym;
  return model_.find(name);
}

Symbol* Checker::lookup_local(const std::string& name) {
  for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
    for (Symbol& sym : *s)
      if (sym.name == name) return &sym;
  return nullptr;
}

std::vector<std::string> Checker::visible_names() const {
  std::vector<std::string> out;
  for (const auto& s : scopes_)
    for (const Symbol& sym : s) out.push_back(sym.name);
  for (const Symbol& sym : model_.symbols) out.push_back(sym.name);
  return out;
}

}  // namespace check_detail
}  // namespace fvic
