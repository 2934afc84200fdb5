// The checker (checker_impl.h) on expressions: the walk over an expression tree, giving each node
// a type, a symbolic shape and a taint; variables, operators, `?:`, transposes, literals and
// indexing. Calls are check_calls.cpp's.
#include "frontend/checker_impl.h"

#include <utility>

namespace fvic {
namespace check_detail {

// ---- expressions ---------------------------------------------------------------------------

void Checker::fail(Expr& e) { e.type = Type::error(); }

// expr recurses once per level of the tree, and a statement may nest 2000 deep (parser.cpp's
// kMaxOperators, a chain of '+' or of indexes): its frame must stay small in every build. The
// work on one node is therefore kept out of line (expr_node() and the helpers it calls, index()
// included, which no longer recurses on its base): inlined into expr, they made its frame 8.5 KB
// under ASan, and the 2000 '+' that [limits] accepts overflowed an 8 MB stack.
void Checker::expr(Expr& e) {
  for (const ExprPtr& a : e.args)  // an index's base too (index() checks the indices)
    if (a) expr(*a);
  expr_node(e);
}

void Checker::expr_node(Expr& e) {
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

bool Checker::any_error(const Expr& e) {
  for (const ExprPtr& a : e.args)
    if (a->type.is_error()) return true;
  return false;
}

void Checker::variable(Expr& e) {
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

void Checker::unary(Expr& e) {
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

void Checker::conditional(Expr& e) {
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

void Checker::binary_type(const std::string& op, const Expr& a, const Expr& b, const Loc& loc, Type& out,
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

void Checker::transpose(Expr& e) {
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

void Checker::literal_container(Expr& e) {
  if (any_error(e)) return;
  const Type& first = e.args[0]->type;
  bool row = e.kind == ExprKind::RowVectorLit;
  // [r1, r2, ...] of row_vectors is the matrix with those rows (Stan's matrix literal).
  const bool matrix = row && first.array_dims == 0 && first.base == Base::RowVector;
  for (const ExprPtr& a : e.args) {
    if (matrix) {
      if (a->type.array_dims != 0 || a->type.base != Base::RowVector) {
        diags_.error(a->loc, "a matrix literal holds row_vectors, not " + to_string(a->type),
                     "write [[a, b], [c, d]] or [r1, r2] with row_vectors r1, r2");
        return;
      }
      require_equal(first.array_dims == 0 ? e.args[0]->shape.dims[0] : SymSize::constant(1), a->shape.dims[0], a->loc,
                    "the rows of a matrix literal");
      continue;
    }
    if (row && !a->type.is_scalar()) {
      diags_.error(a->loc, "a row_vector literal holds scalars (or, for a matrix, row_vectors), not " +
                               to_string(a->type),
                   "write [a, b, c] with numbers, or [r1, r2] with row_vectors");
      return;
    }
    if (!row && a->type.base != first.base && !(a->type.is_scalar() && first.is_scalar())) {
      diags_.error(a->loc, "the elements of an array literal must have one type", "make them alike");
      return;
    }
  }
  SymSize n = SymSize::constant(static_cast<long long>(e.args.size()));
  if (matrix) {
    e.type = scalar(Base::Matrix);
    e.shape.dims = {n, e.args[0]->shape.dims[0]};
    return;
  }
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

void Checker::index(Expr& e) {
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

}  // namespace check_detail
}  // namespace fvic
