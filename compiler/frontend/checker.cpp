// Semantic analysis: names, types, shapes, constraints, ownership marks and priors.
//
// One walk over the program in declaration order. Each expression gets a type, a symbolic
// shape and a taint; each `~` / `target +=` becomes a Term classified by ownership.cpp. Errors
// are reported and the walk goes on, with an error type that silences follow-on errors, so one
// run shows every independent mistake.
//
// This file: check_program, the order of the walk (Checker::run), the program's structure, the
// parameters left without a prior, and the helpers the checker's files share. The rest, by concern:
// check_declarations.cpp, check_functions.cpp, check_derived.cpp, check_statements.cpp,
// check_distributions.cpp, check_expressions.cpp, check_calls.cpp and check_settings.cpp, around
// the class in checker_impl.h.
#include "frontend/checker_impl.h"

#include <algorithm>

#include "builtins.h"

namespace fvic {
namespace check_detail {

// ---- helpers shared by the checker's files (checker_impl.h) --------------------------------

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

std::string args_source(const std::vector<ExprPtr>& args, size_t from) {
  std::string out;
  for (size_t i = from; i < args.size(); ++i) out += (i > from ? ", " : "") + to_source(*args[i]);
  return out;
}

std::optional<double> literal_value(const Expr& e) {
  if (e.kind == ExprKind::IntLit) return static_cast<double>(e.int_value);
  if (e.kind == ExprKind::RealLit) return e.real_value;
  if (e.kind == ExprKind::Unary && e.name == "-" && e.args[0])
    if (auto v = literal_value(*e.args[0])) return -*v;
  return std::nullopt;
}

// ---- the walk, block by block --------------------------------------------------------------

void Checker::run() {
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

// ---- program structure ---------------------------------------------------------------------

void Checker::check_structure() {
  const Block* silo = program_.find(BlockKind::SiloData);
  const Block* split = program_.find(BlockKind::SplitData);
  if (silo && split)
    diags_.error(split->loc, "a model has either 'silo data' (each silo its own rows) or "
                             "'split data' (each silo its own columns), not both",
                 "keep the block that matches how the data is partitioned");
  has_silo_data_ = silo != nullptr;
  has_split_data_ = split != nullptr;
}

// ---- priors --------------------------------------------------------------------------------

void Checker::check_priors() {
  // A prior rejected for another reason was still written: no second error for it. A `~` on
  // an undeclared name was probably meant for one of these parameters: say nothing until the
  // name is fixed.
  if (prior_of_unknown_) return;
  for (Symbol& s : model_.symbols) {
    if (s.kind != SymbolKind::Parameter || prior_attempts_.count(s.name)) continue;
    // As in Stan: uniform over the declared support (for a simplex, Dirichlet(1, ..., 1)). The
    // methods that need a proper prior (PVI starts from it) refuse it in the plan, saying so.
    s.flat_prior = true;
  }
}

}  // namespace check_detail

std::unique_ptr<SemanticModel> check_program(const Program& program, Diagnostics& diags) {
  auto model = std::make_unique<SemanticModel>();
  check_detail::Checker(program, diags, *model).run();
  return model;
}

}  // namespace fvic
