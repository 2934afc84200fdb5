#pragma once
// A model's kernel-ABI table (runtime/include/fvi/kernel/abi.h, docs/kernel-abi.md) as values:
// its factors, variables, quantities and data declarations, decided once here for every backend.
// The C++ backend prints them as C source (backend/cpp/emit_abi_table.cpp); the graph backend
// (backend/graph/graph_model.h) builds the same table in memory.
#include <array>
#include <string>
#include <vector>

#include "frontend/semantic.h"
#include "fvi/kernel/abi.h"
#include "ir/ir.h"

namespace fvic::backend {

fvi_owner owner_code(TermOwner owner);
fvi_factor_kind kind_code(ir::FactorKind kind);
// The module's index of group `kind`, or -1.
int group_index(const ir::Module& module, fvi_group kind);

// A declared bound as fvi_variable_info holds it: a literal, or the name of a data scalar
// ("(expression)" for anything else, which the runtime cannot evaluate).
struct BoundDescription {
  double literal = 0;
  std::string data;
};

struct VariableDescription {
  std::string name;
  int group = -1;
  fvi_transform transform = FVI_IDENTITY;
  BoundDescription lower, upper;
  int rank = 0;
  int prior_scale = -1;  // the index of its prior-scale hyperparameter in this list, or -1
  int class_shift = 0;   // fvi_variable_info.class_shift
  std::string centring_data;     // fvi_variable_info.centring_data ("" for none)
  int centring_coefficient = -1; // fvi_variable_info.centring_coefficient: an index in this list
  std::vector<std::string> centring_more_data;   // fvi_variable_info.centring_more_data: the further products'
  std::vector<int> centring_more_coefficients;   // ... and centring_more_coefficients (indices in this list)
  std::string centring_group;    // fvi_variable_info.centring_group ("" for none)
  SymSize offset;        // in its group
  std::vector<SymSize> dims;
};
// Every slot of every group, in group order.
std::vector<VariableDescription> describe_variables(const ir::Module& module, const SemanticModel& model);

struct QuantityDescription {
  std::string name;
  fvi_quantity_block block = FVI_TRANSFORMED_PARAMETERS;
  fvi_owner owner = FVI_SERVER;
  int factor = 0;
  std::vector<int> groups;
  int rank = 0;
  fvi_transform transform = FVI_IDENTITY;
  BoundDescription lower, upper;
  bool aggregate = false;
};
std::vector<QuantityDescription> describe_quantities(const ir::Module& module, const SemanticModel& model);

// The data table (fvi_data_table): sizes and bounds the runtime cannot evaluate (a function
// call, an indexed value) are "" and left unchecked.
struct DataDescription {
  std::string name;
  fvi_data_party party = FVI_DATA_PUBLIC;
  bool is_int = false;
  bool row_vector = false;
  fvi_vector_structure structure = FVI_PLAIN;
  std::vector<std::string> dims;
  std::string lower, upper;
  std::string declaration;  // as written: "array[N] int<lower=0, upper=1> y"
  int line = 0;
};
struct SizeCheckDescription {
  std::string left, right, what;
  int line = 0;
};
struct DataTableDescription {
  std::vector<DataDescription> declarations;
  std::vector<SizeCheckDescription> size_checks;
  std::array<std::string, 3> transformed_data{};
};
DataTableDescription describe_data(const SemanticModel& model, const std::array<std::string, 3>& transformed_data);

}  // namespace fvic::backend
