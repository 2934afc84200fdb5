#include "ir/ir.h"

#include <sstream>

namespace fvic::ir {

const char* op_name(Op op) {
  switch (op) {
    case Op::Input: return "input";
    case Op::Data: return "data";
    case Op::Index: return "index";
    case Op::Const: return "const";
    case Op::Seed: return "seed";
    case Op::Tangent: return "tangent";
    case Op::Mean: return "mean";
    case Op::Sd: return "sd";
    case Op::Noise: return "noise";
    case Op::Unary: return "unary";
    case Op::Neg: return "neg";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Pow: return "pow";
    case Op::Compare: return "compare";
    case Op::Select: return "select";
    case Op::Reduce: return "reduce";
    case Op::MatMul: return "matmul";
    case Op::Transpose: return "transpose";
    case Op::Reshape: return "reshape";
    case Op::Sum: return "sum";
    case Op::RowsDotProduct: return "rows_dot_product";
    case Op::Broadcast: return "broadcast";
    case Op::LogSoftmax: return "log_softmax";
    case Op::Softmax: return "softmax";
    case Op::CumulativeSum: return "cumulative_sum";
    case Op::IndexRows: return "index_rows";
    case Op::IndexCols: return "index_cols";
    case Op::ConcatRows: return "concat_rows";
    case Op::ConcatCols: return "concat_cols";
    case Op::Cholesky: return "cholesky";
    case Op::Inverse: return "inverse";
    case Op::MatrixConstrain: return "matrix_constrain";
    case Op::MatrixLogJacobian: return "matrix_log_jacobian";
    case Op::SquaredDistances: return "squared_distances";
    case Op::DiagMatrix: return "diag_matrix";
    case Op::Diagonal: return "diagonal";
    case Op::Conv2d: return "conv2d";
    case Op::Pool: return "pool2d";
    case Op::Lpdf: return "lpdf";
    case Op::Rng: return "rng";
    case Op::UnaryDerivative: return "unary_derivative";
    case Op::SumTo: return "sum_to";
    case Op::MatMulGradLeft: return "matmul_grad_left";
    case Op::MatMulGradRight: return "matmul_grad_right";
    case Op::ScatterRows: return "scatter_rows";
    case Op::ScatterCols: return "scatter_cols";
    case Op::LogSoftmaxGrad: return "log_softmax_grad";
    case Op::SoftmaxGrad: return "softmax_grad";
    case Op::CumulativeSumGrad: return "cumulative_sum_grad";
    case Op::LpdfVjp: return "lpdf_vjp";
    case Op::ConcatRowsPart: return "concat_rows_part";
    case Op::ConcatColsPart: return "concat_cols_part";
    case Op::CholeskyGrad: return "cholesky_grad";
    case Op::InverseGrad: return "inverse_grad";
    case Op::MatrixConstrainGrad: return "matrix_constrain_grad";
    case Op::MatrixLogJacobianGrad: return "matrix_log_jacobian_grad";
    case Op::Program: return "program";
    case Op::ProgramVjp: return "program_vjp";
    case Op::Conv2dGradInput: return "conv2d_grad_input";
    case Op::Conv2dGradWeight: return "conv2d_grad_weight";
    case Op::PoolGrad: return "pool2d_grad";
  }
  return "?";
}

const char* factor_kind_name(FactorKind kind) {
  switch (kind) {
    case FactorKind::Density: return "density";
    case FactorKind::Likelihood: return "likelihood";
    case FactorKind::Contribution: return "contribution";
    case FactorKind::Elements: return "elements";
    case FactorKind::Quantity: return "quantity";
  }
  return "?";
}

const Group* Module::group(fvi_group kind) const {
  for (const Group& g : groups)
    if (g.kind == kind) return &g;
  return nullptr;
}

namespace {

std::string describe(const Node& n) {
  std::ostringstream s;
  s << op_name(n.op);
  if (n.op == Op::Input || n.op == Op::Mean || n.op == Op::Sd) s << ' ' << fvi_group_name(n.group);
  if (!n.name.empty()) s << ' ' << n.name;
  if (n.op == Op::Const) s << ' ' << n.value;
  if (n.op == Op::LpdfVjp || n.op == Op::ConcatRowsPart || n.op == Op::ConcatColsPart) s << " operand " << n.k;
  if (n.op == Op::Rng) s << " stream " << n.k;
  if (n.op == Op::Program) s << " #" << n.k;
  if (n.op == Op::ProgramVjp) s << " operand " << n.k;
  if (n.op == Op::Input || n.op == Op::Mean || n.op == Op::Sd) s << " @" << n.offset.str();
  if (n.op == Op::Noise) s << " stream " << n.k;
  if (n.range) s << ' ' << n.first.str() << ':' << n.last.str();
  if (!n.ints.empty()) {
    s << " {";
    for (size_t i = 0; i < n.ints.size(); ++i) s << (i ? "," : "") << n.ints[i];
    s << '}';
  }
  for (size_t i = 0; i < n.args.size(); ++i) s << (i ? ", %" : " %") << n.args[i];
  s << "  : " << n.rows.str() << " x " << n.cols.str() << (n.varies ? ", S draws" : "");
  if (n.batched) s << ", batched";
  return s.str();
}

}  // namespace

Node derived_node(const Factor& f, Op op, std::vector<int> args, int like, const std::string& name, int k) {
  Node n{op};
  n.args = std::move(args);
  n.name = name;
  n.k = k;
  n.rows = f.nodes[size_t(like)].rows;
  n.cols = f.nodes[size_t(like)].cols;
  for (int a : n.args) n.varies |= f.nodes[size_t(a)].varies;
  return n;
}

std::string dump(const Module& m) {
  std::ostringstream out;
  out << "module " << m.model << '\n';
  for (const Group& g : m.groups) {
    out << "  group " << fvi_group_name(g.kind) << " (" << g.size.str() << (g.varies ? ", S draws" : ", point estimate") << "):";
    for (const Slot& s : g.slots) {
      out << ' ' << s.variable << "@" << s.offset.str();
      if (!s.prior_scale.empty()) out << " [prior scale " << s.prior_scale << "]";
      if (s.class_shift) out << (s.class_shift == 1 ? " [class shift: rows]" : " [class shift: all]");
      for (size_t i = 0; i < s.centring.size(); ++i)
        out << (i == 0 ? " [centred: " : " + ") << s.centring[i].first
            << (s.centring[i].second.empty() ? "" : " * " + s.centring[i].second)
            << (i + 1 == s.centring.size() ? (s.centring_group.empty() ? "]" : " by " + s.centring_group + "]") : "");
    }
    out << '\n';
  }
  std::vector<const Factor*> all;
  for (const Factor& f : m.factors) all.push_back(&f);
  for (const Factor& f : m.quantities) all.push_back(&f);
  for (const Factor* fp : all) {
    const Factor& f = *fp;
    out << "  factor " << f.name << " (" << factor_kind_name(f.kind) << ", " << term_owner_name(f.owner) << ")";
    if (!f.distribution.empty()) out << " " << f.distribution << " over " << f.rows.str() << " rows";
    if (!f.local_index.empty()) out << ", local element per row: " << f.local_index;
    if (f.aggregate) out << ", summed over silos by the server";
    out << '\n';
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      if (static_cast<int>(i) == f.forward_end && f.forward_end < static_cast<int>(f.nodes.size()))
        out << "    -- adjoint\n";
      out << "    %" << i << " = " << describe(f.nodes[i]) << '\n';
    }
    out << "    output %" << f.output << '\n';
    for (const Node& n : f.nodes)
      if (n.op == Op::Program && n.k >= 0 && static_cast<size_t>(n.k) < m.programs.size())
        out << "    program #" << n.k << ": " << m.programs[n.k].code.size() << " instructions, "
            << m.programs[n.k].registers << " registers\n";
    for (const auto& [input, adjoint] : f.input_adjoints)
      out << "    d/d %" << input << " (" << fvi_group_name(f.nodes[input].group) << ") = %" << adjoint << '\n';
    // The mean-field variant, where it differs: which products it samples locally.
    size_t index = static_cast<size_t>(&f - m.factors.data());
    if (f.kind != FactorKind::Quantity && index < m.meanfield.size())
      for (const Node& n : m.meanfield[index].nodes)
        if (n.op == Op::Noise)
          out << "    meanfield: local reparameterisation of the product of %" << n.ints.at(0) << " and %"
              << n.ints.at(1) << " (" << n.rows.str() << " x " << n.cols.str() << ", noise stream " << n.k << ")\n";
  }
  return out.str();
}

}  // namespace fvic::ir
