#pragma once
// The operations generated kernels are written in, on batched tensors (tensor.h). The compiler
// lowers a model to a sequence of these calls and differentiates it by emitting more of them:
// each forward operation below has its adjoint expressed with the `*_grad`, `sum_to` and
// `scatter_*` helpers at the end of this file. The IR interpreter calls the same functions, so
// interpreted and compiled kernels compute identical numbers.
#include <unsupported/Eigen/SpecialFunctions>  // lgamma, digamma, erf on arrays

#include <cmath>
#include <string>

#include "fvi/kernel/tensor.h"
#include "fvi/math/array_math.h"

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
template <class T>
Tensor<T> neg(const Tensor<T>& a) {
  return map(a, [](const auto& x) { return -x; });
}

// Numerically stable building blocks.
// log(1 + e^x) = max(x, 0) + log1p(t), t = e^-|x| in (0, 1]. log1p(t) is computed as
// log(u) - ((u - 1) - t) / u with u = 1 + t (the rounding of u corrected to first order, about
// an ulp; t itself when u rounds to 1): Eigen vectorises log but not double log1p, this is the
// inner loop of every logistic likelihood, and it is a third faster than Goldberg's
// t log(u) / (u - 1) with its select.
template <class A>
auto log1p_exp_array(const A& x) {
  using T = typename A::Scalar;
  Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic> t = (-x.abs()).exp();
  Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic> u = t + T(1);
  return (x.max(T(0)) + (u.log() - ((u - T(1)) - t) / u)).eval();
}
template <class A>
auto inv_logit_array(const A& x) {
  return 1 / (1 + (-x).exp());
}

// The unary functions of stdlib/builtins.cpp. Fused loops (fused.h) name them by this enum, whose
// enumerators are the functions' own names, so that a block of 1,024 elements does not pay a chain
// of string comparisons (3% of a network's kernels in `perf`, 2026-11-23).
// The one list: X(name) for each function, giving the enum here and the names in unary_fn.cpp.
#define FVI_UNARY_FUNCTIONS(X)                                                                        \
  X(exp) X(log) X(log1p) X(expm1) X(log1m) X(inv_logit) X(logit) X(log_inv_logit) X(log1m_inv_logit) \
  X(log1p_exp) X(tanh) X(sin) X(cos) X(sqrt) X(safe_sqrt) X(square) X(inv) X(inv_sqrt) X(relu)        \
  X(lgamma) X(digamma) X(erf) X(Phi) X(fabs) X(abs) X(neg)
#define FVI_UNARY_ENUMERATOR(name) name,
enum class UnaryFn { FVI_UNARY_FUNCTIONS(FVI_UNARY_ENUMERATOR) };
#undef FVI_UNARY_ENUMERATOR

// The function called `name` (throws std::invalid_argument for an unknown name), and back.
UnaryFn unary_fn(const std::string& name);
const char* unary_name(UnaryFn f);

// out = f(x) for array expressions (whole tensors, or the blocks of a fused loop: fused.h), so
// that both compute the same numbers.
template <class T, class X, class Out>
void unary_eval(UnaryFn f, const X& x, Out&& out) {
  using F = UnaryFn;
  switch (f) {
    case F::exp:
      return void(out = x.exp());
    case F::log:
      return void(out = x.log());
    case F::log1p:
      return void(out = x.log1p());
    case F::expm1:
      return void(out = x.exp() - 1);
    case F::log1m:
      return void(out = (-x).log1p());
    case F::inv_logit:
      return void(out = inv_logit_array(x));
    case F::logit:
      return void(out = (x / (1 - x)).log());
    // log1p_exp_array returns an array: negate it into another (not an expression of a temporary).
    case F::log_inv_logit:
      return void(out = (-log1p_exp_array(-x)).eval());
    case F::log1m_inv_logit:
      return void(out = (-log1p_exp_array(x)).eval());
    case F::log1p_exp:
      return void(out = log1p_exp_array(x));
    case F::tanh:
      return void(out = x.tanh());
    case F::sin:
      return void(out = x.sin());
    case F::cos:
      return void(out = x.cos());
    case F::sqrt:
    case F::safe_sqrt:
      return void(out = x.sqrt());
    case F::square:
      return void(out = x.square());
    case F::inv:
      return void(out = x.inverse());
    case F::inv_sqrt:
      return void(out = x.rsqrt());
    case F::relu:
      return void(out = x.max(T(0)));
    case F::lgamma:
      return void(out = x.lgamma());
    case F::digamma:
      return void(out = x.digamma());
    case F::erf:
      return void(out = x.erf());
    case F::Phi:
      return void(out = T(0.5) * (1 + (x * T(M_SQRT1_2)).erf()));
    case F::fabs:
    case F::abs:
      return void(out = x.abs());
    case F::neg:
      return void(out = -x);
  }
  throw std::invalid_argument(std::string("no kernel for the function '") + unary_name(f) + "'");
}

template <class T, class X, class Out>
void unary_eval(const std::string& f, const X& x, Out&& out) {
  unary_eval<T>(unary_fn(f), x, std::forward<Out>(out));
}

template <class T>
Tensor<T> unary(const std::string& f, const Tensor<T>& a) {
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, a.cols, a.draws);
  unary_eval<T>(f, a.m.array(), out.m.array());
  return out;
}

// d f(x) / dx for the unary function f, given x and y = f(x), as unary_eval.
template <class T, class X, class Y, class Out>
void unary_derivative_eval(UnaryFn f, const X& x, const Y& y, Out&& out) {
  using F = UnaryFn;
  switch (f) {
    case F::exp:
      return void(out = y);
    case F::log:
      return void(out = x.inverse());
    case F::log1p:
      return void(out = (1 + x).inverse());
    case F::expm1:
      return void(out = y + 1);
    case F::log1m:
      return void(out = -(1 - x).inverse());
    case F::inv_logit:
      return void(out = y * (1 - y));
    case F::logit:
      return void(out = (x * (1 - x)).inverse());
    case F::log_inv_logit:
      return void(out = inv_logit_array(-x));
    case F::log1m_inv_logit:
      return void(out = -inv_logit_array(x));
    case F::log1p_exp:
      return void(out = inv_logit_array(x));
    case F::tanh:
      return void(out = 1 - y.square());
    case F::sin:
      return void(out = x.cos());
    case F::cos:
      return void(out = -x.sin());
    case F::sqrt:
      return void(out = T(0.5) * y.inverse());
    // The local reparameterisation's sqrt(x^2 sigma^2) (transform/local_reparam.h): derivative 0
    // at 0, where the value is constant in every sigma_j with x_j != 0 (so the result is exact).
    case F::safe_sqrt:
      return void(out = (y > 0).select(T(0.5) * y.inverse(), T(0)));
    case F::square:
      return void(out = 2 * x);
    case F::inv:
      return void(out = -y.square());
    case F::inv_sqrt:
      return void(out = T(-0.5) * y.cube());
    case F::relu:
      return void(out = (x > 0).template cast<T>());
    case F::lgamma:
      return void(out = x.digamma());
    case F::erf:
      return void(out = T(M_2_SQRTPI) * (-x.square()).exp());
    case F::Phi:
      return void(out = T(0.5 * M_2_SQRTPI * M_SQRT1_2) * (T(-0.5) * x.square()).exp());
    case F::fabs:
    case F::abs:
      return void(out = x.sign());
    case F::neg:
      return void(out = x.Constant(x.rows(), x.cols(), T(-1)));
    default:
      break;
  }
  throw std::invalid_argument(std::string("no derivative for the function '") + unary_name(f) + "'");
}

template <class T, class X, class Y, class Out>
void unary_derivative_eval(const std::string& f, const X& x, const Y& y, Out&& out) {
  unary_derivative_eval<T>(unary_fn(f), x, y, std::forward<Out>(out));
}

// unary_derivative_eval on n contiguous elements, with relu' and safe_sqrt' as plain loops whose
// selects are bitwise blends (fvi/math/array_math.h): Eigen runs their comparisons one element at
// a time (relu' took 0.55 ns an element, against 0.08 for square'). The same values as the plain
// comparisons, edge values included (tests/runtime/kernel/fused_test.cpp).
template <class T>
void unary_derivative_array(UnaryFn f, const T* x, const T* y, Eigen::Index n, T* out) {
  if (f == UnaryFn::relu) {
    for (Eigen::Index i = 0; i < n; ++i) out[i] = select_bits(is_positive(x[i]), T(1), T(0));
  } else if (f == UnaryFn::safe_sqrt) {
    for (Eigen::Index i = 0; i < n; ++i) out[i] = select_bits(is_positive(y[i]), T(0.5) / y[i], T(0));
  } else {
    using Map = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
    unary_derivative_eval<T>(f, Map(x, n), Map(y, n), Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(out, n));
  }
}

template <class T>
Tensor<T> unary_derivative(const std::string& f, const Tensor<T>& x, const Tensor<T>& y) {
  Tensor<T> out = Tensor<T>::uninitialized(x.rows, x.cols, x.draws);
  unary_derivative_array<T>(unary_fn(f), x.m.data(), y.m.data(), x.m.size(), out.m.data());
  return out;
}

// ---- linear algebra -------------------------------------------------------------------------

// (r x k) * (k x c). When the left side does not vary (data), every draw of the right side is
// multiplied in one matrix product: the draws sit side by side as columns.
template <class T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.cols != b.rows)
    throw ShapeError("matrix product of " + shape_string(a) + " and " + shape_string(b));
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, b.cols, joint_draws(a.draws, b.draws));
  if (a.draws == 1) {
    if (b.draws == out.draws) {
      out.m.noalias() = a.m * b.m;
    } else {
      for (Eigen::Index s = 0; s < out.draws; ++s) out.draw(s).noalias() = a.m * b.draw(s);
    }
    return out;
  }
  for (Eigen::Index s = 0; s < out.draws; ++s) out.draw(s).noalias() = a.draw(s) * b.draw(s);
  return out;
}

// Rows [begin, begin + count) of a data matrix, read in place: a minibatch's rows as the left
// operand of a product need no copy (the emitter reads a batched data matrix this way when
// products are all it feeds). `draws` is 1: data do not vary.
template <class T>
struct RowBlock {
  const T* data = nullptr;
  Eigen::Index rows = 0, cols = 0, stride = 0;
  static constexpr Eigen::Index draws = 1;
  Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>> matrix() const {
    return {data, rows, cols, Eigen::OuterStride<>(stride)};
  }
};

// Rows [begin, begin + count) of `full` (count < 0: every row).
template <class T>
RowBlock<T> row_block(const Tensor<T>& full, int64_t begin, int64_t count) {
  if (full.draws != 1) throw ShapeError("a block of rows of a value that varies with the draw");
  if (count < 0) return {full.m.data(), full.rows, full.cols, full.rows};
  if (begin < 0 || begin + count > full.rows) throw std::out_of_range("batch outside the data's rows");
  return {full.m.data() + begin, count, full.cols, full.rows};
}

// matmul with rows of data on the left: one product for every draw of b.
template <class T>
Tensor<T> matmul(const RowBlock<T>& a, const Tensor<T>& b) {
  if (a.cols != b.rows)
    throw ShapeError("matrix product of " + shape_string(a.rows, a.cols, 1) + " and " + shape_string(b));
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, b.cols, b.draws);
  out.m.noalias() = a.matrix() * b.m;  // the BLAS reads the rows at the data's stride
  return out;
}

// The adjoint of matmul's left operand: g * b', summed to `a_draws` draws.
template <class T>
Tensor<T> matmul_grad_left(const Tensor<T>& g, const Tensor<T>& b, Eigen::Index a_draws) {
  if (a_draws == 1 && b.draws == g.draws) {
    Tensor<T> out = Tensor<T>::uninitialized(g.rows, b.rows, a_draws);  // the product writes it all
    out.m.noalias() = g.m * b.m.transpose();  // sum over draws inside one product
    return out;
  }
  if (a_draws != 1 && a_draws != g.draws)
    throw ShapeError("the adjoint of a product's left operand with " + std::to_string(a_draws) +
                     " draws from a gradient with " + std::to_string(g.draws));
  // Summed into zeros for one draw; else every draw is written whole (not zero-filled first: for
  // a network's hidden layer that was a pass over B x H x S values per call).
  Tensor<T> out = a_draws == 1 ? Tensor<T>(g.rows, b.rows, 1) : Tensor<T>::uninitialized(g.rows, b.rows, a_draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    if (a_draws == 1) out.m.noalias() += g.draw(s) * b.draw(s).transpose();
    else out.draw(s).noalias() = g.draw(s) * b.draw(s).transpose();
  }
  return out;
}

// The adjoint of matmul's right operand: a' * g, summed to `b_draws` draws.
template <class T>
Tensor<T> matmul_grad_right(const Tensor<T>& a, const Tensor<T>& g, Eigen::Index b_draws) {
  if (a.draws == 1 && b_draws == g.draws) {
    Tensor<T> out = Tensor<T>::uninitialized(a.cols, g.cols, b_draws);  // the product writes it all
    out.m.noalias() = a.m.transpose() * g.m;  // every draw in one product
    return out;
  }
  if (b_draws != 1 && b_draws != g.draws)
    throw ShapeError("the adjoint of a product's right operand with " + std::to_string(b_draws) +
                     " draws from a gradient with " + std::to_string(g.draws));
  Tensor<T> out = b_draws == 1 ? Tensor<T>(a.cols, g.cols, 1) : Tensor<T>::uninitialized(a.cols, g.cols, b_draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    if (b_draws == 1) out.m.noalias() += a.draw(s).transpose() * g.draw(s);
    else out.draw(s).noalias() = a.draw(s).transpose() * g.draw(s);
  }
  return out;
}

// matmul_grad_right with rows of data on the left.
template <class T>
Tensor<T> matmul_grad_right(const RowBlock<T>& a, const Tensor<T>& g, Eigen::Index b_draws) {
  if (a.rows != g.rows)
    throw ShapeError("matrix product of the transpose of " + shape_string(a.rows, a.cols, 1) + " and " + shape_string(g));
  if (b_draws == g.draws) {
    Tensor<T> out = Tensor<T>::uninitialized(a.cols, g.cols, b_draws);  // the product writes it all
    out.m.noalias() = a.matrix().transpose() * g.m;
    return out;
  }
  if (b_draws != 1) throw ShapeError("the adjoint of a product's right operand with " + std::to_string(b_draws) +
                                     " draws from a gradient with " + std::to_string(g.draws));
  Tensor<T> out(a.cols, g.cols, 1);  // every draw's product summed
  for (Eigen::Index s = 0; s < g.draws; ++s) out.m.noalias() += a.matrix().transpose() * g.draw(s);
  return out;
}

template <class T>
Tensor<T> transpose(const Tensor<T>& a) {
  Tensor<T> out(a.cols, a.rows, a.draws);
  if (a.rows == 1 || a.cols == 1) {
    out.m = Eigen::Map<const Mat<T>>(a.m.data(), out.rows, out.cols * out.draws);  // same memory order
    return out;
  }
  for (Eigen::Index s = 0; s < a.draws; ++s) out.draw(s) = a.draw(s).transpose();
  return out;
}

// Reinterpret each draw's values (column-major) as rows x cols: to_vector, to_row_vector.
template <class T>
Tensor<T> reshape(const Tensor<T>& a, Eigen::Index rows, Eigen::Index cols) {
  if (rows * cols != a.size()) throw ShapeError("cannot reshape " + shape_string(a));
  Tensor<T> out(rows, cols, a.draws);
  out.m = Eigen::Map<const Mat<T>>(a.m.data(), rows, cols * a.draws);
  return out;
}

// ---- reductions and broadcasts --------------------------------------------------------------

template <class T>
Tensor<T> sum(const Tensor<T>& a) {
  Tensor<T> out(1, 1, a.draws);
  out.m = a.flat().colwise().sum();
  return out;
}

template <class T>
Tensor<T> rows_dot_product(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.rows != b.rows || a.cols != b.cols) throw ShapeError("rows_dot_product of " + shape_string(a) + " and " + shape_string(b));
  Tensor<T> out(a.rows, 1, joint_draws(a.draws, b.draws));
  for (Eigen::Index s = 0; s < out.draws; ++s)
    out.draw(s) = (a.draw(s).array() * b.draw(s).array()).rowwise().sum().matrix();
  return out;
}

// x repeated to rows x cols: a scalar everywhere, a row_vector down the rows, a vector across the
// columns (rep_vector, rep_matrix, and the adjoint of sum).
template <class T>
Tensor<T> broadcast(const Tensor<T>& x, Eigen::Index rows, Eigen::Index cols) {
  Tensor<T> out(rows, cols, x.draws);
  for (Eigen::Index s = 0; s < x.draws; ++s) out.draw(s).array() = expand(x, rows, cols, s);
  return out;
}

// The adjoint of a broadcast: g summed down to rows x cols with `draws` draws.
template <class T>
Tensor<T> sum_to(const Tensor<T>& g, Eigen::Index rows, Eigen::Index cols, Eigen::Index draws) {
  Tensor<T> out(rows, cols, draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    auto gs = g.draw(s);
    auto o = out.draw(draws == 1 ? 0 : s);
    if (rows == g.rows && cols == g.cols) o += gs;
    else if (rows * cols == 1) o(0, 0) += gs.sum();
    else if (rows * cols == g.rows * g.cols) o += Eigen::Map<const Mat<T>>(gs.eval().data(), rows, cols);
    else if (rows == 1 && cols == g.cols) o += gs.colwise().sum();
    else if (cols == 1 && rows == g.rows) o += gs.rowwise().sum();
    else throw ShapeError("cannot sum " + shape_string(g) + " to " + shape_string(rows, cols, draws));
  }
  return out;
}

template <class T>
Tensor<T> sum_like(const Tensor<T>& g, const Tensor<T>& like) {
  return sum_to(g, like.rows, like.cols, like.draws);
}

template <class T>
Tensor<T> log_softmax(const Tensor<T>& a) {
  Tensor<T> out(a.rows, a.cols, a.draws);
  auto x = a.flat();
  auto o = out.flat();
  for (Eigen::Index s = 0; s < a.draws; ++s) {
    T mx = x.col(s).maxCoeff();
    T lse = mx + std::log((x.col(s).array() - mx).exp().sum());
    o.col(s).array() = x.col(s).array() - lse;
  }
  return out;
}

template <class T>
Tensor<T> softmax(const Tensor<T>& a) {
  return map(log_softmax(a), [](const auto& x) { return x.exp(); });
}

// Adjoint of y = log_softmax(x) per draw: g - softmax(x) * sum(g).
template <class T>
Tensor<T> log_softmax_grad(const Tensor<T>& y, const Tensor<T>& g) {
  Tensor<T> out(y.rows, y.cols, y.draws);
  for (Eigen::Index s = 0; s < y.draws; ++s)
    out.flat().col(s) = g.flat().col(s) - y.flat().col(s).array().exp().matrix() * g.flat().col(s).sum();
  return out;
}

// Adjoint of y = softmax(x) per draw: y .* (g - sum(g .* y)).
template <class T>
Tensor<T> softmax_grad(const Tensor<T>& y, const Tensor<T>& g) {
  Tensor<T> out(y.rows, y.cols, y.draws);
  for (Eigen::Index s = 0; s < y.draws; ++s) {
    T dot = g.flat().col(s).dot(y.flat().col(s));
    out.flat().col(s).array() = y.flat().col(s).array() * (g.flat().col(s).array() - dot);
  }
  return out;
}

// ---- input groups ---------------------------------------------------------------------------

// A variable's values inside its group (all unconstrained variables of one kind, one after
// another, matrices column-major): rows x cols from `offset`, for every draw.
template <class T>
Tensor<T> slice(const Tensor<T>& group, Eigen::Index offset, Eigen::Index rows, Eigen::Index cols) {
  if (offset + rows * cols > group.size())
    throw ShapeError("slice past the end of a group of " + std::to_string(group.size()));
  Tensor<T> out = Tensor<T>::uninitialized(rows, cols, group.draws);
  out.flat() = group.flat().middleRows(offset, rows * cols);
  return out;
}

// The adjoint of slice: adds g into the group's gradient at `offset`.
template <class T>
void add_to_slice(Tensor<T>& group_gradient, const Tensor<T>& g, Eigen::Index offset) {
  if (g.draws == group_gradient.draws) {
    group_gradient.flat().middleRows(offset, g.size()) += g.flat();
  } else {
    group_gradient.flat().middleRows(offset, g.size()) += g.flat().rowwise().sum();
  }
}

// ---- indexing (1-based indices, as in the language) -----------------------------------------

template <class T>
Tensor<T> index_rows(const Tensor<T>& x, const IntVec& idx) {
  Tensor<T> out(idx.size(), x.cols, x.draws);
  for (Eigen::Index i = 0; i < idx.size(); ++i) {
    if (idx[i] < 1 || idx[i] > x.rows)
      throw std::out_of_range("index " + std::to_string(idx[i]) + " outside 1.." + std::to_string(x.rows));
    out.m.row(i) = x.m.row(idx[i] - 1);
  }
  return out;
}

template <class T>
Tensor<T> scatter_rows(const Tensor<T>& g, const IntVec& idx, Eigen::Index rows) {
  Tensor<T> out(rows, g.cols, g.draws);
  for (Eigen::Index i = 0; i < idx.size(); ++i) out.m.row(idx[i] - 1) += g.m.row(i);
  return out;
}

template <class T>
Tensor<T> index_cols(const Tensor<T>& x, const IntVec& idx) {
  Tensor<T> out(x.rows, idx.size(), x.draws);
  for (Eigen::Index s = 0; s < x.draws; ++s)
    for (Eigen::Index j = 0; j < idx.size(); ++j) {
      if (idx[j] < 1 || idx[j] > x.cols)
        throw std::out_of_range("index " + std::to_string(idx[j]) + " outside 1.." + std::to_string(x.cols));
      out.draw(s).col(j) = x.draw(s).col(idx[j] - 1);
    }
  return out;
}

template <class T>
Tensor<T> scatter_cols(const Tensor<T>& g, const IntVec& idx, Eigen::Index cols) {
  Tensor<T> out(g.rows, cols, g.draws);
  for (Eigen::Index s = 0; s < g.draws; ++s)
    for (Eigen::Index j = 0; j < idx.size(); ++j) out.draw(s).col(idx[j] - 1) += g.draw(s).col(j);
  return out;
}

inline IntVec range_index(int64_t lo, int64_t hi) {
  IntVec idx(std::max<int64_t>(0, hi - lo + 1));
  for (Eigen::Index i = 0; i < idx.size(); ++i) idx[i] = lo + i;
  return idx;
}

}  // namespace fvi::kernel
