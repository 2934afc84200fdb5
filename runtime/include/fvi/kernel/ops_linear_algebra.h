#pragma once
// Kernel operations (ops.h), linear algebra: matrix products and their adjoints (with rows of data
// read in place as the left operand: RowBlock), transpose and reshape.
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

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

}  // namespace fvi::kernel
