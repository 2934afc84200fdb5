// The C++ backend (emitter.h) on kernel bodies: each factor's class (forward, backward and the
// arguments of a likelihood) and each quantity's, their data bound in the constructor and data
// transforms hoisted there, how a node's value is named, one statement per node and fused chains
// (fuse.h) as one loop each. The mean-field passes are emit_meanfield.cpp's.
#include "backend/cpp/emitter.h"

#include <algorithm>
#include <stdexcept>

#include "backend/fuse.h"
#include "fvi/kernel/ops.h"

namespace fvic::backend::emit_detail {

namespace {

// A unary function as the fused loops name it: fvi::kernel::UnaryFn, whose enumerators are the
// functions' names (unary_fn throws for a name the kernels do not have).
std::string unary_fn(const std::string& name) {
  return std::string("UnaryFn::") + fvi::kernel::unary_name(fvi::kernel::unary_fn(name));
}

// A Conv2d's or Pool's geometry as a brace initialiser of fvi::kernel::ConvGeometry/PoolGeometry.
std::string geometry(const std::string& type, const Node& n) {
  std::string s = type + "{";
  for (size_t k = 0; k < n.ints.size(); ++k) s += (k ? ", " : "") + std::to_string(n.ints[k]);
  return s + "}";
}

}  // namespace

// ---- kernel bodies -------------------------------------------------------------------------

// The bound tensor of a batched data node or of a hoisted data transform (fuse.h
// hoisted_data): data_x, hoisted_square_x_ (no data variable's member can take that name);
// empty for any other node.
std::string Emitter::bound_rows(const ir::Factor& f, int k) {
  const Node& n = f.nodes[k];
  if (n.op == Op::Data && n.batched) return "data_" + n.name;
  if (hoisted_data(f, k)) return "hoisted_" + n.name + "_" + f.nodes[n.args[0]].name + "_";
  return "";
}

// Whether batched rows node k (bound_rows) is read in place as a block of rows of the bound
// tensor (fvi::kernel::row_block), never copied: when it only feeds products (fuse.h).
bool Emitter::rows_read_in_place(const ir::Factor& f, int k) {
  return !bound_rows(f, k).empty() && only_feeds_products(f, k);
}

// How generated code names node k's value. Data are read in place: a non-batched one is the
// bound tensor itself, a batched one (or a hoisted transform of one) too on a full-data call
// (full_), else its minibatch copy, or, when it only feeds products, a block of the bound
// tensor's rows.
std::string Emitter::ref(const ir::Factor& f, int k, bool meanfield) const {
  const Node& n = f.nodes[k];
  const std::string own = (meanfield ? "w_[" : "v_[") + std::to_string(k) + "]";
  if (n.op == Op::Data && !n.batched) return "data_" + n.name;
  const std::string bound = bound_rows(f, k);
  if (bound.empty()) return own;
  if (rows_read_in_place(f, k)) return "row_block(" + bound + ", begin_, count_)";
  return "(full_ ? " + bound + " : " + own + ")";
}

// The hoisted data transforms of a factor's passes: member name -> its statement in the
// constructor, computed from the bound data.
std::map<std::string, std::string> Emitter::hoisted_transforms(const std::vector<const ir::Factor*>& passes) {
  std::map<std::string, std::string> out;
  for (const ir::Factor* f : passes)
    for (size_t k = 0; k < f->nodes.size(); ++k)
      if (hoisted_data(*f, int(k)))
        out[bound_rows(*f, int(k))] = "unary(" + quoted(f->nodes[k].name) + ", data_" +
                                      f->nodes[f->nodes[k].args[0]].name + ")";
  return out;
}

// The statements of nodes [begin, end) of f, fused chains (fuse.h) as one loop each.
void Emitter::statements(std::ostringstream& o, const ir::Factor& f, int begin, int end, bool meanfield) {
  FusionPlan plan = plan_fusion(f, begin, end, pinned_nodes(f));
  for (const Step& step : schedule(plan, begin, end)) {
    if (step.chain >= 0) fused_chain(o, f, plan.chains[step.chain], meanfield);
    else o << "    " << statement(f, step.node, meanfield) << '\n';
  }
}

// One fused chain as a call of fvi::kernel::fused with a body computing each member's block.
void Emitter::fused_chain(std::ostringstream& o, const ir::Factor& f, const FusedChain& chain, bool meanfield) {
  auto member = [&](int node) { return int(std::find(chain.nodes.begin(), chain.nodes.end(), node) - chain.nodes.begin()); };
  auto leaf = [&](int node) { return int(std::find(chain.leaves.begin(), chain.leaves.end(), node) - chain.leaves.begin()); };
  auto in_chain = [&](int node) { return member(node) < int(chain.nodes.size()); };
  auto array = [&](int node) {  // an operand's block as an Eigen array
    return in_chain(node) ? "b.value(" + std::to_string(member(node)) + ")" : "b.leaf(" + std::to_string(leaf(node)) + ")";
  };
  auto pointer = [&](int node) {
    return in_chain(node) ? "b.node_ptr[" + std::to_string(member(node)) + "]"
                          : "b.leaf_ptr[" + std::to_string(leaf(node)) + "]";
  };
  std::string leaves, outs, out_of_node;
  for (int l : chain.leaves) leaves += (leaves.empty() ? "&" : ", &") + ref(f, l, meanfield);
  int written = 0;
  for (int m : chain.nodes) {
    bool escapes = chain.escaping.count(m) > 0;
    if (escapes) outs += (outs.empty() ? "&" : ", &") + ref(f, m, meanfield);
    out_of_node += (out_of_node.empty() ? "" : ", ") + std::to_string(escapes ? written++ : -1);
  }
  o << "    // nodes";
  for (int m : chain.nodes) o << ' ' << m;
  o << ": one fused loop\n";
  o << "    fused<Real>({" << leaves << "}, {" << outs << "}, {" << out_of_node << "}, [&](const FusedBlock<Real>& b) {\n";
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const Node& n = f.nodes[chain.nodes[k]];
    const std::string dst = "b.node(" + std::to_string(k) + ")", out = "b.node_ptr[" + std::to_string(k) + "]";
    auto a = [&](size_t j) { return array(n.args[j]); };
    auto p = [&](size_t j) { return pointer(n.args[j]); };
    std::string line;
    switch (n.op) {
      case Op::Add: line = dst + " = " + a(0) + " + " + a(1) + ";"; break;
      case Op::Sub: line = dst + " = " + a(0) + " - " + a(1) + ";"; break;
      case Op::Mul: line = dst + " = " + a(0) + " * " + a(1) + ";"; break;
      case Op::Div: line = dst + " = " + a(0) + " / " + a(1) + ";"; break;
      case Op::Pow: line = dst + " = " + a(0) + ".pow(" + a(1) + ");"; break;
      case Op::Neg: line = dst + " = -" + a(0) + ";"; break;
      case Op::Unary: line = "unary_block<Real>(" + unary_fn(n.name) + ", " + p(0) + ", b.n, " + out + ");"; break;
      case Op::UnaryDerivative:
        line = "unary_derivative_block<Real>(" + unary_fn(n.name) + ", " + p(0) + ", " + p(1) + ", b.n, " + out + ");";
        break;
      case Op::Lpdf: {
        std::string ops;
        for (size_t j = 0; j < n.args.size(); ++j) ops += (j ? ", " : "") + p(j);
        line = "lpdf_block<Real>(" + quoted(n.name) + ", {" + ops + "}, b.n, " + out + ");";
        break;
      }
      case Op::LpdfVjp: {
        std::string ops;
        for (size_t j = 1; j < n.args.size(); ++j) ops += (j > 1 ? ", " : "") + p(j);
        line = "lpdf_vjp_block<Real>(" + quoted(n.name) + ", " + std::to_string(n.k) + ", " + p(0) + ", {" + ops +
               "}, b.n, " + out + ");";
        break;
      }
      default: line = "// ?"; break;
    }
    o << "      " << line << "  // " << (meanfield ? "w_[" : "v_[") << chain.nodes[k] << "]\n";
  }
  o << "    });\n";
}

// A batched rows node (bound_rows): a comment when read in place, else its minibatch's copy.
std::string Emitter::rows_statement(const ir::Factor& f, size_t i, const std::string& vals) {
  const std::string bound = bound_rows(f, int(i)), own = vals + std::to_string(i) + "]";
  if (rows_read_in_place(f, int(i))) return "// " + own + " is rows of " + bound + ", read in place";
  return "if (!full_) batch_rows_into(" + bound + ", begin, count, " + own + ");";
}

// forward or backward node i as one statement.
// In a mean-field variant (`meanfield`) values live in w_ and inputs are the sampled theta_.
std::string Emitter::statement(const ir::Factor& f, size_t i, bool meanfield) {
  const Node& n = f.nodes[i];
  const std::string vals = meanfield ? "w_[" : "v_[";
  auto v = [&](size_t k) { return ref(f, n.args[k], meanfield); };
  auto ix = [&](size_t k) { return "ix_[" + std::to_string(n.args[k]) + "]"; };
  std::string target = vals + std::to_string(i) + "] = ";
  if (hoisted_data(f, int(i))) return rows_statement(f, i, vals);
  auto slot_of = [&](fvi_group group) {
    return std::to_string(std::find(f.groups.begin(), f.groups.end(), group) - f.groups.begin());
  };
  auto call = [&](const std::string& fn, std::vector<std::string> args) {
    std::string s = target + fn + "(";
    for (size_t k = 0; k < args.size(); ++k) s += (k ? ", " : "") + args[k];
    return s + ");";
  };
  switch (n.op) {
    case Op::Input: {
      std::string in = (meanfield ? "theta_[" : "in_[") + slot_of(n.group) + "]";
      // z_sum holds the summed contributions of the batch's rows: as many rows as were passed.
      if (n.group == FVI_GROUP_Z_SUM) return call("slice", {in, "0", in + ".size()", "1"});
      return call("slice", {in, meanfield ? compact_offset(f, i) : sizes_(n.offset), sizes_(n.rows), sizes_(n.cols)});
    }
    case Op::Mean:
      return call("slice<Real>", {"mean_[" + slot_of(n.group) + "]", sizes_(n.offset), sizes_(n.rows), sizes_(n.cols)});
    case Op::Sd:
      return call("slice<Real>", {"sd_[" + slot_of(n.group) + "]", sizes_(n.offset), sizes_(n.rows), sizes_(n.cols)});
    case Op::Noise: {
      std::string rows = v(0) + ".rows";
      std::string first = n.batched ? "count < 0 ? 0 : begin" : "0";
      std::string total = n.batched ? sizes_(f.rows) : rows;
      return call("noise<Real>", {rows, sizes_(n.cols), "draws_", "key_", std::to_string(n.k) + "u", first, total});
    }
    case Op::Data:  // read in place (ref) unless a minibatch of it is needed
      if (!n.batched) return "// " + vals + std::to_string(i) + "] is data_" + n.name;
      return rows_statement(f, i, vals);
    case Op::Index: {
      std::string t = "ix_[" + std::to_string(i) + "] = ";
      if (n.range) return t + "range_index(" + sizes_(n.first) + ", " + sizes_(n.last) + ");";
      if (n.name.empty()) {
        std::string s = t + "IntVec(" + std::to_string(n.ints.size()) + "); ix_[" + std::to_string(i) + "] << ";
        for (size_t k = 0; k < n.ints.size(); ++k) s += (k ? ", " : "") + std::to_string(n.ints[k]);
        return s + ";";
      }
      return t + "batch_index(data_" + n.name + ", " + (n.batched ? "begin, count" : "0, -1") + ");";
    }
    case Op::Const: return target + "Tensor<Real>::constant(" + number(n.value) + ");";
    case Op::Seed: {
      int k = static_cast<int>(std::find(f.seeds.begin(), f.seeds.end(), static_cast<int>(i)) - f.seeds.begin());
      int like = k == 0 ? f.output : f.arguments[k - 1];
      return "assign_seed(seeds, " + std::to_string(k) + ", " + ref(f, like, meanfield) + ", " + vals +
             std::to_string(i) + "]);";
    }
    case Op::Unary: return call("unary", {quoted(n.name), v(0)});
    case Op::Neg: return call("neg", {v(0)});
    case Op::Add: return call("add", {v(0), v(1)});
    case Op::Sub: return call("sub", {v(0), v(1)});
    case Op::Mul: return call("mul", {v(0), v(1)});
    case Op::Div: return call("div", {v(0), v(1)});
    case Op::Pow: return call("fvi::kernel::pow", {v(0), v(1)});
    case Op::Compare: return call("compare", {quoted(n.name), v(0), v(1)});
    case Op::Select: return call("select", {v(0), v(1), v(2)});
    case Op::Reduce: return call("reduce", {quoted(n.name), v(0)});
    case Op::MatMul: return call("matmul", {v(0), v(1)});
    case Op::Transpose: return call("transpose", {v(0)});
    case Op::Reshape: return call("reshape", {v(0), sizes_(n.rows), sizes_(n.cols)});
    case Op::Sum: return call("sum", {v(0)});
    case Op::RowsDotProduct: return call("rows_dot_product", {v(0), v(1)});
    case Op::Broadcast:
      if (n.args.size() == 2) return call("broadcast", {v(0), v(1) + ".rows", v(1) + ".cols"});
      return call("broadcast", {v(0), sizes_(n.rows), sizes_(n.cols)});
    case Op::LogSoftmax: return call("log_softmax", {v(0)});
    case Op::Softmax: return call("softmax", {v(0)});
    case Op::CumulativeSum: return call("cumulative_sum", {v(0)});
    case Op::Cholesky: return call("cholesky", {v(0)});
    case Op::Inverse: return call("inverse", {v(0)});
    case Op::MatrixConstrain: return call("matrix_constrain", {quoted(n.name), v(0), sizes_(n.cols)});
    case Op::MatrixLogJacobian: return call("matrix_log_jacobian", {quoted(n.name), v(0)});
    case Op::SquaredDistances: return call("squared_distances", {v(0)});
    case Op::DiagMatrix: return call("diag_matrix", {v(0)});
    case Op::Diagonal: return call("diagonal", {v(0)});
    case Op::IndexRows: return call("index_rows", {v(0), ix(1)});
    case Op::IndexCols: return call("index_cols", {v(0), ix(1)});
    case Op::ConcatRows: return call("concat_rows", {v(0), v(1)});
    case Op::ConcatCols: return call("concat_cols", {v(0), v(1)});
    case Op::Conv2d: return call("conv2d", {v(0), v(1), geometry("ConvGeometry", n)});
    case Op::Pool:
      if (n.args.size() == 2) return call("max_pool2d_select", {v(0), v(1), geometry("PoolGeometry", n)});
      return call("pool2d", {quoted(n.name), v(0), geometry("PoolGeometry", n)});
    case Op::Conv2dGradInput: return call("conv2d_grad_input", {v(0), v(1), v(2) + ".draws", geometry("ConvGeometry", n)});
    case Op::Conv2dGradWeight: return call("conv2d_grad_weight", {v(0), v(1), v(2) + ".draws", geometry("ConvGeometry", n)});
    case Op::PoolGrad: return call("pool2d_grad", {quoted(n.name), v(0), v(1), geometry("PoolGeometry", n)});
    case Op::Lpdf: {
      std::string ops = "{";
      for (size_t k = 0; k < n.args.size(); ++k) ops += (k ? ", &" : "&") + v(k);
      return call("lpdf<Real>", {quoted(n.name), ops + "}"});
    }
    case Op::Rng: {
      std::string ops = "{";
      for (size_t k = 0; k < n.args.size(); ++k) ops += (k ? ", &" : "&") + v(k);
      return call("random_draws<Real>", {quoted(n.name), ops + "}", sizes_(n.rows), sizes_(n.cols), "draws_", "key_",
                                   std::to_string(n.k)});
    }
    case Op::Program: {
      std::string ops = "{", active = "{";
      for (size_t k = 0; k < n.args.size(); ++k) {
        ops += (k ? ", &" : "&") + v(k);
        active += std::string(k ? ", " : "") + (f.nodes[n.args[k]].active ? "true" : "false");
      }
      const std::string machine = "machine_[" + std::to_string(meanfield ? -1 - int(i) : int(i)) + "]";
      return machine + ".set_random(key_, draws_); " + target + machine + ".run(program_" +
             std::to_string(n.k) + "(), " + ops + "}, " + active + "});";
    }
    case Op::ProgramVjp:
      return target + "machine_.at(" + std::to_string(meanfield ? -1 - n.args[1] : n.args[1]) + ").operand_gradient(" +
             v(0) + ", " + std::to_string(n.k) + ");";
    case Op::UnaryDerivative: return call("unary_derivative", {quoted(n.name), v(0), v(1)});
    case Op::SumTo: return call("sum_like", {v(0), v(1)});
    case Op::MatMulGradLeft: return call("matmul_grad_left", {v(0), v(1), v(2) + ".draws"});
    case Op::MatMulGradRight: return call("matmul_grad_right", {v(0), v(1), v(2) + ".draws"});
    case Op::ScatterRows: return call("scatter_rows", {v(0), ix(1), v(2) + ".rows"});
    case Op::ScatterCols: return call("scatter_cols", {v(0), ix(1), v(2) + ".cols"});
    case Op::LogSoftmaxGrad: return call("log_softmax_grad", {v(0), v(1)});
    case Op::SoftmaxGrad: return call("softmax_grad", {v(0), v(1)});
    case Op::CumulativeSumGrad: return call("cumulative_sum_grad", {v(0)});
    case Op::CholeskyGrad: return call("cholesky_grad", {v(0), v(1)});
    case Op::InverseGrad: return call("inverse_grad", {v(0), v(1)});
    case Op::MatrixConstrainGrad: return call("matrix_constrain_grad", {quoted(n.name), v(0), v(1)});
    case Op::MatrixLogJacobianGrad: return call("matrix_log_jacobian_grad", {quoted(n.name), v(0), v(1)});
    case Op::ConcatRowsPart: return call("concat_rows_part", {v(0), v(1) + ".rows", std::to_string(n.k)});
    case Op::ConcatColsPart: return call("concat_cols_part", {v(0), v(1) + ".cols", std::to_string(n.k)});
    case Op::Tangent:  // tangent factors (transform/tangent.h) are interpreted, not emitted yet
      throw std::logic_error("the C++ backend emits no Jacobian-vector products yet (factor " + f.name + ")");
    case Op::LpdfVjp: {
      std::string ops = "{";
      for (size_t k = 1; k < n.args.size(); ++k) ops += (k > 1 ? ", &" : "&") + v(k);
      return call("lpdf_vjp<Real>", {quoted(n.name), std::to_string(n.k), v(0), ops + "}"});
    }
  }
  return "// ?";
}

void Emitter::factor(std::ostringstream& o, const ir::Factor& f, size_t index) {
  const ir::Factor& mf = m_.meanfield.at(index);
  std::string cls = "Factor_" + f.name;
  o << "// " << f.name << ": " << ir::factor_kind_name(f.kind) << " evaluated by " << term_owner_name(f.owner);
  if (!f.distribution.empty()) o << "; " << f.distribution << " over " << f.rows.str() << " rows";
  o << "\ntemplate <class Real>\nclass " << cls << " final : public Factor, Sizes {\n public:\n";
  o << "  explicit " << cls << "(const fvi_data* data) : Sizes(data) {\n";
  bind_data(o, f);
  const std::map<std::string, std::string> hoisted = hoisted_transforms({&f, &mf});
  if (!hoisted.empty()) o << "    // data transforms, computed once: their minibatches are rows of these\n";
  for (const auto& [member, value] : hoisted) o << "    " << member << " = " << value << ";\n";
  o << "  }\n\n";
  o << "  void forward(int64_t begin, int64_t count, const fvi_tensor* inputs) override {\n";
  o << "    meanfield_ = false;\n    full_ = count < 0;\n    begin_ = begin, count_ = count;\n";
  for (size_t g = 0; g < f.groups.size(); ++g)
    o << "    assign_from_abi(inputs[" << g << "], in_[" << g << "]);\n";
  statements(o, f, 0, f.forward_end, false);
  o << "  }\n\n";
  o << "  fvi_tensor output() override {\n    return export_abi(meanfield_ ? " << ref(mf, mf.output, true) << " : "
    << ref(f, f.output, false) << ", exported_[0]);\n  }\n\n";
  if (f.outcome >= 0) {
    o << "  void arguments(fvi_tensor* values) override {\n";
    o << "    values[0] = export_abi(meanfield_ ? " << ref(mf, mf.outcome, true) << " : " << ref(f, f.outcome, false)
      << ", exported_[1]);\n";
    for (size_t a = 0; a < f.arguments.size(); ++a)
      o << "    values[" << a + 1 << "] = export_abi(meanfield_ ? " << ref(mf, mf.arguments[a], true) << " : "
        << ref(f, f.arguments[a], false) << ", exported_[" << a + 2 << "]);\n";
    o << "  }\n\n";
  }
  o << "  void backward(const fvi_tensor* const* seeds, fvi_tensor* gradients) override {\n";
  o << "    if (meanfield_) throw std::logic_error(\"backward() after forward_meanfield(): call backward_meanfield()\");\n";
  statements(o, f, f.forward_end, static_cast<int>(f.nodes.size()), false);
  // Each group's gradient written once into the caller's buffer (abi_support.h write_gradient).
  for (size_t g = 0; g < f.groups.size(); ++g) {
    std::string pieces;
    for (const auto& [input, adjoint] : f.input_adjoints) {
      const Node& n = f.nodes[input];
      if (n.group != f.groups[g]) continue;
      append_piece(pieces, ref(f, adjoint, false), sizes_(n.offset));
    }
    const std::string in = "in_[" + std::to_string(g) + "]";
    o << "    write_gradient<Real>({" << pieces << "}, " << in << ".size(), " << in << ".draws, gradients[" << g << "]);\n";
  }
  o << "  }\n\n";
  meanfield_passes(o, mf);
  o << " private:\n";
  for (const std::string& d : f.data) o << "  Tensor<Real> data_" << d << ";\n";
  for (const auto& [member, value] : hoisted) o << "  Tensor<Real> " << member << ";\n";
  size_t groups = std::max<size_t>(1, f.groups.size());
  o << "  Tensor<Real> in_[" << groups << "], theta_[" << groups << "], eps_[" << groups << "];\n";
  o << "  AbiColumn mean_[" << groups << "], sd_[" << groups << "];  // the engine's, during forward_meanfield\n";
  o << "  bool has_sd_[" << groups << "] = {};\n";
  o << "  bool meanfield_ = false;\n  bool full_ = true;  // the last forward read every row\n  int64_t begin_ = 0, count_ = -1;  // its rows\n  int64_t draws_ = 1;\n  uint64_t key_ = 0;\n";
  o << "  std::vector<Tensor<Real>> v_ = std::vector<Tensor<Real>>(" << f.nodes.size() << ");\n";
  o << "  std::vector<Tensor<Real>> w_ = std::vector<Tensor<Real>>(" << mf.nodes.size() << ");\n";
  o << "  std::vector<IntVec> ix_ = std::vector<IntVec>(" << std::max(f.nodes.size(), mf.nodes.size()) << ");\n";
  if (!m_.programs.empty()) o << "  std::map<int, Machine<Real>> machine_;  // statement programs' tapes, by node (-1 - node: mean-field)\n";
  o << "  Tensor<double> exported_[" << f.arguments.size() + 2 << "];\n";
  o << "};\n\n";
}

// A transformed parameter or generated quantity: the forward pass alone, on all of its party's
// data; the gradient calls are not valid on it (kernel ABI, "Quantities").
void Emitter::quantity(std::ostringstream& o, const ir::Factor& f) {
  std::string cls = "Factor_" + f.name;
  o << "// " << f.name << ": the value of '" << f.variable << "' per draw, evaluated by " << term_owner_name(f.owner)
    << "\ntemplate <class Real>\nclass " << cls << " final : public Factor, Sizes {\n public:\n";
  o << "  explicit " << cls << "(const fvi_data* data) : Sizes(data) {\n";
  bind_data(o, f);
  o << "  }\n\n";
  o << "  void forward(int64_t begin, int64_t count, const fvi_tensor* inputs) override {\n";
  o << "    (void)begin, (void)count, (void)inputs;  // a quantity of data alone reads no inputs\n    draws_ = posterior_draws_;\n";
  for (size_t g = 0; g < f.groups.size(); ++g)
    o << "    assign_from_abi(inputs[" << g << "], in_[" << g << "]);\n    draws_ = std::max<int64_t>(draws_, in_[" << g
      << "].draws);\n";
  statements(o, f, 0, f.forward_end, false);
  o << "  }\n\n";
  o << "  fvi_tensor output() override { return export_abi(" << ref(f, f.output, false) << ", exported_); }\n\n";
  o << "  void set_noise_key(uint64_t key, int64_t draws) override { key_ = key, posterior_draws_ = std::max<int64_t>(1, draws); }\n";
  o << "  void backward(const fvi_tensor* const*, fvi_tensor*) override { no_gradient(); }\n";
  o << "  void forward_meanfield(int64_t, int64_t, const MeanFieldInputs&, int64_t, uint64_t) override { no_gradient(); }\n";
  o << "  void backward_meanfield(const fvi_tensor* const*, const MeanFieldOutputs&) override { no_gradient(); }\n\n";
  o << " private:\n";
  o << "  [[noreturn]] static void no_gradient() {\n"
    << "    throw std::logic_error(\"" << f.variable << " is a quantity: only forward() is valid\");\n  }\n";
  for (const std::string& d : f.data) o << "  Tensor<Real> data_" << d << ";\n";
  size_t groups = std::max<size_t>(1, f.groups.size());
  o << "  Tensor<Real> in_[" << groups << "];\n";
  o << "  bool full_ = true;\n  int64_t begin_ = 0, count_ = -1;\n  int64_t draws_ = 1;  // the inputs' draws\n"
    << "  int64_t posterior_draws_ = 1;  // forward_quantity's: the draws an `_rng` of constants makes\n"
    << "  uint64_t key_ = 0;  // forward_quantity's noise key: the random draws of `_rng`\n";
  o << "  std::vector<Tensor<Real>> v_ = std::vector<Tensor<Real>>(" << f.nodes.size() << ");\n";
  o << "  std::vector<IntVec> ix_ = std::vector<IntVec>(" << f.nodes.size() << ");\n";
  if (!m_.programs.empty()) o << "  std::map<int, Machine<Real>> machine_;  // statement programs' tapes, by node\n";
  o << "  Tensor<double> exported_;\n";
  o << "};\n\n";
}

// The constructor's statements binding each data variable a factor reads.
void Emitter::bind_data(std::ostringstream& o, const ir::Factor& f) {
  for (const std::string& d : f.data) {
    const Symbol* s = model_.find(d);
    SymSize rows = SymSize::constant(1), cols = SymSize::constant(1);
    if (!s->shape.dims.empty()) rows = s->shape.dims[0];
    if (s->shape.dims.size() > 1) cols = s->shape.dims[1];
    if (s->type.base == Base::RowVector && s->type.array_dims == 0) std::swap(rows, cols);
    o << "    data_" << d << " = bind_data<Real>(data, " << quoted(d) << ", " << sizes_(rows) << ", " << sizes_(cols)
      << ");\n";
  }
}

// One `{value, offset}` GradientPiece of write_gradient's list (abi_support.h), comma-separated.
void Emitter::append_piece(std::string& list, const std::string& value, const std::string& offset) {
  list += (list.empty() ? "{" : ", {") + value + ", " + offset + "}";
}

}  // namespace fvic::backend::emit_detail
