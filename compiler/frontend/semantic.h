#pragma once
// What semantic analysis learns about a program: every declared name with its type, shape and
// owner; every term of the log joint (each `~` and `target +=`) with its kind and the party that
// evaluates it; the size equalities that can only be checked against data; and the validated
// inference settings. The planner and the IR lowering read this, never the raw AST alone.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/ast.h"
#include "frontend/diagnostics.h"

namespace fvic {

// Who holds a value at run time.
enum class Owner {
  Public,  // `data`: the server and every silo
  Server,  // `server data`
  Silo,    // `silo data` and `local` parameters: each silo its own
  Split,   // `split data` and `split` values: silo k its own block
  Global,  // `global` parameters and hyperparameters: the server's posterior, shared
  Scope,   // model-block locals and loop variables
};
const char* owner_name(Owner owner);

// Transformed: a declaration of `transformed data`, `transformed parameters` or `generated
// quantities` (its `block` says which); its owner is inferred from what it reads.
enum class SymbolKind { Data, Parameter, Hyperparameter, LocalVariable, LoopVariable, Transformed };

struct Symbol {
  std::string name;
  SymbolKind kind;
  Owner owner;
  BlockKind block;
  const VarDecl* decl = nullptr;  // null for loop variables
  Type type;
  Shape shape;
  Taint taint;  // what the value itself carries
  Loc loc;
  // A parameter with no prior statement: Stan's implicit uniform over its declared support (on
  // the unconstrained scale, the log-Jacobian of the constraint alone).
  bool flat_prior = false;
  // Transformed: the expression that defines it (its declared value, or its one assignment of
  // the whole variable); null when statements build it piece by piece.
  const Expr* value = nullptr;
  // Set when `value` is element i's: `for (i in 1:N) v[i] = value;`, this loop (its variable is
  // `name`, its bounds args[0] = 1 and args[1]), the only statement assigning v.
  const Stmt* loop = nullptr;
  // A generated quantity `real t = silo_sum(e);`: each silo computes e at the server's draws
  // and sends it once, at the end; the server writes the sum (owner Global).
  bool aggregate = false;
  // A silo's transformed data declared with its value (`vector[N] age2 = square(age);`, not an
  // int) that the silo computes when it reads its data, as it does what statements build, rather
  // than the kernels wherever it is read: then it is held as data (a covariate centred as data is,
  // analysis/centring.h). Set where the runtime can compute the value (analysis/transformed_data.h).
  bool value_at_load = false;
};

// Whether `s` is transformed data built by statements (loops, ifs, element assignments: no single
// defining expression), or a silo's with its value computed so (value_at_load), computed when its
// party's data is read (analysis/transformed_data.h).
bool computed_at_load(const Symbol& s);

enum class TermKind { Prior, Likelihood, Target };
const char* term_kind_name(TermKind kind);

// Who evaluates a term of the log joint.
enum class TermOwner {
  Server,    // global priors, server-data likelihoods without silo_sum
  Silo,      // each silo: local priors, likelihoods of silo data
  SplitSilo, // silo k of a vertical model: split priors
  Coupling,  // a likelihood through silo_sum: needs every silo's contribution
};
const char* term_owner_name(TermOwner owner);

struct Term {
  const Stmt* stmt;
  TermKind kind;
  TermOwner owner;
  std::string subject;       // the parameter a prior is about, or the data a likelihood scores
  std::string distribution;  // empty for `target +=`
  bool uses_silo_sum = false;
  bool conditional = false;  // inside an `if`: a `target +=` term whatever it is written as
  // The model block runs as statement programs (ir/lower.cpp: a statement the vectorised forms
  // refuse): the term is a part of its party's program, not a factor of its own.
  bool in_program = false;
  Taint taint;
  Loc loc;
};

// A size equality the compiler cannot decide: `N` (rows of x) must equal `M` (length of y).
struct SizeCheck {
  SymSize left;
  SymSize right;
  Loc loc;
  std::string what;
};

struct InferenceSettings {
  std::map<std::string, stdlib::KeyValue> values;  // only the keys that were set
  std::map<std::string, Loc> locs;  // where each value is written (no location for --set)

  bool has(const std::string& key) const { return values.count(key) > 0; }
  // The value's name (`auto`, `meanfield`, `gce`), or `fallback` when the key is unset.
  std::string name(const std::string& key, const std::string& fallback) const;
  Loc loc(const std::string& key) const;
};

struct SemanticModel {
  const Program* program = nullptr;
  std::vector<Symbol> symbols;  // declaration order; loop and model locals excluded
  std::vector<Term> terms;
  std::vector<SizeCheck> size_checks;
  InferenceSettings settings;

  // By name, in constant time: the symbols appended since the last call are indexed first (a
  // linear search made checking quadratic in the declarations, issue 27 item 9).
  const Symbol* find(const std::string& name) const;
  std::vector<const Symbol*> of(SymbolKind kind) const;
  bool has_block(BlockKind kind) const { return program && program->find(kind); }

 private:
  mutable std::unordered_map<std::string, size_t> index_;
  mutable size_t indexed_ = 0;
};

// The value of an int expression known when the data files are read, as a size: + - * of int
// literals, int data and transformed data ints defined so (`int Kc = K - 1;`, declared with that
// value and never assigned again); nullopt for anything else.
std::optional<SymSize> size_value(const Expr& e, const SemanticModel& model);

// Runs every check on a parsed program. Reports through `diags`; returns the model even when
// there are errors (callers look at diags.has_errors()).
std::unique_ptr<SemanticModel> check_program(const Program& program, Diagnostics& diags);

// Applies `--set key=value` overrides on top of the inference block; reports bad ones.
bool apply_overrides(InferenceSettings& settings, const std::vector<std::string>& overrides,
                     std::string* error);

}  // namespace fvic
