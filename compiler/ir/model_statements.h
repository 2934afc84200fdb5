#pragma once
// The model block's statements as lowering reads them (ir/lower.cpp): each `~` and `target +=`
// with its place — the one loop `for (i in 1:N)` around it (lowered as one vectorised statement of
// N rows), the tests of the `if`s around it, the loop's own locals declared before it — and the
// block's locals with their values in order, a local assigned again getting a new value that the
// statements after the assignment read.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/diagnostics.h"
#include "frontend/semantic.h"

namespace fvic::ir {

// `for (var in 1:rows)` around a statement: element var's values are lowered as one value of
// `rows` rows (each use of var must be a container's element [var]).
struct StatementLoop {
  std::string var;
  SymSize rows;
};

// An `if`'s test around a term (one per enclosing `if`).
struct Condition {
  const Expr* test;
  bool holds;  // the term is in the `if`'s branch (true) or its `else` (false)
};

// A model-block local's value: its declared value, its one assignment, or element i's value of
// `for (i in 1:rows) v[i] = value;` (then lowered as one value of `rows` rows, as a derived one).
struct LocalValue {
  const Expr* value = nullptr;
  std::optional<SymSize> loop_rows;
  std::string loop_var;
  bool in_loop = false;  // declared in the loop's body: the name itself is element i's value
  // A later value of a local assigned again (`mu += z;`, `for (n in 1:N) sigma[n] =
  // exp(sigma[n]);`): inside `value` the name is the previous value, and with an operator (`+`
  // for `+=`) the new value is previous (op) value.
  std::shared_ptr<const LocalValue> previous;
  std::string name, compound;
};

struct Local {
  std::string name;
  LocalValue value;
};

struct ModelStatements {
  std::vector<Local> locals;  // in order: a name's later values after its earlier ones
  std::map<const Stmt*, StatementLoop> loops;
  std::map<const Stmt*, std::vector<Condition>> conditions;
  // The loop locals declared before each statement in its loop, in order.
  std::map<const Stmt*, std::vector<std::pair<std::string, LocalValue>>> loop_locals;
  // For each term, how many of `locals` come before it: the values it reads.
  std::map<const Stmt*, size_t> visible;
};

// Reads the model block (null: none). Reports each statement the code generator cannot lower
// (another kind of loop, a local never given its value) and returns false then.
bool collect_model_statements(const Block* model, ModelStatements& out, Diagnostics& diags);

// The locals a block's statements declare with a value (`matrix[N, N] L = ...;`, in nested
// blocks too) before the assignment whose value is `value` (a transformed parameter built in a
// block: `{ matrix[N, N] L = cholesky_decompose(K); f = L * z; }`), outermost first; none when
// no assignment of the block has that value, or it is in a loop, or a statement before it assigns
// one of those locals again (their declared values are then not what it reads).
std::vector<Local> locals_before(const Block* block, const Expr* value);

}  // namespace fvic::ir
