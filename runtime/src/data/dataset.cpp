#include "fvi/data/dataset.h"

#include <utility>

namespace fvi::data {

void Variable::set_dims(std::vector<int64_t> d) {
  dims = std::move(d);
  rows = dims.empty() ? 1 : dims[0];
  cols = 1;
  for (size_t i = 1; i < dims.size(); ++i) cols *= dims[i];
}

DataSet::DataSet(const DataSet& other) : vars_(other.vars_), files_(other.files_), found_(other.found_) {
  rebuild_view();
}

DataSet::DataSet(DataSet&& other) noexcept
    : vars_(std::move(other.vars_)), files_(std::move(other.files_)), found_(other.found_) {
  rebuild_view();
  other.rebuild_view();
}

DataSet& DataSet::operator=(const DataSet& other) {
  if (this != &other) {
    vars_ = other.vars_;
    files_ = other.files_;
    found_ = other.found_;
    rebuild_view();
  }
  return *this;
}

DataSet& DataSet::operator=(DataSet&& other) noexcept {
  if (this != &other) {
    vars_ = std::move(other.vars_);
    files_ = std::move(other.files_);
    found_ = other.found_;
    rebuild_view();
    other.rebuild_view();
  }
  return *this;
}

void DataSet::add(Variable v) {
  if (const Variable* old = find(v.name))
    throw DataError(v.source + ": " + v.name + " is defined twice for this party: in " + old->source + " and in " +
                    v.source);
  vars_.push_back(std::move(v));
  rebuild_view();
}

void DataSet::absorb(DataSet&& other) {
  for (const std::string& f : other.files_)
    if (other.found_) add_file(f);
  for (Variable& v : other.vars_) {
    if (const Variable* old = find(v.name))
      throw DataError(v.source + ": " + v.name + " is defined twice for this party: in " + old->source + " and in " +
                      v.source);
    vars_.push_back(std::move(v));
  }
  other.vars_.clear();
  other.rebuild_view();
  rebuild_view();
}

DataSet DataSet::merged(const DataSet& other) const& { return DataSet(*this).merged(other); }

DataSet DataSet::merged(const DataSet& other) && {
  DataSet out(std::move(*this));
  for (const Variable& v : other.vars_)
    if (!out.find(v.name)) out.vars_.push_back(v);
  out.rebuild_view();
  return out;
}

const Variable* DataSet::find(const std::string& name) const {
  for (const Variable& v : vars_)
    if (v.name == name) return &v;
  return nullptr;
}

void DataSet::reshape(const std::string& name, std::vector<int64_t> dims, int64_t rows, int64_t cols) {
  for (Variable& v : vars_) {
    if (v.name != name) continue;
    if (rows * cols != v.size())
      throw std::logic_error("DataSet::reshape: " + name + " has " + std::to_string(v.size()) + " values, not " +
                             std::to_string(rows) + " x " + std::to_string(cols));
    v.dims = std::move(dims);
    v.rows = rows;
    v.cols = cols;
    rebuild_view();
    return;
  }
  throw std::logic_error("DataSet::reshape: no variable " + name);
}

std::vector<std::string> DataSet::names() const {
  std::vector<std::string> out;
  for (const Variable& v : vars_) out.push_back(v.name);
  return out;
}

std::string DataSet::where() const {
  std::string out;
  for (size_t i = 0; i < files_.size(); ++i) out += (i ? ", " : "") + files_[i];
  if (!found_ && !out.empty()) out += " (not found)";
  return out.empty() ? std::string("(no file)") : out;
}

void DataSet::rebuild_view() {
  names_.clear();
  tensors_.clear();
  for (Variable& v : vars_) {
    names_.push_back(v.name.c_str());
    tensors_.push_back(fvi_tensor{v.values.data(), v.rows, v.cols, 1});
  }
  view_ = fvi_data{static_cast<int>(vars_.size()), names_.data(), tensors_.data()};
}

}  // namespace fvi::data
