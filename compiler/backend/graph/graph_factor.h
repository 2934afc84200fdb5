#pragma once
// One factor or quantity of a graph model (graph_model.h) bound to its party's data: its IR nodes
// evaluated on the runtime's kernel operations as the generated code evaluates them (fused
// chains included), in double or float. Private to graph_model.cpp and graph_factor.cpp.
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "backend/graph/chain.h"
#include "fvi/kernel/abi_support.h"
#include "ir/ir.h"

namespace fvic::backend::graph {

// What every bound factor of one model shares: the IR and how to read sizes and data from a
// party's fvi_data.
struct ModelShapes {
  const ir::Module* module = nullptr;
  // Each data variable's tensor shape (rows, cols) as the kernels bind it.
  std::map<std::string, std::pair<SymSize, SymSize>> data_shapes;
  // Each factor's steps (plan_factors), their chains compiled or not.
  std::vector<FactorPlan> plans;
};

// The interface behind the ABI's state pointer, as the generated classes have it.
class BoundFactor {
 public:
  virtual ~BoundFactor() = default;
  virtual void forward(int64_t begin, int64_t count, const fvi_tensor* inputs) = 0;
  virtual fvi_tensor output() = 0;
  virtual void arguments(fvi_tensor* values) = 0;
  virtual void backward(const fvi_tensor* const* seeds, fvi_tensor* gradients) = 0;
  virtual void forward_meanfield(int64_t begin, int64_t count, const fvi::kernel::MeanFieldInputs& q, int64_t draws,
                                 uint64_t noise_key) = 0;
  virtual void backward_meanfield(const fvi_tensor* const* seeds, const fvi::kernel::MeanFieldOutputs& d_q) = 0;
  virtual void set_noise_key(uint64_t key, int64_t draws) = 0;
};

// Factor `index` of the module (a quantity: factors.size() + i), computing in Real.
template <class Real>
std::unique_ptr<BoundFactor> bind_factor(const ModelShapes& shapes, int index, const fvi_data* data);

// The data's scalars that can be sizes, by name: a whole number >= 0, or -2 for any other
// value (a size that reads it is refused). A factor keeps them from the data it was bound to,
// as generated code's Sizes does, and needs the caller's fvi_data no longer.
using DataInts = std::map<std::string, long long>;
DataInts data_ints(const fvi_data* data);

// A size from those scalars (-1 for one the data does not hold, as generated code).
int64_t evaluate_size(const SymSize& size, const DataInts& ints);

}  // namespace fvic::backend::graph
