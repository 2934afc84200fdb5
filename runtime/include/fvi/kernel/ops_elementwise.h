#pragma once
// Kernel operations (ops.h), elementwise: the shape two operands broadcast to, each operand read
// at that shape, zip and map over batched tensors, and the arithmetic operators on them.
#include <stdexcept>
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

// ---- elementwise ----------------------------------------------------------------------------

// The shape of an elementwise result: equal shapes, a 1x1 operand broadcast to the other, or a
// 1 x c row broadcast over an r x c matrix (DESIGN.md §2: `x * W + b`).
inline void broadcast_shape(Eigen::Index ar, Eigen::Index ac, Eigen::Index br, Eigen::Index bc, Eigen::Index& r,
                            Eigen::Index& c) {
  if (ar == br && ac == bc) {
    r = ar, c = ac;
  } else if (ar * ac == 1) {
    r = br, c = bc;
  } else if (br * bc == 1) {
    r = ar, c = ac;
  } else if (ar * ac == br * bc && (ac == 1 || ar == 1) && (bc == 1 || br == 1)) {
    r = ar, c = ac;  // a vector and a row_vector of one length, elementwise
  } else if (br == 1 && bc == ac) {
    r = ar, c = ac;  // a row broadcast down the rows
  } else if (ar == 1 && ac == bc) {
    r = br, c = bc;
  } else if (bc == 1 && br == ar) {
    r = ar, c = ac;  // a column broadcast across the columns
  } else if (ac == 1 && ar == br) {
    r = br, c = bc;
  } else {
    throw ShapeError("elementwise operands of shapes " + shape_string(ar, ac, 1) + " and " +
                     shape_string(br, bc, 1) + " do not broadcast");
  }
}

// Operand x as an array of the result's shape (r x c) for draw s.
template <class T>
Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic> expand(const Tensor<T>& x, Eigen::Index r, Eigen::Index c,
                                                     Eigen::Index s) {
  auto d = x.draw(s);
  if (x.rows == r && x.cols == c) return d.array();
  if (x.size() == 1) return Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>::Constant(r, c, d(0, 0));
  if (x.size() == r * c) return Eigen::Map<const Mat<T>>(d.data(), r, c).array();
  if (x.rows == 1) return d.array().replicate(r, 1);
  return d.array().replicate(1, c);
}

// Whether with_column can give x's columns for an r x c result.
template <class T>
bool column_operand(const Tensor<T>& x, Eigen::Index r, Eigen::Index c) {
  return (x.rows == r && x.cols == c) || x.size() == 1 || (x.rows == 1 && x.cols == c) || (x.cols == 1 && x.rows == r);
}

// Calls k with column j of operand x expanded to r rows, for draw s, as an Eigen expression.
template <class T, class K>
void with_column(const Tensor<T>& x, Eigen::Index r, Eigen::Index s, Eigen::Index j, K k) {
  using Col = Eigen::Array<T, Eigen::Dynamic, 1>;
  auto d = x.draw(s);
  if (x.rows == r && x.cols > 1) return k(d.col(j).array());
  if (x.rows == r) return k(d.col(0).array());
  if (x.size() == 1) return k(Col::Constant(r, d(0, 0)));
  return k(Col::Constant(r, d(0, j)));  // a row broadcast down the rows
}

template <class T, class F>
Tensor<T> zip(const Tensor<T>& a, const Tensor<T>& b, F f) {
  Eigen::Index r, c;
  broadcast_shape(a.rows, a.cols, b.rows, b.cols, r, c);
  Tensor<T> out = Tensor<T>::uninitialized(r, c, joint_draws(a.draws, b.draws));
  if (a.rows == r && a.cols == c && b.rows == r && b.cols == c && a.draws == b.draws) {
    out.m.array() = f(a.m.array(), b.m.array());
    return out;
  }
  // Draw by draw and column by column, each operand's column as an expression (no copies): a
  // whole column, one value of a broadcast row, or a constant.
  bool simple = column_operand(a, r, c) && column_operand(b, r, c);
  for (Eigen::Index s = 0; s < out.draws; ++s) {
    if (!simple) {
      out.draw(s).array() = f(expand(a, r, c, s), expand(b, r, c, s));
      continue;
    }
    for (Eigen::Index j = 0; j < c; ++j)
      with_column(a, r, s, j, [&](const auto& x) {
        with_column(b, r, s, j, [&](const auto& y) { out.draw(s).col(j).array() = f(x, y); });
      });
  }
  return out;
}

template <class T, class F>
Tensor<T> map(const Tensor<T>& a, F f) {
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, a.cols, a.draws);
  out.m.array() = f(a.m.array());
  return out;
}

template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  return zip(a, b, [](const auto& x, const auto& y) { return x + y; });
}
template <class T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  return zip(a, b, [](const auto& x, const auto& y) { return x - y; });
}
template <class T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  return zip(a, b, [](const auto& x, const auto& y) { return x * y; });
}
template <class T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  return zip(a, b, [](const auto& x, const auto& y) { return x / y; });
}
template <class T>
Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& b) {
  return zip(a, b, [](const auto& x, const auto& y) { return x.pow(y); });
}
// Stan's comparisons and logical operators, elementwise: 1 where true, 0 where false. Their
// derivative is 0 wherever it exists, so they have no adjoint.
template <class T>
Tensor<T> compare(const std::string& op, const Tensor<T>& a, const Tensor<T>& b) {
  auto as_t = [](const auto& truth) { return truth.template cast<T>(); };
  if (op == "==") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x == y); });
  if (op == "!=") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x != y); });
  if (op == "<") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x < y); });
  if (op == "<=") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x <= y); });
  if (op == ">") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x > y); });
  if (op == ">=") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x >= y); });
  if (op == "&&") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x != T(0) && y != T(0)); });
  if (op == "||") return zip(a, b, [&](const auto& x, const auto& y) { return as_t(x != T(0) || y != T(0)); });
  throw std::invalid_argument("unknown comparison '" + op + "'");
}

// `cond ? a : b` elementwise, the three broadcast to one shape: a where cond is not 0, else b.
// Both a and b are computed; the one not chosen does not reach the result.
template <class T>
Tensor<T> select(const Tensor<T>& cond, const Tensor<T>& a, const Tensor<T>& b) {
  Eigen::Index r, c, rr, cc;
  broadcast_shape(cond.rows, cond.cols, a.rows, a.cols, rr, cc);
  broadcast_shape(rr, cc, b.rows, b.cols, r, c);
  Tensor<T> out = Tensor<T>::uninitialized(r, c, joint_draws(joint_draws(cond.draws, a.draws), b.draws));
  for (Eigen::Index s = 0; s < out.draws; ++s)
    out.draw(s).array() = (expand(cond, r, c, s) != T(0)).select(expand(a, r, c, s), expand(b, r, c, s));
  return out;
}

template <class T>
Tensor<T> neg(const Tensor<T>& a) {
  return map(a, [](const auto& x) { return -x; });
}

}  // namespace fvi::kernel
