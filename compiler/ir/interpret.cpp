#include "ir/interpret.h"

#include "fvi/kernel/random.h"
#ifdef FVIC_KERNELS_FROM_LIBFVI
// The kernel operations libfvi instantiates once (instances.cpp), declared `extern template`:
// instantiated here again they took this file 153 s to compile, against 41 s.
#include "fvi/kernel/instances.h"
#include "fvi/kernel/machine_instances.h"
#endif

#include <stdexcept>

#include "ir/apply_op.h"

namespace fvic::ir {

namespace k = fvi::kernel;

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
    case Op::Rng: {
      k::Operands<double> xs;
      for (int a : n.args) xs.push_back(&values_[a]);
      long long draws = 1;
      for (const auto& [group, value] : b.inputs) draws = std::max<long long>(draws, value.draws);
      out = k::random_draws<double>(n.name, xs, size_of(n.rows, b), size_of(n.cols, b), draws, b.noise_key, uint32_t(n.k));
      return;
    }
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
    default: {
      OperandAccess<double> operands{[&](size_t a) -> const RealTensor& { return v(a); },
                                     [&](size_t a) -> const k::IntVec& { return indices_[n.args[a]]; },
                                     [&](const SymSize& s) { return size_of(s, b); }};
      if (!apply_op(n, operands, out)) throw std::logic_error(std::string("the interpreter cannot evaluate ") + op_name(n.op));
      return;
    }
  }
}

}  // namespace fvic::ir
