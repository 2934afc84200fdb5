#pragma once
// A party's data and inputs as the kernel ABI takes them, from the interpreter's tensors
// (test_models.h random_bindings): views into owned copies, for the tests that call a model's
// table directly.
#include <map>
#include <string>
#include <vector>

#include "fvi/kernel/abi.h"
#include "ir/interpret.h"

namespace fvic::test {

inline fvi_tensor view(ir::RealTensor& t) { return fvi_tensor{t.m.data(), t.rows, t.cols, t.draws}; }

// One party's data: names and views into owned copies.
struct Party {
  explicit Party(const std::map<std::string, ir::RealTensor>& values) {
    for (const auto& [name, value] : values) names.push_back(name), copies.push_back(value);
    for (size_t i = 0; i < names.size(); ++i) pointers.push_back(names[i].c_str()), views.push_back(view(copies[i]));
    data = fvi_data{int(names.size()), pointers.data(), views.data()};
  }
  Party(const Party&) = delete;  // data points into the copies
  Party& operator=(const Party&) = delete;
  std::vector<std::string> names;
  std::vector<ir::RealTensor> copies;
  std::vector<const char*> pointers;
  std::vector<fvi_tensor> views;
  fvi_data data{};
};

}  // namespace fvic::test
