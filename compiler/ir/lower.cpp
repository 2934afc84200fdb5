#include "ir/lower.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "analysis/centring.h"
#include "analysis/class_shift.h"
#include "analysis/occurrences.h"
#include "analysis/sparse_gp.h"
#include "analysis/transformed_data.h"
#include "builtins.h"
#include "ir/model_statements.h"
#include "ir/statement_program.h"

namespace fvic::ir {

namespace {

// A value's logical (rows, cols): scalars 1x1, vectors and 1-D arrays n x 1, row_vectors 1 x n,
// matrices, 2-D arrays and arrays of vectors rows x cols.
bool dims_of(const Type& t, const Shape& s, SymSize& rows, SymSize& cols) {
  rows = cols = SymSize::constant(1);
  if (t.array_dims == 0) {
    switch (t.base) {
      case Base::Int:
      case Base::Real: return true;
      case Base::Vector: rows = s.dims[0]; return true;
      case Base::RowVector: cols = s.dims[0]; return true;
      case Base::Matrix: rows = s.dims[0], cols = s.dims[1]; return true;
      default: return false;
    }
  }
  if (t.array_dims == 1 && t.base_dims() == 0) {
    rows = s.dims[0];
    return true;
  }
  if (t.array_dims == 2 && t.base_dims() == 0) {  // array[R, C] of scalars: a list of R rows of C
    rows = s.dims[0], cols = s.dims[1];
    return true;
  }
  if (t.array_dims == 1 && t.base_dims() == 1) {  // array[R] vector[C] (row_vector[C]): element i is row i
    rows = s.dims[0], cols = s.dims[1];
    return true;
  }
  return false;
}

// The structure of a structured matrix parameter, and the number of its unconstrained values:
// K(K-1)/2 for cholesky_factor_corr[K] and corr_matrix[K], K(K+1)/2 for cov_matrix[K] and
// cholesky_factor_cov[K], K for unit_vector[K]; a plain parameter's are its elements.
MatrixStructure structure_of(const Symbol& s) {
  return s.decl ? s.decl->type.structure : MatrixStructure::None;
}
SymSize unconstrained_elements(const Symbol& s) {
  const MatrixStructure m = structure_of(s);
  if (m == MatrixStructure::UnitVector) return s.shape.dims[0];
  if (m == MatrixStructure::CholeskyCov) {  // [M, N]: N(N+1)/2 + (M - N) N
    const SymSize &rows = s.shape.dims[0], &cols = s.shape.dims[1];
    return (cols * (cols + SymSize::constant(1))).divided_by(2) + (rows - cols) * cols;
  }
  if (m != MatrixStructure::None) {
    const SymSize& k = s.shape.dims[0];
    const SymSize one = SymSize::constant(1);
    const bool with_diagonal = m == MatrixStructure::Cov || m == MatrixStructure::CholeskyCov;
    return (k * (with_diagonal ? k + one : k - one)).divided_by(2);
  }
  return s.shape.elements();
}
// A parameter whose outputs are its value computed by the kernels (a quantity), not its
// unconstrained values transformed by the runtime: a structured matrix (its values are fewer than
// its elements), or an affine transform (its offset and multiplier may be parameters).
bool written_as_quantity(const Symbol& s) {
  return (s.kind == SymbolKind::Parameter || s.kind == SymbolKind::Hyperparameter) && s.decl &&
         (s.decl->type.structure != MatrixStructure::None || s.decl->type.affine());
}

// The kernels' name of its transform (fvi/kernel/ops_matrix_constrain.h).
const char* transform_kind(MatrixStructure m) {
  switch (m) {
    case MatrixStructure::Corr: return "corr";
    case MatrixStructure::Cov: return "cov";
    case MatrixStructure::CholeskyCov: return "cholesky_cov";
    case MatrixStructure::UnitVector: return "unit";
    default: return "cholesky_corr";
  }
}

fvi_group group_of(const Symbol& s) {
  bool hyper = s.kind == SymbolKind::Hyperparameter;
  switch (s.owner) {
    case Owner::Silo: return hyper ? FVI_GROUP_LOCAL_HYPER : FVI_GROUP_LOCAL;
    case Owner::Split: return hyper ? FVI_GROUP_SPLIT_HYPER : FVI_GROUP_SPLIT;
    default: return hyper ? FVI_GROUP_HYPER : FVI_GROUP_GLOBAL;
  }
}

TermOwner party_of(const Symbol& s) {
  return s.owner == Owner::Silo ? TermOwner::Silo : s.owner == Owner::Split ? TermOwner::SplitSilo : TermOwner::Server;
}

bool is_scalar(const Node& n) { return n.rows.equals(SymSize::constant(1)) && n.cols.equals(SymSize::constant(1)); }

class FactorBuilder {
 public:
  FactorBuilder(const SemanticModel& model, Module& module, Diagnostics& diags, Factor& factor)
      : model_(model), module_(module), diags_(&diags), f_(factor) {}

  bool ok() const { return ok_; }

  int add(Node n) {
    f_.nodes.push_back(std::move(n));
    return static_cast<int>(f_.nodes.size()) - 1;
  }

  int constant(double v) {
    Node n{Op::Const};
    n.value = v;
    return add(n);
  }

  // rows and cols by value: a caller's node(i).rows would dangle if another argument adds a node.
  int op(Op o, std::vector<int> args, SymSize rows, SymSize cols, const std::string& name = "") {
    Node n{o};
    n.args = std::move(args);
    n.name = name;
    n.rows = rows;
    n.cols = cols;
    for (int a : n.args) n.varies |= f_.nodes[a].varies;
    return add(n);
  }

  const Node& node(int i) const { return f_.nodes[i]; }

  // `cond ? a : b` elementwise, shaped as the first of a, b and cond that is not a scalar.
  int select(int cond, int a, int b) {
    int shape = a;
    for (int x : {b, cond})
      if (is_scalar(node(shape))) shape = x;
    return op(Op::Select, {cond, a, b}, node(shape).rows, node(shape).cols);
  }

  using Condition = ir::Condition;

  // A term's value where every enclosing `if` takes its branch (element by element in a loop),
  // else 0: the term counts only there, as Stan evaluates it.
  int where(const std::vector<Condition>& path, int value) {
    int mask = -1;
    for (const Condition& c : path) {
      int t = expr(*c.test);
      if (!c.holds) {
        const int zero = constant(0);  // before taking t's sizes: adding a node moves the nodes
        const SymSize rows = node(t).rows, cols = node(t).cols;
        t = op(Op::Compare, {t, zero}, rows, cols, "==");
      }
      if (mask < 0) {
        mask = t;
        continue;
      }
      const int shape = is_scalar(node(mask)) ? t : mask;
      mask = op(Op::Compare, {mask, t}, node(shape).rows, node(shape).cols, "&&");
    }
    return mask < 0 ? value : select(mask, value, constant(0));
  }

  // Operand `x` (the value of `operand`) shaped to meet element i's row of a rows x cols value:
  // element i's scalar spread along row i; a vector every element reads, a row.
  int along_rows(const Expr& operand, int x, const SymSize& rows, const SymSize& cols) {
    const bool mine = per_element(operand), scalar = operand.type.is_scalar();
    if (mine && scalar) return op(Op::Broadcast, {x}, rows, cols);
    if (!mine && !scalar && node(x).cols.equals(one())) return op(Op::Transpose, {x}, one(), cols);
    return x;
  }

  // A distribution's operands (`exprs`, lowered to `args`) in a loop where some is element i's
  // row: the others shaped to meet it (along_rows).
  void orient_operands(const std::vector<const Expr*>& exprs, std::vector<int>& args) {
    if (!loop_) return;
    int row = -1;
    for (size_t k = 0; k < exprs.size(); ++k)
      if (per_element(*exprs[k]) && !exprs[k]->type.is_scalar()) row = args[k];
    if (row < 0) return;
    const SymSize rows = node(row).rows, cols = node(row).cols;
    for (size_t k = 0; k < exprs.size(); ++k)
      if (!(per_element(*exprs[k]) && !exprs[k]->type.is_scalar())) args[k] = along_rows(*exprs[k], args[k], rows, cols);
  }

  // Each row of `value` summed: element i's total when element i's value is a row.
  int row_sums(int value) {
    const Node& n = node(value);
    if (n.cols.equals(one())) return value;
    const SymSize rows = n.rows, cols = n.cols;
    const int ones = op(Op::Broadcast, {constant(1)}, cols, one());
    return op(Op::MatMul, {value, ones}, rows, one());
  }

  // A term inside `for (i in 1:N)` that does not read i counts N times: its total on every row.
  int per_row(int value, bool reads_loop) {
    if (!loop_ || reads_loop) return value;
    if (!is_scalar(node(value))) value = op(Op::Sum, {value}, one(), one());
    return op(Op::Broadcast, {value}, loop_->rows, one());
  }

  void unsupported(const Loc& loc, const std::string& what) {
    if (ok_)
      diags_->error(loc, what + " is not supported by the code generator yet",
                   "the checker accepts it, but kernels cannot be generated for it; rewrite it with "
                   "vectorised statements");
    ok_ = false;
  }

  // The constrained value of a parameter; its log-Jacobian is collected for density factors.
  // A hyperparameter has none: it is a point estimate maximising the ELBO (empirical Bayes), not
  // a random variable, so a log-Jacobian would move its optimum (sigma = exp(u) would maximise
  // ELBO + u), and would only be counted where the value happens to meet a density factor.
  int parameter(const Symbol& s, const Loc& loc) {
    auto it = params_.find(s.name);
    if (it != params_.end()) return it->second;
    SymSize rows, cols;
    if (!dims_of(s.type, s.shape, rows, cols) || (s.decl->type.simplex && s.type.array_dims > 1)) {
      unsupported(loc, "the parameter type of '" + s.name + "'");
      return constant(0);
    }
    const Group* g = module_.group(group_of(s));
    Node in{Op::Input};
    in.group = g->kind;
    for (const Slot& slot : g->slots)
      if (slot.variable == s.name) in.offset = slot.offset;
    in.rows = rows;
    in.cols = cols;
    if (structure_of(s) != MatrixStructure::None) in.rows = unconstrained_elements(s), in.cols = one();
    in.varies = g->varies;
    in.active = true;
    int u = add(in);
    if (std::find(f_.groups.begin(), f_.groups.end(), g->kind) == f_.groups.end()) f_.groups.push_back(g->kind);
    int x = constrain(s, u, loc);
    params_[s.name] = x;
    return x;
  }

  // The bijection from the unconstrained value u to the declared support, and its log-Jacobian.
  int constrain(const Symbol& s, int u, const Loc& loc) {
    const TypeDecl& t = s.decl->type;
    SymSize r = node(u).rows, c = node(u).cols;
    if (t.ordering != Ordering::None) return constrain_ordered(s, u);
    if (t.structure != MatrixStructure::None) return constrain_matrix(s, u);
    if (t.affine()) return constrain_affine(s, u);
    if (t.simplex) return constrain_simplex(s, u);
    if (!t.lower && !t.upper) return u;
    int lower = t.lower ? expr(*t.lower) : -1;
    int upper = t.upper ? expr(*t.upper) : -1;
    int x, log_jacobian;
    if (lower >= 0 && upper < 0) {  // x = a + exp(u), log|dx/du| = u
      x = op(Op::Add, {lower, op(Op::Unary, {u}, r, c, "exp")}, r, c);
      log_jacobian = op(Op::Sum, {u}, one(), one());
    } else if (upper >= 0 && lower < 0) {  // x = b - exp(u)
      x = op(Op::Sub, {upper, op(Op::Unary, {u}, r, c, "exp")}, r, c);
      log_jacobian = op(Op::Sum, {u}, one(), one());
    } else {  // x = a + (b - a) inv_logit(u), log|dx/du| = log(b - a) + log_inv_logit(u) + log1m_inv_logit(u)
      int width = op(Op::Sub, {upper, lower}, node(upper).rows, node(upper).cols);
      x = op(Op::Add, {lower, op(Op::Mul, {width, op(Op::Unary, {u}, r, c, "inv_logit")}, r, c)}, r, c);
      int per = op(Op::Add,
                   {op(Op::Unary, {u}, r, c, "log_inv_logit"), op(Op::Unary, {u}, r, c, "log1m_inv_logit")}, r, c);
      per = op(Op::Add, {per, op(Op::Unary, {width}, node(width).rows, node(width).cols, "log")}, r, c);
      log_jacobian = op(Op::Sum, {per}, one(), one());
    }
    (void)loc;
    if (s.kind == SymbolKind::Parameter) jacobians_.push_back({party_of(s), log_jacobian});
    return x;
  }

  // Stan's affine transform x = offset + multiplier .* u, log|J| = sum(log(multiplier)) over x's
  // elements (a scalar multiplier counted once per element). Offset 0 and multiplier 1 by default.
  int constrain_affine(const Symbol& s, int u) {
    const TypeDecl& t = s.decl->type;
    const SymSize r = node(u).rows, c = node(u).cols;
    int x = u;
    if (t.multiplier) {
      const int m = expr(*t.multiplier);
      x = op(Op::Mul, {m, u}, r, c);
      const int logs = op(Op::Unary, {m}, node(m).rows, node(m).cols, "log");
      const int spread = is_scalar(node(logs)) ? op(Op::Broadcast, {logs}, r, c) : logs;
      if (s.kind == SymbolKind::Parameter) jacobians_.push_back({party_of(s), op(Op::Sum, {spread}, one(), one())});
    }
    if (t.offset) x = op(Op::Add, {expr(*t.offset), x}, r, c);
    return x;
  }

  // A structured matrix from its unconstrained values (fvi/kernel/ops_matrix_constrain.h).
  int constrain_matrix(const Symbol& s, int u) {
    const MatrixStructure m = structure_of(s);
    const SymSize rows = s.shape.dims[0], cols = m == MatrixStructure::UnitVector ? one() : s.shape.dims[1];
    const char* kind = transform_kind(m);
    const int x = op(Op::MatrixConstrain, {u}, rows, cols, kind);
    if (s.kind != SymbolKind::Parameter) return x;
    if (m == MatrixStructure::CholeskyCov) {
      // log|J| = sum of the diagonal's u = sum(log(diagonal(L))), its top N x N block's diagonal
      // (N a size of the data, which the kernel's log-Jacobian could not know from u).
      const int top = op(Op::IndexRows, {x, range_index(one(), cols)}, cols, cols);
      const int logs = op(Op::Unary, {op(Op::Diagonal, {top}, cols, one())}, cols, one(), "log");
      jacobians_.push_back({party_of(s), op(Op::Sum, {logs}, one(), one())});
    } else {
      jacobians_.push_back({party_of(s), op(Op::MatrixLogJacobian, {u}, one(), one(), kind)});
    }
    return x;
  }

  // Stan's transforms of ordered vectors (Stan reference manual, "Constraint transforms"):
  // positive_ordered x = cumulative_sum(exp(u)), log|J| = sum(u); ordered x_1 = u_1,
  // x_k = x_(k-1) + exp(u_k), log|J| = sum(u_2..K).
  int constrain_ordered(const Symbol& s, int u) {
    const SymSize r = node(u).rows;
    int steps, log_jacobian;
    if (s.decl->type.ordering == Ordering::PositiveOrdered) {
      steps = op(Op::Unary, {u}, r, one(), "exp");
      log_jacobian = op(Op::Sum, {u}, one(), one());
    } else {
      const int first = op(Op::IndexRows, {u, range_index(one(), one())}, one(), one());
      const SymSize rest_rows = r - one();
      const int rest = op(Op::IndexRows, {u, range_index(SymSize::constant(2), r)}, rest_rows, one());
      steps = op(Op::ConcatRows, {first, op(Op::Unary, {rest}, rest_rows, one(), "exp")}, r, one());
      log_jacobian = op(Op::Sum, {rest}, one(), one());
    }
    if (s.kind == SymbolKind::Parameter) jacobians_.push_back({party_of(s), log_jacobian});
    return op(Op::CumulativeSum, {steps}, r, one());
  }

  // array[M] simplex[K]: row m of the M x K value is simplex m, each by the map below (the same
  // formulas row by row): x = y ./ (y's row sums), log|J| = sum(u) - sum(exp(u)) - M lgamma(K).
  int constrain_simplex_rows(const Symbol& s, int u) {
    const SymSize r = node(u).rows, c = node(u).cols;
    const int y = op(Op::Unary, {u}, r, c, "exp");
    const int row_sums = op(Op::RowsDotProduct, {y, op(Op::Broadcast, {constant(1)}, r, c)}, r, one());
    const int k = op(Op::Sum, {op(Op::Broadcast, {constant(1)}, one(), c)}, one(), one());
    const int lgamma_k = op(Op::Unary, {k}, one(), one(), "lgamma");
    const int m_lgamma_k = op(Op::Sum, {op(Op::Broadcast, {lgamma_k}, r, one())}, one(), one());
    const int log_jacobian =
        op(Op::Sub, {op(Op::Sub, {op(Op::Sum, {u}, one(), one()), op(Op::Sum, {y}, one(), one())}, one(), one()),
                     m_lgamma_k},
           one(), one());
    if (s.kind == SymbolKind::Parameter) jacobians_.push_back({party_of(s), log_jacobian});
    return op(Op::Div, {y, row_sums}, r, c);
  }

  // simplex[K] from K unconstrained values: with y = exp(u), x = y / s and s = sum(y), the map
  // u -> (x, s) is a bijection onto the simplex times (0, inf). Giving the auxiliary scale s the
  // density gamma(s | K, 1), independent of x, the density of u is p(x) gamma(s | K, 1) prod(y) /
  // s^(K-1) (|d y / d(x, s)| = s^(K-1)), so log|J| = sum(u) - sum(exp(u)) - lgamma(K): x's
  // posterior is the written model's exactly (y_k iid exponential(1) is x ~ Dirichlet(1)).
  int constrain_simplex(const Symbol& s, int u) {
    if (s.type.array_dims == 1) return constrain_simplex_rows(s, u);
    const SymSize r = node(u).rows;
    const int ones = op(Op::Broadcast, {constant(1)}, r, one());
    const int k = op(Op::Sum, {ones}, one(), one());
    const int y = op(Op::Unary, {u}, r, one(), "exp");
    const int log_jacobian =
        op(Op::Sub, {op(Op::Sub, {op(Op::Sum, {u}, one(), one()), op(Op::Sum, {y}, one(), one())}, one(), one()),
                     op(Op::Unary, {k}, one(), one(), "lgamma")},
           one(), one());
    if (s.kind == SymbolKind::Parameter) jacobians_.push_back({party_of(s), log_jacobian});
    return op(Op::Softmax, {u}, r, one());
  }

  static SymSize one() { return SymSize::constant(1); }

  int data(const Symbol& s, bool as_index, const Loc& loc) {
    std::string key = (as_index ? "#" : "") + s.name;
    auto it = data_.find(key);
    if (it != data_.end()) return it->second;
    SymSize rows, cols;
    if (!dims_of(s.type, s.shape, rows, cols)) {
      unsupported(loc, "the data type of '" + s.name + "'");
      return constant(0);
    }
    Node n{as_index ? Op::Index : Op::Data};
    n.name = s.name;
    n.rows = rows;
    n.cols = cols;
    n.batched = batch_rows_ && !s.shape.dims.empty() && s.shape.dims[0].equals(*batch_rows_);
    if (n.batched) n.rows = *batch_rows_;
    int id = add(n);
    if (std::find(f_.data.begin(), f_.data.end(), s.name) == f_.data.end()) f_.data.push_back(s.name);
    data_[key] = id;
    return id;
  }

  void set_batch_rows(const SymSize& rows) { batch_rows_ = rows; }
  void set_silo_sum_input(bool on) { silo_sum_input_ = on; }

  struct Jacobian {
    TermOwner party;
    int node;
  };
  const std::vector<Jacobian>& jacobians() const { return jacobians_; }

  // An index expression: a constant, an int data variable (a multi-index), or a range or single
  // index whose bounds are known from the data (constants, int data, sizes computed from them).
  int index(const Index& ix, const SymSize& extent, const Loc& loc) {
    Node n{Op::Index};
    if (ix.kind == IndexKind::Range || ix.kind == IndexKind::All) {
      const bool all = ix.kind == IndexKind::All;
      auto lo = !all && ix.lower ? size_value(*ix.lower, model_) : std::optional<SymSize>(SymSize::constant(1));
      auto hi = !all && ix.upper ? size_value(*ix.upper, model_) : std::optional<SymSize>(extent);
      if (!lo || !hi) {
        unsupported(loc, "a range index with bounds not known from the data (constants, int data, or ints computed "
                         "from them in transformed data)");
        return constant(0);
      }
      return range_index(*lo, *hi);
    }
    const Expr& e = *ix.lower;
    if (auto v = literal(e)) {
      n.ints.push_back(*v);
      return add(n);
    }
    if (e.kind == ExprKind::Var) {
      const Symbol* s = model_.find(e.name);
      if (s && s->kind == SymbolKind::Data) return data(*s, true, e.loc);
    }
    if (auto at = size_value(e, model_)) return range_index(*at, *at);
    unsupported(e.loc, "an index that is not a constant, an int data variable or an int known from the data");
    return constant(0);
  }

  // first..last: listed when both are constants, else computed when the data is bound.
  int range_index(const SymSize& first, const SymSize& last) {
    Node n{Op::Index};
    auto lo = first.constant_value(), hi = last.constant_value();
    if (lo && hi) {
      for (long long i = *lo; i <= *hi; ++i) n.ints.push_back(i);
      n.rows = SymSize::constant(static_cast<long long>(n.ints.size()));
      return add(n);
    }
    n.range = true;
    n.first = first;
    n.last = last;
    n.rows = last - first + SymSize::constant(1);
    return add(n);
  }

  static std::optional<long long> literal(const Expr& e) {
    if (e.kind == ExprKind::IntLit) return e.int_value;
    return std::nullopt;
  }

  int expr(const Expr& e) {
    if (e.inlined) return expr(*e.inlined);  // a user function's call: its body
    SymSize rows, cols;
    if (!dims_of(e.type, e.shape, rows, cols)) {
      unsupported(e.loc, "a value of type " + to_string(e.type));
      return constant(0);
    }
    if (loop_ && per_element(e)) {
      // Element i's value inside `for (i in 1:N)`: computed for every i at once, N rows.
      if (e.kind == ExprKind::Var && loop_local(e.name)) return local_value(locals_.at(e.name));
      if (e.kind == ExprKind::Var) {
        unsupported(e.loc, "the loop variable '" + e.name + "' used as a value (it may only index: x[" + e.name + "])");
        return constant(0);
      }
      if (e.kind == ExprKind::Index) return loop_element(e);
      rows = loop_->rows;
      cols = one();
      if (!e.type.is_scalar()) {
        // Element i's vector (a row of a matrix or of a 2-D array: `y[i] ~ bernoulli_logit(a[i] *
        // (theta - b[i]))`) is row i of the N x K value.
        if (e.type.array_dims + e.type.base_dims() != 1 || e.shape.dims.empty()) {
          unsupported(e.loc, "a container computed per element of a loop (each element's value must be a scalar "
                             "or a vector)");
          return constant(0);
        }
        cols = e.shape.dims[0];
        if (e.kind == ExprKind::Transpose) return expr(*e.args[0]);  // element i's row either way
      }
    }
    switch (e.kind) {
      case ExprKind::IntLit: return constant(static_cast<double>(e.int_value));
      case ExprKind::RealLit: return constant(e.real_value);
      case ExprKind::Var: return variable(e);
      case ExprKind::Unary:
        if (e.name == "-") return op(Op::Neg, {expr(*e.args[0])}, rows, cols);
        if (e.name == "+") return expr(*e.args[0]);
        if (e.name == "!") return op(Op::Compare, {expr(*e.args[0]), constant(0)}, rows, cols, "==");
        unsupported(e.loc, "the operator '" + e.name + "'");
        return constant(0);
      case ExprKind::Binary: return binary(e, rows, cols);
      case ExprKind::Transpose: return op(Op::Transpose, {expr(*e.args[0])}, rows, cols);
      case ExprKind::Cond: return select(expr(*e.args[0]), expr(*e.args[1]), expr(*e.args[2]));
      case ExprKind::RowVectorLit: return row_vector_literal(e);
      case ExprKind::ArrayLit: return array_literal(e);
      case ExprKind::Index: return indexed(e, rows, cols);
      case ExprKind::Call: return call(e, rows, cols);
      case ExprKind::CondCall: {
        if (user_function(e.name)) {  // `y ~ dist(...)` of a user density whose body is statements
          unsupported(e.loc, "a call of '" + e.name + "', whose body is statements (it runs where statements run one at a time),");
          return constant(0);
        }
        std::vector<int> args;
        std::vector<const Expr*> exprs;
        for (const ExprPtr& a : e.args) {
          args.push_back(expr(*a));
          exprs.push_back(a.get());
        }
        orient_operands(exprs, args);
        // A density names its distribution; a CDF keeps its suffix ("normal_lcdf", the kernels'
        // fvi/kernel/cdfs.h), and `normal_cdf` is the exponential of the sum of normal_lcdf.
        const std::optional<stdlib::CdfFunction> cdf_function = stdlib::find_cdf_function(e.name);
        std::string dist = e.name.substr(0, e.name.rfind('_'));
        if (cdf_function) dist += cdf_function->kind == stdlib::CdfKind::Lccdf ? "_lccdf" : "_lcdf";
        const bool product = cdf_function && cdf_function->kind == stdlib::CdfKind::Cdf;
        int shape = args[0];  // the outcome's, or a wider argument's (element i's vector of means)
        for (int a : args)
          if (node(a).rows.equals(node(shape).rows) && !node(a).cols.equals(one())) shape = a;
        int lp = density(args, node(shape).rows, node(shape).cols, dist);
        if (loop_ && per_element(e)) {  // element i's log density: one per row
          lp = row_sums(lp);
          return product ? op(Op::Unary, {lp}, node(lp).rows, node(lp).cols, "exp") : lp;
        }
        int sum = op(Op::Sum, {lp}, one(), one());
        return product ? op(Op::Unary, {sum}, one(), one(), "exp") : sum;
      }
      default:
        unsupported(e.loc, "this expression");
        return constant(0);
    }
  }

  // [a, b, c]: scalars side by side (a row_vector), or row_vectors one above another (a matrix),
  // joined left to right.
  int row_vector_literal(const Expr& e) {
    const bool rows = !e.args[0]->type.is_scalar();
    int joined = expr(*e.args[0]);
    for (size_t i = 1; i < e.args.size(); ++i) {
      const int next = expr(*e.args[i]);
      const SymSize r = rows ? node(joined).rows + node(next).rows : node(joined).rows;
      const SymSize c = rows ? node(joined).cols : node(joined).cols + node(next).cols;
      joined = op(rows ? Op::ConcatRows : Op::ConcatCols, {joined, next}, r, c);
    }
    return joined;
  }

  // {a, b, c} of scalars: a column; {u, v} of vectors or row vectors: the rows of an array of
  // them (element i is row i, as dims_of lays an array of vectors out).
  int array_literal(const Expr& e) {
    const Type& element = e.args[0]->type;
    if (!element.is_scalar() && !(element.array_dims == 0 && (element.base == Base::Vector || element.base == Base::RowVector))) {
      unsupported(e.loc, "a literal array of " + to_string(element));
      return constant(0);
    }
    auto row = [&](const Expr& x) {
      const int v = expr(x);
      if (x.type.base != Base::Vector) return v;
      const SymSize r = node(v).rows, c = node(v).cols;  // copies: adding a node moves the nodes
      return op(Op::Transpose, {v}, c, r);
    };
    int joined = row(*e.args[0]);
    for (size_t i = 1; i < e.args.size(); ++i) {
      const int next = row(*e.args[i]);
      const SymSize r = node(joined).rows + node(next).rows, c = node(joined).cols;
      joined = op(Op::ConcatRows, {joined, next}, r, c);
    }
    return joined;
  }

  int variable(const Expr& e) {
    const Symbol* s = model_.find(e.name);
    if (!s) {
      auto local = locals_.find(e.name);
      if (local != locals_.end()) return local_value(local->second);
      unsupported(e.loc, "the loop or local variable '" + e.name + "'");
      return constant(0);
    }
    if (s->kind == SymbolKind::Data) return data(*s, false, e.loc);
    if (s->kind == SymbolKind::Transformed) return derived(*s, e.loc);
    return parameter(*s, e.loc);
  }

  int binary(const Expr& e, const SymSize& rows, const SymSize& cols) {
    const std::string& o = e.name;
    int a = expr(*e.args[0]), b = expr(*e.args[1]);
    if (loop_ && per_element(e) && !e.type.is_scalar()) {
      // Element i's vector is row i of rows x cols: a vector read by every element is a row, and
      // element i's scalar is spread along its row.
      a = along_rows(*e.args[0], a, rows, cols);
      b = along_rows(*e.args[1], b, rows, cols);
      if (o == "*") return op(Op::Mul, {a, b}, rows, cols);
    }
    bool linear_algebra = o == "*" && !e.args[0]->type.is_scalar() && !e.args[1]->type.is_scalar();
    if (linear_algebra) return op(Op::MatMul, {a, b}, rows, cols);
    if (o == "+") return op(Op::Add, {a, b}, rows, cols);
    if (o == "-") return op(Op::Sub, {a, b}, rows, cols);
    if (o == "*" || o == ".*") return op(Op::Mul, {a, b}, rows, cols);
    if (o == "/" || o == "./") return op(Op::Div, {a, b}, rows, cols);
    if (o == "^" || o == ".^") return op(Op::Pow, {a, b}, rows, cols);
    if (o == "==" || o == "!=" || o == "<" || o == "<=" || o == ">" || o == ">=" || o == "&&" || o == "||")
      return op(Op::Compare, {a, b}, rows, cols, o);
    unsupported(e.loc, "the operator '" + o + "'");
    return constant(0);
  }

  int indexed(const Expr& e, const SymSize& rows, const SymSize& cols) {
    const Expr& base = *e.args[0];
    int x = expr(base);
    if (base.type.array_dims > 1 || (base.type.array_dims == 1 && base.type.base_dims() > 0)) {
      unsupported(e.loc, "indexing arrays of containers");
      return x;
    }
    SymSize r = node(x).rows, c = node(x).cols;
    bool row_vector = base.type.array_dims == 0 && base.type.base == Base::RowVector;
    for (size_t i = 0; i < e.indices.size(); ++i) {
      if (e.indices[i].kind == IndexKind::All) continue;  // every row (column): the value as it is
      bool along_rows = !row_vector && i == 0;
      int idx = index(e.indices[i], along_rows ? r : c, e.loc);
      SymSize n = node(idx).ints.empty() ? node(idx).rows : SymSize::constant(static_cast<long long>(node(idx).ints.size()));
      if (along_rows) r = n;
      else c = n;
      x = op(along_rows ? Op::IndexRows : Op::IndexCols, {x, idx}, r, c);
    }
    // A vector result of a matrix column or row keeps the checker's orientation.
    if (!node(x).rows.equals(rows) || !node(x).cols.equals(cols)) {
      if (node(x).rows.equals(cols) && node(x).cols.equals(rows)) return op(Op::Transpose, {x}, rows, cols);
    }
    return x;
  }

  int call(const Expr& e, const SymSize& rows, const SymSize& cols) {
    const std::string& f = e.name;
    const stdlib::Function* fn = stdlib::find_function(f);
    const bool elementwise = fn && (fn->rule == stdlib::Rule::Elementwise || fn->rule == stdlib::Rule::ElementwiseInt);
    const bool random = !fn && f.size() > 4 && f.compare(f.size() - 4, 4, "_rng") == 0;
    if (loop_ && per_element(e) && !elementwise && !random) {
      unsupported(e.loc, "the function '" + f + "' of a loop's element (inside a loop: elementwise functions, "
                         "densities and _rng)");
      return constant(0);
    }
    if (f == "silo_sum") {
      if (!silo_sum_input_) return expr(*e.args[0]);
      // One auxiliary vector per silo (z_sum) carries one silo_sum: a second one would read the
      // first one's sum.
      if (silo_sums_++) {
        if (ok_)
          diags_->error(e.loc, "a second silo_sum in one likelihood is not supported by the code generator yet",
                       "a vertical model has one silo_sum for now (each silo sends one auxiliary value per row); "
                       "where the sums add up, write one: `silo_sum(x * beta + z * gamma)`");
        ok_ = false;
        return constant(0);
      }
      Node z{Op::Input};
      z.group = FVI_GROUP_Z_SUM;
      z.offset = SymSize::constant(0);
      z.rows = rows;
      z.cols = cols;
      z.varies = true;
      z.active = true;
      if (std::find(f_.groups.begin(), f_.groups.end(), FVI_GROUP_Z_SUM) == f_.groups.end())
        f_.groups.push_back(FVI_GROUP_Z_SUM);
      return add(z);
    }
    if (fn && fn->rule == stdlib::Rule::Size) {
      // A size known from the data: the count of ones of that many rows (sizes are symbolic).
      if (std::optional<SymSize> n = size_value(e, model_))
        return op(Op::Sum, {op(Op::Broadcast, {constant(1)}, *n, one())}, one(), one());
      unsupported(e.loc, "'" + f + "' of a value whose size is not known from the data");
      return constant(0);
    }
    if (stdlib::find_ode_solver(f)) {
      unsupported(e.loc, "an ODE solve (it runs where statements run one at a time),");
      return constant(0);
    }
    if (!fn && !e.inlined && user_function(f)) {
      unsupported(e.loc, "a call of '" + f + "', whose body is statements (it runs where statements run one at a time),");
      return constant(0);
    }
    if (fn && (fn->rule == stdlib::Rule::Conv2d || fn->rule == stdlib::Rule::Pool2d)) return image_op(e, rows, cols);
    std::vector<int> args;
    for (const ExprPtr& a : e.args) args.push_back(expr(*a));
    if (!fn && f.size() > 4 && f.compare(f.size() - 4, 4, "_rng") == 0) {  // generated quantities only
      int r = op(Op::Rng, args, rows, cols, f.substr(0, f.size() - 4));
      f_.nodes[r].k = rng_streams_++;
      f_.nodes[r].varies = true;
      return r;
    }
    if (fn && (fn->rule == stdlib::Rule::Elementwise || fn->rule == stdlib::Rule::ElementwiseInt) && args.size() == 1)
      return op(Op::Unary, args, rows, cols, f);
    if (f == "pow") return op(Op::Pow, args, rows, cols);
    if (f == "sum") return op(Op::Sum, args, rows, cols);
    if ((f == "max" || f == "min" || f == "prod") && args.size() == 1) return op(Op::Reduce, args, rows, cols, f);
    if (f == "log_sum_exp" && args.size() == 1) {
      // max + log(sum(exp(x - max))): finite where exp(x) overflows; max's part of the gradient cancels.
      const int x = args[0], top = op(Op::Reduce, {x}, one(), one(), "max");
      const SymSize r = node(x).rows, c = node(x).cols;  // copies: adding a node moves the nodes
      const int shifted = op(Op::Unary, {op(Op::Sub, {x, top}, r, c)}, r, c, "exp");
      return op(Op::Add, {top, op(Op::Unary, {op(Op::Sum, {shifted}, one(), one())}, one(), one(), "log")}, one(), one());
    }
    if (f == "mean" || f == "variance" || f == "sd") return moment(f, args[0]);
    if (f == "dot_product") return op(Op::Sum, {op(Op::Mul, args, node(args[0]).rows, node(args[0]).cols)}, rows, cols);
    if (f == "dot_self") return op(Op::Sum, {op(Op::Mul, {args[0], args[0]}, node(args[0]).rows, node(args[0]).cols)}, rows, cols);
    if (f == "rows_dot_product") return op(Op::RowsDotProduct, args, rows, cols);
    if (f == "columns_dot_product") {  // the rows' products of the transposes, as a row_vector
      const SymSize r = node(args[0]).rows, c = node(args[0]).cols;
      const int a = op(Op::Transpose, {args[0]}, c, r), b = op(Op::Transpose, {args[1]}, c, r);
      return op(Op::Transpose, {op(Op::RowsDotProduct, {a, b}, c, one())}, one(), c);
    }
    if (f == "softmax") return op(Op::Softmax, args, rows, cols);
    if (f == "log_softmax") return op(Op::LogSoftmax, args, rows, cols);
    if (f == "cumulative_sum") return op(Op::CumulativeSum, args, rows, cols);
    if (f == "rep_vector" || f == "rep_row_vector" || f == "rep_matrix" || f == "rep_array")
      return op(Op::Broadcast, {args[0]}, rows, cols);
    if (f == "to_vector" || f == "to_row_vector" || f == "to_matrix") return op(Op::Reshape, {args[0]}, rows, cols);
    if (f == "append_row") return op(Op::ConcatRows, args, rows, cols);
    if (f == "append_col") return op(Op::ConcatCols, args, rows, cols);
    if (f == "cholesky_decompose") return op(Op::Cholesky, args, rows, cols);
    if (f == "inverse" || f == "inverse_spd") return op(Op::Inverse, args, rows, cols);
    if (f == "multiply_lower_tri_self_transpose")  // L L' (the checker took L lower triangular)
      return op(Op::MatMul, {args[0], op(Op::Transpose, {args[0]}, cols, rows)}, rows, cols);
    if (f == "diag_matrix") return op(Op::DiagMatrix, args, rows, cols);
    if (f == "diagonal") return op(Op::Diagonal, args, rows, cols);
    if (f == "gp_exp_quad_cov" || f == "cov_exp_quad") return exp_quad_cov(e, args, rows, cols);
    unsupported(e.loc, "the function '" + f + "'");
    return constant(0);
  }

  // conv2d(x, w, b, C, H, W, k, padding) and max/avg_pool2d(x, C, H, W, k): the geometry is the
  // checker's integer constants. conv2d's bias b (C_out) is each output channel's value over its
  // P positions: the P x C_out product ones * b' read column by column, down the rows.
  int image_op(const Expr& e, const SymSize& rows, const SymSize& cols) {
    const bool conv = e.name == "conv2d";
    std::vector<long long> geometry;
    for (size_t i = conv ? 3 : 1; i < e.args.size(); ++i)
      geometry.push_back(size_value(*e.args[i], model_).value().constant_value().value());
    const int x = expr(*e.args[0]);
    if (!conv) {
      const int pooled = op(Op::Pool, {x}, rows, cols, e.name == "max_pool2d" ? "max" : "avg");
      f_.nodes[size_t(pooled)].ints = geometry;
      return pooled;
    }
    const int w = expr(*e.args[1]), b = expr(*e.args[2]);
    const int y = op(Op::Conv2d, {x, w}, rows, cols);
    f_.nodes[size_t(y)].ints = geometry;
    const long long H = geometry[1], W = geometry[2], k = geometry[3], pad = geometry[4];
    const SymSize positions = SymSize::constant((H + 2 * pad - k + 1) * (W + 2 * pad - k + 1));
    const SymSize channels = node(w).rows;
    const int b_row = op(Op::Reshape, {b}, one(), channels);
    const int ones = op(Op::Broadcast, {constant(1)}, positions, one());
    const int block = op(Op::MatMul, {ones, b_row}, positions, channels);
    const int flat = op(Op::Reshape, {block}, one(), channels * positions);
    return op(Op::Add, {y, op(Op::Broadcast, {flat, y}, rows, cols)}, rows, cols);  // y's rows: a minibatch's
  }

  bool user_function(const std::string& name) const {
    const Block* functions = model_.program->find(BlockKind::Functions);
    if (!functions) return false;
    for (const FunctionDef& f : functions->functions)
      if (f.name == name) return true;
    return false;
  }

  // gp_exp_quad_cov(x, alpha, rho): K_ij = alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)), Stan's
  // exponentiated quadratic kernel, from the squared distances of the points (data: they get no
  // adjoint) by elementwise operations, whose adjoints give alpha's and rho's.
  int exp_quad_cov(const Expr& e, const std::vector<int>& args, const SymSize& rows, const SymSize& cols) {
    if (node(args[0]).active) {
      unsupported(e.loc, "gp_exp_quad_cov at points that depend on parameters (the points must be data)");
      return constant(0);
    }
    const int d2 = op(Op::SquaredDistances, {args[0]}, rows, cols);
    const int alpha = args[1], rho = args[2];
    const int two_rho2 = op(Op::Mul, {constant(2), op(Op::Mul, {rho, rho}, one(), one())}, one(), one());
    const int scaled = op(Op::Div, {op(Op::Neg, {d2}, rows, cols), two_rho2}, rows, cols);
    return op(Op::Mul, {op(Op::Mul, {alpha, alpha}, one(), one()), op(Op::Unary, {scaled}, rows, cols, "exp")}, rows, cols);
  }

  // A density's node. One value per draw for the joint densities (multinomial_logit, dirichlet,
  // multi_normal_cholesky); multi_normal(y | mu, Sigma) is multi_normal_cholesky(y | mu, L) with
  // L = cholesky_decompose(Sigma).
  int density(std::vector<int> args, const SymSize& rows, const SymSize& cols, std::string dist) {
    if (dist == "multi_normal" && args.size() == 3) {
      const SymSize n = node(args[2]).rows, m = node(args[2]).cols;  // copies: op() moves the nodes
      args[2] = op(Op::Cholesky, {args[2]}, n, m);
      dist = "multi_normal_cholesky";
    }
    if (stdlib::joint_density(dist)) return op(Op::Lpdf, args, one(), one(), dist);
    return op(Op::Lpdf, args, rows, cols, dist);
  }

  // mean(x) = sum(x) / n; variance(x) = sum((x - mean)^2) / (n - 1), sd its square root (Stan's
  // sample variance); n, x's element count, as the sum of ones of x's shape (sizes are symbolic).
  int moment(const std::string& f, int x) {
    const SymSize r = node(x).rows, c = node(x).cols;
    const int n = op(Op::Sum, {op(Op::Broadcast, {constant(1)}, r, c)}, one(), one());
    const int mean = op(Op::Div, {op(Op::Sum, {x}, one(), one()), n}, one(), one());
    if (f == "mean") return mean;
    const int centred = op(Op::Sub, {x, mean}, r, c);
    const int squares = op(Op::Sum, {op(Op::Mul, {centred, centred}, r, c)}, one(), one());
    const int variance = op(Op::Div, {squares, op(Op::Sub, {n, constant(1)}, one(), one())}, one(), one());
    return f == "variance" ? variance : op(Op::Unary, {variance}, one(), one(), "sqrt");
  }

  using LocalValue = ir::LocalValue;
  void bind_local(const std::string& name, const LocalValue& v) { locals_[name] = v; }
  void unbind_local(const std::string& name) { locals_.erase(name); }

  // Whether `name` is a local of the loop being lowered (`int g = group[n];` in its body).
  bool loop_local(const std::string& name) const {
    auto it = locals_.find(name);
    return it != locals_.end() && it->second.in_loop && loop_ && it->second.loop_var == loop_->var;
  }

  // `e`, or the value of the loop local it names (through locals of locals).
  const Expr& resolved(const Expr& e) const {
    const Expr* x = &e;
    for (int hops = 0; x->kind == ExprKind::Var && loop_local(x->name) && hops < 64; ++hops)
      x = locals_.at(x->name).value;
    return *x;
  }

  int local_value(const LocalValue& bound) {
    if (!bound.previous)
      return bound.loop_rows ? element_values(*bound.value, Loop{bound.loop_var, *bound.loop_rows}) : expr(*bound.value);
    const LocalValue l = bound;  // `bound` may be the binding replaced below
    const LocalValue now = locals_.at(l.name);
    locals_[l.name] = *l.previous;  // the name means its previous value here
    const std::map<const Expr*, bool> memo = element_;
    int v = l.loop_rows ? element_values(*l.value, Loop{l.loop_var, *l.loop_rows}) : expr(*l.value);
    if (!l.compound.empty()) {
      const int before = local_value(*l.previous);
      const Node& n = node(before);
      const SymSize rows = n.rows, cols = n.cols;
      const Op o = l.compound == "+" ? Op::Add : l.compound == "-" ? Op::Sub : l.compound == "*" ? Op::Mul : Op::Div;
      if ((o == Op::Mul || o == Op::Div) && !l.loop_rows && !is_scalar(node(v)) && !is_scalar(n)) {
        unsupported(l.value->loc, "'" + l.compound + "=' of two containers");
        v = constant(0);
      }
      v = op(o, {before, v}, rows, cols);
    }
    locals_[l.name] = now;
    element_ = memo;
    return v;
  }


  // `for (var in 1:rows)` around the statement being lowered (model_statements.h).
  using Loop = StatementLoop;
  void set_loop(std::optional<Loop> loop) {
    loop_ = std::move(loop);
    element_.clear();
  }

  // Whether e reads the loop variable (memoised: lowering asks at every node).
  bool per_element(const Expr& e) {
    if (!loop_) return false;
    auto it = element_.find(&e);
    if (it != element_.end()) return it->second;
    bool reads = e.kind == ExprKind::Var && (e.name == loop_->var || loop_local(e.name));
    if (e.inlined) reads = per_element(*e.inlined);
    for (const ExprPtr& a : e.args) reads = reads || (a && per_element(*a));
    for (const Index& ix : e.indices)
      reads = reads || (ix.lower && per_element(*ix.lower)) || (ix.upper && per_element(*ix.upper));
    return element_[&e] = reads;
  }

  // x[i] inside the loop over i: all of x, whose rows are the loop's elements (a matrix's rows
  // stay rows: only `x[i] * beta` may use one, as the product of all of x with beta).
  int loop_element(const Expr& e) {
    const Expr& base = *e.args[0];
    // x[idx[i]], idx int data of the loop's rows: all of x indexed by idx (x[idx] as a vector).
    if (e.indices.size() == 1 && e.indices[0].kind == IndexKind::Single && e.indices[0].lower &&
        !per_element(base) && base.type.array_dims + base.type.base_dims() == 1 &&
        !(base.type.array_dims == 0 && base.type.base == Base::RowVector)) {
      const Expr& ix = resolved(*e.indices[0].lower);
      const Symbol* idx = ix.kind == ExprKind::Index && ix.args[0]->kind == ExprKind::Var
                              ? model_.find(ix.args[0]->name) : nullptr;
      if (idx && idx->kind == SymbolKind::Data && idx->type.is_int_array() && idx->type.array_dims == 1 && ix.indices.size() == 1 &&
          ix.indices[0].kind == IndexKind::Single && ix.indices[0].lower &&
          ix.indices[0].lower->kind == ExprKind::Var && ix.indices[0].lower->name == loop_->var) {
        int rows = data(*idx, true, ix.loc);
        if (!node(rows).rows.equals(loop_->rows)) {
          unsupported(e.loc, "a loop over 1:" + loop_->rows.str() + " reading '" + to_source(ix) + "' of " +
                                 node(rows).rows.str() + " rows (the loop must run over all of them)");
          return constant(0);
        }
        int x = expr(base);
        return op(Op::IndexRows, {x, rows}, loop_->rows, one());
      }
    }
    // x[i, j] of a matrix, j the same for every element: all of x's column j (col(x, j)).
    if (e.indices.size() == 2 && e.indices[0].kind == IndexKind::Single && e.indices[0].lower &&
        e.indices[0].lower->kind == ExprKind::Var && e.indices[0].lower->name == loop_->var &&
        e.indices[1].kind == IndexKind::Single && e.indices[1].lower && !per_element(*e.indices[1].lower) &&
        !per_element(base) && base.type.array_dims == 0 && base.type.base == Base::Matrix) {
      int x = expr(base);
      if (!node(x).rows.equals(loop_->rows)) {
        unsupported(e.loc, "a loop over 1:" + loop_->rows.str() + " reading '" + to_source(base) + "' of " +
                               node(x).rows.str() + " rows (the loop must run over all of them)");
        return constant(0);
      }
      const int column = index(e.indices[1], node(x).cols, e.loc);
      return op(Op::IndexCols, {x, column}, loop_->rows, one());
    }
    const bool simple = e.indices.size() == 1 && e.indices[0].kind == IndexKind::Single && e.indices[0].lower &&
                        e.indices[0].lower->kind == ExprKind::Var && e.indices[0].lower->name == loop_->var &&
                        !per_element(base) && base.type.array_dims + base.type.base_dims() >= 1 &&
                        !(base.type.array_dims == 0 && base.type.base == Base::RowVector);
    if (!simple) {
      unsupported(e.loc, "an index inside a loop other than a vector's, array's or matrix's element [" + loop_->var + "]");
      return constant(0);
    }
    int x = expr(base);
    if (!node(x).rows.equals(loop_->rows)) {
      unsupported(e.loc, "a loop over 1:" + loop_->rows.str() + " reading '" + to_source(base) + "' of " +
                             node(x).rows.str() + " rows (the loop must run over all of them)");
      return constant(0);
    }
    return x;
  }

  // `value`, element i's value in `for (i in 1:rows)`, as one value of `rows` rows (the same
  // value for every element when it does not read i).
  int element_values(const Expr& value, const Loop& loop) {
    std::optional<Loop> outer = loop_;
    set_loop(loop);
    int v = expr(value);
    if (!node(v).rows.equals(loop.rows)) v = op(Op::Broadcast, {v}, loop.rows, one());
    set_loop(outer);
    return v;
  }

  struct BlockProgram {
    int node = -1;
    std::map<std::string, SymSize> offsets;
  };
  // What a vectorised attempt may add, to be taken back when it is refused.
  struct Snapshot {
    size_t nodes, jacobians, programs, data, groups;
    std::map<std::string, int> params, data_nodes, derived;
    std::map<BlockKind, BlockProgram> blocks;
    int rng_streams, silo_sums;
    bool ok;
  };
  Snapshot snapshot() const {
    return {f_.nodes.size(), jacobians_.size(), module_.programs.size(), f_.data.size(), f_.groups.size(), params_,
            data_, derived_, block_programs_, rng_streams_, silo_sums_, ok_};
  }
  void restore(const Snapshot& s) {
    f_.nodes.resize(s.nodes);
    jacobians_.resize(s.jacobians);
    module_.programs.resize(s.programs);
    module_.program_origins.resize(s.programs);
    f_.data.resize(s.data);
    f_.groups.resize(s.groups);
    params_ = s.params, data_ = s.data_nodes, derived_ = s.derived, block_programs_ = s.blocks;
    rng_streams_ = s.rng_streams, silo_sums_ = s.silo_sums, ok_ = s.ok;
    element_.clear();
  }

  // A statement program's node (Op::Program), its operands the variables it reads, as this
  // factor reads them.
  int program(StatementProgram p, const Loc& loc, const std::string& origin) {
    std::vector<int> operands;
    for (const std::string& name : p.operands) {
      const Symbol* s = model_.find(name);
      if (!s) {
        unsupported(loc, "the variable '" + name + "' in statements run one at a time");
        return constant(0);
      }
      Expr v(ExprKind::Var, loc);
      v.name = name;
      v.type = s->type;
      v.shape = s->shape;
      operands.push_back(s->kind == SymbolKind::Data && !computed_at_load(*s) ? data(*s, false, loc) : expr(v));
    }
    SymSize rows = one();
    if (!p.code.log_density) {
      rows = SymSize::constant(0);
      for (const std::string& name : p.outputs) rows = rows + model_.find(name)->shape.elements();
    }
    Node n{Op::Program};
    n.args = operands;
    n.k = static_cast<int>(module_.programs.size());
    n.rows = rows;
    n.varies = true;
    module_.programs.push_back(std::move(p.code));
    module_.program_origins.push_back(origin);
    return add(n);
  }

  // A transformed parameter or generated quantity that statements build piece by piece (or that
  // the vectorised forms refuse): its block as one statement program (made once per factor),
  // whose outputs are every declaration of the block; this one is its part of them, reshaped.
  int built_by_statements(const Symbol& s, const Loc& loc) {
    SymSize rows, cols;
    if ((s.block != BlockKind::TransformedParameters && s.block != BlockKind::GeneratedQuantities) ||
        !dims_of(s.type, s.shape, rows, cols)) {
      unsupported(loc, "'" + s.name + "', built by statements in '" + std::string(block_name(s.block)) +
                           "' (declare it with its value, or assign the whole variable once),");
      return constant(0);
    }
    auto it = block_programs_.find(s.block);
    if (it == block_programs_.end()) {
      const Block* block = model_.program->find(s.block);
      std::vector<const Stmt*> stmts;
      for (const StmtPtr& st : block->stmts) stmts.push_back(st.get());
      std::vector<std::string> outputs;
      for (const Symbol& o : model_.symbols)
        if (o.kind == SymbolKind::Transformed && o.block == s.block) outputs.push_back(o.name);
      StatementProgram p;
      if (!compile_statements(model_, stmts, false, outputs, p, *diags_)) {
        ok_ = false;
        return constant(0);
      }
      BlockProgram bp;
      SymSize offset = SymSize::constant(0);
      for (const std::string& name : p.outputs) {
        bp.offsets[name] = offset;
        offset = offset + model_.find(name)->shape.elements();
      }
      bp.node = program(std::move(p), block->loc,
                        "'" + std::string(block_name(s.block)) + "' (line " + std::to_string(block->loc.line) + ")");
      it = block_programs_.emplace(s.block, std::move(bp)).first;
    }
    const BlockProgram& bp = it->second;
    const SymSize first = bp.offsets.at(s.name), size = s.shape.elements();
    Node range{Op::Index};
    range.range = true;
    range.first = first + one();
    range.last = first + size;
    range.rows = size;
    const int part = op(Op::IndexRows, {bp.node, add(range)}, size, one());
    return rows.equals(size) && cols.equals(one()) ? part : op(Op::Reshape, {part}, rows, cols);
  }

  // A declaration of a derived block, computed where it is read from its defining expression.
  int derived(const Symbol& s, const Loc& loc) {
    auto it = derived_.find(s.name);
    if (it != derived_.end()) return it->second;
    // Transformed data built by statements is computed when the data is read: data here.
    if (computed_at_load(s)) return derived_[s.name] = data(s, false, loc);
    if (!s.value) return derived_[s.name] = built_by_statements(s, loc);
    // The vectorised form first; where it refuses, a derived block's statements run one at a time.
    const bool by_statements = s.block == BlockKind::TransformedParameters || s.block == BlockKind::GeneratedQuantities;
    const Snapshot before = snapshot();
    Diagnostics refusals(nullptr);
    Diagnostics* outer = diags_;
    if (by_statements) diags_ = &refusals, ok_ = true;
    // Built in a block of its own (`{ matrix[N, N] L = ...; f = L * z; }`): the block's locals,
    // bound while the value is lowered, hiding any of the same name.
    std::vector<Local> block_locals;
    if (!s.loop && s.decl)
      block_locals = locals_before(model_.program->find(s.decl->block), s.value);
    std::map<std::string, LocalValue> hidden;
    for (const Local& l : block_locals) {
      if (auto it = locals_.find(l.name); it != locals_.end() && !hidden.count(l.name)) hidden.emplace(l.name, it->second);
      bind_local(l.name, l.value);
    }
    // `for (i in 1:N) v[i] = value;`: element i's value.
    const int v = s.loop ? element_values(*s.value, Loop{s.loop->name, s.shape.dims[0]}) : expr(*s.value);
    for (const Local& l : block_locals) unbind_local(l.name);
    for (const auto& [name, value] : hidden) bind_local(name, value);
    diags_ = outer;
    if (by_statements && !ok_) {
      restore(before);
      return derived_[s.name] = built_by_statements(s, loc);
    }
    ok_ = ok_ && before.ok;
    derived_[s.name] = v;
    return v;
  }

 private:
  const SemanticModel& model_;
  Module& module_;  // its statement programs grow as factors read them
  Diagnostics* diags_;  // another while a vectorised form is tried (derived)
  Factor& f_;
  bool ok_ = true;
  std::map<std::string, int> params_, data_, derived_;
  std::map<BlockKind, BlockProgram> block_programs_;
  std::map<std::string, LocalValue> locals_;
  std::optional<Loop> loop_;
  std::map<const Expr*, bool> element_;
  std::vector<Jacobian> jacobians_;
  std::optional<SymSize> batch_rows_;
  bool silo_sum_input_ = false;
  int silo_sums_ = 0;
  int rng_streams_ = 0;
};

// The hyperparameter h when the only prior of global `s` is `s ~ normal(0, h)` with h a scalar
// `real<lower=0>` hyperparameter: h is then the unit of every element of s a priori, so an engine
// may measure q's log-sds from log h and its means in units of (a power of) h
// (fvi_variable_info.prior_scale); "". Another location would move the means by h's steps about a
// point the prior does not favour.

std::string prior_scale_of(const SemanticModel& m, const Symbol& s) {
  const TypeDecl& type = s.decl->type;
  if (type.lower || type.upper || type.simplex || type.ordering != Ordering::None ||
      type.structure != MatrixStructure::None || type.affine())
    return "";
  std::string scale;
  int priors = 0;
  for (const Term& t : m.terms) {
    if (t.kind == TermKind::Target && t.taint.has(TaintKind::GlobalParam)) return "";  // more than the prior
    if (t.kind != TermKind::Prior || t.subject != s.name) continue;
    ++priors;
    const Stmt& st = *t.stmt;
    if (t.conditional || st.kind != StmtKind::Tilde || t.distribution != "normal" || !st.lhs ||
        st.lhs->kind != ExprKind::Var || st.args.size() != 2 || !is_zero_literal(st.args[0].get()) ||
        st.args[1]->kind != ExprKind::Var)
      return "";
    const Symbol* h = m.find(st.args[1]->name);
    if (!h || h->kind != SymbolKind::Hyperparameter || group_of(*h) != FVI_GROUP_HYPER || !h->decl) return "";
    const TypeDecl& ht = h->decl->type;
    if (!is_zero_literal(ht.lower.get()) || ht.upper || !h->shape.dims.empty() || ht.affine()) return "";
    scale = h->name;
  }
  return priors == 1 ? scale : "";
}

void build_groups(const SemanticModel& m, Module& module) {
  for (fvi_group kind : {FVI_GROUP_GLOBAL, FVI_GROUP_LOCAL, FVI_GROUP_SPLIT, FVI_GROUP_HYPER, FVI_GROUP_LOCAL_HYPER,
                         FVI_GROUP_SPLIT_HYPER}) {
    Group g;
    g.kind = kind;
    g.varies = kind == FVI_GROUP_GLOBAL || kind == FVI_GROUP_LOCAL || kind == FVI_GROUP_SPLIT;
    for (const Symbol& s : m.symbols) {
      if ((s.kind != SymbolKind::Parameter && s.kind != SymbolKind::Hyperparameter) || group_of(s) != g.kind) continue;
      SymSize n = unconstrained_elements(s);
      const bool global = kind == FVI_GROUP_GLOBAL && s.kind == SymbolKind::Parameter;
      const bool local = kind == FVI_GROUP_LOCAL && s.kind == SymbolKind::Parameter;
      std::vector<std::pair<std::string, std::string>> products;
      std::string group;
      // A local's products: those of global coefficients (shifted with the pooled centring), then
      // those of its own slopes (the silo's map); the runtime tells them apart by W's group.
      for (const std::optional<Centring>& centring :
           {global ? centring_of(m, s) : local ? local_centring_of(m, s) : std::nullopt,
            local ? local_slope_centring_of(m, s) : std::nullopt})
        if (centring) {
          for (const CentringProduct& p : centring->products) products.push_back({p.data, p.coefficient});
          if (!centring->group.empty()) group = centring->group;
        }
      g.slots.push_back({s.name, g.size, n, global ? prior_scale_of(m, s) : "", global ? class_shift_of(m, s) : 0,
                         std::move(products), std::move(group)});
      g.size = g.size + n;
    }
    if (!g.slots.empty()) module.groups.push_back(g);
  }
}

void mark_active(Factor& f) {
  for (Node& n : f.nodes)
    if (n.op != Op::Input)
      for (int a : n.args) n.active |= f.nodes[a].active;
}

// Whether `e` reads a local (silo-owned) parameter, through the model block's local variables too.
bool mentions_local(const SemanticModel& m, const std::map<std::string, const Expr*>& locals, const Expr& e) {
  if (e.kind == ExprKind::Var) {
    if (const Symbol* s = m.find(e.name)) return s->kind == SymbolKind::Parameter && s->owner == Owner::Silo;
    auto it = locals.find(e.name);
    return it != locals.end() && mentions_local(m, locals, *it->second);
  }
  for (const ExprPtr& a : e.args)
    if (mentions_local(m, locals, *a)) return true;
  for (const Index& ix : e.indices)
    if ((ix.lower && mentions_local(m, locals, *ix.lower)) || (ix.upper && mentions_local(m, locals, *ix.upper)))
      return true;
  return false;
}

// A silo prior `b ~ normal(...)` (student_t, cauchy) on a whole unconstrained local vector whose
// arguments read no local parameter: a sum of one independent term per element of b given the
// globals, so it becomes its own `elements` factor and an engine can weight element by element.
bool is_element_prior(const SemanticModel& m, const std::map<std::string, const Expr*>& locals, const Term& t) {
  if (t.owner != TermOwner::Silo || t.kind != TermKind::Prior) return false;
  const Stmt& s = *t.stmt;
  if (s.kind != StmtKind::Tilde || !s.lhs || s.lhs->kind != ExprKind::Var) return false;
  const Symbol* b = m.find(s.lhs->name);
  if (!b || b->kind != SymbolKind::Parameter || b->owner != Owner::Silo) return false;
  if (b->decl->type.lower || b->decl->type.upper || b->type.array_dims != 0 || b->type.base != Base::Vector) return false;
  if (s.name != "normal" && s.name != "student_t" && s.name != "cauchy") return false;
  for (const ExprPtr& a : s.args)
    if (mentions_local(m, locals, *a)) return false;
  return true;
}

// The int data array `idx` when the likelihood reads the local group only as `b[idx]`, b the
// group's only variable and idx one of the likelihood's row-batched arrays; else "".
std::string local_index_of(const Module& module, const Factor& f) {
  const Group* local = module.group(FVI_GROUP_LOCAL);
  if (!local || local->slots.size() != 1) return "";
  std::string name;
  bool reads_local = false;
  for (int i = 0; i < f.forward_end; ++i) {
    const Node& in = f.nodes[i];
    if (in.op != Op::Input || in.group != FVI_GROUP_LOCAL) continue;
    reads_local = true;
    for (int j = i + 1; j < f.forward_end; ++j) {
      const Node& use = f.nodes[j];
      if (std::find(use.args.begin(), use.args.end(), i) == use.args.end()) continue;
      if (use.op != Op::IndexRows || use.args[0] != i) return "";
      const Node& ix = f.nodes[use.args[1]];
      if (ix.op != Op::Index || ix.name.empty() || !ix.batched || (!name.empty() && name != ix.name)) return "";
      name = ix.name;
    }
  }
  return reads_local ? name : "";
}

// A party's density factor closed: its flat priors' parameters bound, so that the log-Jacobian
// of their constraint is collected even where only a likelihood reads them (a flat prior, Stan's
// implicit uniform, is that Jacobian alone), the party's log-Jacobians added to `parts`, and
// their sum the factor's output. False when there is nothing to sum (no factor then).
bool close_density(const SemanticModel& model, FactorBuilder& b, Factor& f, TermOwner party, std::vector<int> parts) {
  for (const Symbol& s : model.symbols)
    if (s.flat_prior && party_of(s) == party &&
        (s.decl->type.lower || s.decl->type.upper || s.decl->type.simplex || written_as_quantity(s)))
      b.parameter(s, s.loc);
  for (const auto& j : b.jacobians())
    if (j.party == party) parts.push_back(j.node);
  if (parts.empty()) return false;
  int total = parts[0];
  for (size_t i = 1; i < parts.size(); ++i)
    total = b.op(Op::Add, {total, parts[i]}, FactorBuilder::one(), FactorBuilder::one());
  f.output = total;
  mark_active(f);
  f.forward_end = static_cast<int>(f.nodes.size());
  return true;
}

// The model block's terms as vectorised factors: one density factor per party, element priors,
// one likelihood factor per likelihood statement. Returns false (reported) where a statement has
// no vectorised form; `locals` gets the block's locals as they are bound.
bool lower_terms(const SemanticModel& model, Module& module, Diagnostics& diags, std::vector<Local>& locals) {
  ModelStatements statements;
  if (!collect_model_statements(model.program->find(BlockKind::Model), statements, diags)) return false;
  locals = statements.locals;
  const auto& loops = statements.loops;
  const auto& conditions = statements.conditions;
  const auto& loop_locals = statements.loop_locals;
  const auto& visible = statements.visible;
  // Binds the model block's locals as statement s sees them (each name's latest value before it).
  auto bind_visible = [&](FactorBuilder& b, const Stmt* s) {
    auto it = visible.find(s);
    const size_t count = it == visible.end() ? locals.size() : it->second;
    for (const Local& l : locals) b.unbind_local(l.name);
    for (size_t i = 0; i < count; ++i) b.bind_local(locals[i].name, locals[i].value);
  };
  // Binds the loop locals declared before statement s in its loop (unbound by the next call).
  auto place_locals = [&](FactorBuilder& b, const Stmt* s, std::vector<std::string>& bound) {
    for (const std::string& name : bound) b.unbind_local(name);
    bound.clear();
    auto it = loop_locals.find(s);
    if (it == loop_locals.end()) return;
    for (const auto& [name, value] : it->second) {
      b.bind_local(name, value);
      bound.push_back(name);
    }
  };
  auto conditions_of = [&](const Stmt* s) {
    auto it = conditions.find(s);
    return it == conditions.end() ? std::vector<FactorBuilder::Condition>{} : it->second;
  };
  auto loop_of = [&](const Stmt* s) -> std::optional<FactorBuilder::Loop> {
    auto it = loops.find(s);
    if (it == loops.end()) return std::nullopt;
    return it->second;
  };
  std::map<std::string, const Expr*> local_map;
  for (const Local& l : locals) local_map[l.name] = l.value.value;
  bool ok = true;

  // Density factors: one per party kind, holding its priors, its `target +=` terms and the
  // log-Jacobians of its own parameters.
  for (TermOwner party : {TermOwner::Server, TermOwner::Silo, TermOwner::SplitSilo}) {
    Factor f;
    f.kind = FactorKind::Density;
    f.owner = party;
    f.name = party == TermOwner::Server ? "server_density" : party == TermOwner::Silo ? "silo_density" : "split_density";
    FactorBuilder b(model, module, diags, f);
    for (const Local& l : locals) b.bind_local(l.name, l.value);
    std::vector<int> parts;
    std::vector<std::string> bound;
    for (const Term& t : model.terms) {
      if (t.owner != party || t.kind == TermKind::Likelihood || is_element_prior(model, local_map, t)) continue;
      const Stmt& s = *t.stmt;
      bind_visible(b, &s);
      b.set_loop(loop_of(&s));
      place_locals(b, &s, bound);
      int value;
      bool reads_loop = false;
      if (s.kind == StmtKind::Target) {
        value = b.expr(*s.args[0]);
        reads_loop = b.per_element(*s.args[0]);
      } else {
        std::vector<int> args{b.expr(*s.lhs)};
        std::vector<const Expr*> exprs{s.lhs.get()};
        reads_loop = b.per_element(*s.lhs);
        for (const ExprPtr& a : s.args) {
          args.push_back(b.expr(*a));
          exprs.push_back(a.get());
          reads_loop = reads_loop || b.per_element(*a);
        }
        b.orient_operands(exprs, args);
        value = b.density(args, b.node(args[0]).rows, b.node(args[0]).cols, s.name);
      }
      value = b.where(conditions_of(&s), b.per_row(value, reads_loop));
      if (s.kind == StmtKind::Tilde || !is_scalar(b.node(value)))
        value = b.op(Op::Sum, {value}, FactorBuilder::one(), FactorBuilder::one());
      parts.push_back(value);
      b.set_loop(std::nullopt);
    }
    if (!close_density(model, b, f, party, std::move(parts))) continue;
    ok &= b.ok();
    module.factors.push_back(std::move(f));
  }

  // The priors of local vectors that factor element by element (is_element_prior).
  for (const Term& t : model.terms) {
    if (!is_element_prior(model, local_map, t)) continue;
    const Stmt& s = *t.stmt;
    Factor f;
    f.kind = FactorKind::Elements;
    f.owner = TermOwner::Silo;
    f.name = "local_prior_" + t.subject;
    for (const Factor& other : module.factors)
      if (other.name == f.name) f.name += "_" + std::to_string(module.factors.size());
    FactorBuilder b(model, module, diags, f);
    bind_visible(b, &s);
    std::vector<int> args{b.expr(*s.lhs)};
    for (const ExprPtr& a : s.args) args.push_back(b.expr(*a));
    f.output = b.density(args, b.node(args[0]).rows, b.node(args[0]).cols, s.name);
    f.rows = f.nodes[f.output].rows;
    ok &= b.ok();
    mark_active(f);
    f.forward_end = static_cast<int>(f.nodes.size());
    module.factors.push_back(std::move(f));
  }

  // Likelihood factors, and the contributions of vertical models.
  int count = 0;
  for (const Term& t : model.terms) {
    if (t.kind != TermKind::Likelihood || is_sparse_gp_term(t)) continue;
    const Stmt& s = *t.stmt;
    if (t.owner == TermOwner::Coupling && module.group(FVI_GROUP_Z_SUM)) {
      // The z_sum group carries one coupling likelihood's silo_sum; a second would share it.
      diags.error(s.loc, "a second likelihood through silo_sum is not supported by the code generator yet",
                  "a vertical model has one silo_sum for now (each silo sends one auxiliary value per row)");
      ok = false;
      continue;
    }
    const Symbol* y = model.find(t.subject);
    Factor f;
    f.kind = FactorKind::Likelihood;
    f.owner = t.owner;
    f.name = "likelihood_" + t.subject + (count++ ? "_" + std::to_string(count) : "");
    f.distribution = s.name;
    f.rows = y->shape.dims.empty() ? SymSize::constant(1) : y->shape.dims[0];
    FactorBuilder b(model, module, diags, f);
    bind_visible(b, &s);
    // A joint density (multi_normal, dirichlet, ...) is one term of all its rows: never a minibatch.
    b.set_batch_rows(stdlib::joint_density(s.name) ? FactorBuilder::one() : f.rows);
    b.set_silo_sum_input(t.owner == TermOwner::Coupling);
    b.set_loop(loop_of(&s));
    std::vector<std::string> bound;
    place_locals(b, &s, bound);
    f.outcome = b.expr(*s.lhs);
    for (const ExprPtr& a : s.args) f.arguments.push_back(b.expr(*a));
    std::vector<int> args{f.outcome};
    args.insert(args.end(), f.arguments.begin(), f.arguments.end());
    f.output = b.density(args, b.node(f.outcome).rows, b.node(f.outcome).cols, s.name);
    f.rows = f.nodes[f.output].rows;
    ok &= b.ok();
    mark_active(f);
    f.forward_end = static_cast<int>(f.nodes.size());
    if (t.owner == TermOwner::Silo) f.local_index = local_index_of(module, f);

    if (t.owner == TermOwner::Coupling) {
      // The silo_sum operand becomes silo k's contribution factor.
      std::function<const Expr*(const Expr&)> find_operand = [&](const Expr& e) -> const Expr* {
        if (e.kind == ExprKind::Call && e.name == "silo_sum") return e.args[0].get();
        for (const ExprPtr& a : e.args)
          if (const Expr* found = find_operand(*a)) return found;
        return nullptr;
      };
      const Expr* operand = nullptr;
      for (const ExprPtr& a : s.args)
        if (!operand) operand = find_operand(*a);
      Factor c;
      c.kind = FactorKind::Contribution;
      c.owner = TermOwner::SplitSilo;
      c.name = "contribution_" + t.subject;
      c.rows = f.rows;
      FactorBuilder cb(model, module, diags, c);
      for (const Local& l : locals) cb.bind_local(l.name, l.value);
      cb.set_batch_rows(c.rows);
      c.output = cb.expr(*operand);
      ok &= cb.ok();
      mark_active(c);
      c.forward_end = static_cast<int>(c.nodes.size());
      module.factors.push_back(std::move(f));
      module.factors.push_back(std::move(c));
      Group z;
      z.kind = FVI_GROUP_Z_SUM;
      z.slots.push_back({"z_sum", SymSize::constant(0), module.factors[module.factors.size() - 2].rows});
      z.size = z.slots[0].size;
      if (!module.group(FVI_GROUP_Z_SUM)) module.groups.push_back(z);
      continue;
    }
    module.factors.push_back(std::move(f));
  }

  return ok;
}

// What a statement of the model block reads, by the checker's taints, its nested statements
// included; and whose terms it holds (each term's statement, at any depth).
void statement_taint(const Stmt& s, Taint& taint) {
  for (const Expr* e : {s.lhs.get()})
    if (e) taint.merge(e->taint);
  for (const ExprPtr& a : s.args)
    if (a) taint.merge(a->taint);
  if (s.decl) {  // its value, and the sizes and bounds of its type
    const TypeDecl& t = s.decl->type;
    for (const Expr* e : {s.decl->init.get(), t.lower.get(), t.upper.get()})
      if (e) taint.merge(e->taint);
    for (const std::vector<ExprPtr>* sizes : {&t.array_sizes, &t.sizes})
      for (const ExprPtr& e : *sizes)
        if (e) taint.merge(e->taint);
  }
  for (const StmtPtr& b : s.body)
    if (b) statement_taint(*b, taint);
}

void statement_owners(const Stmt& s, const std::map<const Stmt*, TermOwner>& owners, std::set<TermOwner>& found) {
  if (auto it = owners.find(&s); it != owners.end()) found.insert(it->second);
  for (const StmtPtr& b : s.body)
    if (b) statement_owners(*b, owners, found);
}

// Whether a party may compute a statement that holds no term (a local's declaration, a loop
// filling one): it reads nothing the party does not hold.
bool visible_to(TermOwner party, const Taint& t) {
  if (t.any_split() || t.has(TaintKind::SiloSum)) return false;
  if (party == TermOwner::Server)
    return !t.has(TaintKind::SiloData) && !t.has(TaintKind::LocalParam) && !t.has(TaintKind::LocalHyper);
  return !t.has(TaintKind::ServerData);
}

// The model block as statement programs (ir/statement_program.h), one in the density factor of
// each party whose terms it holds (the server's priors; the silos' priors and likelihoods), with
// the log-Jacobians of that party's parameters: where the vectorised forms refuse a statement.
// Each statement of the block goes to the party whose terms it holds; one that holds none (a
// local's declaration) to every party that can compute it. A statement holding terms of two
// parties, or a vertical or silo_sum term, leaves the vectorised forms' refusals standing.
bool lower_terms_as_program(const SemanticModel& model, Module& module, Diagnostics& diags,
                            const Diagnostics& refusals) {
  const Block* block = model.program->find(BlockKind::Model);
  // A local declared without a value, read, and assigned nowhere in the block is the model's
  // error (Stan would read NaN); the vectorised forms' own "never given its value" may only mean
  // a form they do not follow.
  std::map<std::string, const VarDecl*> declared;
  std::set<std::string> assigned, read;
  std::vector<const Expr*> reads;  // expressions whose variables are read
  std::vector<const Stmt*> todo;
  for (const StmtPtr& st : block->stmts) todo.push_back(st.get());
  while (!todo.empty()) {
    const Stmt* st = todo.back();
    todo.pop_back();
    if (st->kind == StmtKind::Decl && st->decl && !st->decl->init) declared.emplace(st->decl->name, st->decl.get());
    if (st->decl && st->decl->init) reads.push_back(st->decl->init.get());
    if (st->kind == StmtKind::Assign && st->lhs) {
      const Expr* target = st->lhs.get();
      while (target->kind == ExprKind::Index && !target->args.empty()) {
        for (const Index& ix : target->indices)
          for (const Expr* e : {ix.lower.get(), ix.upper.get()})
            if (e) reads.push_back(e);
        target = target->args[0].get();
      }
      if (target->kind == ExprKind::Var) assigned.insert(target->name);
    } else if (st->lhs) {
      reads.push_back(st->lhs.get());
    }
    for (const ExprPtr& a : st->args)
      if (a) reads.push_back(a.get());
    for (const StmtPtr& b : st->body)
      if (b) todo.push_back(b.get());
  }
  for (size_t i = 0; i < reads.size(); ++i) {  // the list grows as it is walked
    const Expr* e = reads[i];
    if (e->kind == ExprKind::Var) read.insert(e->name);
    for (const ExprPtr& a : e->args)
      if (a) reads.push_back(a.get());
    for (const Index& ix : e->indices)
      for (const Expr* x : {ix.lower.get(), ix.upper.get()})
        if (x) reads.push_back(x);
  }
  bool unassigned = false;
  for (const auto& [name, d] : declared)
    if (read.count(name) && !assigned.count(name)) {
      diags.error(d->loc, "'" + name + "' is declared in the model block but never given its value",
                  "give it its value: `" + name + " = ...;` or `for (i in 1:N) " + name + "[i] = ...;`");
      unassigned = true;
    }
  if (unassigned) return false;
  std::map<const Stmt*, TermOwner> owners;
  for (const Term& t : model.terms) owners[t.stmt] = t.owner;
  std::vector<std::optional<TermOwner>> statement_party;  // per top-level statement; nullopt: no term
  bool splittable = true;
  for (const Term& t : model.terms)
    splittable = splittable && (t.owner == TermOwner::Server || t.owner == TermOwner::Silo);
  for (const StmtPtr& st : block->stmts) {
    std::set<TermOwner> found;
    statement_owners(*st, owners, found);
    splittable = splittable && found.size() <= 1;
    statement_party.push_back(found.empty() ? std::nullopt : std::optional<TermOwner>(*found.begin()));
  }
  if (!splittable) {
    const std::string why =
        "; statements the vectorised forms refuse run one at a time when each statement of the model block holds "
        "the terms of one party (the server's priors, or the silos' terms), and here one does not (or a term is a "
        "vertical model's or goes through silo_sum)";
    for (const Diagnostic& d : refusals.all()) {
      if (d.severity == Severity::Error) diags.error(d.loc, d.message, d.help + why);
      else diags.warning(d.loc, d.message, d.help);
    }
    return false;
  }
  bool ok = true;
  for (TermOwner party : {TermOwner::Server, TermOwner::Silo}) {
    std::vector<const Stmt*> stmts;
    bool holds_terms = false;
    for (size_t i = 0; i < block->stmts.size(); ++i) {
      const Stmt* st = block->stmts[i].get();
      if (statement_party[i]) {
        if (*statement_party[i] != party) continue;
        holds_terms = true;
        stmts.push_back(st);
        continue;
      }
      Taint taint;
      statement_taint(*st, taint);
      if (visible_to(party, taint)) stmts.push_back(st);
    }
    Factor f;
    f.kind = FactorKind::Density;
    f.owner = party;
    f.name = party == TermOwner::Server ? "server_density" : "silo_density";
    FactorBuilder b(model, module, diags, f);
    std::vector<int> parts;
    if (holds_terms) {
      StatementProgram program;
      if (!compile_statements(model, stmts, true, {}, program, diags)) {
        ok = false;
        continue;
      }
      const bool both = std::count(statement_party.begin(), statement_party.end(), TermOwner::Server) > 0 &&
                        std::count(statement_party.begin(), statement_party.end(), TermOwner::Silo) > 0;
      const std::string origin = "the model block (line " + std::to_string(block->loc.line) +
                                 (both ? party == TermOwner::Server ? ": the server's terms)" : ": the silos' terms)" : ")");
      parts.push_back(b.program(std::move(program), block->loc, origin));
    }
    if (!close_density(model, b, f, party, std::move(parts))) continue;
    if (!b.ok()) {
      ok = false;
      continue;
    }
    module.factors.push_back(std::move(f));
  }
  return ok;
}

}  // namespace

bool lower(const SemanticModel& model, Module& module, Diagnostics& diags) {
  module.model = model.program->name;
  bool gp_ok = true;
  module.sparse_gp = find_sparse_gp(model, diags, &gp_ok);
  if (!gp_ok) return false;
  build_groups(model, module);
  if (!transformed_data_programs(model, module.transformed_data, diags)) return false;
  // The vectorised forms first; where they refuse a statement, the block as a statement program.
  std::vector<Local> locals;
  Module vectorised = module;
  Diagnostics refusals(nullptr);
  bool ok = true;
  if (lower_terms(model, vectorised, refusals, locals)) {
    module = std::move(vectorised);
    for (const Diagnostic& d : refusals.all())
      if (d.severity == Severity::Warning) diags.warning(d.loc, d.message, d.help);
  } else {
    locals.clear();
    ok = lower_terms_as_program(model, module, diags, refusals);
    module.model_block_programs = ok;
  }

  // A structured matrix parameter is written to the outputs as its declared value, a quantity of
  // its group (computed at each draw by the owner), Stan's first; its unconstrained values are not.
  for (const Symbol& s : model.symbols) {
    if (!written_as_quantity(s)) continue;
    Factor q;
    q.kind = FactorKind::Quantity;
    q.owner = party_of(s);
    q.name = "quantity_" + s.name;
    q.variable = s.name;
    FactorBuilder b(model, module, diags, q);
    q.output = b.parameter(s, s.loc);
    SymSize rows, cols;
    if (dims_of(s.type, s.shape, rows, cols)) q.rows = rows;
    ok &= b.ok();
    q.forward_end = static_cast<int>(q.nodes.size());
    module.quantities.push_back(std::move(q));
  }
  // Transformed parameters and generated quantities: each its own value, evaluated by its owner.
  for (const Symbol& s : model.symbols) {
    if (s.kind != SymbolKind::Transformed || s.block == BlockKind::TransformedData) continue;
    Factor q;
    q.kind = FactorKind::Quantity;
    q.owner = party_of(s);
    q.name = "quantity_" + s.name;
    q.variable = s.name;
    q.aggregate = s.aggregate;  // silo k computes its part (silo_sum's operand; lowering reads through silo_sum)
    if (s.aggregate) q.owner = TermOwner::Silo;
    FactorBuilder b(model, module, diags, q);
    for (const Local& l : locals) b.bind_local(l.name, l.value);
    q.output = b.derived(s, s.loc);
    SymSize rows, cols;
    if (dims_of(s.type, s.shape, rows, cols)) q.rows = rows;
    else b.unsupported(s.loc, "the type of '" + s.name + "'");
    ok &= b.ok();
    q.forward_end = static_cast<int>(q.nodes.size());
    module.quantities.push_back(std::move(q));
  }
  return ok;
}

}  // namespace fvic::ir
