#pragma once
// One IR operation on its operands' values, by the runtime's kernel operation of the same name:
// the part of evaluating a node that depends on nothing but its operands, its own fields and the
// data's sizes. The interpreter (ir/interpret.h) and the graph backend's factors
// (backend/graph/graph_factor.cpp) evaluate every such node through here; leaves, statement
// programs and random draws, which read their evaluator's state, they evaluate themselves.
// (An includer that links libfvi includes fvi/kernel/instances.h first: the operations it
// instantiates once are then not instantiated again.)
#include <functional>

#include "fvi/kernel/distributions.h"
#include "fvi/kernel/ops.h"
#include "ir/ir.h"

namespace fvic::ir {

template <class Real>
struct OperandAccess {
  std::function<const fvi::kernel::Tensor<Real>&(size_t)> value;   // operand a's value
  std::function<const fvi::kernel::IntVec&(size_t)> index;          // operand a's indices (an Index node)
  std::function<long long(const SymSize&)> size;                    // a size from the data
};

// Sets `out` to node n's value and returns true, or returns false for a node this does not
// evaluate (a leaf, Program, ProgramVjp, Rng).
template <class Real>
bool apply_op(const Node& n, const OperandAccess<Real>& a, fvi::kernel::Tensor<Real>& out) {
  namespace k = fvi::kernel;
  auto v = [&](size_t i) -> const k::Tensor<Real>& { return a.value(i); };
  auto operands = [&](size_t first) {
    k::Operands<Real> xs;
    for (size_t i = first; i < n.args.size(); ++i) xs.push_back(&v(i));
    return xs;
  };
  auto conv = [&] {
    return k::ConvGeometry{Eigen::Index(n.ints.at(0)), Eigen::Index(n.ints.at(1)), Eigen::Index(n.ints.at(2)),
                           Eigen::Index(n.ints.at(3)), Eigen::Index(n.ints.at(4))};
  };
  auto pool = [&] {
    return k::PoolGeometry{Eigen::Index(n.ints.at(0)), Eigen::Index(n.ints.at(1)), Eigen::Index(n.ints.at(2)),
                           Eigen::Index(n.ints.at(3))};
  };
  switch (n.op) {
    case Op::Unary: out = k::unary(n.name, v(0)); return true;
    case Op::Neg: out = k::neg(v(0)); return true;
    case Op::Add: out = k::add(v(0), v(1)); return true;
    case Op::Sub: out = k::sub(v(0), v(1)); return true;
    case Op::Mul: out = k::mul(v(0), v(1)); return true;
    case Op::Div: out = k::div(v(0), v(1)); return true;
    case Op::Pow: out = k::pow(v(0), v(1)); return true;
    case Op::Compare: out = k::compare(n.name, v(0), v(1)); return true;
    case Op::Select: out = k::select(v(0), v(1), v(2)); return true;
    case Op::Reduce: out = k::reduce(n.name, v(0)); return true;
    case Op::MatMul: out = k::matmul(v(0), v(1)); return true;
    case Op::Transpose: out = k::transpose(v(0)); return true;
    case Op::Reshape: out = k::reshape(v(0), a.size(n.rows), a.size(n.cols)); return true;
    case Op::Sum: out = k::sum(v(0)); return true;
    case Op::RowsDotProduct: out = k::rows_dot_product(v(0), v(1)); return true;
    case Op::Broadcast:
      if (n.args.size() == 2) out = k::broadcast(v(0), v(1).rows, v(1).cols);
      else out = k::broadcast(v(0), a.size(n.rows), a.size(n.cols));
      return true;
    case Op::LogSoftmax: out = k::log_softmax(v(0)); return true;
    case Op::Softmax: out = k::softmax(v(0)); return true;
    case Op::CumulativeSum: out = k::cumulative_sum(v(0)); return true;
    case Op::Cholesky: out = k::cholesky(v(0)); return true;
    case Op::Inverse: out = k::inverse(v(0)); return true;
    case Op::MatrixConstrain: out = k::matrix_constrain(n.name, v(0), a.size(n.cols)); return true;
    case Op::MatrixLogJacobian: out = k::matrix_log_jacobian(n.name, v(0)); return true;
    case Op::SquaredDistances: out = k::squared_distances(v(0)); return true;
    case Op::DiagMatrix: out = k::diag_matrix(v(0)); return true;
    case Op::Diagonal: out = k::diagonal(v(0)); return true;
    case Op::IndexRows: out = k::index_rows(v(0), a.index(1)); return true;
    case Op::IndexCols: out = k::index_cols(v(0), a.index(1)); return true;
    case Op::ConcatRows: out = k::concat_rows(v(0), v(1)); return true;
    case Op::ConcatCols: out = k::concat_cols(v(0), v(1)); return true;
    case Op::Conv2d: out = k::conv2d(v(0), v(1), conv()); return true;
    case Op::Pool:
      out = n.args.size() == 2 ? k::max_pool2d_select(v(0), v(1), pool()) : k::pool2d(n.name, v(0), pool());
      return true;
    case Op::Lpdf: out = k::lpdf<Real>(n.name, operands(0)); return true;
    case Op::UnaryDerivative: out = k::unary_derivative(n.name, v(0), v(1)); return true;
    case Op::SumTo: out = k::sum_like(v(0), v(1)); return true;
    case Op::MatMulGradLeft: out = k::matmul_grad_left(v(0), v(1), v(2).draws); return true;
    case Op::MatMulGradRight: out = k::matmul_grad_right(v(0), v(1), v(2).draws); return true;
    case Op::ScatterRows: out = k::scatter_rows(v(0), a.index(1), v(2).rows); return true;
    case Op::ScatterCols: out = k::scatter_cols(v(0), a.index(1), v(2).cols); return true;
    case Op::LogSoftmaxGrad: out = k::log_softmax_grad(v(0), v(1)); return true;
    case Op::SoftmaxGrad: out = k::softmax_grad(v(0), v(1)); return true;
    case Op::CumulativeSumGrad: out = k::cumulative_sum_grad(v(0)); return true;
    case Op::LpdfVjp: out = k::lpdf_vjp<Real>(n.name, size_t(n.k), v(0), operands(1)); return true;
    case Op::ConcatRowsPart: out = k::concat_rows_part(v(0), v(1).rows, n.k); return true;
    case Op::ConcatColsPart: out = k::concat_cols_part(v(0), v(1).cols, n.k); return true;
    case Op::CholeskyGrad: out = k::cholesky_grad(v(0), v(1)); return true;
    case Op::InverseGrad: out = k::inverse_grad(v(0), v(1)); return true;
    case Op::MatrixConstrainGrad: out = k::matrix_constrain_grad(n.name, v(0), v(1)); return true;
    case Op::MatrixLogJacobianGrad: out = k::matrix_log_jacobian_grad(n.name, v(0), v(1)); return true;
    case Op::Conv2dGradInput: out = k::conv2d_grad_input(v(0), v(1), v(2).draws, conv()); return true;
    case Op::Conv2dGradWeight: out = k::conv2d_grad_weight(v(0), v(1), v(2).draws, conv()); return true;
    case Op::PoolGrad: out = k::pool2d_grad(n.name, v(0), v(1), pool()); return true;
    default: return false;
  }
}

}  // namespace fvic::ir
