#pragma once
// A party's data (DESIGN.md §5): named values, each a tensor of doubles (ints as whole-number
// doubles) with the dimensions it was given in and the file it came from, and the kernel ABI's
// view of them (fvi_data, runtime/include/fvi/kernel/abi.h).
//
// Storage: the elements of a value with dims (d0, d1, ..., dk) are in column-major order over all
// its dims (element (i0, i1, ...) at i0 + d0 * (i1 + d1 * (i2 + ...))), viewed as the fvi_tensor
// d0 x (d1 * ... * dk): a scalar is 1 x 1, a list of n values n x 1, a matrix (a list of r rows of
// c values) r x c. A `row_vector` is reshaped to 1 x n when it is validated against its
// declaration (fvi/data/validate.h).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fvi/kernel/abi.h"

namespace fvi::data {

// Data that cannot be read or does not match the model. The message names the file (and the
// variable and what was expected); a validation error holds every problem found, one per line.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Variable {
  std::string name;
  std::vector<int64_t> dims;   // as given: {} a scalar, {n} a list, {r, c} a list of rows, ...
  std::vector<double> values;  // column-major over dims (see above)
  int64_t rows = 1, cols = 1;  // the fvi_tensor view: dims[0] x (the product of the others)
  std::string source;          // the file it came from, e.g. "data/silo-2.json"

  // Sets dims and the matching rows x cols; `values` must already hold their product.
  void set_dims(std::vector<int64_t> d);
  int64_t size() const { return static_cast<int64_t>(values.size()); }
};

class DataSet {
 public:
  DataSet() = default;
  DataSet(const DataSet& other);
  DataSet(DataSet&& other) noexcept;
  DataSet& operator=(const DataSet& other);
  DataSet& operator=(DataSet&& other) noexcept;

  // Adds a variable; throws DataError naming both files when `name` is already defined.
  void add(Variable v);
  // Adds every variable of `other` (the same duplicate error) and remembers its files.
  void absorb(DataSet&& other);
  // This party's variables followed by `other`'s, where `other` does not define the same name
  // (the public data joins every party's: `silo.merged(public_data)`).
  DataSet merged(const DataSet& other) const&;
  DataSet merged(const DataSet& other) &&;

  const Variable* find(const std::string& name) const;
  // Gives `name` the dims `dims` viewed as rows x cols (the same values, in the same order):
  // validation reshapes a row_vector to 1 x n and an empty list to its declared shape.
  void reshape(const std::string& name, std::vector<int64_t> dims, int64_t rows, int64_t cols);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const std::vector<Variable>& variables() const { return vars_; }
  std::vector<std::string> names() const;
  bool empty() const { return vars_.empty(); }

  // The files this party's data was read from ("data/silo-2.json", "data/silo-2/"), or, when
  // none exists, the file that was expected and was not found (`found()` is then false).
  const std::vector<std::string>& files() const { return files_; }
  bool found() const { return found_; }
  void add_file(const std::string& file) { files_.push_back(file), found_ = true; }
  void expect_file(const std::string& file) {
    if (files_.empty()) files_.push_back(file), found_ = false;
  }
  // "data/silo-2.json" or "data/silo-2.json, data/silo-2/", or "data/server.json (not found)".
  std::string where() const;

  // The kernel ABI's view: every variable by name. Valid until this DataSet changes; the tensors
  // point into it. (fvi_tensor.data is not const: kernels only read it.)
  const fvi_data& view() const { return view_; }

 private:
  void rebuild_view();

  std::vector<Variable> vars_;
  std::vector<std::string> files_;
  bool found_ = false;
  std::vector<const char*> names_;
  std::vector<fvi_tensor> tensors_;
  fvi_data view_{0, nullptr, nullptr};
};

}  // namespace fvi::data
