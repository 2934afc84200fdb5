#pragma once
// Fused elementwise loops: the fusion plan (compiler/backend/fuse.h) turns a chain of
// elementwise nodes of one shape (arithmetic, unary functions and their derivatives, scalar log
// densities and their partials) into one `fused` call. The chain runs block by block (kBlock
// elements of one column of one draw): every node's block is computed from the blocks of its
// operands while they are in cache, and only the nodes used outside the chain (`outs`) are
// written to memory. One pass over the data instead of one pass per node, no zero-filled
// temporaries, and the operands are read in place however they broadcast.
//
// Each node's block is computed with the same Eigen formulas as the unfused operation (ops.h
// unary_eval, distributions.h scalar_lpdf / scalar_partial), so fused and unfused kernels agree
// to rounding (tests/runtime/kernel/fused_test.cpp).
#include <string>
#include <vector>

#include "fvi/kernel/distributions.h"

namespace fvi::kernel {

constexpr Eigen::Index kBlock = 1024;

template <class T>
using BlockMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstBlockMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
// One block of a fused loop: n elements of every leaf (operand from outside the chain) and of
// every node of the chain, each contiguous.
template <class T>
struct FusedBlock {
  Eigen::Index n = 0;
  std::vector<const T*> leaf_ptr;
  std::vector<T*> node_ptr;
  ConstBlockMap<T> leaf(int k) const { return ConstBlockMap<T>(leaf_ptr[k], n); }
  BlockMap<T> node(int k) const { return BlockMap<T>(node_ptr[k], n); }
  ConstBlockMap<T> value(int k) const { return ConstBlockMap<T>(node_ptr[k], n); }
};

// Block versions of the named operations, instantiated once in libfvi (instances.h).
template <class T>
void unary_block(UnaryFn f, const T* x, Eigen::Index n, T* out) {
  unary_eval<T>(f, ConstBlockMap<T>(x, n), BlockMap<T>(out, n));
}
template <class T>
void unary_derivative_block(UnaryFn f, const T* x, const T* y, Eigen::Index n, T* out) {
  unary_derivative_array<T>(f, x, y, n, out);
}
// The log density of the scalar distribution `dist` of operands xs (y, a1, ...), elementwise.
template <class T>
void lpdf_block(const std::string& dist, const std::vector<const T*>& xs, Eigen::Index n, T* out) {
  thread_local std::vector<Arr<T>> v;
  v.resize(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) v[i] = ConstBlockMap<T>(xs[i], n);
  BlockMap<T>(out, n) = detail::scalar_lpdf<T>(dist, v);
}
// g .* d(log density)/d(operand k): lpdf_vjp where operand k has the result's shape.
template <class T>
void lpdf_vjp_block(const std::string& dist, size_t k, const T* g, const std::vector<const T*>& xs, Eigen::Index n,
                    T* out) {
  thread_local std::vector<Arr<T>> v;
  v.resize(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) v[i] = ConstBlockMap<T>(xs[i], n);
  BlockMap<T>(out, n) = ConstBlockMap<T>(g, n) * detail::scalar_partial<T>(dist, k, v);
}

// Whether every distribution operation on `dist` is elementwise (lpdf_block applies).
inline bool scalar_distribution(const std::string& dist) {
  return dist != "categorical_logit" && dist != "multinomial_logit" && dist != "dirichlet" &&
         dist != "multi_normal_cholesky";
}

// Runs `body(block)` over the broadcast shape of `leaves`, writing node k of the chain to
// outs[out_of_node[k]] (reshaped to that shape, buffer reused) or, when out_of_node[k] < 0, to
// a block of scratch. `nodes` is the chain's length.
template <class T, class Body>
void fused(const std::vector<const Tensor<T>*>& leaves, const std::vector<Tensor<T>*>& outs,
           const std::vector<int>& out_of_node, Body body) {
  Eigen::Index r = leaves[0]->rows, c = leaves[0]->cols, S = leaves[0]->draws;
  for (size_t i = 1; i < leaves.size(); ++i) {
    Eigen::Index nr, nc;
    broadcast_shape(r, c, leaves[i]->rows, leaves[i]->cols, nr, nc);
    r = nr, c = nc;
    S = joint_draws(S, leaves[i]->draws);
  }
  for (Tensor<T>* o : outs) o->reshape_for(r, c, S);
  // How each leaf is read: a whole column of the result's shape (memory order as the result's),
  // a column of one draw broadcast across the columns, or one value per column (a scalar or a
  // row broadcast down the rows), copied into a block of scratch.
  enum Kind { Full, Column, Constant };
  const size_t L = leaves.size(), K = out_of_node.size();
  std::vector<Kind> kind(L);
  bool flat = true;  // no leaf broadcasts along one axis only: each draw is one column
  for (size_t i = 0; i < L; ++i) {
    const Tensor<T>& x = *leaves[i];
    if (x.size() == r * c) kind[i] = Full;
    else if (x.size() == 1) kind[i] = Constant;
    else if (x.cols == 1 && x.rows == r) kind[i] = Column, flat = false;
    else kind[i] = Constant, flat = false;  // a 1 x c row
  }
  const Eigen::Index rows = flat ? r * c : r, cols = flat ? 1 : c;
  const Eigen::Index block = std::max<Eigen::Index>(1, std::min(rows, kBlock));
  const Eigen::Index per_column = (rows + block - 1) / block, blocks = per_column * cols * S;
  std::vector<Eigen::Array<T, Eigen::Dynamic, 1>> scratch(L + K);
  FusedBlock<T> b;
  b.leaf_ptr.resize(L);
  b.node_ptr.resize(K);
  for (size_t i = 0; i < L; ++i)
    if (kind[i] == Constant) scratch[i].resize(block), b.leaf_ptr[i] = scratch[i].data();
  for (size_t k = 0; k < K; ++k)
    if (out_of_node[k] < 0) scratch[L + k].resize(block), b.node_ptr[k] = scratch[L + k].data();
  // Blocks in (draw, column, rows) order. (Two threads, each half of the blocks, ran slower on
  // the two-core machine: OpenBLAS's threads spin between products; bench/README.md.)
  for (Eigen::Index at = 0; at < blocks; ++at) {
    const Eigen::Index sj = at / per_column, s = sj / cols, j = sj % cols, i0 = (at % per_column) * block;
    if (i0 == 0)  // a new (draw, column): the constant leaves' values
      for (size_t i = 0; i < L; ++i)
        if (kind[i] == Constant) scratch[i].setConstant(leaves[i]->draw(s)(0, leaves[i]->size() == 1 ? 0 : j));
    b.n = std::min(block, rows - i0);
    for (size_t i = 0; i < L; ++i) {
      const Tensor<T>& x = *leaves[i];
      const Eigen::Index ds = x.draws == 1 ? 0 : s;
      if (kind[i] == Full) b.leaf_ptr[i] = x.m.data() + ds * r * c + j * rows + i0;
      else if (kind[i] == Column) b.leaf_ptr[i] = x.m.data() + ds * r + i0;
    }
    for (size_t k = 0; k < K; ++k)
      if (out_of_node[k] >= 0) b.node_ptr[k] = outs[out_of_node[k]]->m.data() + s * r * c + j * rows + i0;
    body(b);
  }
}

}  // namespace fvi::kernel
