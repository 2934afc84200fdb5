#pragma once
// Input validation. Each check throws fvi::InvalidArgument with a message of the form
// "<function>: <name>[i] is NaN" (vectors), "<function>: <name>(i,j) is inf" (matrices) or
// "<function>: <name> must be positive but is -1" (scalars), so the caller sees which input is bad.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include <Eigen/Dense>

#include "fvi/error.h"

namespace fvi {
namespace internal {

template <typename T>
std::string to_string(const T& x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}

// "name", "name[i]" or "name(i,j)" depending on the shape.
inline std::string element_name(const char* name, Eigen::Index rows, Eigen::Index cols, Eigen::Index i,
                                Eigen::Index j) {
  std::ostringstream os;
  os << name;
  if (rows == 1 && cols == 1) return os.str();
  if (cols == 1) {
    os << "[" << i << "]";
  } else if (rows == 1) {
    os << "[" << j << "]";
  } else {
    os << "(" << i << "," << j << ")";
  }
  return os.str();
}

[[noreturn]] inline void throw_invalid(const char* function, const std::string& what) {
  throw InvalidArgument(std::string(function) + ": " + what);
}

}  // namespace internal

// x must be finite (not NaN, not +-inf).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
void check_finite(const char* function, const char* name, T x) {
  if (std::isnan(x)) internal::throw_invalid(function, std::string(name) + " is NaN");
  if (std::isinf(x)) internal::throw_invalid(function, std::string(name) + " is inf");
}

template <typename Derived>
void check_finite(const char* function, const char* name, const Eigen::DenseBase<Derived>& x) {
  // A branch-free pass first (GCC vectorises it); the loop below only names the first bad element.
  using Real = typename Derived::RealScalar;
  bool all_finite = true;
  for (Eigen::Index j = 0; j < x.cols(); ++j)
    for (Eigen::Index i = 0; i < x.rows(); ++i) all_finite &= std::abs(x(i, j)) <= std::numeric_limits<Real>::max();
  if (all_finite) return;
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      const auto v = x(i, j);
      if (std::isnan(v)) {
        internal::throw_invalid(function, internal::element_name(name, x.rows(), x.cols(), i, j) + " is NaN");
      }
      if (std::isinf(v)) {
        internal::throw_invalid(function, internal::element_name(name, x.rows(), x.cols(), i, j) + " is inf");
      }
    }
  }
}

// x must be finite and > 0.
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
void check_positive(const char* function, const char* name, T x) {
  check_finite(function, name, x);
  if (!(x > 0)) {
    internal::throw_invalid(function, std::string(name) + " must be positive but is " + internal::to_string(x));
  }
}

template <typename Derived>
void check_positive(const char* function, const char* name, const Eigen::DenseBase<Derived>& x) {
  check_finite(function, name, x);
  bool all_positive = true;
  for (Eigen::Index j = 0; j < x.cols(); ++j)
    for (Eigen::Index i = 0; i < x.rows(); ++i) all_positive &= x(i, j) > 0;
  if (all_positive) return;
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    for (Eigen::Index i = 0; i < x.rows(); ++i) {
      if (!(x(i, j) > 0)) {
        internal::throw_invalid(function, internal::element_name(name, x.rows(), x.cols(), i, j) +
                                              " must be positive but is " + internal::to_string(x(i, j)));
      }
    }
  }
}

// x must be finite and >= 0.
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
void check_nonnegative(const char* function, const char* name, T x) {
  check_finite(function, name, x);
  if (!(x >= 0)) {
    internal::throw_invalid(function, std::string(name) + " must be non-negative but is " + internal::to_string(x));
  }
}

// lo <= x <= hi (x finite).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
void check_bounded(const char* function, const char* name, T x, T lo, T hi) {
  check_finite(function, name, x);
  if (!(x >= lo && x <= hi)) {
    internal::throw_invalid(function, std::string(name) + " must be in [" + internal::to_string(lo) + ", " +
                                          internal::to_string(hi) + "] but is " + internal::to_string(x));
  }
}

inline void check_size(const char* function, const char* name, Eigen::Index actual, Eigen::Index expected) {
  if (actual != expected) {
    internal::throw_invalid(function, std::string(name) + " has size " + std::to_string(actual) + " but " +
                                          std::to_string(expected) + " was expected");
  }
}

template <typename Derived>
void check_square(const char* function, const char* name, const Eigen::DenseBase<Derived>& m) {
  if (m.rows() != m.cols()) {
    internal::throw_invalid(function, std::string(name) + " is " + std::to_string(m.rows()) + "x" +
                                          std::to_string(m.cols()) + " but must be square");
  }
}

// Symmetric up to a relative tolerance (default: 1e-8 of the largest absolute entry).
template <typename Derived>
void check_symmetric(const char* function, const char* name, const Eigen::MatrixBase<Derived>& m,
                     double relative_tolerance = 1e-8) {
  check_square(function, name, m);
  using std::abs;
  const double scale = static_cast<double>(m.cwiseAbs().maxCoeff());
  for (Eigen::Index j = 0; j < m.cols(); ++j) {
    for (Eigen::Index i = j + 1; i < m.rows(); ++i) {
      if (abs(static_cast<double>(m(i, j) - m(j, i))) > relative_tolerance * scale) {
        internal::throw_invalid(function, std::string(name) + " is not symmetric: (" + std::to_string(i) + "," +
                                              std::to_string(j) + ") = " + internal::to_string(m(i, j)) + " but (" +
                                              std::to_string(j) + "," + std::to_string(i) +
                                              ") = " + internal::to_string(m(j, i)));
      }
    }
  }
}

// Finite, symmetric and positive definite (Cholesky succeeds with positive pivots).
template <typename Derived>
Eigen::LLT<Eigen::Matrix<typename Derived::Scalar, Eigen::Dynamic, Eigen::Dynamic>> check_positive_definite(
    const char* function, const char* name, const Eigen::MatrixBase<Derived>& m) {
  using Matrix = Eigen::Matrix<typename Derived::Scalar, Eigen::Dynamic, Eigen::Dynamic>;
  check_finite(function, name, m);
  check_symmetric(function, name, m);
  Eigen::LLT<Matrix> llt(Matrix(m.template selfadjointView<Eigen::Lower>()));
  if (llt.info() != Eigen::Success || !(llt.matrixLLT().diagonal().array() > 0).all() ||
      !llt.matrixLLT().diagonal().allFinite()) {
    internal::throw_invalid(function, std::string(name) + " is not positive definite");
  }
  return llt;
}

// A Cholesky factor: square, lower triangular, finite, strictly positive diagonal.
template <typename Derived>
void check_cholesky_factor(const char* function, const char* name, const Eigen::MatrixBase<Derived>& l) {
  check_square(function, name, l);
  check_finite(function, name, l);
  for (Eigen::Index j = 1; j < l.cols(); ++j) {
    for (Eigen::Index i = 0; i < j; ++i) {
      if (l(i, j) != 0) {
        internal::throw_invalid(function, std::string(name) + " is not lower triangular: (" + std::to_string(i) +
                                              "," + std::to_string(j) + ") = " + internal::to_string(l(i, j)));
      }
    }
  }
  for (Eigen::Index i = 0; i < l.rows(); ++i) {
    if (!(l(i, i) > 0)) {
      internal::throw_invalid(function, std::string(name) + " has a non-positive diagonal entry (" +
                                            std::to_string(i) + "," + std::to_string(i) +
                                            ") = " + internal::to_string(l(i, i)));
    }
  }
}

}  // namespace fvi
