#pragma once
// Short names for the Eigen types the runtime uses, templated on the scalar type so that generated
// kernels can run in float as well as double.
#include <Eigen/Dense>

namespace fvi {

template <typename T>
using VectorX = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <typename T>
using MatrixX = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

namespace internal {
template <typename T>
struct type_identity {
  using type = T;
};
}  // namespace internal

// Function parameters of these types do not take part in template argument deduction, so callers
// may pass Eigen expressions (e.g. VectorXd::Constant(1, x)); T is deduced from another argument.
template <typename T>
using VectorArg = typename internal::type_identity<VectorX<T>>::type;
template <typename T>
using MatrixArg = typename internal::type_identity<MatrixX<T>>::type;

}  // namespace fvi
