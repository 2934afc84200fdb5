#pragma once
// Kernel operations (ops.h), unary functions: the numerically stable building blocks, the table of
// the unary functions (UnaryFn) and their values and derivatives, on whole tensors or on the
// blocks of a fused loop (fused.h).
#include <unsupported/Eigen/SpecialFunctions>  // lgamma, digamma, erf on arrays

#include <cmath>
#include <string>

#include "fvi/kernel/tensor.h"
#include "fvi/math/array_math.h"

namespace fvi::kernel {

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
  X(lgamma) X(digamma) X(erf) X(Phi) X(fabs) X(abs) X(neg) X(asin) X(acos) X(atan) X(sinh) X(cosh)  \
  X(tan) X(asinh) X(acosh) X(atanh) X(step) X(inv_cloglog) X(log1m_exp) X(Phi_approx) X(cbrt) X(exp2) \
  X(erfc)
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
      return void(out = x.expm1());
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
    case F::asin:
      return void(out = x.asin());
    case F::acos:
      return void(out = x.acos());
    case F::atan:
      return void(out = x.atan());
    case F::sinh:
      return void(out = x.sinh());
    case F::cosh:
      return void(out = x.cosh());
    case F::tan:
      return void(out = x.tan());
    // Eigen has no inverse hyperbolic functions on arrays: from their logarithms as log1p, exact
    // near 0 (asinh) and near 1 (acosh); asinh is odd, so taken at |x| and given x's sign:
    // log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(a^2 + 1))).
    case F::asinh:
      return void(out = x.sign() * (x.abs() + x.square() / (1 + (x.square() + 1).sqrt())).log1p());
    case F::acosh:
      return void(out = ((x - 1) + ((x - 1) * (x + 1)).sqrt()).log1p());
    case F::atanh:
      return void(out = T(0.5) * ((2 * x / (1 - x)).log1p()));
    case F::step:  // Stan's step: 0 for x < 0, else 1 (step(0) = 1)
      return void(out = (x < T(0)).select(x.Zero(x.rows(), x.cols()), x.Constant(x.rows(), x.cols(), T(1))));
    case F::inv_cloglog:  // 1 - exp(-exp(x))
      return void(out = -(-x.exp()).expm1());
    // log(1 - exp(x)), x <= 0: log(-expm1(x)) near 0, log1p(-exp(x)) below -log 2 (Maechler 2012)
    case F::log1m_exp:
      return void(out = (x > T(-M_LN2)).select((-x.expm1()).log(), (-x.exp()).log1p()));
    case F::Phi_approx:  // Stan's: inv_logit(0.07056 x^3 + 1.5976 x)
      return void(out = inv_logit_array((T(0.07056) * x.square() + T(1.5976)) * x));
    case F::cbrt:
      return void(out = x.unaryExpr([](T v) { return std::cbrt(v); }));
    case F::exp2:
      return void(out = (T(M_LN2) * x).exp());
    case F::erfc:
      return void(out = x.erfc());
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
    case F::asin:
      return void(out = (1 - x.square()).rsqrt());
    case F::acos:
      return void(out = -(1 - x.square()).rsqrt());
    case F::atan:
      return void(out = (1 + x.square()).inverse());
    case F::sinh:
      return void(out = x.cosh());
    case F::cosh:
      return void(out = x.sinh());
    case F::tan:
      return void(out = 1 + y.square());
    case F::asinh:
      return void(out = (x.square() + 1).rsqrt());
    case F::acosh:
      return void(out = (x.square() - 1).rsqrt());
    case F::atanh:
      return void(out = (1 - x.square()).inverse());
    case F::step:
      return void(out = x.Zero(x.rows(), x.cols()));
    case F::inv_cloglog:  // exp(x - exp(x))
      return void(out = (x - x.exp()).exp());
    case F::log1m_exp:  // -exp(x) / (1 - exp(x)) = -1 / expm1(-x)
      return void(out = -(-x).expm1().inverse());
    case F::Phi_approx:
      return void(out = y * (1 - y) * (T(3 * 0.07056) * x.square() + T(1.5976)));
    case F::cbrt:
      return void(out = (3 * y.square()).inverse());
    case F::exp2:
      return void(out = T(M_LN2) * y);
    case F::erfc:
      return void(out = -T(M_2_SQRTPI) * (-x.square()).exp());
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

}  // namespace fvi::kernel
