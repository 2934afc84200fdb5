#include "backend/graph/graph_model.h"

#include <array>
#include <mutex>
#include <stdexcept>

#include "fvi/kernel/abi_support.h"

namespace fvic::backend::graph {

namespace k = fvi::kernel;

// The live graph models by slot, and the entry points that read them.
struct SlotAccess {
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::array<const GraphModel*, GraphModel::kSlots>& models() {
    static std::array<const GraphModel*, GraphModel::kSlots> live{};
    return live;
  }
  static const GraphModel& model(int slot) {
    const GraphModel* m = models()[size_t(slot)];
    if (!m) throw std::logic_error("a graph model's table was used after the model was destroyed");
    return *m;
  }

  template <int Slot>
  static int group_size(int group, const fvi_data* data, int64_t* size, fvi_error* error) {
    return k::guarded(error, [&] {
      const ir::Module& m = model(Slot).module_;
      if (group < 0 || size_t(group) >= m.groups.size()) throw std::out_of_range("no such group");
      *size = evaluate_size(m.groups[size_t(group)].size, data_ints(data));
    });
  }
  template <int Slot>
  static int variable_shape(int variable, const fvi_data* data, int64_t* offset, int64_t* dims, fvi_error* error) {
    return k::guarded(error, [&] {
      const auto& variables = model(Slot).variable_descriptions_;
      if (variable < 0 || size_t(variable) >= variables.size()) throw std::out_of_range("no such variable");
      const VariableDescription& v = variables[size_t(variable)];
      const DataInts ints = data_ints(data);
      *offset = evaluate_size(v.offset, ints);
      for (size_t d = 0; d < v.dims.size(); ++d) dims[d] = evaluate_size(v.dims[d], ints);
    });
  }
  template <int Slot, class Real>
  static void* create(int factor, const fvi_data* data, fvi_error* error) {
    BoundFactor* made = nullptr;
    k::guarded(error, [&] { made = bind_factor<Real>(model(Slot).shapes_, factor, data).release(); });
    return made;
  }

  template <int Slot>
  static void install(fvi_model& t) {
    t.group_size = group_size<Slot>;
    t.variable_shape = variable_shape<Slot>;
    t.create = create<Slot, double>;
    t.create_float32 = create<Slot, float>;
  }
  template <int... Slots>
  static void install_slot(int slot, fvi_model& t, std::integer_sequence<int, Slots...>) {
    ((slot == Slots ? install<Slots>(t) : void()), ...);
  }
};

namespace {

BoundFactor* bound(void* state) { return static_cast<BoundFactor*>(state); }

int meanfield_pass(void* state, int64_t begin, int64_t count, const k::MeanFieldInputs& q, int64_t draws,
                   uint64_t noise_key, fvi_tensor* output, fvi_error* error) {
  return k::guarded(error, [&] {
    if (draws < 1) throw std::invalid_argument("forward_meanfield needs at least one draw");
    bound(state)->forward_meanfield(begin, count, q, draws, noise_key);
    *output = bound(state)->output();
  });
}

int forward_meanfield(void* state, int64_t begin, int64_t count, const fvi_tensor* means, const fvi_tensor* sds,
                      int64_t draws, uint64_t noise_key, fvi_tensor* output, fvi_error* error) {
  return meanfield_pass(state, begin, count, {means, sds, nullptr, nullptr}, draws, noise_key, output, error);
}

int forward_meanfield_f32(void* state, int64_t begin, int64_t count, const fvi_tensor_f32* means,
                          const fvi_tensor_f32* sds, int64_t draws, uint64_t noise_key, fvi_tensor* output,
                          fvi_error* error) {
  return meanfield_pass(state, begin, count, {nullptr, nullptr, means, sds}, draws, noise_key, output, error);
}

int backward_meanfield(void* state, const fvi_tensor* const* seeds, fvi_tensor* d_means, fvi_tensor* d_sds,
                       fvi_error* error) {
  return k::guarded(error, [&] { bound(state)->backward_meanfield(seeds, {d_means, d_sds, nullptr, nullptr}); });
}

int backward_meanfield_f32(void* state, const fvi_tensor* const* seeds, fvi_tensor_f32* d_means, fvi_tensor_f32* d_sds,
                           fvi_error* error) {
  return k::guarded(error, [&] { bound(state)->backward_meanfield(seeds, {nullptr, nullptr, d_means, d_sds}); });
}

int forward(void* state, int64_t begin, int64_t count, const fvi_tensor* inputs, fvi_tensor* output, fvi_error* error) {
  return k::guarded(error, [&] {
    bound(state)->forward(begin, count, inputs);
    *output = bound(state)->output();
  });
}

int backward(void* state, const fvi_tensor* const* seeds, fvi_tensor* gradients, fvi_error* error) {
  return k::guarded(error, [&] { bound(state)->backward(seeds, gradients); });
}

int arguments(void* state, fvi_tensor* values, fvi_error* error) {
  return k::guarded(error, [&] { bound(state)->arguments(values); });
}

void destroy(void* state) { delete bound(state); }

int forward_quantity(void* state, const fvi_tensor* inputs, int64_t draws, uint64_t noise_key, fvi_tensor* output,
                     fvi_error* error) {
  return k::guarded(error, [&] {
    bound(state)->set_noise_key(noise_key, draws);
    bound(state)->forward(0, -1, inputs);
    *output = bound(state)->output();
  });
}

fvi_gp_argument gp_argument(const SparseGpArgument& a) {
  return {a.name.c_str(), int(a.kind), a.value};  // SparseGpArgument::Kind follows fvi_gp_argument_kind
}

}  // namespace

GraphModel::GraphModel(ir::Module module, const SemanticModel& model, const ChainCompiler* compiler)
    : module_(std::move(module)) {
  shapes_.module = &module_;
  shapes_.plans = plan_factors(module_);
  if (compiler) {
    try {
      code_ = compiler->compile(shapes_.plans);
    } catch (const std::exception& e) {
      jit_error_ = e.what();
      for (Chain* c : all_chains(shapes_.plans)) c->code_double = nullptr, c->code_float = nullptr;  // interpreted
    }
  }
  // Each data variable as the kernels bind it (emit_kernels.cpp bind_data): a row_vector is 1 x n.
  for (const Symbol& s : model.symbols) {
    if (shapes_.data_shapes.count(s.name)) continue;  // SemanticModel::find's: the first of a name
    SymSize rows = SymSize::constant(1), cols = SymSize::constant(1);
    if (!s.shape.dims.empty()) rows = s.shape.dims[0];
    if (s.shape.dims.size() > 1) cols = s.shape.dims[1];
    if (s.type.base == Base::RowVector && s.type.array_dims == 0) std::swap(rows, cols);
    shapes_.data_shapes[s.name] = {rows, cols};
  }
  variable_descriptions_ = describe_variables(module_, model);
  quantity_descriptions_ = describe_quantities(module_, model);
  data_description_ = describe_data(model, module_.transformed_data);
  {
    std::lock_guard<std::mutex> lock(SlotAccess::mutex());
    auto& live = SlotAccess::models();
    for (int s = 0; s < kSlots && slot_ < 0; ++s)
      if (!live[size_t(s)]) live[size_t(s)] = this, slot_ = s;
  }
  if (slot_ < 0)
    throw std::runtime_error("more than " + std::to_string(kSlots) + " graph models at once in one process");
  build_table();
}

GraphModel::~GraphModel() {
  std::lock_guard<std::mutex> lock(SlotAccess::mutex());
  SlotAccess::models()[size_t(slot_)] = nullptr;
}

void GraphModel::build_table() {
  const ir::Module& m = module_;
  for (const ir::Group& g : m.groups) group_kinds_.push_back(g.kind), group_varies_.push_back(g.varies ? 1 : 0);
  for (const ir::Factor& f : m.factors) {
    factor_groups_.emplace_back();
    for (fvi_group g : f.groups) factor_groups_.back().push_back(group_index(m, g));
  }
  for (size_t i = 0; i < m.factors.size(); ++i) {
    const ir::Factor& f = m.factors[i];
    factors_.push_back({f.name.c_str(), kind_code(f.kind), owner_code(f.owner), f.distribution.c_str(),
                        int(f.groups.size()), factor_groups_[i].data(), int(f.seeds.size()), f.local_index.c_str()});
  }
  for (const VariableDescription& v : variable_descriptions_) {
    centring_more_data_.emplace_back();
    for (const std::string& x : v.centring_more_data) centring_more_data_.back().push_back(x.c_str());
  }
  for (size_t i = 0; i < variable_descriptions_.size(); ++i) {
    const VariableDescription& v = variable_descriptions_[i];
    const bool more = !v.centring_more_data.empty();
    variables_.push_back({v.name.c_str(), v.group, v.transform, v.lower.literal, v.upper.literal, v.lower.data.c_str(),
                          v.upper.data.c_str(), v.rank, v.prior_scale, v.class_shift,
                          v.centring_data.c_str(), v.centring_coefficient, int(v.centring_more_data.size()),
                          more ? centring_more_data_[i].data() : nullptr,
                          more ? v.centring_more_coefficients.data() : nullptr, v.centring_group.c_str()});
  }
  for (const QuantityDescription& q : quantity_descriptions_)
    quantities_.push_back({q.name.c_str(), q.block, q.owner, q.factor, int(q.groups.size()), q.groups.data(), q.rank,
                           q.transform, q.lower.literal, q.upper.literal, q.lower.data.c_str(), q.upper.data.c_str(),
                           q.aggregate ? 1 : 0});
  for (const DataDescription& d : data_description_.declarations) {
    data_dims_.emplace_back();
    for (const std::string& dim : d.dims) data_dims_.back().push_back(dim.c_str());
  }
  for (size_t i = 0; i < data_description_.declarations.size(); ++i) {
    const DataDescription& d = data_description_.declarations[i];
    data_declarations_.push_back({d.name.c_str(), d.party, d.is_int ? 1 : 0, d.row_vector ? 1 : 0, d.structure,
                                  int(d.dims.size()), d.dims.empty() ? nullptr : data_dims_[i].data(), d.lower.c_str(),
                                  d.upper.c_str(), d.declaration.c_str(), d.line});
  }
  for (const SizeCheckDescription& c : data_description_.size_checks)
    size_checks_.push_back({c.left.c_str(), c.right.c_str(), c.what.c_str(), c.line});
  data_table_ = {int(data_declarations_.size()), data_declarations_.empty() ? nullptr : data_declarations_.data(),
                 int(size_checks_.size()), size_checks_.empty() ? nullptr : size_checks_.data(),
                 {data_description_.transformed_data[0].c_str(), data_description_.transformed_data[1].c_str(),
                  data_description_.transformed_data[2].c_str()}};
  if (m.sparse_gp) {
    const SparseGpModel& gp = *m.sparse_gp;
    sparse_gp_ = {gp.outcome.c_str(),          gp.inputs.c_str(),       gp_argument(gp.inducing),
                  gp_argument(gp.scale), gp_argument(gp.lengthscale), gp_argument(gp.noise),
                  gp.line};
  }

  table_.abi_version = FVI_ABI_VERSION;
  table_.name = m.model.c_str();
  table_.group_count = int(m.groups.size());
  table_.group_kinds = group_kinds_.data();
  table_.group_varies = group_varies_.data();
  table_.factor_count = int(m.factors.size());
  table_.factors = factors_.data();
  table_.forward = forward;
  table_.backward = backward;
  table_.arguments = arguments;
  table_.destroy = destroy;
  table_.variable_count = int(variables_.size());
  table_.variables = variables_.data();
  table_.forward_meanfield = forward_meanfield;
  table_.backward_meanfield = backward_meanfield;
  table_.data_table = &data_table_;
  table_.forward_meanfield_f32 = forward_meanfield_f32;
  table_.backward_meanfield_f32 = backward_meanfield_f32;
  table_.quantity_count = int(quantities_.size());
  table_.quantities = quantities_.data();
  table_.forward_quantity = forward_quantity;
  table_.sparse_gp = m.sparse_gp ? &sparse_gp_ : nullptr;
  SlotAccess::install_slot(slot_, table_, std::make_integer_sequence<int, kSlots>{});
}

}  // namespace fvic::backend::graph
