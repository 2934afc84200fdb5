// A graph model's factors: the nodes of a factor (and of its mean-field variant) evaluated in
// the generated code's order with its calls (backend/cpp/emit_kernels.cpp, emit_meanfield.cpp):
// the fusion plan (backend/fuse.h) run as block loops (fvi/kernel/fused.h) whose body
// interprets each member per block of 1,024 elements, data transforms hoisted to binding time,
// minibatches of data read in place by the products. So both backends compute the same values.
#include "backend/graph/graph_factor.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "backend/fuse.h"
#include "backend/graph/chain.h"
#include "fvi/kernel/fused.h"
#include "fvi/kernel/instances.h"
#include "fvi/kernel/machine_instances.h"
#include "fvi/kernel/ops.h"
#include "ir/apply_op.h"

namespace fvic::backend::graph {

namespace k = fvi::kernel;
using ir::Node;
using ir::Op;

DataInts data_ints(const fvi_data* data) {
  DataInts out;
  for (int i = 0; data && i < data->count; ++i) {
    const fvi_tensor& t = data->values[i];
    if (t.rows * t.cols * t.draws != 1 || !t.data) continue;
    const double v = t.data[0];
    const bool whole = v >= 0 && v < 9.2e18 && v == double(static_cast<long long>(v));
    out.emplace(data->names[i], whole ? static_cast<long long>(v) : -2);
  }
  return out;
}

int64_t evaluate_size(const SymSize& size, const DataInts& ints) {
  std::optional<long long> v = size.eval([&](const std::string& name) -> std::optional<long long> {
    const auto at = ints.find(name);
    if (at == ints.end()) return -1;
    if (at->second == -2) throw std::invalid_argument("size '" + name + "' must be a non-negative integer");
    return at->second;
  });
  if (!v) throw std::invalid_argument("the size " + size.str() + " cannot be computed from the data");
  return *v;
}

namespace {

// The input slot of `group` in a factor's input order.
size_t slot_of(const ir::Factor& f, fvi_group group) {
  return size_t(std::find(f.groups.begin(), f.groups.end(), group) - f.groups.begin());
}

// One block of chain c: each member's values from its operands' (the formulas of the generated
// code's loops, emit_kernels.cpp fused_chain).
template <class Real>
void run_block(const Chain& c, const k::FusedBlock<Real>& b) {
  for (size_t i = 0; i < c.members.size(); ++i) {
    const Chain::Member& m = c.members[i];
    auto pointer = [&](size_t a) -> const Real* {
      const Chain::Operand& o = m.operands[a];
      return o.member ? b.node_ptr[size_t(o.at)] : b.leaf_ptr[size_t(o.at)];
    };
    auto array = [&](size_t a) {
      const Chain::Operand& o = m.operands[a];
      return o.member ? b.value(o.at) : b.leaf(o.at);
    };
    Real* out = b.node_ptr[i];
    switch (m.op) {
      case Op::Add: b.node(int(i)) = array(0) + array(1); break;
      case Op::Sub: b.node(int(i)) = array(0) - array(1); break;
      case Op::Mul: b.node(int(i)) = array(0) * array(1); break;
      case Op::Div: b.node(int(i)) = array(0) / array(1); break;
      case Op::Pow: b.node(int(i)) = array(0).pow(array(1)); break;
      case Op::Neg: b.node(int(i)) = -array(0); break;
      case Op::Unary: k::unary_block<Real>(m.fn, pointer(0), b.n, out); break;
      case Op::UnaryDerivative: k::unary_derivative_block<Real>(m.fn, pointer(0), pointer(1), b.n, out); break;
      case Op::Lpdf: {
        std::vector<const Real*> xs;
        for (size_t a = 0; a < m.operands.size(); ++a) xs.push_back(pointer(a));
        k::lpdf_block<Real>(m.name, xs, b.n, out);
        break;
      }
      case Op::LpdfVjp: {
        std::vector<const Real*> xs;
        for (size_t a = 1; a < m.operands.size(); ++a) xs.push_back(pointer(a));
        k::lpdf_vjp_block<Real>(m.name, size_t(m.k), pointer(0), xs, b.n, out);
        break;
      }
      default: throw std::logic_error(std::string("a fused chain cannot hold ") + ir::op_name(m.op));
    }
  }
}

// The chain's machine code for Real, if the JIT compiled it.
template <class Real>
auto compiled(const Chain& c) {
  if constexpr (std::is_same_v<Real, double>) return c.code_double;
  else return c.code_float;
}

template <class Real>
class GraphFactor final : public BoundFactor {
 public:
  using Tensor = k::Tensor<Real>;

  GraphFactor(const ModelShapes& shapes, int index, const fvi_data* data) : ints_(data_ints(data)) {
    const ir::Module& m = *shapes.module;
    const size_t factors = m.factors.size();
    if (index < 0 || size_t(index) >= factors + m.quantities.size()) throw std::out_of_range("no such factor");
    quantity_ = size_t(index) >= factors;
    f_ = quantity_ ? &m.quantities[size_t(index) - factors] : &m.factors[size_t(index)];
    mf_ = quantity_ ? nullptr : &m.meanfield.at(size_t(index));
    programs_ = &m.programs;
    for (const std::string& name : f_->data) {
      const auto& [rows, cols] = shapes.data_shapes.at(name);
      bound_[name] = k::bind_data<Real>(data, name.c_str(), size(rows), size(cols));
    }
    const size_t groups = std::max<size_t>(1, f_->groups.size());
    in_.resize(groups), theta_.resize(groups), eps_.resize(groups);
    mean_.resize(groups), sd_.resize(groups), has_sd_.assign(groups, false);
    exported_.resize(f_->arguments.size() + 2);
    for (size_t g = 0; g < m.groups.size(); ++g) kind_order_[m.groups[g].kind] = int(g);
    const FactorPlan& planned = shapes.plans.at(size_t(index));
    draw_pass_.plan(*f_, planned.draws);
    if (mf_) meanfield_pass_.plan(*mf_, planned.meanfield);
    // Data transforms computed once, here (fuse.h hoisted_data: square(x) of local
    // reparameterisation): a call's minibatch of one is a block of its rows.
    for (const ir::Factor* f : {f_, mf_})
      for (size_t i = 0; f && i < f->nodes.size(); ++i)
        if (hoisted_data(*f, int(i))) {
          const Node& n = f->nodes[i];
          const std::string& x = f->nodes[size_t(n.args[0])].name;
          if (!hoisted_.count(n.name + " " + x)) hoisted_[n.name + " " + x] = k::unary(n.name, bound_.at(x));
        }
  }

  void forward(int64_t begin, int64_t count, const fvi_tensor* inputs) override {
    meanfield_ = false;
    full_ = count < 0;
    begin_ = begin, count_ = count;
    if (quantity_) {
      full_ = true, begin_ = 0, count_ = -1;
      draws_ = posterior_draws_;
    }
    for (size_t g = 0; g < f_->groups.size(); ++g) {
      k::assign_from_abi(inputs[g], in_[g]);
      if (quantity_) draws_ = std::max<int64_t>(draws_, in_[g].draws);
    }
    draw_pass_.reset(*f_);
    run(*f_, draw_pass_, draw_pass_.steps->forward);
  }

  fvi_tensor output() override {
    return meanfield_ ? k::export_abi(ref(*mf_, meanfield_pass_, mf_->output), exported_[0])
                      : k::export_abi(ref(*f_, draw_pass_, f_->output), exported_[0]);
  }

  void arguments(fvi_tensor* values) override {
    if (f_->outcome < 0) return;
    const ir::Factor& f = meanfield_ ? *mf_ : *f_;
    Pass& p = meanfield_ ? meanfield_pass_ : draw_pass_;
    values[0] = k::export_abi(ref(f, p, f.outcome), exported_[1]);
    for (size_t a = 0; a < f.arguments.size(); ++a) values[a + 1] = k::export_abi(ref(f, p, f.arguments[a]), exported_[a + 2]);
  }

  void backward(const fvi_tensor* const* seeds, fvi_tensor* gradients) override {
    not_a_quantity();
    if (meanfield_) throw std::logic_error("backward() after forward_meanfield(): call backward_meanfield()");
    seeds_ = seeds;
    run(*f_, draw_pass_, draw_pass_.steps->backward);
    // Each group's gradient written once into the caller's buffer (abi_support.h write_gradient).
    for (size_t g = 0; g < f_->groups.size(); ++g) {
      std::vector<k::GradientPiece<Real>> pieces;
      for (const auto& [input, adjoint] : f_->input_adjoints) {
        const Node& n = f_->nodes[input];
        if (n.group == f_->groups[g]) pieces.push_back({ref(*f_, draw_pass_, adjoint), size(n.offset)});
      }
      k::write_gradient<Real>(pieces, in_[g].size(), in_[g].draws, gradients[g]);
    }
  }

  // The mean-field pass (emit_meanfield.cpp): each group's theta = mean + sd .* eps for the slices
  // the variant reads as Input (compact; noise stream = the group's index in the model), Mean and
  // Sd leaves read the group's means and sds directly.
  void forward_meanfield(int64_t begin, int64_t count, const k::MeanFieldInputs& q, int64_t draws,
                         uint64_t noise_key) override {
    not_a_quantity();
    meanfield_ = true;
    full_ = count < 0;
    begin_ = begin, count_ = count;
    draws_ = draws;
    key_ = noise_key;
    for (size_t g = 0; g < mf_->groups.size(); ++g) {
      mean_[g] = k::mean_column(q, int(g));
      sd_[g] = k::sd_column(q, int(g), mean_[g].rows);
      has_sd_[g] = sd_[g].present();
      k::meanfield_sample(mean_[g], has_sd_[g] ? &sd_[g] : nullptr, draws, noise_key,
                          uint32_t(group_index(mf_->groups[g])), ranges(g), theta_[g], eps_[g]);
    }
    meanfield_pass_.reset(*mf_);
    run(*mf_, meanfield_pass_, meanfield_pass_.steps->forward);
  }

  void backward_meanfield(const fvi_tensor* const* seeds, const k::MeanFieldOutputs& d_q) override {
    not_a_quantity();
    if (!meanfield_) throw std::logic_error("backward_meanfield() needs forward_meanfield() first");
    seeds_ = seeds;
    run(*mf_, meanfield_pass_, meanfield_pass_.steps->backward);
    for (size_t g = 0; g < mf_->groups.size(); ++g) {
      Tensor d_theta = Tensor::zeros_like(theta_[g]), d_mean, d_sd;
      std::vector<k::GradientPiece<Real>> mean_pieces, sd_pieces;
      for (const auto& [input, adjoint] : mf_->input_adjoints) {
        const Node& n = mf_->nodes[input];
        if (n.group != mf_->groups[g]) continue;
        const Tensor& value = ref(*mf_, meanfield_pass_, adjoint);
        if (n.op == Op::Input) k::add_to_slice(d_theta, value, compact_offset(input));
        else (n.op == Op::Mean ? mean_pieces : sd_pieces).push_back({value, size(n.offset)});
      }
      k::meanfield_chain(d_theta, eps_[g], has_sd_[g], ranges(g), d_mean, d_sd, mean_pieces, sd_pieces);
      k::write_meanfield_gradient<Real>(mean_pieces, mean_[g].size(), d_q, int(g), false);
      k::write_meanfield_gradient<Real>(sd_pieces, mean_[g].size(), d_q, int(g), true);
    }
  }

  void set_noise_key(uint64_t key, int64_t draws) override {
    key_ = key;
    posterior_draws_ = std::max<int64_t>(1, draws);
  }

 private:
  // One pass's values: the draws pass reads v_, the mean-field pass w_ (generated code's names).
  struct Pass {
    std::vector<Tensor> values;
    std::vector<k::IntVec> indices;
    std::map<int, k::Machine<Real>> machines;  // statement programs' tapes, by node
    // Per node: a batched data matrix or a hoisted transform of one (its rows bound once), and
    // whether a minibatch of it is read in place, as a block of those rows, never copied (it
    // only feeds products: fuse.h only_feeds_products), as the generated code does.
    std::vector<char> bound_rows, in_place;
    // The forward nodes, then the backward nodes, in the generated code's order: each step one
    // node or one fused chain (backend/fuse.h), run block by block (run_chain).
    const PassPlan* steps = nullptr;
    void plan(const ir::Factor& f, const PassPlan& planned) {
      for (size_t i = 0; i < f.nodes.size(); ++i) {
        const Node& n = f.nodes[i];
        const bool rows = (n.op == Op::Data && n.batched) || hoisted_data(f, int(i));
        bound_rows.push_back(rows);
        in_place.push_back(rows && only_feeds_products(f, int(i)));
      }
      steps = &planned;
    }
    void reset(const ir::Factor& f) {
      values.resize(f.nodes.size());
      indices.resize(f.nodes.size());
    }
  };

  [[noreturn]] void quantity_only() const {
    throw std::logic_error(f_->variable + " is a quantity: only forward() is valid");
  }
  void not_a_quantity() const {
    if (quantity_) quantity_only();
  }

  // A size from the bound data's ints: the same at every call, so each node's is computed once.
  int64_t size(const SymSize& s) const {
    const auto at = sizes_.find(&s);
    if (at != sizes_.end()) return at->second;
    return sizes_[&s] = evaluate_size(s, ints_);
  }

  // A group's index in the model: the noise stream of its mean-field sample.
  int group_index(fvi_group kind) const { return kind_order_.at(kind); }

  // The Input nodes of group g of the mean-field variant, in node order: the ranges its compact
  // theta holds.
  std::vector<std::pair<int64_t, int64_t>> ranges(size_t g) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (size_t i = 0; i < mf_->nodes.size(); ++i)
      if (mf_->nodes[i].op == Op::Input && mf_->nodes[i].group == mf_->groups[g])
        out.push_back({size(mf_->nodes[i].offset), range_length(i, g)});
    return out;
  }
  int64_t range_length(size_t node, size_t g) const {
    const Node& n = mf_->nodes[node];
    return n.group == FVI_GROUP_Z_SUM ? int64_t(mean_[g].size()) : size(n.rows) * size(n.cols);
  }
  // Where Input node `node` of the mean-field variant starts in its group's compact theta.
  int64_t compact_offset(size_t node) const {
    const fvi_group group = mf_->nodes[node].group;
    const size_t g = slot_of(*mf_, group);
    int64_t offset = 0;
    for (size_t i = 0; i < node; ++i)
      if (mf_->nodes[i].op == Op::Input && mf_->nodes[i].group == group) offset += range_length(i, g);
    return offset;
  }

  // The bound rows of a batched data node or a hoisted transform of one.
  const Tensor& rows_of(const ir::Factor& f, int node) const {
    const Node& n = f.nodes[size_t(node)];
    if (n.op == Op::Data) return bound_.at(n.name);
    return hoisted_.at(n.name + " " + f.nodes[size_t(n.args[0])].name);
  }

  // Node k's value: data are read from the bound tensors (a batched one on a call with every
  // row), a minibatch of them copied unless read in place (eval's products).
  const Tensor& ref(const ir::Factor& f, const Pass& p, int node) const {
    const Node& n = f.nodes[size_t(node)];
    if (n.op == Op::Data && !n.batched) return bound_.at(n.name);
    if (full_ && p.bound_rows[size_t(node)]) return rows_of(f, node);
    return p.values[size_t(node)];
  }

  void run(const ir::Factor& f, Pass& p, const Section& section) {
    for (const Step& step : section.steps) {
      if (step.chain >= 0) run_chain(f, p, section.chains[size_t(step.chain)]);
      else eval(f, p, step.node);
    }
  }

  // A fused chain in one loop over blocks (fvi/kernel/fused.h): its members' values computed
  // block by block while their operands are in cache; only escaping members written to memory,
  // into the buffers they had last call.
  void run_chain(const ir::Factor& f, Pass& p, const Chain& c) {
    std::vector<const Tensor*> leaves;
    for (int l : c.leaves) leaves.push_back(&ref(f, p, l));
    std::vector<Tensor*> outs;
    for (int m : c.outs) outs.push_back(&p.values[size_t(m)]);
    const auto code = compiled<Real>(c);
    if (code)
      k::fused<Real>(leaves, outs, c.out_of_node,
                     [&](const k::FusedBlock<Real>& b) { code(b.n, b.leaf_ptr.data(), b.node_ptr.data()); });
    else
      k::fused<Real>(leaves, outs, c.out_of_node, [&](const k::FusedBlock<Real>& b) { run_block(c, b); });
  }

  void eval(const ir::Factor& f, Pass& p, int i) {
    const Node& n = f.nodes[i];
    const bool meanfield = &f == mf_;
    auto v = [&](size_t a) -> const Tensor& { return ref(f, p, n.args[a]); };
    auto ix = [&](size_t a) -> const k::IntVec& { return p.indices[size_t(n.args[a])]; };
    auto operands = [&](size_t first) {
      k::Operands<Real> xs;
      for (size_t a = first; a < n.args.size(); ++a) xs.push_back(&v(a));
      return xs;
    };
    Tensor& out = p.values[size_t(i)];
    // A minibatch read in place: a block of the bound rows (only products read such a node).
    auto in_place = [&](size_t a) { return !full_ && p.in_place[size_t(n.args[a])]; };
    auto block = [&](size_t a) { return k::row_block(rows_of(f, n.args[a]), begin_, count_); };
    if (n.op == Op::MatMul && in_place(0)) {
      out = k::matmul(block(0), v(1));
      return;
    }
    if (n.op == Op::MatMulGradRight && in_place(0)) {
      out = k::matmul_grad_right(block(0), v(1), v(2).draws);
      return;
    }
    if (n.op == Op::MatMulGradLeft && in_place(2)) {  // data: one draw
      out = k::matmul_grad_left(v(0), v(1), 1);
      return;
    }
    if (p.bound_rows[size_t(i)]) {  // a batched data node or hoisted transform
      if (!full_ && !p.in_place[size_t(i)]) k::batch_rows_into(rows_of(f, i), begin_, count_, out);
      return;
    }
    switch (n.op) {
      case Op::Input: {
        const size_t g = slot_of(f, n.group);
        const Tensor& in = meanfield ? theta_[g] : in_[g];
        // z_sum holds the summed contributions of the batch's rows: as many rows as were passed.
        if (n.group == FVI_GROUP_Z_SUM) out = k::slice(in, 0, in.size(), 1);
        else out = k::slice(in, meanfield ? compact_offset(size_t(i)) : size(n.offset), size(n.rows), size(n.cols));
        return;
      }
      case Op::Mean:
        out = k::slice<Real>(mean_[slot_of(f, n.group)], size(n.offset), size(n.rows), size(n.cols));
        return;
      case Op::Sd:
        out = k::slice<Real>(sd_[slot_of(f, n.group)], size(n.offset), size(n.rows), size(n.cols));
        return;
      case Op::Noise: {
        const Eigen::Index rows = in_place(0) ? Eigen::Index(count_) : v(0).rows;
        const Eigen::Index first = n.batched ? (count_ < 0 ? 0 : begin_) : 0;
        const Eigen::Index total = n.batched ? size(f.rows) : rows;
        out = k::noise<Real>(rows, size(n.cols), draws_, key_, uint32_t(n.k), first, total);
        return;
      }
      case Op::Data:  // read in place (ref): the bound tensor, or its minibatch (above)
        return;
      case Op::Index:
        if (n.range) p.indices[i] = k::range_index(size(n.first), size(n.last));
        else if (n.name.empty()) {
          p.indices[i] = k::IntVec(Eigen::Index(n.ints.size()));
          for (size_t j = 0; j < n.ints.size(); ++j) p.indices[i][Eigen::Index(j)] = n.ints[j];
        } else {
          p.indices[i] = k::batch_index(bound_.at(n.name), n.batched ? begin_ : 0, n.batched ? count_ : -1);
        }
        return;
      case Op::Const: out = Tensor::constant(Real(n.value)); return;
      case Op::Seed: {
        const int s = int(std::find(f.seeds.begin(), f.seeds.end(), i) - f.seeds.begin());
        const int like = s == 0 ? f.output : f.arguments[size_t(s - 1)];
        k::assign_seed(seeds_, s, ref(f, p, like), out);
        return;
      }
      case Op::Tangent:
        throw std::logic_error("graph models evaluate no Jacobian-vector products (factor " + f.name + ")");
      case Op::Rng:
        out = k::random_draws<Real>(n.name, operands(0), size(n.rows), size(n.cols), draws_, key_, uint32_t(n.k));
        return;
      case Op::Program: {
        std::vector<bool> active;
        for (int a : n.args) active.push_back(f.nodes[size_t(a)].active);
        k::Machine<Real>& machine = p.machines[i];
        machine.set_random(key_, draws_);
        out = machine.run(programs_->at(size_t(n.k)), operands(0), active);
        return;
      }
      case Op::ProgramVjp: out = p.machines.at(n.args[1]).operand_gradient(v(0), size_t(n.k)); return;
      default: {
        ir::OperandAccess<Real> access{v, ix, [&](const SymSize& s) { return size(s); }};
        if (!ir::apply_op(n, access, out)) throw std::logic_error(std::string("a graph model cannot evaluate ") + ir::op_name(n.op));
        return;
      }
    }
  }

  const DataInts ints_;  // the sizes of the data the factor was bound to
  const ir::Factor* f_ = nullptr;
  const ir::Factor* mf_ = nullptr;  // the mean-field variant (none for a quantity)
  const std::vector<k::Program>* programs_ = nullptr;
  bool quantity_ = false;
  std::map<fvi_group, int> kind_order_;  // each group's index in the model
  mutable std::unordered_map<const SymSize*, int64_t> sizes_;  // size(): by the IR's SymSize
  std::map<std::string, Tensor> bound_;  // the data variables the factor reads
  std::map<std::string, Tensor> hoisted_;  // data transforms of them, by "function data"
  std::vector<Tensor> in_, theta_, eps_;
  std::vector<k::AbiColumn> mean_, sd_;  // the engine's, during forward_meanfield
  std::vector<bool> has_sd_;
  Pass draw_pass_, meanfield_pass_;
  const fvi_tensor* const* seeds_ = nullptr;
  bool meanfield_ = false;
  bool full_ = true;  // the last forward read every row
  int64_t begin_ = 0, count_ = -1;
  int64_t draws_ = 1;
  int64_t posterior_draws_ = 1;  // forward_quantity's: the draws an `_rng` of constants makes
  uint64_t key_ = 0;
  std::vector<k::Tensor<double>> exported_;  // output() and arguments() in double
};

}  // namespace

template <class Real>
std::unique_ptr<BoundFactor> bind_factor(const ModelShapes& shapes, int index, const fvi_data* data) {
  return std::make_unique<GraphFactor<Real>>(shapes, index, data);
}

template std::unique_ptr<BoundFactor> bind_factor<double>(const ModelShapes&, int, const fvi_data*);
template std::unique_ptr<BoundFactor> bind_factor<float>(const ModelShapes&, int, const fvi_data*);

}  // namespace fvic::backend::graph
