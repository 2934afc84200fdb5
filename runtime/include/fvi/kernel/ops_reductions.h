#pragma once
// Kernel operations (ops.h), reductions and broadcasts: sums, broadcasts and their adjoint sum_to,
// log_softmax and softmax with their adjoints.
#include <cmath>

#include "fvi/kernel/tensor.h"
#include "fvi/kernel/ops_elementwise.h"

namespace fvi::kernel {

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

// max, min or prod of all of x's elements: one value per draw (the IR's Reduce; its adjoint is
// written with elementwise operations in transform/adjoint.cpp).
template <class T>
Tensor<T> reduce(const std::string& name, const Tensor<T>& x) {
  Tensor<T> out(1, 1, x.draws);
  if (x.rows * x.cols == 0) throw ShapeError(name + " of no elements");
  for (Eigen::Index s = 0; s < x.draws; ++s) {
    auto d = x.draw(s);
    if (name == "max") out.m(0, s) = d.maxCoeff();
    else if (name == "min") out.m(0, s) = d.minCoeff();
    else if (name == "prod") out.m(0, s) = d.prod();
    else throw std::invalid_argument("unknown reduction '" + name + "'");
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

// Running sums of a vector (down its rows) or a row_vector (along its columns), every draw:
// cumulative_sum, and the constraining transform of ordered and positive_ordered vectors.
template <class T>
Tensor<T> cumulative_sum(const Tensor<T>& a) {
  if (a.cols != 1 && a.rows != 1) throw ShapeError("cumulative_sum of " + shape_string(a) + ": not a vector");
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, a.cols, a.draws);
  for (Eigen::Index s = 0; s < a.draws; ++s) {
    const auto x = a.draw(s).reshaped();
    auto y = out.draw(s).reshaped();
    T running = 0;
    for (Eigen::Index i = 0; i < x.size(); ++i) y(i) = running += x(i);
  }
  return out;
}

// Its adjoint: element i of the result collects g from i to the end.
template <class T>
Tensor<T> cumulative_sum_grad(const Tensor<T>& g) {
  if (g.cols != 1 && g.rows != 1) throw ShapeError("cumulative_sum's adjoint of " + shape_string(g) + ": not a vector");
  Tensor<T> out = Tensor<T>::uninitialized(g.rows, g.cols, g.draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) {
    const auto x = g.draw(s).reshaped();
    auto y = out.draw(s).reshaped();
    T running = 0;
    for (Eigen::Index i = x.size() - 1; i >= 0; --i) y(i) = running += x(i);
  }
  return out;
}

}  // namespace fvi::kernel
