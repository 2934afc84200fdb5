#pragma once
// The batched tensor every generated kernel computes with (docs/kernel-abi.md).
//
// A value of the model is logically a (rows x cols) matrix — a scalar is 1x1, a vector n x 1,
// a row_vector 1 x n — and it either varies with the Monte Carlo draw (draws = S) or does not
// (draws = 1: data, constants, point-estimated hyperparameters). It is stored as one column-major
// matrix of rows x (cols * draws): draw s occupies columns [s*cols, (s+1)*cols), which is also
// one contiguous block of rows*cols numbers. So
//   - X (N x D data) times a vector parameter stored D x S is one matrix product giving N x S;
//   - X times a matrix parameter stored D x (H*S) is one product giving N x (H*S);
//   - every elementwise operation sees the value as (rows*cols) x draws.
#include <Eigen/Dense>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fvi::kernel {

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
using IntVec = Eigen::Matrix<int64_t, Eigen::Dynamic, 1>;

template <class T>
struct Tensor {
  Mat<T> m;            // rows x (cols * draws)
  Eigen::Index rows = 1;
  Eigen::Index cols = 1;
  Eigen::Index draws = 1;

  Tensor() : m(Mat<T>::Zero(1, 1)) {}
  Tensor(Eigen::Index r, Eigen::Index c, Eigen::Index s) : m(Mat<T>::Zero(r, c * s)), rows(r), cols(c), draws(s) {}

  static Tensor constant(T value) {
    Tensor t(1, 1, 1);
    t.m(0, 0) = value;
    return t;
  }
  // A tensor every element of which the caller writes: no zero-filling pass, one allocation (the
  // statement machine makes one per instruction, so the default 1 x 1 is not made and freed first).
  static Tensor uninitialized(Eigen::Index r, Eigen::Index c, Eigen::Index s) {
    Tensor t{Unallocated{}};
    t.m.resize(r, c * s);
    t.rows = r, t.cols = c, t.draws = s;
    return t;
  }
  // Shapes this tensor as r x c with s draws, reusing its buffer when the size is unchanged
  // (values then undefined until written): the kernels' per-node buffers across calls.
  void reshape_for(Eigen::Index r, Eigen::Index c, Eigen::Index s) {
    if (m.rows() != r || m.cols() != c * s) m.resize(r, c * s);
    rows = r, cols = c, draws = s;
  }
  static Tensor zeros(Eigen::Index r, Eigen::Index c, Eigen::Index s) { return Tensor(r, c, s); }
  static Tensor zeros_like(const Tensor& o) { return Tensor(o.rows, o.cols, o.draws); }

  Eigen::Index size() const { return rows * cols; }
  // Each draw's values as one column: (rows*cols) x draws, no copy.
  Eigen::Map<Mat<T>> flat() { return Eigen::Map<Mat<T>>(m.data(), size(), draws); }
  Eigen::Map<const Mat<T>> flat() const { return Eigen::Map<const Mat<T>>(m.data(), size(), draws); }
  // Draw s as a rows x cols matrix (draw 0 when the value does not vary).
  auto draw(Eigen::Index s) { return m.middleCols((draws == 1 ? 0 : s) * cols, cols); }
  auto draw(Eigen::Index s) const { return m.middleCols((draws == 1 ? 0 : s) * cols, cols); }

 private:
  struct Unallocated {};
  explicit Tensor(Unallocated) {}
};

// An integer value of the data (indices, counts, categories): never varies with the draw.
struct IntTensor {
  Eigen::Matrix<int64_t, Eigen::Dynamic, Eigen::Dynamic> m;
  Eigen::Index rows() const { return m.rows(); }
  Eigen::Index cols() const { return m.cols(); }
  Eigen::Index size() const { return m.size(); }
};

class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

inline std::string shape_string(Eigen::Index r, Eigen::Index c, Eigen::Index s) {
  return "(" + std::to_string(r) + "x" + std::to_string(c) + ", " + std::to_string(s) + " draws)";
}

template <class T>
std::string shape_string(const Tensor<T>& t) {
  return shape_string(t.rows, t.cols, t.draws);
}

// The draw count of a result combining values with draws a and b (1 broadcasts).
inline Eigen::Index joint_draws(Eigen::Index a, Eigen::Index b) {
  if (a != b && a != 1 && b != 1)
    throw ShapeError("values with " + std::to_string(a) + " and " + std::to_string(b) + " draws combined");
  return a == 1 ? b : a;
}

}  // namespace fvi::kernel
