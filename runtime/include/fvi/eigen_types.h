#pragma once
// Short names for the Eigen types the runtime uses, templated on the scalar type so that generated
// kernels can run in float as well as double.
#include <Eigen/Dense>

namespace fvi {

template <typename T>
using VectorX = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <typename T>
using MatrixX = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

}  // namespace fvi
