// The C++ backend (emitter.h) on the model's C ABI table (runtime/include/fvi/kernel/abi.h): the
// groups, the factors, the extern functions behind the table, the variable and quantity tables
// with their declared bounds, the data table (emit_data_checks.cpp), and kModel itself.
#include "backend/cpp/emitter.h"

#include "backend/abi_description.h"
#include "backend/cpp/abi_names.h"
#include "backend/cpp/emit_data_checks.h"

namespace fvic::backend::emit_detail {

// ---- the ABI tables ------------------------------------------------------------------------

void Emitter::abi(std::ostringstream& o) {
  o << "const int kGroupKinds[] = {";
  for (size_t g = 0; g < m_.groups.size(); ++g) o << (g ? ", " : "") << group_constant(m_.groups[g].kind);
  if (m_.groups.empty()) o << "-1";
  o << "};\nconst int kGroupVaries[] = {";
  for (size_t g = 0; g < m_.groups.size(); ++g) o << (g ? ", " : "") << (m_.groups[g].varies ? 1 : 0);
  if (m_.groups.empty()) o << "0";
  o << "};\n";
  for (size_t i = 0; i < m_.factors.size(); ++i) {
    const ir::Factor& f = m_.factors[i];
    o << "const int kFactor" << i << "Groups[] = {";
    for (size_t g = 0; g < f.groups.size(); ++g) o << (g ? ", " : "") << group_index(f.groups[g]);
    if (f.groups.empty()) o << "-1";
    o << "};\n";
  }
  o << "const fvi_factor_info kFactors[] = {\n";
  for (size_t i = 0; i < m_.factors.size(); ++i) {
    const ir::Factor& f = m_.factors[i];
    o << "    {" << quoted(f.name) << ", " << kind_name(kind_code(f.kind)) << ", " << owner_name(owner_code(f.owner)) << ", "
      << quoted(f.distribution) << ", " << f.groups.size() << ", kFactor" << i << "Groups, "
      << f.seeds.size() << ", " << quoted(f.local_index) << "},\n";
  }
  o << "};\n\n";
  o << "int group_size(int group, const fvi_data* data, int64_t* size, fvi_error* error) {\n"
    << "  return guarded(error, [&] {\n    Sizes s(data);\n    (void)s;\n    switch (group) {\n";
  for (size_t g = 0; g < m_.groups.size(); ++g) {
    SizeSpeller local;
    std::string expr = local(m_.groups[g].size);
    o << "      case " << g << ": {\n";
    for (const std::string& a : local.used) o << "        const int64_t size_" << a << " = s.size_" << a << ";\n";
    o << "        *size = " << expr << ";\n        return;\n      }\n";
  }
  o << "      default: throw std::out_of_range(\"no such group\");\n    }\n  });\n}\n\n";
  o << "template <class Real>\nFactor* make(int factor, const fvi_data* data) {\n  switch (factor) {\n";
  for (size_t i = 0; i < m_.factors.size(); ++i)
    o << "    case " << i << ": return new Factor_" << m_.factors[i].name << "<Real>(data);\n";
  for (size_t i = 0; i < m_.quantities.size(); ++i)
    o << "    case " << m_.factors.size() + i << ": return new Factor_" << m_.quantities[i].name << "<Real>(data);\n";
  o << "    default: throw std::out_of_range(\"no such factor\");\n  }\n}\n\n";
  o << "void* create(int factor, const fvi_data* data, fvi_error* error) {\n  Factor* made = nullptr;\n"
    << "  guarded(error, [&] { made = make<double>(factor, data); });\n  return made;\n}\n\n";
  o << "void* create_float32(int factor, const fvi_data* data, fvi_error* error) {\n  Factor* made = nullptr;\n"
    << "  guarded(error, [&] { made = make<float>(factor, data); });\n  return made;\n}\n\n";
  o << "int meanfield_pass(void* state, int64_t begin, int64_t count, const MeanFieldInputs& q, int64_t draws,\n"
    << "                   uint64_t noise_key, fvi_tensor* output, fvi_error* error) {\n"
    << "  return guarded(error, [&] {\n    if (draws < 1) throw std::invalid_argument(\"forward_meanfield needs at least one draw\");\n"
    << "    Factor* f = static_cast<Factor*>(state);\n"
    << "    f->forward_meanfield(begin, count, q, draws, noise_key);\n    *output = f->output();\n  });\n}\n\n";
  o << "int forward_meanfield(void* state, int64_t begin, int64_t count, const fvi_tensor* means, const fvi_tensor* sds,\n"
    << "                      int64_t draws, uint64_t noise_key, fvi_tensor* output, fvi_error* error) {\n"
    << "  return meanfield_pass(state, begin, count, {means, sds, nullptr, nullptr}, draws, noise_key, output, error);\n}\n\n";
  o << "int forward_meanfield_f32(void* state, int64_t begin, int64_t count, const fvi_tensor_f32* means,\n"
    << "                          const fvi_tensor_f32* sds, int64_t draws, uint64_t noise_key, fvi_tensor* output,\n"
    << "                          fvi_error* error) {\n"
    << "  return meanfield_pass(state, begin, count, {nullptr, nullptr, means, sds}, draws, noise_key, output, error);\n}\n\n";
  o << "int backward_meanfield(void* state, const fvi_tensor* const* seeds, fvi_tensor* d_means, fvi_tensor* d_sds,\n"
    << "                       fvi_error* error) {\n"
    << "  return guarded(error, [&] {\n"
    << "    static_cast<Factor*>(state)->backward_meanfield(seeds, {d_means, d_sds, nullptr, nullptr});\n  });\n}\n\n";
  o << "int backward_meanfield_f32(void* state, const fvi_tensor* const* seeds, fvi_tensor_f32* d_means,\n"
    << "                           fvi_tensor_f32* d_sds, fvi_error* error) {\n"
    << "  return guarded(error, [&] {\n"
    << "    static_cast<Factor*>(state)->backward_meanfield(seeds, {nullptr, nullptr, d_means, d_sds});\n  });\n}\n\n";
  o << "int forward(void* state, int64_t begin, int64_t count, const fvi_tensor* inputs, fvi_tensor* output,\n"
    << "            fvi_error* error) {\n  return guarded(error, [&] {\n"
    << "    Factor* f = static_cast<Factor*>(state);\n    f->forward(begin, count, inputs);\n"
    << "    *output = f->output();\n  });\n}\n\n";
  o << "int backward(void* state, const fvi_tensor* const* seeds, fvi_tensor* gradients, fvi_error* error) {\n"
    << "  return guarded(error, [&] { static_cast<Factor*>(state)->backward(seeds, gradients); });\n}\n\n";
  o << "int arguments(void* state, fvi_tensor* values, fvi_error* error) {\n"
    << "  return guarded(error, [&] { static_cast<Factor*>(state)->arguments(values); });\n}\n\n";
  o << "void destroy(void* state) { delete static_cast<Factor*>(state); }\n\n";
  o << "int forward_quantity(void* state, const fvi_tensor* inputs, int64_t draws, uint64_t noise_key,\n"
    << "                     fvi_tensor* output, fvi_error* error) {\n  return guarded(error, [&] {\n"
    << "    Factor* f = static_cast<Factor*>(state);\n    f->set_noise_key(noise_key, draws);\n"
    << "    f->forward(0, -1, inputs);\n    *output = f->output();\n  });\n}\n\n";
  const size_t variables = variable_table(o);
  quantity_table(o);
  emit_data_table(model_, m_.transformed_data, o);
  if (m_.sparse_gp) {
    const SparseGpModel& gp = *m_.sparse_gp;
    auto argument = [&](const SparseGpArgument& a) {
      static const char* kinds[] = {"FVI_GP_PARAMETER", "FVI_GP_HYPERPARAMETER", "FVI_GP_DATA", "FVI_GP_NUMBER"};
      return "{" + quoted(a.name) + ", " + kinds[int(a.kind)] + ", " + number(a.value) + "}";
    };
    o << "const fvi_sparse_gp kSparseGp = {" << quoted(gp.outcome) << ", " << quoted(gp.inputs) << ", "
      << argument(gp.inducing) << ", " << argument(gp.scale) << ", " << argument(gp.lengthscale) << ", "
      << argument(gp.noise) << ", " << gp.line << "};\n\n";
  }
  o << "const fvi_model kModel = {FVI_ABI_VERSION, " << quoted(m_.model) << ", " << m_.groups.size()
    << ", kGroupKinds, kGroupVaries, " << m_.factors.size()
    << ", kFactors, group_size, create, forward, backward, arguments, destroy, " << variables
    << ", kVariables, variable_shape, create_float32, forward_meanfield, backward_meanfield, &kDataTable, "
    << "forward_meanfield_f32, backward_meanfield_f32, " << m_.quantities.size() << ", kQuantities, forward_quantity, "
    << (m_.sparse_gp ? "&kSparseGp" : "nullptr") << "};\n\n";
}

// fvi_quantity_info for every transformed parameter and generated quantity.
void Emitter::quantity_table(std::ostringstream& o) {
  const std::vector<QuantityDescription> quantities = describe_quantities(m_, model_);
  for (size_t i = 0; i < quantities.size(); ++i) {
    o << "const int kQuantity" << i << "Groups[] = {";
    for (size_t g = 0; g < quantities[i].groups.size(); ++g) o << (g ? ", " : "") << quantities[i].groups[g];
    if (quantities[i].groups.empty()) o << "-1";
    o << "};\n";
  }
  o << "const fvi_quantity_info kQuantities[] = {\n";
  for (size_t i = 0; i < quantities.size(); ++i) {
    const QuantityDescription& q = quantities[i];
    o << "    {" << quoted(q.name) << ", "
      << (q.block == FVI_GENERATED_QUANTITIES ? "FVI_GENERATED_QUANTITIES" : "FVI_TRANSFORMED_PARAMETERS") << ", "
      << owner_name(q.owner) << ", " << q.factor << ", " << q.groups.size() << ", kQuantity" << i << "Groups, " << q.rank
      << ", " << transform_name(q.transform) << ", " << number(q.lower.literal) << ", " << number(q.upper.literal)
      << ", " << quoted(q.lower.data) << ", " << quoted(q.upper.data) << ", " << (q.aggregate ? 1 : 0) << "},\n";
  }
  if (quantities.empty()) o << "    {\"\", 0, 0, -1, 0, nullptr, 0, 0, 0, 0, \"\", \"\", 0},\n";
  o << "};\n\n";
}

// fvi_variable_info for every slot of every group, and variable_shape() giving its offset and
// declared dimensions from the data's sizes. Returns the number of variables.
size_t Emitter::variable_table(std::ostringstream& o) {
  const std::vector<VariableDescription> variables = describe_variables(m_, model_);
  // An intercept's further centred products (fvi_variable_info.centring_more_*).
  for (size_t i = 0; i < variables.size(); ++i) {
    const VariableDescription& v = variables[i];
    if (v.centring_more_data.empty()) continue;
    o << "const char* const kVariable" << i << "CentringData[] = {";
    for (size_t j = 0; j < v.centring_more_data.size(); ++j) o << (j ? ", " : "") << quoted(v.centring_more_data[j]);
    o << "};\nconst int kVariable" << i << "CentringCoefficients[] = {";
    for (size_t j = 0; j < v.centring_more_coefficients.size(); ++j) o << (j ? ", " : "") << v.centring_more_coefficients[j];
    o << "};\n";
  }
  o << "const fvi_variable_info kVariables[] = {\n";
  for (size_t i = 0; i < variables.size(); ++i) {
    const VariableDescription& v = variables[i];
    const std::string more = v.centring_more_data.empty()
                                 ? "0, nullptr, nullptr"
                                 : std::to_string(v.centring_more_data.size()) + ", kVariable" + std::to_string(i) +
                                       "CentringData, kVariable" + std::to_string(i) + "CentringCoefficients";
    o << "    {" << quoted(v.name) << ", " << v.group << ", " << transform_name(v.transform) << ", "
      << number(v.lower.literal) << ", " << number(v.upper.literal) << ", " << quoted(v.lower.data) << ", "
      << quoted(v.upper.data) << ", " << v.rank << ", " << v.prior_scale << ", " << v.class_shift << ", "
      << quoted(v.centring_data) << ", " << v.centring_coefficient << ", " << more << ", " << quoted(v.centring_group)
      << "},\n";
  }
  if (variables.empty()) o << "    {\"\", -1, 0, 0, 0, \"\", \"\", 0, -1, 0, \"\", -1, 0, nullptr, nullptr, \"\"},\n";
  o << "};\n\n";
  o << "int variable_shape(int variable, const fvi_data* data, int64_t* offset, int64_t* dims, fvi_error* error) {\n"
    << "  (void)dims;\n  return guarded(error, [&] {\n    Sizes s(data);\n    (void)s;\n    switch (variable) {\n";
  for (size_t i = 0; i < variables.size(); ++i) {
    SizeSpeller local;
    std::string off = local(variables[i].offset);
    std::vector<std::string> dims;
    for (const SymSize& d : variables[i].dims) dims.push_back(local(d));
    o << "      case " << i << ": {\n";
    for (const std::string& a : local.used) o << "        const int64_t size_" << a << " = s.size_" << a << ";\n";
    o << "        *offset = " << off << ";\n";
    for (size_t d = 0; d < dims.size(); ++d) o << "        dims[" << d << "] = " << dims[d] << ";\n";
    o << "        return;\n      }\n";
  }
  o << "      default: throw std::out_of_range(\"no such variable\");\n    }\n  });\n}\n\n";
  return variables.size();
}

}  // namespace fvic::backend::emit_detail
