#include "ir/interpret.h"

#include "fvi/kernel/random.h"
#ifdef FVIC_KERNELS_FROM_LIBFVI
// The kernel operations libfvi instantiates once (instances.cpp), declared `extern template`:
// instantiated here again they took this file 153 s to compile, against 41 s.
#include "fvi/kernel/instances.h"
#include "fvi/kernel/machine_instances.h"
#endif

#include <stdexcept>

namespace fvic::ir {

namespace k = fvi::kernel;

namespace {
// A Conv2d's or Pool's geometry, from its ints (ir.h).
k::ConvGeometry conv_geometry(const Node& n) {
  return {Eigen::Index(n.ints.at(0)), Eigen::Index(n.ints.at(1)), Eigen::Index(n.ints.at(2)), Eigen::Index(n.ints.at(3)),
          Eigen::Index(n.ints.at(4))};
}
k::PoolGeometry pool_geometry(const Node& n) {
  return {Eigen::Index(n.ints.at(0)), Eigen::Index(n.ints.at(1)), Eigen::Index(n.ints.at(2)), Eigen::Index(n.ints.at(3))};
}
}  // namespace

long long Interpreter::size_of(const SymSize& s, const Bindings& b) const {
  auto v = s.eval([&](const std::string& name) -> std::optional<long long> {
    auto it = b.data.find(name);
    if (it == b.data.end() || it->second.size() != 1) return std::nullopt;
    return static_cast<long long>(it->second.m(0, 0));
  });
  if (!v) throw std::invalid_argument("the size " + s.str() + " is not known from the data");
  return *v;
}

const RealTensor& Interpreter::forward(const Bindings& b) {
  values_.assign(f_.nodes.size(), RealTensor());
  indices_.assign(f_.nodes.size(), k::IntVec());
  for (int i = 0; i < f_.forward_end; ++i) eval(i, b, nullptr);
  return values_[f_.output];
}

std::map<std::string, RealTensor> Interpreter::backward(const Bindings& b, const std::vector<RealTensor>& seeds) {
  next_seed_ = 0;
  for (int i = f_.forward_end; i < static_cast<int>(f_.nodes.size()); ++i) eval(i, b, &seeds);
  std::map<std::string, RealTensor> grads;
  for (const auto& [input, adjoint] : f_.input_adjoints) {
    const Node& n = f_.nodes[input];
    const Group* g = module_.group(n.group);
    const std::string name = fvi_group_name(n.group);
    long long total = size_of(g->size, b);
    auto it = grads.find(name);
    if (it == grads.end()) {
      long long draws = b.inputs.at(name).draws;
      it = grads.emplace(name, RealTensor(total, 1, draws)).first;
    }
    k::add_to_slice(it->second, values_[adjoint], size_of(n.offset, b));
  }
  return grads;
}

void Interpreter::eval(int i, const Bindings& b, const std::vector<RealTensor>* seeds) {
  const Node& n = f_.nodes[i];
  auto v = [&](size_t a) -> const RealTensor& { return values_[n.args[a]]; };
  RealTensor& out = values_[i];
  switch (n.op) {
    case Op::Input:
      out = k::slice(b.inputs.at(fvi_group_name(n.group)), size_of(n.offset, b), size_of(n.rows, b), size_of(n.cols, b));
      return;
    case Op::Tangent:
      out = k::slice(b.tangents.at(fvi_group_name(n.group)), size_of(n.offset, b), size_of(n.rows, b), size_of(n.cols, b));
      return;
    case Op::Data:
    case Op::Index: {
      RealTensor full;
      if (n.range) {
        indices_[i] = k::range_index(size_of(n.first, b), size_of(n.last, b));
        return;
      }
      if (n.name.empty()) {
        indices_[i] = k::IntVec(static_cast<Eigen::Index>(n.ints.size()));
        for (size_t j = 0; j < n.ints.size(); ++j) indices_[i][j] = n.ints[j];
        return;
      }
      full = b.data.at(n.name);
      if (n.batched && b.batch_count >= 0) {
        RealTensor part(b.batch_count, full.cols, 1);
        part.m = full.m.middleRows(b.batch_begin, b.batch_count);
        full = part;
      }
      if (n.op == Op::Data) {
        out = full;
      } else {
        indices_[i] = full.m.col(0).cast<int64_t>();
      }
      return;
    }
    case Op::Const: out = RealTensor::constant(n.value); return;
    case Op::Seed: out = (*seeds).at(next_seed_++); return;
    case Op::Mean:
    case Op::Sd:
    case Op::Noise:
      throw std::invalid_argument("the interpreter evaluates factors from draws, not their mean-field variants");
    case Op::Unary: out = k::unary(n.name, v(0)); return;
    case Op::Neg: out = k::neg(v(0)); return;
    case Op::Add: out = k::add(v(0), v(1)); return;
    case Op::Sub: out = k::sub(v(0), v(1)); return;
    case Op::Mul: out = k::mul(v(0), v(1)); return;
    case Op::Div: out = k::div(v(0), v(1)); return;
    case Op::Pow: out = k::pow(v(0), v(1)); return;
    case Op::Compare: out = k::compare(n.name, v(0), v(1)); return;
    case Op::Select: out = k::select(v(0), v(1), v(2)); return;
    case Op::Reduce: out = k::reduce(n.name, v(0)); return;
    case Op::MatMul: out = k::matmul(v(0), v(1)); return;
    case Op::Transpose: out = k::transpose(v(0)); return;
    case Op::Reshape: out = k::reshape(v(0), size_of(n.rows, b), size_of(n.cols, b)); return;
    case Op::Sum: out = k::sum(v(0)); return;
    case Op::RowsDotProduct: out = k::rows_dot_product(v(0), v(1)); return;
    case Op::Broadcast:
      if (n.args.size() == 2) out = k::broadcast(v(0), v(1).rows, v(1).cols);
      else out = k::broadcast(v(0), size_of(n.rows, b), size_of(n.cols, b));
      return;
    case Op::LogSoftmax: out = k::log_softmax(v(0)); return;
    case Op::Softmax: out = k::softmax(v(0)); return;
    case Op::CumulativeSum: out = k::cumulative_sum(v(0)); return;
    case Op::Cholesky: out = k::cholesky(v(0)); return;
    case Op::Inverse: out = k::inverse(v(0)); return;
    case Op::MatrixConstrain: out = k::matrix_constrain(n.name, v(0), size_of(n.cols, b)); return;
    case Op::MatrixLogJacobian: out = k::matrix_log_jacobian(n.name, v(0)); return;
    case Op::SquaredDistances: out = k::squared_distances(v(0)); return;
    case Op::DiagMatrix: out = k::diag_matrix(v(0)); return;
    case Op::Diagonal: out = k::diagonal(v(0)); return;
    case Op::IndexRows: out = k::index_rows(v(0), indices_[n.args[1]]); return;
    case Op::IndexCols: out = k::index_cols(v(0), indices_[n.args[1]]); return;
    case Op::ConcatRows: out = k::concat_rows(v(0), v(1)); return;
    case Op::ConcatCols: out = k::concat_cols(v(0), v(1)); return;
    case Op::Conv2d: out = k::conv2d(v(0), v(1), conv_geometry(n)); return;
    case Op::Pool:
      out = n.args.size() == 2 ? k::max_pool2d_select(v(0), v(1), pool_geometry(n)) : k::pool2d(n.name, v(0), pool_geometry(n));
      return;
    case Op::Conv2dGradInput: out = k::conv2d_grad_input(v(0), v(1), v(2).draws, conv_geometry(n)); return;
    case Op::Conv2dGradWeight: out = k::conv2d_grad_weight(v(0), v(1), v(2).draws, conv_geometry(n)); return;
    case Op::PoolGrad: out = k::pool2d_grad(n.name, v(0), v(1), pool_geometry(n)); return;
    case Op::Lpdf: {
      k::Operands<double> xs;
      for (int a : n.args) xs.push_back(&values_[a]);
      out = k::lpdf(n.name, xs);
      return;
    }
    case Op::Rng: {
      k::Operands<double> xs;
      for (int a : n.args) xs.push_back(&values_[a]);
      long long draws = 1;
      for (const auto& [group, value] : b.inputs) draws = std::max<long long>(draws, value.draws);
      out = k::random_draws<double>(n.name, xs, size_of(n.rows, b), size_of(n.cols, b), draws, b.noise_key, uint32_t(n.k));
      return;
    }
    case Op::UnaryDerivative: out = k::unary_derivative(n.name, v(0), v(1)); return;
    case Op::SumTo: out = k::sum_like(v(0), v(1)); return;
    case Op::MatMulGradLeft: out = k::matmul_grad_left(v(0), v(1), v(2).draws); return;
    case Op::MatMulGradRight: out = k::matmul_grad_right(v(0), v(1), v(2).draws); return;
    case Op::ScatterRows: out = k::scatter_rows(v(0), indices_[n.args[1]], v(2).rows); return;
    case Op::ScatterCols: out = k::scatter_cols(v(0), indices_[n.args[1]], v(2).cols); return;
    case Op::LogSoftmaxGrad: out = k::log_softmax_grad(v(0), v(1)); return;
    case Op::SoftmaxGrad: out = k::softmax_grad(v(0), v(1)); return;
    case Op::CumulativeSumGrad: out = k::cumulative_sum_grad(v(0)); return;
    case Op::CholeskyGrad: out = k::cholesky_grad(v(0), v(1)); return;
    case Op::InverseGrad: out = k::inverse_grad(v(0), v(1)); return;
    case Op::MatrixConstrainGrad: out = k::matrix_constrain_grad(n.name, v(0), v(1)); return;
    case Op::MatrixLogJacobianGrad: out = k::matrix_log_jacobian_grad(n.name, v(0), v(1)); return;
    case Op::Program: {
      std::vector<const RealTensor*> operands;
      std::vector<bool> active;
      for (int a : n.args) operands.push_back(&values_[a]), active.push_back(f_.nodes[a].active);
      long long draws = 1;
      for (const auto& [group, value] : b.inputs) draws = std::max<long long>(draws, value.draws);
      machines_[i].set_random(b.noise_key, draws);
      out = machines_[i].run(module_.programs.at(static_cast<size_t>(n.k)), operands, active);
      return;
    }
    case Op::ProgramVjp: out = machines_.at(n.args[1]).operand_gradient(v(0), static_cast<size_t>(n.k)); return;
    case Op::ConcatRowsPart: out = k::concat_rows_part(v(0), v(1).rows, n.k); return;
    case Op::ConcatColsPart: out = k::concat_cols_part(v(0), v(1).cols, n.k); return;
    case Op::LpdfVjp: {
      k::Operands<double> xs;
      for (size_t a = 1; a < n.args.size(); ++a) xs.push_back(&values_[n.args[a]]);
      out = k::lpdf_vjp(n.name, static_cast<size_t>(n.k), v(0), xs);
      return;
    }
  }
}

}  // namespace fvic::ir
