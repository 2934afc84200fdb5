#pragma once
// An interpreter of IR factors on the runtime's kernel operations (fvi::kernel): the same
// calls the generated C++ makes, one node at a time. It checks the adjoint pass against finite
// differences without compiling anything, and is the seed of `fvic run` without a C++ compiler.
#include <map>
#include <string>
#include <vector>

#include "fvi/kernel/distributions.h"
#include "fvi/kernel/machine.h"
#include "ir/ir.h"

namespace fvic::ir {

using RealTensor = fvi::kernel::Tensor<double>;

struct Bindings {
  std::map<std::string, RealTensor> data;             // every data variable (ints as whole reals)
  std::map<std::string, RealTensor> inputs;           // group name -> (size x 1, draws)
  std::map<std::string, RealTensor> tangents;         // group name -> a direction, shaped as inputs
  long long batch_begin = 0;
  long long batch_count = -1;                         // -1: all rows
  unsigned long long noise_key = 0;                   // a quantity's random draws (Op::Rng)
};

class Interpreter {
 public:
  Interpreter(const Module& module, const Factor& factor) : module_(module), f_(factor) {}

  // Runs the forward nodes; returns the factor's output.
  const RealTensor& forward(const Bindings& b);
  // Runs the adjoint nodes with the given seeds (one per Seed node, in order) after forward();
  // returns each input group's gradient.
  std::map<std::string, RealTensor> backward(const Bindings& b, const std::vector<RealTensor>& seeds);

  const RealTensor& value(int node) const { return values_[node]; }

 private:
  long long size_of(const SymSize& s, const Bindings& b) const;
  void eval(int i, const Bindings& b, const std::vector<RealTensor>* seeds);

  const Module& module_;
  const Factor& f_;
  std::vector<RealTensor> values_;
  std::vector<fvi::kernel::IntVec> indices_;
  std::map<int, fvi::kernel::Machine<double>> machines_;  // Program nodes' tapes, for their adjoints
  size_t next_seed_ = 0;
};

}  // namespace fvic::ir
