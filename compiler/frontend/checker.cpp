// Semantic analysis: names, types, shapes, constraints, ownership marks and priors.
//
// One walk over the program in declaration order. Each expression gets a type, a symbolic
// shape and a taint; each `~` / `target +=` becomes a Term classified by ownership.cpp. Errors
// are reported and the walk goes on, with an error type that silences follow-on errors, so one
// run shows every independent mistake.
#include <algorithm>
#include <functional>
#include <set>

#include "builtins.h"
#include "frontend/functions.h"
#include "fvi/kernel/random.h"
#include "frontend/ownership.h"
#include "frontend/semantic.h"

namespace fvic {

const char* owner_name(Owner owner) {
  switch (owner) {
    case Owner::Public: return "public";
    case Owner::Server: return "server";
    case Owner::Silo: return "silo";
    case Owner::Split: return "split";
    case Owner::Global: return "global";
    case Owner::Scope: return "scope";
  }
  return "?";
}

const char* term_kind_name(TermKind kind) {
  switch (kind) {
    case TermKind::Prior: return "prior";
    case TermKind::Likelihood: return "likelihood";
    case TermKind::Target: return "target";
  }
  return "?";
}

const char* term_owner_name(TermOwner owner) {
  switch (owner) {
    case TermOwner::Server: return "server";
    case TermOwner::Silo: return "silo";
    case TermOwner::SplitSilo: return "split silo";
    case TermOwner::Coupling: return "coupling";
  }
  return "?";
}

std::string InferenceSettings::name(const std::string& key, const std::string& fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second.text;
}

Loc InferenceSettings::loc(const std::string& key) const {
  auto it = locs.find(key);
  return it == locs.end() ? Loc{} : it->second;
}

const Symbol* SemanticModel::find(const std::string& name) const {
  if (indexed_ > symbols.size()) index_.clear(), indexed_ = 0;  // the vector was cut: index afresh
  for (; indexed_ < symbols.size(); ++indexed_) index_.emplace(symbols[indexed_].name, indexed_);  // the first wins
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &symbols[it->second];
}

std::vector<const Symbol*> SemanticModel::of(SymbolKind kind) const {
  std::vector<const Symbol*> out;
  for (const Symbol& s : symbols)
    if (s.kind == kind) out.push_back(&s);
  return out;
}

bool apply_overrides(InferenceSettings& settings, const std::vector<std::string>& overrides,
                     std::string* error) {
  for (const std::string& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos) {
      *error = "--set expects key=value, got '" + o + "'";
      return false;
    }
    std::string key = o.substr(0, eq);
    const stdlib::KeySpec* spec = stdlib::find_key(key);
    if (!spec) {
      std::string near = stdlib::suggest_key(key);
      *error = "--set: unknown inference key '" + key + "'" +
               (near.empty() ? "" : "; did you mean '" + near + "'?");
      return false;
    }
    std::string why;
    auto value = stdlib::parse_key_value(o.substr(eq + 1), &why);
    if (!value) {
      *error = "--set " + key + ": " + why;
      return false;
    }
    std::string invalid = stdlib::validate_key_value(*spec, *value);
    if (!invalid.empty()) {
      *error = "--set " + key + ": " + invalid;
      return false;
    }
    settings.values[key] = *value;
    settings.locs[key] = Loc{};
  }
  return true;
}

namespace {

using stdlib::Arg;
using K = TaintKind;

std::string closest(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  // Close spellings only, and never a wholly different name (`D` is not a misspelt `N`).
  // At most 8 edits: beyond that no name is a misspelling, and the bound keeps a long name cheap.
  size_t best_d = std::min({std::max<size_t>(2, name.size() / 3) + 1, name.size(), size_t(8)});
  for (const std::string& c : candidates) {
    size_t d = stdlib::edit_distance(name, c, best_d);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

Type scalar(Base b) { return Type{b, 0}; }

// Arguments printed back as source, from index `from`: "mu, 1".
std::string args_source(const std::vector<ExprPtr>& args, size_t from = 0) {
  std::string out;
  for (size_t i = from; i < args.size(); ++i) out += (i > from ? ", " : "") + to_source(*args[i]);
  return out;
}

// A numeric literal, possibly negated: for compile-time checks of distribution arguments.
std::optional<double> literal_value(const Expr& e) {
  if (e.kind == ExprKind::IntLit) return static_cast<double>(e.int_value);
  if (e.kind == ExprKind::RealLit) return e.real_value;
  if (e.kind == ExprKind::Unary && e.name == "-" && e.args[0])
    if (auto v = literal_value(*e.args[0])) return -*v;
  return std::nullopt;
}

class Checker {
 public:
  Checker(const Program& program, Diagnostics& diags, SemanticModel& model)
      : program_(program), diags_(diags), model_(model) {}

  void run() {
    model_.program = &program_;
    check_structure();
    for (const Block& b : program_.blocks) {
      switch (b.kind) {
        case BlockKind::Functions:
          check_functions(b);
          break;
        case BlockKind::Model:
          check_model(b);
          break;
        case BlockKind::TransformedData:
        case BlockKind::TransformedParameters:
        case BlockKind::GeneratedQuantities:
          check_derived(b);
          break;
        case BlockKind::Inference:
          check_settings(b);
          break;
        default:
          for (const VarDeclPtr& d : b.decls) declare(*d);
      }
    }
    check_priors();
  }

 private:
  // ---- program structure -------------------------------------------------------------------

  void check_structure() {
    const Block* silo = program_.find(BlockKind::SiloData);
    const Block* split = program_.find(BlockKind::SplitData);
    if (silo && split)
      diags_.error(split->loc, "a model has either 'silo data' (each silo its own rows) or "
                               "'split data' (each silo its own columns), not both",
                   "keep the block that matches how the data is partitioned");
    has_silo_data_ = silo != nullptr;
    has_split_data_ = split != nullptr;
  }

  // ---- declarations ------------------------------------------------------------------------

  static Owner owner_of(const VarDecl& d) {
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

  static K taint_kind(SymbolKind kind, Owner owner) {
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
  unsigned allowed_size_taint(const VarDecl& d, Owner owner) const {
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

  static unsigned param_bits() {
    unsigned b = 0;
    for (K k : {K::GlobalParam, K::LocalParam, K::SplitParam, K::GlobalHyper, K::LocalHyper,
                K::SplitHyper, K::SiloSum})
      b |= 1u << static_cast<unsigned>(k);
    return b;
  }

  // The owner an unmarked parameter's sizes suggest: local if they read silo data, split if
  // split data, else global.
  Owner unmarked_owner(const VarDecl& d) {
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

  void check_marks(const VarDecl& d, Owner guessed) {
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

  SymSize size_of(const Expr& e) {
    if (auto v = literal_value(e); v && e.kind != ExprKind::RealLit)
      return SymSize::constant(static_cast<long long>(*v));
    if (e.kind == ExprKind::Var) return SymSize::atom(e.name);
    if (e.kind == ExprKind::Binary && (e.name == "+" || e.name == "-" || e.name == "*")) {
      SymSize a = size_of(*e.args[0]), b = size_of(*e.args[1]);
      return e.name == "+" ? a + b : e.name == "-" ? a - b : a * b;
    }
    return SymSize::atom("(" + to_source(e) + ")");
  }

  // True if the size is an int that the declaration may read.
  bool check_size_expr(Expr& e, const VarDecl& d, Owner owner, const char* what) {
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

  bool check_decl_reads(const Expr& e, const VarDecl& d, Owner owner, const char* what) {
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

  void declare(const VarDecl& d) {
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
    if (d.type.lower && d.type.upper) {
      auto lo = literal_value(*d.type.lower), hi = literal_value(*d.type.upper);
      if (lo && hi && *lo >= *hi)
        diags_.error(d.type.loc, "the lower bound of '" + d.name + "' is not below its upper bound",
                     "write `<lower=a, upper=b>` with a < b");
    }
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

  // ---- scopes ------------------------------------------------------------------------------

  const Symbol* lookup(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      for (const Symbol& sym : *s)
        if (sym.name == name) return &sym;
    return model_.find(name);
  }

  Symbol* lookup_local(const std::string& name) {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      for (Symbol& sym : *s)
        if (sym.name == name) return &sym;
    return nullptr;
  }

  std::vector<std::string> visible_names() const {
    std::vector<std::string> out;
    for (const auto& s : scopes_)
      for (const Symbol& sym : s) out.push_back(sym.name);
    for (const Symbol& sym : model_.symbols) out.push_back(sym.name);
    return out;
  }

  // ---- functions ---------------------------------------------------------------------------

  // Each function is checked once with its arguments' declared types and unknown sizes, then
  // inlined at every call (frontend/functions.h) and checked again there with the real ones.
  void check_functions(const Block& b) {
    std::set<std::string> below;
    for (const FunctionDef& f : b.functions) below.insert(f.name);
    for (const FunctionDef& f : b.functions) {
      below.erase(f.name);
      later_functions_ = below;
      if (stdlib::find_function(f.name) || stdlib::find_distribution(f.name) ||
          stdlib::find_density_function(f.name, nullptr)) {
        diags_.error(f.loc, "'" + f.name + "' is a built-in function", "choose another name for the function");
        continue;
      }
      if (functions_.count(f.name)) {
        diags_.error(f.loc, "the function '" + f.name + "' is defined twice",
                     "it was defined on line " + std::to_string(functions_[f.name]->loc.line) +
                         "; overloading is not supported: give each function its own name");
        continue;
      }
      if (!check_function(f)) broken_functions_.insert(f.name);
      functions_[f.name] = &f;  // after its check: a call of itself in its body is refused_call's
    }
    later_functions_.clear();
  }

  bool check_function(const FunctionDef& f) {
    const int errors = diags_.error_count();
    if (f.returns_void) {
      diags_.error(f.return_loc, "'" + f.name + "' returns void: functions without a value are not supported yet",
                   "fvic inlines each call's value into the kernels; return the value the caller needs");
      return false;
    }
    std::vector<const VarDecl*> locals;
    const Expr* result = nullptr;
    std::string why;
    Loc where;
    if (!function_body(f, locals, result, why, where)) {
      diags_.error(where, "the body of '" + f.name + "' cannot be inlined", why);
      return false;
    }
    std::set<std::string> names;
    for (const FunctionArg& a : f.args)
      if (!names.insert(a.name).second)
        diags_.error(a.loc, "the argument '" + a.name + "' of '" + f.name + "' appears twice", "rename one of them");
    current_function_ = &f;
    scopes_.emplace_back();
    for (const FunctionArg& a : f.args) {
      Symbol sym;
      sym.name = a.name;
      sym.kind = SymbolKind::LocalVariable;
      sym.owner = Owner::Scope;
      sym.block = BlockKind::Functions;
      sym.type = a.type;
      sym.shape.dims.assign(static_cast<size_t>(a.type.rank()), SymSize::unknown());
      sym.loc = a.loc;
      scopes_.back().push_back(sym);
    }
    for (const VarDecl* d : locals) declare(*d);
    expr(const_cast<Expr&>(*result));
    Shape unknown;
    unknown.dims.assign(static_cast<size_t>(f.return_type.rank()), SymSize::unknown());
    check_assignable(f.return_type, unknown, *result, "the value of '" + f.name + "'", result->loc);
    scopes_.pop_back();
    current_function_ = nullptr;
    return diags_.error_count() == errors;
  }

  // A call of a user function (also `foo_lpdf(y | ...)`): its arguments against the declared
  // types, then its inlined body.
  void user_call(Expr& e, const FunctionDef& f) {
    if (e.args.size() != f.args.size()) {
      diags_.error(e.loc, "'" + f.name + "' takes " + std::to_string(f.args.size()) + " argument" +
                              (f.args.size() == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()),
                   "it is defined on line " + std::to_string(f.loc.line));
      return;
    }
    if (any_error(e)) return;
    bool ok = true;
    for (size_t i = 0; i < f.args.size(); ++i) {
      const Type& want = f.args[i].type;
      const Expr& a = *e.args[i];
      bool promotes = want.base == Base::Real && a.type.base == Base::Int && want.array_dims == a.type.array_dims;
      if (a.type != want && !promotes) {
        diags_.error(a.loc, "argument '" + f.args[i].name + "' of '" + f.name + "' is " + to_string(want) +
                                ", got " + to_string(a.type),
                     "pass a value of type " + to_string(want));
        ok = false;
      } else if (f.args[i].data_only && (a.taint.bits & param_bits())) {
        unsigned bits = a.taint.bits & param_bits();
        unsigned k = 0;
        while (!(bits & (1u << k))) ++k;
        diags_.error(a.loc, "argument '" + f.args[i].name + "' of '" + f.name + "' is `data`, but this reads " +
                                taint_description(static_cast<K>(k)) + " '" + a.taint.witness[k] + "'",
                     "pass data, or drop `data` from the argument's declaration");
        ok = false;
      }
    }
    if (!ok || broken_functions_.count(f.name)) return;
    if (current_function_) {
      // Inside another function's own check: the callee was checked already; its declared type
      // is enough (the sizes are unknown there anyway), and inlining waits for a real call.
      e.type = f.return_type;
      e.shape.dims.assign(static_cast<size_t>(f.return_type.rank()), SymSize::unknown());
      return;
    }
    std::vector<const Expr*> args;
    for (const ExprPtr& a : e.args) args.push_back(a.get());
    e.inlined = inline_call(f, args);
    const ExprSize size = expr_size(*e.inlined);
    if (size.depth > kMaxInlinedDepth) {
      diags_.error(e.loc, "the value of this call of '" + f.name + "' nests " + std::to_string(size.depth) +
                              " levels deep once its functions are inlined (at most " +
                              std::to_string(kMaxInlinedDepth) + ")",
                   "compute the inner values as local variables first");
      e.inlined.reset();
      return;
    }
    inlined_nodes_ += size.nodes;
    if (inlined_nodes_ > kMaxInlinedNodes) {
      if (!inlining_reported_)
        diags_.error(e.loc, "inlining the calls of user functions makes the model over " +
                                std::to_string(kMaxInlinedNodes) + " expression nodes",
                     "a function that calls another several times multiplies its size; compute a shared value "
                     "once as a local variable and pass it");
      inlining_reported_ = true;
      e.inlined.reset();
      return;
    }
    if (inline_nesting_ >= kMaxInlineNesting) {
      if (!inlining_reported_)
        diags_.error(e.loc, "calls of user functions nest more than " + std::to_string(kMaxInlineNesting) +
                                " deep (each inlined into the one that calls it)",
                     "fewer layers of functions that each call the next");
      inlining_reported_ = true;
      e.inlined.reset();
      return;
    }
    ++inline_nesting_;
    expr(*e.inlined);
    --inline_nesting_;
    if (e.inlined->type.is_error()) return;
    e.type = f.return_type;
    e.shape = e.inlined->shape;
    e.taint = e.inlined->taint;
  }

  // A call inside a function body of itself or of a function defined below it.
  bool refused_call(const Expr& e) {
    if (!current_function_) return false;
    if (e.name == current_function_->name) {
      diags_.error(e.loc, "'" + e.name + "' calls itself: recursion is not supported",
                   "fvic inlines every call into straight-line kernels, so a function cannot call itself; "
                   "write the computation without recursion");
      return true;
    }
    if (later_functions_.count(e.name)) {
      diags_.error(e.loc, "'" + e.name + "' is defined below '" + current_function_->name + "'",
                   "a function may call only the functions defined above it (so no call can recurse); "
                   "move '" + e.name + "' up");
      return true;
    }
    return false;
  }

  // `normal_rng(...)`: a random draw, which only generated quantities may make (the log density
  // must be a function of the parameters).
  bool random_call(Expr& e) {
    const std::string suffix = "_rng";
    if (e.name.size() <= suffix.size() || e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    const std::string base = e.name.substr(0, e.name.size() - suffix.size());
    const stdlib::Distribution* dist = stdlib::find_distribution(base);
    if (!dist) return false;
    if (block_ != BlockKind::GeneratedQuantities) {
      diags_.error(e.loc, "'" + e.name + "' draws a random number: only 'generated quantities' may call it",
                   std::string("'") + block_name(block_) + "' must compute the same value every time it is "
                   "evaluated; draw replicates in a `generated quantities` block");
      return true;
    }
    if (!fvi::kernel::has_random_draws(base)) {
      diags_.error(e.loc, "random draws of " + base + " are not supported yet",
                   "_rng is available for normal, lognormal, cauchy, logistic, double_exponential, exponential, "
                   "uniform, bernoulli, bernoulli_logit, poisson, poisson_log, binomial and binomial_logit");
      return true;
    }
    if (e.args.size() != dist->params.size()) {
      diags_.error(e.loc, e.name + " takes " + std::to_string(dist->params.size()) + " argument" +
                              (dist->params.size() == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()),
                   "pass the distribution's parameters, as after '~'");
      return true;
    }
    if (any_error(e)) return true;
    // Vectorised as in Stan: scalars, or vectors / 1-D arrays of one length, give one draw each.
    const Expr* container = nullptr;
    for (const ExprPtr& a : e.args) {
      const bool one_d = (a->type.array_dims == 0 && (a->type.base == Base::Vector || a->type.base == Base::RowVector)) ||
                         (a->type.array_dims == 1 && a->type.base_dims() == 0);
      if (!a->type.is_scalar() && !one_d) {
        diags_.error(a->loc, "an argument of " + e.name + " must be a scalar, a vector or a 1-D array, not " +
                                 to_string(a->type),
                     "draw a matrix's replicates from to_vector(...)");
        return true;
      }
      if (one_d) {
        if (container) require_equal(container->shape.dims[0], a->shape.dims[0], a->loc, "the arguments of " + e.name);
        else container = a.get();
      }
    }
    e.type = Type{dist->discrete ? Base::Int : Base::Real, container ? 1 : 0};
    if (container) e.shape.dims = {container->shape.dims[0]};
    return true;
  }

  // ---- transformed data, transformed parameters, generated quantities ----------------------

  static bool is_silo_sum(const Expr& e) { return e.kind == ExprKind::Call && e.name == "silo_sum"; }

  static bool is_derived(BlockKind b) {
    return b == BlockKind::TransformedData || b == BlockKind::TransformedParameters ||
           b == BlockKind::GeneratedQuantities;
  }

  Symbol* derived_symbol(const std::string& name) {
    for (auto it = model_.symbols.rbegin(); it != model_.symbols.rend(); ++it)
      if (it->name == name) return it->kind == SymbolKind::Transformed ? &*it : nullptr;
    return nullptr;
  }

  // Sizes are read from the data files before anything is computed.
  void reject_derived_size(const Expr& e, const VarDecl& d) {
    if (e.kind == ExprKind::Var) {
      const Symbol* s = model_.find(e.name);
      if (s && s->kind == SymbolKind::Transformed)
        diags_.error(e.loc, "the size of '" + d.name + "' uses '" + e.name + "', declared in '" +
                                block_name(s->block) + "'",
                     "sizes are read from the data files before anything is computed; declare '" + e.name +
                         "' in a data block");
      return;
    }
    for (const ExprPtr& a : e.args)
      if (a) reject_derived_size(*a, d);
  }

  void check_derived(const Block& b) {
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
      if (sym.block == BlockKind::TransformedData && (sym.decl->type.lower || sym.decl->type.upper))
        diags_.warning(sym.decl->type.loc, "the bounds of transformed data '" + sym.name + "' are not checked yet",
                       "transformed data is computed inside the kernels that read it; check the data it is "
                       "computed from with bounds in its data block");
    }
  }

  // Who computes a derived value: whoever may read everything it reads (DESIGN.md §2's flow
  // rules). Each silo its own when it reads silo data or locals; the server for globals and
  // server data; every party for public data alone.
  void infer_owner(Symbol& sym) {
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
    if (!silo.empty()) sym.owner = Owner::Silo;
    else if (!split.empty()) sym.owner = Owner::Split;
    else if (sym.block == BlockKind::TransformedData) sym.owner = server.empty() ? Owner::Public : Owner::Server;
    else sym.owner = Owner::Global;
  }

  // ---- model block -------------------------------------------------------------------------

  void check_model(const Block& b) {
    scopes_.emplace_back();
    for (const StmtPtr& s : b.stmts) stmt(*s);
    scopes_.pop_back();
  }

  void stmt(const Stmt& s) {
    if (block_ != BlockKind::Model && (s.kind == StmtKind::Tilde || s.kind == StmtKind::Target)) {
      diags_.error(s.loc, std::string(s.kind == StmtKind::Tilde ? "'~'" : "'target +='") + " is not allowed in '" +
                              block_name(block_) + "'",
                   "the log density is written in the model block; '" + std::string(block_name(block_)) +
                       "' computes values");
      return;
    }
    switch (s.kind) {
      case StmtKind::Tilde: tilde(s); break;
      case StmtKind::Target: target(s); break;
      case StmtKind::Assign: assign(s); break;
      case StmtKind::For: for_loop(s); break;
      case StmtKind::If: if_stmt(s); break;
      case StmtKind::Block:
        scopes_.emplace_back();
        for (const StmtPtr& b : s.body) stmt(*b);
        scopes_.pop_back();
        break;
      case StmtKind::Decl: declare(*s.decl); break;
      case StmtKind::Return:
        diags_.error(s.loc, "'return' outside a function", block_ == BlockKind::Model
                                                               ? "the model block adds to the log density with "
                                                                 "`~` and `target +=`"
                                                               : "a block's values are its declarations");
        break;
      case StmtKind::Empty: break;
    }
  }

  Taint context_taint() const {
    Taint t;
    for (const Taint& c : context_) t.merge(c);
    return t;
  }

  void for_loop(const Stmt& s) {
    for (const ExprPtr& bound : s.args) {
      expr(*bound);
      if (!bound->type.is_error() && !bound->type.is_int())
        diags_.error(bound->loc, "a loop bound must be an int, not " + to_string(bound->type),
                     "write `for (i in 1:N)` with int bounds");
    }
    if (const Symbol* hidden = lookup(s.name))
      diags_.error(s.name_loc, "the loop variable '" + s.name + "' hides another variable",
                   "'" + s.name + "' is declared on line " + std::to_string(hidden->loc.line) +
                       "; choose another name for the loop variable");
    Symbol var;
    var.name = s.name;
    var.kind = SymbolKind::LoopVariable;
    var.owner = Owner::Scope;
    var.block = BlockKind::Model;
    var.type = scalar(Base::Int);
    var.loc = s.name_loc;
    var.taint.merge(s.args[0]->taint);
    var.taint.merge(s.args[1]->taint);
    scopes_.emplace_back();
    scopes_.back().push_back(var);
    loops_.push_back(&s);
    stmt(*s.body[0]);
    loops_.pop_back();
    scopes_.pop_back();
  }

  void if_stmt(const Stmt& s) {
    Expr& cond = *s.args[0];
    expr(cond);
    if (!cond.type.is_error() && !cond.type.is_scalar())
      diags_.error(cond.loc, "a condition must be an int or real, not " + to_string(cond.type),
                   "compare scalars, e.g. `if (N > 0)`");
    context_.push_back(cond.taint);
    for (const StmtPtr& b : s.body) stmt(*b);
    context_.pop_back();
  }

  void assign(const Stmt& s) {
    Expr& lhs = *s.lhs;
    Expr& rhs = *s.args[0];
    if (s.name == "=" && rhs.kind == ExprKind::Call && stdlib::find_distribution(rhs.name) &&
        !stdlib::find_function(rhs.name)) {
      // `mu = normal(0, 1);`: a distribution statement written with '='.
      expr(lhs);
      for (const ExprPtr& a : rhs.args) expr(*a);
      const Expr* base = &lhs;
      while (base->kind == ExprKind::Index) base = base->args[0].get();
      if (base->kind == ExprKind::Var)
        if (const Symbol* sym = lookup(base->name);
            sym && (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter))
          prior_attempts_.insert(sym->name);
      diags_.error(s.name_loc, "'=' assigns a value, but " + rhs.name + " is a distribution",
                   "a distribution statement uses '~': write `" + to_source(lhs) + " ~ " + to_source(rhs) +
                       ";`");
      return;
    }
    expr(lhs);
    // `total = silo_sum(e);`, the whole value of a generated quantity declared without one.
    aggregate_root_ = lhs.kind == ExprKind::Var && s.name == "=" && loops_.empty() && is_silo_sum(rhs) ? &rhs : nullptr;
    expr(rhs);
    aggregate_root_ = nullptr;
    const Expr* base = &lhs;
    while (base->kind == ExprKind::Index) base = base->args[0].get();
    if (base->kind != ExprKind::Var) {
      diags_.error(lhs.loc, "the left side of an assignment must be a variable",
                   "assign to a variable declared in the model block");
      return;
    }
    Symbol* local = lookup_local(base->name);
    if (!local && block_ != BlockKind::Model) {
      // A derived block assigns its own declarations; the one assignment of a whole variable,
      // when it was declared without a value, is its value.
      Symbol* derived = derived_symbol(base->name);
      if (derived && derived->block == block_) {
        bool whole = &lhs == base && s.name == "=";
        bool first = !derived->decl->init && assigned_.insert(derived->name).second;
        derived->value = whole && first && loops_.empty() ? &rhs : nullptr;
        derived->loop = nullptr;
        // `for (i in 1:N) v[i] = e;`: e is element i's value (lowered as one vectorised value).
        const Stmt* loop = loops_.size() == 1 ? loops_.back() : nullptr;
        if (first && s.name == "=" && loop && lhs.kind == ExprKind::Index && lhs.args[0].get() == base &&
            lhs.indices.size() == 1 && lhs.indices[0].kind == IndexKind::Single && lhs.indices[0].lower &&
            lhs.indices[0].lower->kind == ExprKind::Var && lhs.indices[0].lower->name == loop->name &&
            loop->args[0]->kind == ExprKind::IntLit && loop->args[0]->int_value == 1 && !derived->shape.dims.empty()) {
          derived->value = &rhs;
          derived->loop = loop;
          require_equal(derived->shape.dims[0], size_of(*loop->args[1]), loop->args[1]->loc,
                        "the loop over '" + derived->name + "' (it must assign every element)");
        }
        local = derived;
      }
    }
    if (!local || (local->kind != SymbolKind::LocalVariable && local->kind != SymbolKind::Transformed)) {
      const Symbol* sym = lookup(base->name);
      if (sym) {
        // `b = normal(0, 1)` is a prior written wrongly: no "has no prior" on top.
        if (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter)
          prior_attempts_.insert(sym->name);
        std::string what = sym->kind == SymbolKind::LoopVariable  ? "a loop variable"
                           : sym->kind == SymbolKind::Data        ? "data"
                           : sym->kind == SymbolKind::Transformed ? std::string("declared in '") + block_name(sym->block) + "'"
                                                                  : "a parameter";
        std::string help =
            sym->kind == SymbolKind::Transformed  ? "a derived value is computed in its own block"
            : sym->kind == SymbolKind::LoopVariable ? "a loop variable changes only with its loop"
            : sym->kind == SymbolKind::Data
                ? "data is read from the data files; declare a new variable in the model block and "
                  "assign that"
                : "its value comes from inference; to fix it at a known value, declare it in "
                  "`data` instead";
        diags_.error(lhs.loc, "'" + base->name + "' is " + what + " and cannot be assigned", help);
      }
      return;
    }
    if (lhs.type.is_error() || rhs.type.is_error()) return;
    if (s.name == "=") {
      check_assignable(lhs.type, lhs.shape, rhs, "'" + to_source(lhs) + "'", rhs.loc);
    } else {
      std::string op = s.name.substr(0, 1);
      Expr probe(ExprKind::Binary, s.loc);
      Type t;
      Shape sh;
      binary_type(op, lhs, rhs, s.loc, t, sh);
      if (!t.is_error() && t != lhs.type)
        diags_.error(s.loc, "'" + s.name + "' would change the type of '" + to_source(lhs) + "' to " +
                                to_string(t),
                     "assign a value of type " + to_string(lhs.type));
    }
    local->taint.merge(rhs.taint);
    local->taint.merge(context_taint());
    local->taint.merge(lhs.taint);
  }

  void check_assignable(const Type& to, const Shape& to_shape, const Expr& value,
                        const std::string& what, const Loc& loc) {
    if (value.type.is_error()) return;
    bool ok = value.type == to ||
              (to.base == Base::Real && value.type.base == Base::Int && to.array_dims == value.type.array_dims);
    if (!ok) {
      diags_.error(loc, "cannot assign " + to_string(value.type) + " to " + what + " of type " + to_string(to),
                   "declare " + what + " as " + to_string(value.type) + ", or compute a value of type " +
                       to_string(to));
      return;
    }
    require_same_dims(to_shape, value.shape, loc, what);
  }

  void require_same_dims(const Shape& a, const Shape& b, const Loc& loc, const std::string& what) {
    if (a.dims.size() != b.dims.size()) return;
    for (size_t i = 0; i < a.dims.size(); ++i) require_equal(a.dims[i], b.dims[i], loc, what);
  }

  void require_equal(const SymSize& a, const SymSize& b, const Loc& loc, const std::string& what) {
    if (a.is_unknown() || b.is_unknown() || a.equals(b)) return;
    if (a.provably_different(b)) {
      diags_.error(loc, "size mismatch in " + what + ": " + a.str() + " vs " + b.str(),
                   "the sizes must agree");
      return;
    }
    model_.size_checks.push_back({a, b, loc, what});
  }

  // ---- `~` and `target +=` -----------------------------------------------------------------

  void tilde(const Stmt& s) {
    Expr& lhs = *s.lhs;
    expr(lhs);
    for (const ExprPtr& a : s.args) expr(*a);
    const Expr* base = &lhs;
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
      if (lhs.type.is_error()) return;
      std::string help = "put a declared parameter or data variable (or an element of one) on the left; "
                         "for a density of a computed value use `target += " + s.name +
                         (dist->discrete ? "_lpmf" : "_lpdf") + "(...)`";
      // `to_vector(B) ~ normal(0, 1)`: B itself may stand on the left.
      if (lhs.kind == ExprKind::Call && (lhs.name == "to_vector" || lhs.name == "to_row_vector") &&
          lhs.args.size() == 1 && lhs.args[0]->kind == ExprKind::Var)
        if (const Symbol* inner = lookup(lhs.args[0]->name)) {
          if (inner->kind == SymbolKind::Parameter || inner->kind == SymbolKind::Hyperparameter)
            prior_attempts_.insert(inner->name);
          help = "distributions accept vectors and matrices elementwise: write `" + inner->name + " ~ " +
                 s.name + "(" + args_source(s.args) + ")`";
        }
      diags_.error(lhs.loc, "the left side of '~' must be a parameter or data", help);
      return;
    }
    TermFacts facts;
    facts.stmt = &s;
    facts.subject = subject;
    facts.distribution = s.name;
    facts.kind = on_data ? TermKind::Likelihood : TermKind::Prior;
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
    if (auto term = classify_term(facts, diags_)) model_.terms.push_back(*term);
  }

  void target(const Stmt& s) {
    Expr& e = *s.args[0];
    expr(e);
    // `target += normal_lpdf(theta | ...)` on a parameter is its prior, even when rejected.
    const Symbol* density_of = nullptr;
    if ((e.kind == ExprKind::CondCall || e.kind == ExprKind::Call) && !e.args.empty() &&
        e.args[0]->kind == ExprKind::Var) {
      const Symbol* sym = lookup(e.args[0]->name);
      if (sym && (sym->kind == SymbolKind::Parameter || sym->kind == SymbolKind::Hyperparameter)) {
        prior_attempts_.insert(sym->name);
        if (e.kind == ExprKind::CondCall) density_of = sym;
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
  void check_support(const stdlib::Distribution& dist, const Symbol& p, const Loc& at) {
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

  bool matches(Arg arg, const Type& t) const {
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

  // Checks arity, argument types, constant argument values and vectorised sizes.
  bool check_distribution_call(const stdlib::Distribution& dist, const Expr& outcome,
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
      if (!matches(p.arg, a.type)) {
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

  // ---- expressions -------------------------------------------------------------------------

  void fail(Expr& e) { e.type = Type::error(); }

  // expr recurses once per level of the tree, and a statement may nest 2000 deep (parser.cpp's
  // kMaxOperators, a chain of '+' or of indexes): its frame must stay small in every build. The
  // work on one node is therefore kept out of line (expr_node() and the helpers it calls, index()
  // included, which no longer recurses on its base): inlined into expr, they made its frame 8.5 KB
  // under ASan, and the 2000 '+' that [limits] accepts overflowed an 8 MB stack.
  void expr(Expr& e) {
    for (const ExprPtr& a : e.args)  // an index's base too (index() checks the indices)
      if (a) expr(*a);
    expr_node(e);
  }

  [[gnu::noinline]] void expr_node(Expr& e) {
    e.type = Type::error();
    e.shape = Shape{};
    e.taint = Taint{};
    for (const ExprPtr& a : e.args)
      if (a && e.kind != ExprKind::Index) e.taint.merge(a->taint);
    switch (e.kind) {
      case ExprKind::IntLit:
        e.type = scalar(Base::Int);
        return;
      case ExprKind::RealLit:
        e.type = scalar(Base::Real);
        return;
      case ExprKind::Var: return variable(e);
      case ExprKind::Unary: return unary(e);
      case ExprKind::Binary:
        if (any_error(e)) return;
        binary_type(e.name, *e.args[0], *e.args[1], e.loc, e.type, e.shape);
        return;
      case ExprKind::Cond: return conditional(e);
      case ExprKind::Call: return call(e);
      case ExprKind::CondCall: return density_call(e);
      case ExprKind::Index: return index(e);
      case ExprKind::Transpose: return transpose(e);
      case ExprKind::ArrayLit:
      case ExprKind::RowVectorLit: return literal_container(e);
    }
  }

  static bool any_error(const Expr& e) {
    for (const ExprPtr& a : e.args)
      if (a->type.is_error()) return true;
    return false;
  }

  void variable(Expr& e) {
    const Symbol* sym = lookup(e.name);
    if (!sym) {
      // Once per name: every later use of a missing declaration would repeat the same error.
      if (!unknown_reported_.insert(e.name).second) return;
      std::string near = closest(e.name, visible_names());
      diags_.error(e.loc, "unknown variable '" + e.name + "'",
                   near.empty() ? "declare it in a data or parameters block before using it"
                                : "did you mean '" + near + "'?");
      return;
    }
    e.type = sym->type;
    e.shape = sym->shape;
    e.taint = sym->taint;
  }

  void unary(Expr& e) {
    const Expr& a = *e.args[0];
    if (a.type.is_error()) return;
    if (a.type.array_dims > 0) {
      diags_.error(e.loc, "'" + e.name + "' cannot be applied to an array (" + to_string(a.type) + ")",
                   "convert it first, e.g. `to_vector(...)`");
      return;
    }
    if (e.name == "!" && !a.type.is_scalar()) {
      diags_.error(e.loc, "'!' needs an int or real, not " + to_string(a.type), "negate a scalar condition");
      return;
    }
    e.type = e.name == "!" ? scalar(Base::Int) : a.type;
    e.shape = a.shape;
  }

  void conditional(Expr& e) {
    if (any_error(e)) return;
    const Expr &c = *e.args[0], &a = *e.args[1], &b = *e.args[2];
    if (!c.type.is_scalar()) {
      diags_.error(c.loc, "the condition of '?:' must be a scalar, not " + to_string(c.type), "compare scalars");
      return;
    }
    if (a.type == b.type) {
      e.type = a.type;
    } else if (a.type.is_scalar() && b.type.is_scalar()) {
      e.type = scalar(Base::Real);
    } else {
      diags_.error(e.loc, "the branches of '?:' have different types: " + to_string(a.type) + " and " +
                              to_string(b.type),
                   "give both branches the same type");
      return;
    }
    e.shape = a.shape;
    require_same_dims(a.shape, b.shape, e.loc, "the branches of '?:'");
  }

  void binary_type(const std::string& op, const Expr& a, const Expr& b, const Loc& loc, Type& out,
                   Shape& shape) {
    out = Type::error();
    const Type &ta = a.type, &tb = b.type;
    if (ta.is_error() || tb.is_error()) return;
    auto complain = [&](const std::string& help) {
      diags_.error(loc, "'" + op + "' cannot combine " + to_string(ta) + " and " + to_string(tb), help);
    };
    if (ta.array_dims > 0 || tb.array_dims > 0) {
      complain("arithmetic works on int, real, vector, row_vector and matrix; convert arrays with "
               "to_vector(...)");
      return;
    }
    bool sa = ta.is_scalar(), sb = tb.is_scalar();
    bool both_int = ta.base == Base::Int && tb.base == Base::Int;
    if (op == "&&" || op == "||" || op == "==" || op == "!=" || op == "<" || op == "<=" ||
        op == ">" || op == ">=") {
      if (!sa || !sb) return complain("comparisons and logical operators take scalars");
      out = scalar(Base::Int);
      return;
    }
    if (op == "%") {
      if (!both_int) return complain("'%' takes two ints");
      out = scalar(Base::Int);
      return;
    }
    if (op == "\\") return complain("left division is not supported");
    if (sa && sb) {
      if (op == "/" && both_int)
        diags_.warning(loc, "integer division rounds toward zero",
                       "write " + to_source(a) + " * 1.0 / " + to_source(b) + " for real division");
      out = scalar(both_int && op != "^" && op != ".^" ? Base::Int : Base::Real);
      return;
    }
    if (op == "^") return complain("'^' takes scalars; use '.^' for elementwise powers");
    if (sa || sb) {
      const Expr& c = sa ? b : a;
      if (op == "/" && sa) return complain("dividing a scalar by a container needs './'");
      out = c.type;
      shape = c.shape;
      return;
    }
    // Two containers.
    Base A = ta.base, B = tb.base;
    const auto &da = a.shape.dims, &db = b.shape.dims;
    std::string what = "'" + op + "'";
    if (op == "+" || op == "-" || op == ".*" || op == "./" || op == ".^") {
      if (A == B) {
        out = ta;
        shape = a.shape;
        require_same_dims(a.shape, b.shape, loc, "the operands of " + what);
        return;
      }
      if ((op == "+" || op == "-") && ((A == Base::Matrix && B == Base::RowVector) ||
                                       (A == Base::RowVector && B == Base::Matrix))) {
        // A row_vector broadcasts over the rows of a matrix (DESIGN.md §2).
        const Shape& m = A == Base::Matrix ? a.shape : b.shape;
        const Shape& r = A == Base::Matrix ? b.shape : a.shape;
        require_equal(m.dims[1], r.dims[0], loc, "the columns of the matrix and the row_vector in " + what);
        out = scalar(Base::Matrix);
        shape = m;
        return;
      }
      return complain("both sides must have the same type, or one must be a scalar (a row_vector "
                      "may be added to a matrix)");
    }
    if (op == "*") {
      if (A == Base::Matrix && B == Base::Vector) {
        require_equal(da[1], db[0], loc, "the columns of the matrix and the vector's length in '*'");
        out = scalar(Base::Vector);
        shape.dims = {da[0]};
        return;
      }
      if (A == Base::Matrix && B == Base::Matrix) {
        require_equal(da[1], db[0], loc, "the inner dimensions of '*'");
        out = scalar(Base::Matrix);
        shape.dims = {da[0], db[1]};
        return;
      }
      if (A == Base::RowVector && B == Base::Matrix) {
        require_equal(da[0], db[0], loc, "the inner dimensions of '*'");
        out = scalar(Base::RowVector);
        shape.dims = {db[1]};
        return;
      }
      if (A == Base::RowVector && B == Base::Vector) {
        require_equal(da[0], db[0], loc, "the lengths in row_vector * vector");
        out = scalar(Base::Real);
        return;
      }
      if (A == Base::Vector && B == Base::RowVector) {
        out = scalar(Base::Matrix);
        shape.dims = {da[0], db[0]};
        return;
      }
      return complain(A == B ? "for elementwise products use '.*'; for a dot product use dot_product(a, b)"
                             : "check the orientation: matrix * vector, row_vector * matrix, ...");
    }
    if (op == "/") return complain("dividing by a container needs './'");
    complain("see the language reference for the operators on containers");
  }

  void transpose(Expr& e) {
    const Expr& a = *e.args[0];
    if (a.type.is_error()) return;
    if (a.type.array_dims > 0 || a.type.base_dims() == 0) {
      diags_.error(e.loc, "only vectors, row_vectors and matrices can be transposed, not " + to_string(a.type),
                   "remove the \"'\"");
      return;
    }
    Base b = a.type.base == Base::Vector      ? Base::RowVector
             : a.type.base == Base::RowVector ? Base::Vector
                                              : Base::Matrix;
    e.type = scalar(b);
    e.shape = a.shape;
    if (b == Base::Matrix) std::swap(e.shape.dims[0], e.shape.dims[1]);
  }

  void literal_container(Expr& e) {
    if (any_error(e)) return;
    const Type& first = e.args[0]->type;
    bool row = e.kind == ExprKind::RowVectorLit;
    for (const ExprPtr& a : e.args) {
      if (row && !a->type.is_scalar()) {
        diags_.error(a->loc, "a row_vector literal holds scalars, not " + to_string(a->type),
                     "write [a, b, c] with numbers");
        return;
      }
      if (!row && a->type.base != first.base && !(a->type.is_scalar() && first.is_scalar())) {
        diags_.error(a->loc, "the elements of an array literal must have one type", "make them alike");
        return;
      }
    }
    SymSize n = SymSize::constant(static_cast<long long>(e.args.size()));
    if (row) {
      e.type = scalar(Base::RowVector);
      e.shape.dims = {n};
      return;
    }
    bool any_real = false;
    for (const ExprPtr& a : e.args) any_real |= a->type.base == Base::Real;
    e.type = first;
    if (first.is_scalar()) e.type.base = any_real ? Base::Real : Base::Int;
    e.type.array_dims += 1;
    e.shape.dims = {n};
    e.shape.dims.insert(e.shape.dims.end(), e.args[0]->shape.dims.begin(), e.args[0]->shape.dims.end());
  }

  void index(Expr& e) {
    Expr& base = *e.args[0];  // already checked by expr()
    e.taint = base.taint;
    bool ok = !base.type.is_error();
    std::vector<SymSize> sizes;  // the size of each kept dimension, or nullopt when dropped
    std::vector<bool> kept;
    for (Index& ix : e.indices) {
      for (ExprPtr* part : {&ix.lower, &ix.upper}) {
        if (!*part) continue;
        expr(**part);
        e.taint.merge((*part)->taint);
        if ((*part)->type.is_error()) {
          ok = false;
          continue;
        }
        const Type& t = (*part)->type;
        bool single_ok = ix.kind == IndexKind::Single ? (t.is_int() || (t.is_int_array() && t.array_dims == 1))
                                                      : t.is_int();
        if (!single_ok) {
          diags_.error((*part)->loc, "an index must be an int" +
                                         std::string(ix.kind == IndexKind::Single ? " or an array of ints" : "") +
                                         ", not " + to_string(t),
                       "indices count from 1 and are integers");
          ok = false;
        }
      }
    }
    if (!ok) return;
    int rank = base.type.rank();
    if (static_cast<int>(e.indices.size()) > rank) {
      diags_.error(e.loc, "too many indices for '" + to_source(base) + "' of type " + to_string(base.type),
                   "it takes at most " + std::to_string(rank) + (rank == 1 ? " index" : " indices"));
      return;
    }
    Shape out;
    for (int d = 0; d < rank; ++d) {
      const SymSize& dim = d < static_cast<int>(base.shape.dims.size()) ? base.shape.dims[d] : SymSize::unknown();
      if (d >= static_cast<int>(e.indices.size())) {
        kept.push_back(true);
        out.dims.push_back(dim);
        continue;
      }
      const Index& ix = e.indices[d];
      if (ix.kind == IndexKind::Single && ix.lower->type.is_int()) {
        kept.push_back(false);
        continue;
      }
      kept.push_back(true);
      if (ix.kind == IndexKind::Single) {
        out.dims.push_back(ix.lower->shape.dims[0]);
      } else if (ix.kind == IndexKind::All) {
        out.dims.push_back(dim);
      } else {
        SymSize lo = ix.lower ? size_of(*ix.lower) : SymSize::constant(1);
        SymSize hi = ix.upper ? size_of(*ix.upper) : dim;
        out.dims.push_back(hi - lo + SymSize::constant(1));
      }
    }
    int arrays_left = 0;
    for (int d = 0; d < base.type.array_dims; ++d) arrays_left += kept[d];
    Base b = base.type.base;
    if (b == Base::Vector || b == Base::RowVector) {
      if (!kept[base.type.array_dims]) b = Base::Real;
    } else if (b == Base::Matrix) {
      bool rows = kept[base.type.array_dims], cols = kept[base.type.array_dims + 1];
      b = rows && cols ? Base::Matrix : rows ? Base::Vector : cols ? Base::RowVector : Base::Real;
    }
    e.type = Type{b, arrays_left};
    e.shape = out;
  }

  void call(Expr& e) {
    if (auto user = functions_.find(e.name); user != functions_.end()) return user_call(e, *user->second);
    if (refused_call(e)) return;
    if (random_call(e)) return;
    const stdlib::Function* f = stdlib::find_function(e.name);
    if (!f) {
      bool suffix_ok = false;
      if (stdlib::find_density_function(e.name, &suffix_ok)) {
        // `normal_lpdf(y, mu, sigma)`: the outcome is separated by '|'.
        std::string fixed = e.name + "(" + (e.args.empty() ? "y" : to_source(*e.args[0])) + " |";
        for (size_t i = 1; i < e.args.size(); ++i) fixed += (i > 1 ? ", " : " ") + to_source(*e.args[i]);
        if (e.args.size() < 2) fixed += " ...";
        diags_.error(e.loc, "'" + e.name + "' separates its outcome from the parameters with '|'",
                     "write `" + fixed + ")`");
        return;
      }
      if (const stdlib::Distribution* d = stdlib::find_distribution(e.name)) {
        std::string help = "use it as `y ~ " + e.name + "(...)` or `target += " + e.name +
                           (d->discrete ? "_lpmf" : "_lpdf") + "(y | ...)`";
        if (e.name == "bernoulli_logit" || e.name == "binomial_logit")
          help += "; for the probabilities themselves use inv_logit(...)";
        else if (e.name == "categorical_logit")
          help += "; for the probabilities themselves use softmax(...)";
        diags_.error(e.loc, "'" + e.name + "' is a distribution, not a function", help);
        return;
      }
      std::vector<std::string> names;
      for (const auto& fn : stdlib::functions()) names.push_back(fn.name);
      std::string near = closest(e.name, names);
      diags_.error(e.loc, "unknown function '" + e.name + "'",
                   near.empty() ? "see the language reference for the functions available"
                                : "did you mean '" + near + "'?");
      return;
    }
    int n = static_cast<int>(e.args.size());
    if (n < f->min_args || n > f->max_args) {
      std::string count = f->min_args == f->max_args ? std::to_string(f->min_args)
                                                     : std::to_string(f->min_args) + " to " + std::to_string(f->max_args);
      diags_.error(e.loc, e.name + " takes " + count + (f->max_args == 1 ? " argument" : " arguments") +
                              ", got " + std::to_string(n),
                   std::string("write ") + (f->usage ? f->usage : e.name + "(x)"));
      return;
    }
    if (any_error(e)) {
      if (f->rule == stdlib::Rule::SiloSum) e.taint = silo_sum_taint(*e.args[0]);  // no follow-on flow errors
      return;
    }
    function_type(e, *f);
  }

  void bad_args(Expr& e, const std::string& expected) {
    std::string got;
    for (size_t i = 0; i < e.args.size(); ++i) got += (i ? ", " : "") + to_string(e.args[i]->type);
    diags_.error(e.loc, e.name + " cannot take (" + got + ")", e.name + " takes " + expected);
  }

  void function_type(Expr& e, const stdlib::Function& f) {
    using stdlib::Rule;
    const Expr& a = *e.args[0];
    switch (f.rule) {
      case Rule::Elementwise:
      case Rule::ElementwiseInt: {
        if (e.args.size() == 2) {
          const Expr& b = *e.args[1];
          if (!(a.type.is_scalar() && b.type.is_scalar()) && a.type != b.type && !a.type.is_scalar() &&
              !b.type.is_scalar())
            return bad_args(e, "two scalars, or containers of one type (or a scalar and a container)");
          const Expr& c = a.type.is_scalar() ? b : a;
          e.type = c.type;
          e.shape = c.shape;
          if (!a.type.is_scalar() && !b.type.is_scalar()) require_same_dims(a.shape, b.shape, e.loc, e.name);
        } else {
          e.type = a.type;
          e.shape = a.shape;
        }
        // Ints become reals (abs keeps them); containers keep their own type: log(vector) is a vector.
        if (e.type.base == Base::Int && f.rule != Rule::ElementwiseInt) e.type.base = Base::Real;
        return;
      }
      case Rule::Reduce:
      case Rule::ReduceReal:
        if (a.type.is_scalar() && f.rule == Rule::ReduceReal && e.name != "dot_self")
          return bad_args(e, "a container");
        e.type = scalar(f.rule == Rule::Reduce && a.type.base == Base::Int ? Base::Int : Base::Real);
        return;
      case Rule::DotProduct: {
        const Expr& b = *e.args[1];
        if (!matches(Arg::VectorLike, a.type) || !matches(Arg::VectorLike, b.type))
          return bad_args(e, "two vectors or row_vectors");
        require_equal(a.shape.dims[0], b.shape.dims[0], e.loc, "the arguments of dot_product");
        e.type = scalar(Base::Real);
        return;
      }
      case Rule::RowsDotProduct:
      case Rule::ColumnsDotProduct: {
        const Expr& b = *e.args[1];
        if (a.type != b.type || a.type.array_dims > 0 || a.type.base_dims() == 0)
          return bad_args(e, "two matrices (or vectors) of one shape");
        require_same_dims(a.shape, b.shape, e.loc, "the arguments of " + e.name);
        bool rows = f.rule == Rule::RowsDotProduct;
        e.type = scalar(rows ? Base::Vector : Base::RowVector);
        if (a.type.base == Base::Matrix) e.shape.dims = {a.shape.dims[rows ? 0 : 1]};
        else e.shape.dims = {a.type.base == Base::Vector ? (rows ? a.shape.dims[0] : SymSize::constant(1))
                                                         : (rows ? SymSize::constant(1) : a.shape.dims[0])};
        return;
      }
      case Rule::SameVector:
        if (!matches(Arg::Vector, a.type)) return bad_args(e, "a vector");
        e.type = a.type;
        e.shape = a.shape;
        return;
      case Rule::RepVector:
      case Rule::RepRowVector: {
        const Expr& n = *e.args[1];
        if (!a.type.is_scalar() || !n.type.is_int()) return bad_args(e, "(real value, int n)");
        e.type = scalar(f.rule == Rule::RepVector ? Base::Vector : Base::RowVector);
        e.shape.dims = {size_of(n)};
        return;
      }
      case Rule::RepMatrix: {
        if (e.args.size() == 3) {
          if (!a.type.is_scalar() || !e.args[1]->type.is_int() || !e.args[2]->type.is_int())
            return bad_args(e, "(real value, int m, int n), (vector v, int n) or (row_vector v, int m)");
          e.type = scalar(Base::Matrix);
          e.shape.dims = {size_of(*e.args[1]), size_of(*e.args[2])};
          return;
        }
        const Expr& n = *e.args[1];
        if (!matches(Arg::VectorLike, a.type) || !n.type.is_int())
          return bad_args(e, "(real value, int m, int n), (vector v, int n) or (row_vector v, int m)");
        e.type = scalar(Base::Matrix);
        if (a.type.base == Base::Vector) e.shape.dims = {a.shape.dims[0], size_of(n)};
        else e.shape.dims = {size_of(n), a.shape.dims[0]};
        return;
      }
      case Rule::ToVector:
      case Rule::ToRowVector:
        e.type = scalar(f.rule == Rule::ToVector ? Base::Vector : Base::RowVector);
        e.shape.dims = {a.shape.elements()};
        return;
      case Rule::Size:
        if (a.type.is_scalar()) return bad_args(e, "a container");
        e.type = scalar(Base::Int);
        return;
      case Rule::SiloSum:
        return silo_sum(e);
    }
  }

  // The sum over silos is no longer any one silo's value.
  static Taint silo_sum_taint(const Expr& operand) {
    Taint t;
    if (operand.taint.has(K::PublicData))
      t.add(K::PublicData, operand.taint.witness[static_cast<size_t>(K::PublicData)]);
    t.add(K::SiloSum, "silo_sum(" + to_source(operand) + ")");
    return t;
  }

  void silo_sum(Expr& e) {
    const Expr& a = *e.args[0];
    // Also when the operand is rejected: the error is reported once, here, not again by the term
    // around it.
    e.taint = silo_sum_taint(a);
    if (block_ == BlockKind::TransformedData || block_ == BlockKind::TransformedParameters) {
      diags_.error(e.loc, std::string("silo_sum in '") + block_name(block_) + "'",
                   "a sum over the silos is sent to the server once, after the fit: compute it in `generated "
                   "quantities`, as `real total = silo_sum(...);`");
      return;
    }
    if (block_ == BlockKind::GeneratedQuantities) {
      if (&e != aggregate_root_) {
        diags_.error(e.loc, "silo_sum must be the whole value of a generated quantity",
                     "the server receives each silo's part and adds them up, nothing more: declare "
                     "`real total = silo_sum(" + to_source(a) + ");` and compute with it after the run");
        return;
      }
      if (!check_aggregate_operand(a, diags_)) return;
      e.type = a.type;
      e.shape = a.shape;
      return;
    }
    if (!check_silo_sum_operand(a, diags_)) return;
    e.type = a.type;
    e.shape = a.shape;
  }

  void density_call(Expr& e) {
    if (auto user = functions_.find(e.name); user != functions_.end()) return user_call(e, *user->second);
    if (refused_call(e)) return;
    bool suffix_ok = false;
    const stdlib::Distribution* dist = stdlib::find_density_function(e.name, &suffix_ok);
    if (!dist) {
      if (const stdlib::Distribution* d = stdlib::find_distribution(e.name)) {
        // `normal(y | mu, sigma)`: the density function is normal_lpdf.
        std::string density = e.name + (d->discrete ? "_lpmf" : "_lpdf");
        diags_.error(e.loc, "'" + e.name + "' is a distribution, not a function",
                     "its log density is " + density + ": write `target += " + density + "(" +
                         to_source(*e.args[0]) + " | " + args_source(e.args, 1) + ")`");
        return;
      }
      std::vector<std::string> names;
      for (const auto& d : stdlib::distributions())
        names.push_back(std::string(d.name) + (d.discrete ? "_lpmf" : "_lpdf"));
      std::string near = closest(e.name, names);
      diags_.error(e.loc, "unknown density function '" + e.name + "'",
                   near.empty() ? "write a distribution name with _lpdf (continuous) or _lpmf "
                                  "(discrete), e.g. normal_lpdf"
                                : "did you mean '" + near + "'?");
      return;
    }
    if (!suffix_ok) {
      std::string base = e.name.substr(0, e.name.rfind('_'));
      diags_.error(e.loc, "'" + base + "' is " + (dist->discrete ? "discrete" : "continuous") + ": write " +
                              base + (dist->discrete ? "_lpmf" : "_lpdf"),
                   "_lpmf is for discrete outcomes, _lpdf for continuous ones");
      return;
    }
    if (any_error(e)) return;
    std::vector<const Expr*> args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(e.args[i].get());
    if (!check_distribution_call(*dist, *e.args[0], args, e.loc)) return;
    e.type = scalar(Base::Real);
  }

  // ---- priors ------------------------------------------------------------------------------

  void check_priors() {
    // A prior rejected for another reason was still written: no second error for it. A `~` on
    // an undeclared name was probably meant for one of these parameters: say nothing until the
    // name is fixed.
    if (prior_of_unknown_) return;
    for (Symbol& s : model_.symbols) {
      if (s.kind != SymbolKind::Parameter || prior_attempts_.count(s.name)) continue;
      if (s.decl && s.decl->type.simplex) {
        diags_.error(s.loc, "parameter '" + s.name + "' has no prior",
                     "a simplex needs its prior written: add e.g. `" + s.name + " ~ dirichlet(rep_vector(1, K));`");
        continue;
      }
      // As in Stan: uniform over the declared support. The methods that need a proper prior
      // (PVI starts from it) refuse it in the plan, saying so.
      s.flat_prior = true;
    }
  }

  // ---- inference block ---------------------------------------------------------------------

  void check_settings(const Block& b) {
    InferenceSettings& out = model_.settings;
    for (const Setting& s : b.settings) {
      const stdlib::KeySpec* spec = stdlib::find_key(s.key);
      if (!spec) {
        std::string near = stdlib::suggest_key(s.key);
        diags_.error(s.key_loc, "unknown inference key '" + s.key + "'",
                     near.empty() ? "see `fvic help keys` for the keys" : "did you mean '" + near + "'?");
        continue;
      }
      if (out.has(s.key)) {
        diags_.error(s.key_loc, "'" + s.key + "' is set twice",
                     "it was set on line " + std::to_string(out.loc(s.key).line) + "; keep one");
        continue;
      }
      std::string why = stdlib::validate_key_value(*spec, s.value);
      if (!why.empty()) {
        // The message says what is accepted; the help suggests a spelling or says what the key is.
        std::string near = stdlib::suggest_value(*spec, s.value);
        std::string help = s.key + ": " + spec->meaning;
        if (*spec->default_value) help += std::string(" (default ") + spec->default_value + ")";
        if (why.find("accepted:") == std::string::npos && (s.key == "loss" || s.key == "divergence"))
          help = "'" + s.key + "' accepts " + spec->values;
        diags_.error(s.value_loc, why, near.empty() ? help : "did you mean '" + near + "'?");
        continue;
      }
      out.values[s.key] = s.value;
      out.locs[s.key] = s.value_loc;  // errors about a setting (e.g. an unusable method) mark its value
    }
  }

  const Program& program_;
  Diagnostics& diags_;
  SemanticModel& model_;
  std::vector<std::vector<Symbol>> scopes_;
  std::vector<Taint> context_;  // conditions of enclosing ifs
  std::set<std::string> prior_attempts_;  // parameters with a `~` (valid or not)
  std::set<std::string> unknown_reported_;  // undeclared names already reported
  bool prior_of_unknown_ = false;           // some `~` has an undeclared name on its left
  BlockKind block_ = BlockKind::Model;      // the statements' block (model or a derived one)
  std::vector<const Stmt*> loops_;          // the enclosing `for` statements, innermost last
  const Expr* aggregate_root_ = nullptr;   // the silo_sum a generated quantity's whole value may be
  std::set<std::string> assigned_;          // derived values assigned after their declaration
  std::map<std::string, const FunctionDef*> functions_;  // checked so far, by name
  std::set<std::string> broken_functions_;  // with errors: calls are not inlined
  std::set<std::string> later_functions_;   // defined below the one being checked
  const FunctionDef* current_function_ = nullptr;
  static constexpr long long kMaxInlinedNodes = 1000000;
  static constexpr long long kMaxInlinedDepth = 2000;  // as deep as parser.cpp lets a statement nest
  static constexpr int kMaxInlineNesting = 100;        // a call inlined inside another's inlined body
  int inline_nesting_ = 0;
  long long inlined_nodes_ = 0;
  bool inlining_reported_ = false;
  bool has_silo_data_ = false;
  bool has_split_data_ = false;
};

}  // namespace

std::unique_ptr<SemanticModel> check_program(const Program& program, Diagnostics& diags) {
  auto model = std::make_unique<SemanticModel>();
  Checker(program, diags, *model).run();
  return model;
}

}  // namespace fvic
