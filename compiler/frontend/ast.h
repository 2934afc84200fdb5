#pragma once
// The abstract syntax tree of a .fvi program. The parser builds it from ANTLR's parse tree (no
// ANTLR type leaks past parser.cpp); the checker fills in each expression's type, shape and
// ownership taint; later phases (IR lowering, the planner) read it. Nodes own their children
// through std::unique_ptr.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/source.h"
#include "frontend/types.h"
#include "inference_keys.h"

namespace fvic {

// In the order blocks must appear.
enum class BlockKind {
  Functions,
  Data,
  ServerData,
  SiloData,
  SplitData,
  TransformedData,
  Hyperparameters,
  Parameters,
  TransformedParameters,
  Model,
  GeneratedQuantities,
  Inference,
};
const char* block_name(BlockKind kind);  // as written in source: "silo data", ...

// Who holds a declared value (DESIGN.md §2). Data blocks imply it; parameters state it.
enum class Mark { None, Global, Local, Split };
const char* mark_name(Mark mark);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  IntLit,
  RealLit,
  Var,
  Unary,      // name = operator: "-", "+", "!"
  Binary,     // name = operator: "+", "*", ".*", "==", "&&", ...
  Cond,       // args = {condition, then, else}
  Call,       // name = function, args = arguments
  CondCall,   // normal_lpdf(y | mu, sigma): args[0] = y, args[1..] = parameters
  Index,      // args[0] = indexed value; indices below
  Transpose,  // args[0]'
  ArrayLit,   // { a, b, c }
  RowVectorLit,  // [ a, b, c ]
};

enum class IndexKind { Single, Range, All };

struct Index {
  IndexKind kind = IndexKind::Single;
  ExprPtr lower;  // Single: the index; Range: lower bound (may be null)
  ExprPtr upper;  // Range: upper bound (may be null)
  Loc loc;
};

struct Expr {
  ExprKind kind;
  Loc loc;
  std::string name;  // variable, function or operator
  std::string text;  // literal spelling
  long long int_value = 0;
  double real_value = 0;
  std::vector<ExprPtr> args;
  std::vector<Index> indices;

  // Filled by the checker.
  Type type;
  Shape shape;
  Taint taint;
  // A call of a user function: its body's value with the arguments substituted, checked (the
  // checker inlines every user function; type, shape and taint above are the inlined value's).
  ExprPtr inlined;

  Expr(ExprKind k, Loc l) : kind(k), loc(l) {}
};

// ordered[K]: increasing; positive_ordered[K]: increasing and positive (Stan's types).
enum class Ordering { None, Ordered, PositiveOrdered };

// Stan's structured matrices: cholesky_factor_corr[K], cholesky_factor_cov[M, N], corr_matrix[K],
// cov_matrix[K]. Each is a matrix whose unconstrained values are fewer than its elements. And
// unit_vector[K], a vector of length 1 from K unconstrained values, transformed by the same
// machinery (a value the outputs hold as a quantity).
enum class MatrixStructure { None, CholeskyCorr, CholeskyCov, Corr, Cov, UnitVector };
const char* structure_name(MatrixStructure s);  // "cholesky_factor_corr", ...

// A declared type with its sizes as expressions over data: `array[N] vector<lower=0>[D]`.
struct TypeDecl {
  Base base = Base::Real;
  bool simplex = false;
  Ordering ordering = Ordering::None;  // ordered[K], positive_ordered[K]: vectors
  MatrixStructure structure = MatrixStructure::None;  // a matrix[K, K] (cholesky_factor_cov: [M, N])
  std::vector<ExprPtr> array_sizes;
  std::vector<ExprPtr> sizes;  // vector/row_vector: 1, matrix: 2
  ExprPtr lower;
  ExprPtr upper;
  ExprPtr offset;      // <offset=a, multiplier=b>: x = a + b * u (Stan's affine transform)
  ExprPtr multiplier;
  Loc loc;
  bool affine() const { return offset || multiplier; }
};

struct VarDecl {
  BlockKind block;
  Mark mark = Mark::None;
  Loc mark_loc;
  TypeDecl type;
  std::string name;
  Loc name_loc;
  ExprPtr init;  // local variables, and the derived blocks' declarations
  Loc loc;
  bool from_product = false;  // made from a product in the model (frontend/data_products.h)
};
using VarDeclPtr = std::unique_ptr<VarDecl>;

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

enum class StmtKind { Tilde, Target, Assign, For, If, Block, Decl, Return, Empty };

struct Stmt {
  StmtKind kind;
  Loc loc;
  // Tilde: lhs ~ dist(args). Target: args[0]. Assign: lhs op= args[0]. Return: args (0 or 1).
  // For: loop variable `name` in args[0]:args[1], body[0]. If: args[0], body = {then, else?}.
  ExprPtr lhs;
  std::string name;  // distribution, loop variable, or assignment operator
  Loc name_loc;
  std::vector<ExprPtr> args;
  std::vector<StmtPtr> body;
  VarDeclPtr decl;

  Stmt(StmtKind k, Loc l) : kind(k), loc(l) {}
};

// `key = value;` in the inference block; the value's forms are in stdlib/inference_keys.h.
struct Setting {
  std::string key;
  Loc key_loc;
  stdlib::KeyValue value;
  Loc value_loc;
};

struct FunctionArg {
  Type type;
  bool data_only = false;  // `data real x`: the argument may not read parameters
  std::string name;
  Loc loc;
};

// `real f(vector a, data real b) { ... }`: inlined at each call (frontend/functions.h).
struct FunctionDef {
  std::string name;
  Loc loc;
  bool returns_void = false;
  Type return_type;
  Loc return_loc;
  std::vector<FunctionArg> args;
  StmtPtr body;
};

struct Block {
  BlockKind kind;
  Loc loc;
  std::vector<VarDeclPtr> decls;  // data, hyperparameters, parameters
  std::vector<StmtPtr> stmts;     // model, transformed data/parameters, generated quantities
  std::vector<Setting> settings;  // inference
  std::vector<FunctionDef> functions;
};

struct Program {
  std::string name;  // the model's name: the file's stem
  std::vector<Block> blocks;

  const Block* find(BlockKind kind) const;
  Block* find(BlockKind kind);
};

// `fvic dump --ast`: one node per line, indented, stable for golden tests.
std::string dump_ast(const Program& program);
std::string to_source(const Expr& expr);  // the expression printed back as .fvi text

}  // namespace fvic
