#pragma once
// The checker (check_program, semantic.h) inside: the class Checker, one walk over the program, and
// the helpers its files share. Private to the check_*.cpp files and checker.cpp, which define its
// members by concern, one file per section below. Nothing else includes this.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builtins.h"
#include "frontend/semantic.h"

namespace fvic {
namespace check_detail {

using stdlib::Arg;
using K = TaintKind;

// The candidate nearest to `name` in spelling, or "" when none is a likely misspelling.
std::string closest(const std::string& name, const std::vector<std::string>& candidates);

inline Type scalar(Base b) { return Type{b, 0}; }

// Arguments printed back as source, from index `from`: "mu, 1".
std::string args_source(const std::vector<ExprPtr>& args, size_t from = 0);

// A numeric literal, possibly negated: for compile-time checks of distribution arguments.
std::optional<double> literal_value(const Expr& e);

// The members are defined in the file named in each section's heading.
class Checker {
 public:
  Checker(const Program& program, Diagnostics& diags, SemanticModel& model)
      : program_(program), diags_(diags), model_(model) {}

  void run();
 private:
  // ---- program structure: checker.cpp ------------------------------------------------------
  void check_structure();

  // ---- declarations: check_declarations.cpp ------------------------------------------------
  static Owner owner_of(const VarDecl& d);
  static K taint_kind(SymbolKind kind, Owner owner);
  unsigned allowed_size_taint(const VarDecl& d, Owner owner) const;
  static unsigned param_bits();
  Owner unmarked_owner(const VarDecl& d);
  void check_marks(const VarDecl& d, Owner guessed);
  void check_structured_matrix(const VarDecl& d, const Symbol& sym, bool derived);
  void check_affine(const VarDecl& d, const Symbol& sym);
  SymSize size_of(const Expr& e);
  bool check_size_expr(Expr& e, const VarDecl& d, Owner owner, const char* what);
  bool check_decl_reads(const Expr& e, const VarDecl& d, Owner owner, const char* what);
  void declare(const VarDecl& d);

  // ---- scopes: check_declarations.cpp ------------------------------------------------------
  const Symbol* lookup(const std::string& name) const;
  Symbol* lookup_local(const std::string& name);
  std::vector<std::string> visible_names() const;

  // ---- functions: check_functions.cpp ------------------------------------------------------
  void check_functions(const Block& b);
  bool check_function(const FunctionDef& f);
  void function_return(const Stmt& s);
  void user_call(Expr& e, const FunctionDef& f);
  bool refused_call(const Expr& e);
  bool random_call(Expr& e);

  // ---- transformed data, transformed parameters, generated quantities: check_derived.cpp ---
  static bool is_silo_sum(const Expr& e);
  static bool is_derived(BlockKind b);
  Symbol* derived_symbol(const std::string& name);
  void reject_derived_size(const Expr& e, const VarDecl& d);
  // A transformed data int given as + - * of int literals, data and other such ints
  // (`int Kc = K - 1;`): its defining expression, which a size may use; else null.
  const Expr* size_alias(const Symbol& s) const;
  void check_derived(const Block& b);
  void infer_owner(Symbol& sym);

  // ---- model block: check_statements.cpp ---------------------------------------------------
  void check_model(const Block& b);
  void stmt(const Stmt& s);
  Taint context_taint() const;
  void for_loop(const Stmt& s);
  void if_stmt(const Stmt& s);
  void assign(const Stmt& s);
  void check_assignable(const Type& to, const Shape& to_shape, const Expr& value,
                        const std::string& what, const Loc& loc);
  void require_same_dims(const Shape& a, const Shape& b, const Loc& loc, const std::string& what);
  void require_equal(const SymSize& a, const SymSize& b, const Loc& loc, const std::string& what);
  void append(Expr& e, bool rows);  // append_row / append_col

  // ---- `~` and `target +=`: check_distributions.cpp ----------------------------------------
  void tilde(const Stmt& s);
  void target(const Stmt& s);
  void check_support(const stdlib::Distribution& dist, const Symbol& p, const Loc& at);
  bool matches(Arg arg, const Type& t) const;
  bool check_sparse_gp_shapes(const Expr& outcome, const std::vector<const Expr*>& args);
  bool check_distribution_call(const stdlib::Distribution& dist, const Expr& outcome,
                               const std::vector<const Expr*>& args, const Loc& at);

  // ---- expressions: check_expressions.cpp, check_calls.cpp ---------------------------------
  void fail(Expr& e);
  void expr(Expr& e);
  [[gnu::noinline]] void expr_node(Expr& e);
  static bool any_error(const Expr& e);
  void variable(Expr& e);
  void unary(Expr& e);
  void conditional(Expr& e);
  void binary_type(const std::string& op, const Expr& a, const Expr& b, const Loc& loc, Type& out,
                   Shape& shape);
  void transpose(Expr& e);
  void literal_container(Expr& e);
  void index(Expr& e);
  void call(Expr& e);
  void bad_args(Expr& e, const std::string& expected);
  void function_type(Expr& e, const stdlib::Function& f);
  void image_call(Expr& e, bool conv);  // conv2d, max_pool2d, avg_pool2d
  static Taint silo_sum_taint(const Expr& operand);
  void silo_sum(Expr& e);
  void density_call(Expr& e);
  void cdf_call(Expr& e, const stdlib::CdfFunction& cdf);

  // ---- ODE solvers: check_ode.cpp ----------------------------------------------------------
  void ode_call(Expr& e, const stdlib::OdeSolver& solver);

  // ---- priors: checker.cpp -----------------------------------------------------------------
  void check_priors();

  // ---- inference block: check_settings.cpp -------------------------------------------------
  void check_settings(const Block& b);

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
  // Bodies of statements (loops, ifs, assignments, returns anywhere): calls are not inlined into
  // expressions; statement programs run them (ir/statement_program.h).
  std::set<std::string> statement_functions_;
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

}  // namespace check_detail
}  // namespace fvic
