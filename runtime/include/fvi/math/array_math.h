#pragma once
// log1p and expm1 of arrays, vectorised in float and double alike. Eigen vectorises its own
// .log1p() and .expm1() in float only; in double they are a libm call per element (about 4 ns),
// which made a network's mean-field divergence cost more than its kernels.
//
// Both are accurate to a few ulp over the whole line (tests/runtime/math/array_math_test.cpp
// checks them against std::log1p / std::expm1), with std's values at +-inf and NaN.
//
// The work is done in blocks of at most kMathBlock elements whose temporaries live on the stack
// and in the first-level cache: log1p_block / expm1_block take one such block (a segment of at
// most kMathBlock elements), and a caller with several such steps per element runs them all on
// one block before the next; log1p_array / expm1_array do that for a whole vector.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>

namespace fvi {

constexpr Eigen::Index kMathBlock = 256;

// A temporary of one block: dynamic size up to kMathBlock, on the stack.
template <class T>
using MathBlock = Eigen::Array<T, Eigen::Dynamic, 1, Eigen::ColMajor, kMathBlock, 1>;

// Selects and tests in integer operations on the bits. Under GCC's default -ftrapping-math a
// floating-point comparison may trap (on NaN), so a select on one, or an operation done only on
// one side of it, is control flow, and the loop around it stays scalar (expm1_block's did: a
// quarter of a client's optimiser step). Both sides are computed; the select is a bitwise blend.
template <class T>
using BitsOf = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;

template <class T>
BitsOf<T> bits_of(T x) {
  BitsOf<T> bits;
  std::memcpy(&bits, &x, sizeof(T));
  return bits;
}

// take_a ? a : b.
template <class T>
T select_bits(bool take_a, T a, T b) {
  const BitsOf<T> mask = -BitsOf<T>(take_a), out_bits = (bits_of(a) & mask) | (bits_of(b) & ~mask);
  T out;
  std::memcpy(&out, &out_bits, sizeof(T));
  return out;
}

// |y| < 1/2 (false for NaN, whose magnitude bits are above every finite number's).
template <class T>
bool below_half(T y) {
  return (bits_of(y) & std::numeric_limits<BitsOf<T>>::max()) < bits_of(T(0.5));
}

// x > 0 (false for NaN). A positive float's bits, read as a signed integer, are positive and
// ordered as the numbers are; a negative one's are negative; +inf's are below every NaN's.
template <class T>
bool is_positive(T x) {
  return bits_of(x) > 0 && bits_of(x) <= bits_of(std::numeric_limits<T>::infinity());
}

// 0 < u <= the largest finite number (false for NaN), as is_positive.
template <class T>
bool positive_finite(T u) {
  return bits_of(u) > 0 && bits_of(u) <= bits_of(Eigen::NumTraits<T>::highest());
}

// log1p(z) = log(u) - ((u - 1) - z) / u with u = fl(1 + z): the correction removes the rounding of
// 1 + z (u - 1 is exact), so tiny z gives z and no cancellation is left (the trick of
// kernel::log1p_exp_array). Skipped where u is 0 or inf (z = -1 or inf: the correction would be
// NaN).
//
// Both functions evaluate their transcendental over the whole block into a temporary (Eigen's
// vectorised log and exp) and do the rest in one plain loop over raw arrays, which GCC
// vectorises with its select in integer operations (select_bits): Eigen's select() has no
// vectorised path (a select over `y.exp()` called libm once per element), and a Horner step per
// Eigen expression is a pass over the block each.
template <class In>
MathBlock<typename In::Scalar> log1p_block(const Eigen::ArrayBase<In>& z_in) {
  using T = typename In::Scalar;
  const MathBlock<T> z = z_in;
  const MathBlock<T> u = z + T(1);
  const MathBlock<T> log_u = u.log();
  MathBlock<T> out(z.size());
  const T *zp = z.data(), *up = u.data(), *lp = log_u.data();
  T* o = out.data();
  for (Eigen::Index i = 0; i < z.size(); ++i) {
    o[i] = select_bits(positive_finite(up[i]), lp[i] - ((up[i] - T(1)) - zp[i]) / up[i], lp[i]);
  }
  return out;
}

// expm1(y): for |y| < 1/2 the Taylor polynomial to y^14 / 14! by Horner (truncation below 1e-17
// relative there), elsewhere exp(y) - 1, which loses nothing there (|exp(y) - 1| > 0.39).
template <class In>
MathBlock<typename In::Scalar> expm1_block(const Eigen::ArrayBase<In>& y_in) {
  using T = typename In::Scalar;
  const MathBlock<T> y = y_in;
  const MathBlock<T> e = y.exp();
  MathBlock<T> out(y.size());
  const T *yp = y.data(), *ep = e.data();
  T* o = out.data();
  for (Eigen::Index i = 0; i < y.size(); ++i) {
    const T yi = yp[i];
    T p = T(1) + yi * T(1.0 / 14);
    for (int k = 13; k >= 2; --k) p = T(1) + (yi * T(1.0 / k)) * p;
    o[i] = select_bits(below_half(yi), yi * p, ep[i] - T(1));
  }
  return out;
}

// f (log1p_block or expm1_block) of every element of a vector, a block at a time.
template <class A, class F>
Eigen::Array<typename A::Scalar, Eigen::Dynamic, 1> apply_blockwise(const Eigen::ArrayBase<A>& x, F&& f) {
  const Eigen::Array<typename A::Scalar, Eigen::Dynamic, 1> in = x;
  Eigen::Array<typename A::Scalar, Eigen::Dynamic, 1> out(in.size());
  for (Eigen::Index i = 0; i < in.size(); i += kMathBlock) {
    const Eigen::Index n = std::min(kMathBlock, in.size() - i);
    out.segment(i, n) = f(in.segment(i, n));
  }
  return out;
}

template <class A>
Eigen::Array<typename A::Scalar, Eigen::Dynamic, 1> log1p_array(const Eigen::ArrayBase<A>& z) {
  return apply_blockwise(z, [](const auto& block) { return log1p_block(block); });
}

template <class A>
Eigen::Array<typename A::Scalar, Eigen::Dynamic, 1> expm1_array(const Eigen::ArrayBase<A>& y) {
  return apply_blockwise(y, [](const auto& block) { return expm1_block(block); });
}

}  // namespace fvi
