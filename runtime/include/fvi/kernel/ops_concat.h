#pragma once
// Kernel operations (ops.h) joining values: append_row stacks rows (vectors end to end, row
// vectors into a matrix), append_col stacks columns; a row_vector literal is a chain of them.
// The adjoint of a join hands each operand its own rows (columns) of the gradient.
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

// a above b: (ra + rb) x cols. An operand with one draw is the same at every draw.
template <class T>
Tensor<T> concat_rows(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.cols != b.cols)
    throw ShapeError("append_row of " + shape_string(a) + " and " + shape_string(b) + ": the columns differ");
  Tensor<T> out = Tensor<T>::uninitialized(a.rows + b.rows, a.cols, joint_draws(a.draws, b.draws));
  for (Eigen::Index s = 0; s < out.draws; ++s) {
    out.draw(s).topRows(a.rows) = a.draw(s);
    out.draw(s).bottomRows(b.rows) = b.draw(s);
  }
  return out;
}

// a left of b: rows x (ca + cb).
template <class T>
Tensor<T> concat_cols(const Tensor<T>& a, const Tensor<T>& b) {
  if (a.rows != b.rows)
    throw ShapeError("append_col of " + shape_string(a) + " and " + shape_string(b) + ": the rows differ");
  Tensor<T> out = Tensor<T>::uninitialized(a.rows, a.cols + b.cols, joint_draws(a.draws, b.draws));
  for (Eigen::Index s = 0; s < out.draws; ++s) {
    out.draw(s).leftCols(a.cols) = a.draw(s);
    out.draw(s).rightCols(b.cols) = b.draw(s);
  }
  return out;
}

// The adjoint of concat_rows for one operand: the gradient's rows of the first operand
// (`part` 0, its first `first_rows`) or of the second (`part` 1, the rest), every draw.
template <class T>
Tensor<T> concat_rows_part(const Tensor<T>& g, Eigen::Index first_rows, int part) {
  if (first_rows < 0 || first_rows > g.rows) throw ShapeError("append_row's adjoint: " + shape_string(g));
  const Eigen::Index begin = part == 0 ? 0 : first_rows, rows = part == 0 ? first_rows : g.rows - first_rows;
  Tensor<T> out = Tensor<T>::uninitialized(rows, g.cols, g.draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) out.draw(s) = g.draw(s).middleRows(begin, rows);
  return out;
}

template <class T>
Tensor<T> concat_cols_part(const Tensor<T>& g, Eigen::Index first_cols, int part) {
  if (first_cols < 0 || first_cols > g.cols) throw ShapeError("append_col's adjoint: " + shape_string(g));
  const Eigen::Index begin = part == 0 ? 0 : first_cols, cols = part == 0 ? first_cols : g.cols - first_cols;
  Tensor<T> out = Tensor<T>::uninitialized(g.rows, cols, g.draws);
  for (Eigen::Index s = 0; s < g.draws; ++s) out.draw(s) = g.draw(s).middleCols(begin, cols);
  return out;
}

}  // namespace fvi::kernel
