#pragma once
// What generated kernels need around the C ABI (abi.h): converting tensors, finding a party's
// data by name with its declared shape checked, and turning exceptions into fvi_error messages.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include <utility>
#include <vector>

#include "fvi/kernel/abi.h"
#include "fvi/kernel/noise.h"
#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

// An ABI tensor (always double) as a kernel tensor of scalar T: a copy, converted for float.
template <class T = double>
Tensor<T> from_abi(const fvi_tensor& t) {
  Tensor<T> out(t.rows, t.cols, t.draws);
  out.m = Eigen::Map<const Mat<double>>(t.data, t.rows, t.cols * t.draws).cast<T>();
  return out;
}

// from_abi into `out`, reusing its buffer (the inputs, means and sds of every call).
template <class T>
void assign_from_abi(const fvi_tensor& t, Tensor<T>& out) {
  out.reshape_for(t.rows, t.cols, t.draws);
  out.m = Eigen::Map<const Mat<double>>(t.data, t.rows, t.cols * t.draws).template cast<T>();
}

// Seed k of a backward call into `out`, reusing its buffer: zeros shaped like `like` when the
// caller passed none.
template <class T>
void assign_seed(const fvi_tensor* const* seeds, int k, const Tensor<T>& like, Tensor<T>& out) {
  if (seeds && seeds[k]) {
    assign_from_abi(*seeds[k], out);
  } else {
    out.reshape_for(like.rows, like.cols, like.draws);
    out.m.setZero();
  }
}

inline fvi_tensor to_abi(Tensor<double>& t) { return fvi_tensor{t.m.data(), t.rows, t.cols, t.draws}; }

// A kernel value as an ABI view: the value itself for double, else converted into `buffer`
// (owned by the caller, valid as long as it lives).
inline fvi_tensor export_abi(Tensor<double>& t, Tensor<double>& buffer) {
  (void)buffer;
  return to_abi(t);
}
template <class T>
fvi_tensor export_abi(const Tensor<T>& t, Tensor<double>& buffer) {
  buffer.reshape_for(t.rows, t.cols, t.draws);
  buffer.m = t.m.template cast<double>();
  return to_abi(buffer);
}

// What a mean-field call was given: the double tensors of forward_meanfield or the float ones of
// forward_meanfield_f32 (the other pair null); sds (of either) may be null.
struct MeanFieldInputs {
  const fvi_tensor* means = nullptr;
  const fvi_tensor* sds = nullptr;
  const fvi_tensor_f32* means_f32 = nullptr;
  const fvi_tensor_f32* sds_f32 = nullptr;
};

// Where backward_meanfield (double) or backward_meanfield_f32 (float) writes each group's
// gradients; d_sds (of either) may be null.
struct MeanFieldOutputs {
  fvi_tensor* d_means = nullptr;
  fvi_tensor* d_sds = nullptr;
  fvi_tensor_f32* d_means_f32 = nullptr;
  fvi_tensor_f32* d_sds_f32 = nullptr;
};

// A piece of a group's gradient: `length` values (each with `draws` draws, as a Tensor stores
// them) that belong at `offset` of the group.
template <class T>
struct GradientPiece {
  const T* data;
  int64_t length, draws, offset;
  GradientPiece(const T* values, int64_t n, int64_t s, int64_t at) : data(values), length(n), draws(s), offset(at) {}
  GradientPiece(const Tensor<T>& value, int64_t at) : GradientPiece(value.m.data(), value.size(), value.draws, at) {}
};

// A group of `size` values with `draws` draws: its gradient written into the caller's buffer
// `data` (of `buffer_size` values, scalar U: double, or float for backward_meanfield_f32) in one
// pass, each element once: the pieces converted to U (summed over their draws where the group has
// one), added where pieces overlap, zeros where none falls. (It was a zero-filled tensor, each
// piece added into it, then a converting copy: three passes over a network's weights per call.)
// The pieces are sorted here.
template <class T, class U>
void write_gradient_into(std::vector<GradientPiece<T>> pieces, int64_t size, int64_t draws, U* data,
                         int64_t buffer_size, const std::string& buffer_shape) {
  if (buffer_size != size * draws)
    throw ShapeError("gradient buffer of " + buffer_shape + " for " + shape_string(size, 1, draws));
  std::sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  Eigen::Map<Mat<U>> o(data, size, draws);
  int64_t written = 0;  // [0, written) holds its final value or a partial sum
  for (const GradientPiece<T>& p : pieces) {
    if (p.offset < 0 || p.offset + p.length > size) throw ShapeError("a gradient piece past the end of its group");
    if (p.draws != draws && p.draws != 1 && draws != 1)
      throw ShapeError("a gradient piece of " + std::to_string(p.draws) + " draws for a group of " + std::to_string(draws));
    const Eigen::Map<const Mat<T>> v(p.data, p.length, p.draws);
    // Rows [first, first + n) of the piece into the group's rows from `at`: as they are, summed
    // over the piece's draws for a group of one, or the same for every draw of the group.
    const auto put = [&](bool add, int64_t first, int64_t at, int64_t n) {
      auto target = o.middleRows(at, n);
      const auto rows = v.middleRows(first, n).template cast<U>();
      if (p.draws == draws) {
        if (add) target += rows;
        else target = rows;
      } else if (draws == 1) {
        if (add) target += rows.rowwise().sum();
        else target = rows.rowwise().sum();
      } else {
        if (add) target.colwise() += rows.col(0);
        else target.colwise() = rows.col(0);
      }
    };
    if (p.offset > written) {
      o.middleRows(written, p.offset - written).setZero();
      written = p.offset;
    }
    const int64_t end = p.offset + p.length, overlap = std::min(written, end) - p.offset;
    if (overlap > 0) put(true, 0, p.offset, overlap);  // onto an earlier piece
    if (end > written) {
      put(false, written - p.offset, written, end - written);
      written = end;
    }
  }
  if (written < size) o.middleRows(written, size - written).setZero();
}

// write_gradient_into an ABI tensor (backward's gradients).
template <class T>
void write_gradient(std::vector<GradientPiece<T>> pieces, int64_t size, int64_t draws, fvi_tensor& out) {
  write_gradient_into(std::move(pieces), size, draws, out.data, out.rows * out.cols * out.draws,
                      shape_string(out.rows, out.cols, out.draws));
}

// Group g's gradient with respect to its means (or, `sd`, its sds) from backward_meanfield into
// the caller's buffer, double or float, whichever the call gave: one value per element of the
// group (`size`). A sd buffer the caller did not give is skipped; a means buffer must be given.
template <class T>
void write_meanfield_gradient(std::vector<GradientPiece<T>> pieces, int64_t size, const MeanFieldOutputs& out, int g,
                              bool sd) {
  fvi_tensor* d = sd ? out.d_sds : out.d_means;
  fvi_tensor_f32* f = sd ? out.d_sds_f32 : out.d_means_f32;
  if (d && d[g].data) {
    write_gradient(std::move(pieces), size, 1, d[g]);
  } else if (f && f[g].data) {
    write_gradient_into(std::move(pieces), size, 1, f[g].data, f[g].rows * f[g].cols * f[g].draws,
                        shape_string(f[g].rows, f[g].cols, f[g].draws));
  } else if (!sd) {
    throw std::invalid_argument("backward_meanfield needs a buffer for each group's mean gradient");
  }
}

// The data variable `name`, which must be rows x cols (a scalar is 1 x 1), converted to T.
template <class T = double>
Tensor<T> bind_data(const fvi_data* data, const char* name, int64_t rows, int64_t cols) {
  for (int i = 0; data && i < data->count; ++i) {
    if (std::string(data->names[i]) != name) continue;
    const fvi_tensor& t = data->values[i];
    if (t.rows * t.cols != rows * cols)
      throw ShapeError(std::string("data variable '") + name + "' has " + std::to_string(t.rows) + " x " +
                       std::to_string(t.cols) + " values; the model declares " + std::to_string(rows) + " x " +
                       std::to_string(cols));
    Tensor<T> out(rows, cols, 1);
    out.m = Eigen::Map<const Mat<double>>(t.data, rows, cols).cast<T>();
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

template <class T>
Tensor<T> batch_rows(const Tensor<T>& full, int64_t begin, int64_t count) {
  if (count < 0) return full;
  if (begin < 0 || begin + count > full.rows) throw std::out_of_range("batch outside the data's rows");
  Tensor<T> out(count, full.cols, 1);
  out.m = full.m.middleRows(begin, count);
  return out;
}

// Rows [begin, begin + count) of `full` into `out`, reusing its buffer (a minibatch; a full-data
// call reads the bound data in place and never copies it: rows_read_in_place in
// compiler/backend/cpp/emit_kernels.cpp).
template <class T>
void batch_rows_into(const Tensor<T>& full, int64_t begin, int64_t count, Tensor<T>& out) {
  if (begin < 0 || count < 0 || begin + count > full.rows) throw std::out_of_range("batch outside the data's rows");
  out.reshape_for(count, full.cols, 1);
  out.m = full.m.middleRows(begin, count);
}

template <class T>
IntVec batch_index(const Tensor<T>& full, int64_t begin, int64_t count) {
  Tensor<T> rows = batch_rows(full, begin, count);
  return rows.m.col(0).template cast<int64_t>();
}

// A group's means or sds as the engine passes them to forward_meanfield (double) or
// forward_meanfield_f32 (float), size x 1, read in place during that call: each slice the kernel
// takes converts its own elements, so a group is not first copied whole into the kernel's scalar
// type (for a network's 159k weights, a pass over 2 x 159k values per call). Neither pointer is
// set for a group without a sd: its values are zeros.
struct AbiColumn {
  const double* data = nullptr;
  const float* data_f32 = nullptr;
  Eigen::Index rows = 0;
  Eigen::Index size() const { return rows; }
  bool present() const { return data || data_f32; }
  double operator[](Eigen::Index i) const { return data ? data[i] : data_f32 ? double(data_f32[i]) : 0.0; }
};

namespace abi_detail {
template <class Tensor>
void check_column(const Tensor& t) {
  if (t.cols != 1 || t.draws != 1)
    throw ShapeError("a group's means or sds must be one column with one draw, not " + shape_string(t.rows, t.cols, t.draws));
}
}  // namespace abi_detail

// Group g's means: they must be given.
inline AbiColumn mean_column(const MeanFieldInputs& in, int g) {
  if (in.means) return abi_detail::check_column(in.means[g]), AbiColumn{in.means[g].data, nullptr, in.means[g].rows};
  if (in.means_f32)
    return abi_detail::check_column(in.means_f32[g]), AbiColumn{nullptr, in.means_f32[g].data, in.means_f32[g].rows};
  throw std::invalid_argument("forward_meanfield needs the groups' means");
}

// Group g's sds, or a column of `rows` zeros (not present()) when the caller gave none.
inline AbiColumn sd_column(const MeanFieldInputs& in, int g, Eigen::Index rows) {
  if (in.sds && in.sds[g].data) return abi_detail::check_column(in.sds[g]), AbiColumn{in.sds[g].data, nullptr, in.sds[g].rows};
  if (in.sds_f32 && in.sds_f32[g].data)
    return abi_detail::check_column(in.sds_f32[g]), AbiColumn{nullptr, in.sds_f32[g].data, in.sds_f32[g].rows};
  return AbiColumn{nullptr, nullptr, rows};
}

// slice() of a group's means or sds, converted to T.
template <class T>
Tensor<T> slice(const AbiColumn& group, Eigen::Index offset, Eigen::Index rows, Eigen::Index cols) {
  if (offset < 0 || offset + rows * cols > group.size())
    throw ShapeError("slice past the end of a group of " + std::to_string(group.size()));
  Tensor<T> out = Tensor<T>::uninitialized(rows, cols, 1);
  if (group.data) out.flat() = Eigen::Map<const Mat<double>>(group.data + offset, rows * cols, 1).template cast<T>();
  else if (group.data_f32) out.flat() = Eigen::Map<const Mat<float>>(group.data_f32 + offset, rows * cols, 1).template cast<T>();
  else out.m.setZero();
  return out;
}

// An input group's mean-field sample, for the `ranges` (offset, length) of the group that the
// kernel reads by ordinary reparameterisation, stored one after another (compact: a locally
// reparameterised matrix of the group is neither sampled nor stored): row i of range r is
// theta = mean[offset + i] + sd[offset + i] eps, eps = normal s * group size + offset + i of
// `stream`. Without a sd (a point estimate, or a NULL sd) theta is the mean with one draw.
template <class T>
void meanfield_sample(const AbiColumn& mean, const AbiColumn* sd, Eigen::Index draws, uint64_t key, uint32_t stream,
                      const std::vector<std::pair<int64_t, int64_t>>& ranges, Tensor<T>& theta, Tensor<T>& eps) {
  if (sd && sd->rows != mean.rows)
    throw ShapeError("a group's sds have " + std::to_string(sd->rows) + " values, its means " + std::to_string(mean.rows));
  int64_t rows = 0;
  for (const auto& [offset, length] : ranges) {
    if (offset < 0 || offset + length > mean.rows) throw ShapeError("a variable past the end of its group's mean");
    rows += length;
  }
  const Eigen::Index S = sd ? draws : 1;
  theta = Tensor<T>(rows, 1, S);
  eps = Tensor<T>(rows, 1, S);
  int64_t at = 0;
  for (const auto& [offset, length] : ranges) {
    for (Eigen::Index s = 0; s < S; ++s) {
      T* e = eps.m.col(s).data() + at;
      if (sd) normal_range<T>(key, stream, static_cast<uint64_t>(s * mean.rows + offset), length, e);
      for (int64_t i = 0; i < length; ++i)
        theta.m(at + i, s) = T(mean[offset + i]) + (sd ? T((*sd)[offset + i]) * e[i] : T(0));
    }
    at += length;
  }
}

// The chain rule through theta = mean + sd eps for the `ranges` of the group that the kernel
// samples (their compact rows in d_theta and eps, as meanfield_sample): d mean = d theta summed
// over the draws, d sd = (d theta .* eps) summed (nothing without a sd), compact, into
// `d_mean` / `d_sd`, and one piece per range appended to `mean_pieces` / `sd_pieces` for
// write_gradient (which reads them from d_mean / d_sd: they must outlive it).
template <class T>
void meanfield_chain(const Tensor<T>& d_theta, const Tensor<T>& eps, bool sampled,
                     const std::vector<std::pair<int64_t, int64_t>>& ranges, Tensor<T>& d_mean, Tensor<T>& d_sd,
                     std::vector<GradientPiece<T>>& mean_pieces, std::vector<GradientPiece<T>>& sd_pieces) {
  d_mean.reshape_for(d_theta.rows, 1, 1);
  d_mean.m = d_theta.m.rowwise().sum();
  if (sampled) {
    d_sd.reshape_for(d_theta.rows, 1, 1);
    d_sd.m = (d_theta.m.array() * eps.m.array()).rowwise().sum().matrix();
  }
  int64_t at = 0;
  for (const auto& [offset, length] : ranges) {
    mean_pieces.push_back({d_mean.m.data() + at, length, 1, offset});
    if (sampled) sd_pieces.push_back({d_sd.m.data() + at, length, 1, offset});
    at += length;
  }
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
