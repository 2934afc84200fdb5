#pragma once
// Kernel operations (ops.h), reading parts of values: a variable's slice of its input group, and
// 1-based indexing of rows and columns, with the scatters that are their adjoints.
#include <algorithm>
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

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

// lo..hi as a multi-index (`x[2:K]`, bounds known from the data); empty when hi < lo.
inline IntVec range_index(int64_t lo, int64_t hi) {
  IntVec idx(std::max<int64_t>(0, hi - lo + 1));
  for (Eigen::Index i = 0; i < idx.size(); ++i) idx[i] = lo + i;
  return idx;
}

}  // namespace fvi::kernel
