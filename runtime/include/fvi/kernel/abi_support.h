#pragma once
// What generated kernels need around the C ABI (abi.h): converting tensors, finding a party's
// data by name with its declared shape checked, and turning exceptions into fvi_error messages.
#include <cstdio>
#include <exception>
#include <string>

#include "fvi/kernel/abi.h"
#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

inline Tensor<double> from_abi(const fvi_tensor& t) {
  Tensor<double> out(t.rows, t.cols, t.draws);
  out.m = Eigen::Map<const Mat<double>>(t.data, t.rows, t.cols * t.draws);
  return out;
}

inline fvi_tensor to_abi(Tensor<double>& t) { return fvi_tensor{t.m.data(), t.rows, t.cols, t.draws}; }

inline void copy_to_abi(const Tensor<double>& t, fvi_tensor& out) {
  if (out.rows * out.cols * out.draws != t.m.size())
    throw ShapeError("gradient buffer of " + shape_string(out.rows, out.cols, out.draws) + " for " + shape_string(t));
  Eigen::Map<Mat<double>>(out.data, t.m.rows(), t.m.cols()) = t.m;
}

// The data variable `name`, which must be rows x cols (a scalar is 1 x 1).
inline Tensor<double> bind_data(const fvi_data* data, const char* name, int64_t rows, int64_t cols) {
  for (int i = 0; data && i < data->count; ++i) {
    if (std::string(data->names[i]) != name) continue;
    const fvi_tensor& t = data->values[i];
    if (t.rows * t.cols != rows * cols)
      throw ShapeError(std::string("data variable '") + name + "' has " + std::to_string(t.rows) + " x " +
                       std::to_string(t.cols) + " values; the model declares " + std::to_string(rows) + " x " +
                       std::to_string(cols));
    Tensor<double> out(rows, cols, 1);
    out.m = Eigen::Map<const Mat<double>>(t.data, rows, cols);
    return out;
  }
  throw std::invalid_argument(std::string("data variable '") + name + "' is missing");
}

// An int size from the data (`N`, `D`): a 1 x 1 value holding a whole number.
inline int64_t data_size(const fvi_data* data, const char* name) {
  Tensor<double> t = bind_data(data, name, 1, 1);
  double v = t.m(0, 0);
  if (v != static_cast<double>(static_cast<int64_t>(v)) || v < 0)
    throw std::invalid_argument(std::string("size '") + name + "' must be a non-negative integer");
  return static_cast<int64_t>(v);
}

inline Tensor<double> batch_rows(const Tensor<double>& full, int64_t begin, int64_t count) {
  if (count < 0) return full;
  if (begin < 0 || begin + count > full.rows) throw std::out_of_range("batch outside the data's rows");
  Tensor<double> out(count, full.cols, 1);
  out.m = full.m.middleRows(begin, count);
  return out;
}

inline IntVec batch_index(const Tensor<double>& full, int64_t begin, int64_t count) {
  Tensor<double> rows = batch_rows(full, begin, count);
  return rows.m.col(0).cast<int64_t>();
}

template <class F>
int guarded(fvi_error* error, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    if (error) std::snprintf(error->message, sizeof error->message, "%s", e.what());
    return 1;
  }
}

}  // namespace fvi::kernel
