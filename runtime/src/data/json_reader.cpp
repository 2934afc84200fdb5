// Stan's JSON data format: an object of variables, each a number or (nested) lists of numbers.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "fvi/data/readers.h"
#include "file_util.h"

namespace fvi::data {

namespace {

using nlohmann::json;

// The dims of a nested list, read along its first elements: [[1, 2, 3], [4, 5, 6]] is {2, 3}.
std::vector<int64_t> dims_of(const json& v) {
  std::vector<int64_t> dims;
  const json* x = &v;
  while (x->is_array()) {
    dims.push_back(static_cast<int64_t>(x->size()));
    if (x->empty()) break;
    x = &(*x)[0];
    if (dims.size() > 32) break;  // the walk below rejects it
  }
  return dims;
}

std::string index_string(const std::vector<int64_t>& at) {
  std::string s = "[";
  for (size_t i = 0; i < at.size(); ++i) s += (i ? ", " : "") + std::to_string(at[i] + 1);
  return s + "]";
}

class Filler {
 public:
  Filler(const std::string& source, const std::string& name, const std::vector<int64_t>& dims, std::vector<double>& out)
      : source_(source), name_(name), dims_(dims), out_(out) {
    // Column-major strides over all dims (fvi/data/dataset.h).
    strides_.resize(dims.size());
    int64_t s = 1;
    for (size_t i = 0; i < dims.size(); ++i) strides_[i] = s, s *= dims[i];
  }

  void fill(const json& v, size_t level, int64_t offset) {
    if (level == dims_.size()) {
      if (v.is_array())
        fail("is a list where a number is expected (the lists of " + name_ + " are nested " +
             std::to_string(dims_.size()) + " deep at its first element)");
      out_[static_cast<size_t>(offset)] = number(v);
      return;
    }
    if (!v.is_array()) fail("is a number where a list of " + std::to_string(dims_[level]) + " values is expected");
    if (static_cast<int64_t>(v.size()) != dims_[level])
      fail("has " + std::to_string(v.size()) + " values, but " + (level == 0 ? name_ : name_ + first(level)) +
           " has " + std::to_string(dims_[level]) + " (ragged lists: every row must have the same length)");
    for (size_t i = 0; i < v.size(); ++i) {
      at_.push_back(static_cast<int64_t>(i));
      fill(v[i], level + 1, offset + static_cast<int64_t>(i) * strides_[level]);
      at_.pop_back();
    }
  }

 private:
  std::string first(size_t level) const { return index_string(std::vector<int64_t>(level, 0)); }

  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(source_ + ": " + name_ + (at_.empty() ? "" : index_string(at_)) + " " + what);
  }

  double number(const json& x) const {
    if (x.is_number_unsigned()) return static_cast<double>(x.get<uint64_t>());
    if (x.is_number_integer()) return static_cast<double>(x.get<int64_t>());
    if (x.is_number_float()) return x.get<double>();
    if (x.is_string()) {
      const std::string s = x.get<std::string>();
      const double inf = std::numeric_limits<double>::infinity();
      if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
      if (s == "Inf" || s == "+Inf" || s == "Infinity" || s == "+Infinity") return inf;
      if (s == "-Inf" || s == "-Infinity") return -inf;
      fail("is the string \"" + s.substr(0, 40) + "\", not a number (only \"NaN\", \"Inf\" and \"-Inf\" may be strings)");
    }
    fail(std::string("is ") + (x.is_null() ? "null" : x.is_boolean() ? "a boolean" : "an object") + ", not a number");
  }

  const std::string& source_;
  const std::string& name_;
  const std::vector<int64_t>& dims_;
  std::vector<double>& out_;
  std::vector<int64_t> strides_;
  std::vector<int64_t> at_;
};

}  // namespace

DataSet parse_json(const std::string& text, const std::string& source) {
  json j;
  std::string twice;  // a top-level name given twice (nlohmann would keep the last silently)
  std::unordered_set<std::string> keys;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && twice.empty()) {
      std::string k = parsed.get<std::string>();
      if (!keys.insert(k).second) twice = std::move(k);
    }
    return true;
  };
  try {
    j = json::parse(text, on_event);
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." -> from "parse error".
    const size_t at = what.find("parse error");
    throw DataError(source + ": not valid JSON: " + (at == std::string::npos ? what : what.substr(at)));
  }
  if (!twice.empty()) throw DataError(source + ": " + twice + " is defined twice in this file");
  if (!j.is_object())
    throw DataError(source + ": expected a JSON object of variables ({\"N\": 3, \"y\": [0, 1, 1]}), found " +
                    (j.is_array() ? "a list" : "a single value"));
  DataSet out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    Variable v;
    v.name = it.key();
    v.source = source;
    if (it.value().is_object())
      throw DataError(source + ": " + v.name + " is an object; a variable is a number or a list of numbers");
    std::vector<int64_t> dims = dims_of(it.value());
    if (dims.size() > 32) throw DataError(source + ": " + v.name + " is nested more than 32 lists deep");
    // Each value takes a character of the text, so a product of sizes beyond its length (or an
    // overflow) means the lists along the first elements are longer than the others.
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d != 0 && n > static_cast<int64_t>(text.size()) / d)
        throw DataError(source + ": " + v.name + " is ragged: its lists do not all have the lengths of its first ones");
      n *= d;
    }
    v.values.assign(static_cast<size_t>(n), 0.0);
    Filler(source, v.name, dims, v.values).fill(it.value(), 0, 0);
    v.set_dims(std::move(dims));
    out.add(std::move(v));
  }
  return out;
}

DataSet read_json(const std::string& path) {
  DataSet out = parse_json(read_whole_file(path), path);
  out.add_file(path);
  return out;
}

}  // namespace fvi::data
