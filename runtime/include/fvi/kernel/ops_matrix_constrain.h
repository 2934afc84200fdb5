#pragma once
// Kernel operations (ops.h) for Stan's structured matrix parameters, draw by draw: the map from a
// parameter's unconstrained values u to its declared value, its log-Jacobian, and both adjoints.
// `kind` names the structure:
//
//   "cholesky_corr"   cholesky_factor_corr[K]: u holds K(K-1)/2 values, row by row through the
//                     strict lower triangle. With z = tanh(u) (the canonical partial
//                     correlations), L_00 = 1 and in row i: L_ij = z_ij w_ij for j < i, L_ii = w_ii,
//                     where w_ij = sqrt(1 - sum_{k<j} L_ik^2) = prod_{k<j} sech(u_ik): Stan's
//                     cholesky_corr_constrain (Stan reference manual, "Cholesky factors of
//                     correlation matrices"), the square roots taken as products of sechs, which
//                     is the same value without 1 - (a sum near 1)'s cancellation.
//                     log|J| = sum over i > k of (i - k + 1) log sech(u_ik): tanh's sum of
//                     log(1 - z^2) and the 0.5 log(1 - sum_{k<j} L_ik^2) of each L_ij, j = 1..i-1.
#include <cmath>
#include <stdexcept>
#include <string>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

namespace matrix_constrain_detail {

// K from the K(K-1)/2 unconstrained values of a cholesky_factor_corr[K].
inline Eigen::Index correlation_dimension(Eigen::Index m) {
  const auto k = Eigen::Index(std::llround((1 + std::sqrt(1 + 8.0 * double(m))) / 2));
  if (k * (k - 1) / 2 != m)
    throw ShapeError("cholesky_factor_corr: " + std::to_string(m) + " unconstrained values are not K(K-1)/2 for any K");
  return k;
}

// log sech(u) = log 2 - |u| - log1p(exp(-2|u|)): finite for every u.
template <class T>
T log_sech(T u) {
  const T a = std::fabs(u);
  return T(M_LN2) - a - std::log1p(std::exp(-2 * a));
}

template <class T>
void require_kind(const std::string& kind) {
  if (kind != "cholesky_corr") throw std::invalid_argument("no structured matrix transform '" + kind + "'");
}

}  // namespace matrix_constrain_detail

// The declared value (rows x cols per draw) from the unconstrained values u (m x 1 per draw).
template <class T>
Tensor<T> matrix_constrain(const std::string& kind, const Tensor<T>& u) {
  using namespace matrix_constrain_detail;
  require_kind<T>(kind);
  const Eigen::Index K = correlation_dimension(u.size());
  Tensor<T> out(K, K, u.draws);
  for (Eigen::Index s = 0; s < u.draws; ++s) {
    auto x = u.flat().col(s);
    auto L = out.draw(s);
    L(0, 0) = 1;
    Eigen::Index k = 0;
    for (Eigen::Index i = 1; i < K; ++i) {
      T w = 1;  // w_ij: the product of sech(u_ik) over k < j
      for (Eigen::Index j = 0; j < i; ++j, ++k) {
        L(i, j) = std::tanh(x(k)) * w;
        w /= std::cosh(x(k));
      }
      L(i, i) = w;
    }
  }
  return out;
}

// d(sum of G .* value)/du given the adjoint G of the value. Row i's values depend only on row
// i's u: with S_ij = sum_{j' > j} G_ij' L_ij' (L_ii included), d/du_ij = G_ij w_ij sech^2(u_ij)
// - tanh(u_ij) S_ij (w_ij' carries the factor sech(u_ij) for every j' > j, whose log-derivative is
// -tanh(u_ij)).
template <class T>
Tensor<T> matrix_constrain_grad(const std::string& kind, const Tensor<T>& u, const Tensor<T>& g) {
  using namespace matrix_constrain_detail;
  require_kind<T>(kind);
  const Eigen::Index K = correlation_dimension(u.size());
  const Tensor<T> l = matrix_constrain(kind, u);
  const Eigen::Index S = joint_draws(u.draws, g.draws);
  Tensor<T> out(u.rows, u.cols, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    auto x = u.flat().col(u.draws == 1 ? 0 : s);
    auto L = l.draw(s);
    auto G = g.draw(s);
    auto d = out.flat().col(s);
    Eigen::Index row_start = 0;
    for (Eigen::Index i = 1; i < K; ++i) {
      T suffix = G(i, i) * L(i, i), w = 1;
      // Forward through the row for w, back through it for the suffix sums.
      Eigen::Matrix<T, Eigen::Dynamic, 1> ws(i);
      for (Eigen::Index j = 0; j < i; ++j) {
        ws(j) = w;
        w /= std::cosh(x(row_start + j));
      }
      for (Eigen::Index j = i - 1; j >= 0; --j) {
        const T v = x(row_start + j), t = std::tanh(v), sech = 1 / std::cosh(v);
        d(row_start + j) = G(i, j) * ws(j) * sech * sech - t * suffix;
        suffix += G(i, j) * L(i, j);
      }
      row_start += i;
    }
  }
  return out;
}

// log|J| of the transform, one value per draw.
template <class T>
Tensor<T> matrix_log_jacobian(const std::string& kind, const Tensor<T>& u) {
  using namespace matrix_constrain_detail;
  require_kind<T>(kind);
  const Eigen::Index K = correlation_dimension(u.size());
  Tensor<T> out(1, 1, u.draws);
  for (Eigen::Index s = 0; s < u.draws; ++s) {
    auto x = u.flat().col(s);
    T total = 0;
    Eigen::Index k = 0;
    for (Eigen::Index i = 1; i < K; ++i)
      for (Eigen::Index j = 0; j < i; ++j, ++k) total += T(i - j + 1) * log_sech(x(k));
    out.m(0, s) = total;
  }
  return out;
}

// d(g log|J|)/du: (i - k + 1) (-tanh(u_ik)) g per value.
template <class T>
Tensor<T> matrix_log_jacobian_grad(const std::string& kind, const Tensor<T>& u, const Tensor<T>& g) {
  using namespace matrix_constrain_detail;
  require_kind<T>(kind);
  const Eigen::Index K = correlation_dimension(u.size());
  const Eigen::Index S = joint_draws(u.draws, g.draws);
  Tensor<T> out(u.rows, u.cols, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    auto x = u.flat().col(u.draws == 1 ? 0 : s);
    const T gs = g.m(0, g.draws == 1 ? 0 : s);
    Eigen::Index k = 0;
    for (Eigen::Index i = 1; i < K; ++i)
      for (Eigen::Index j = 0; j < i; ++j, ++k) out.flat()(k, s) = -T(i - j + 1) * std::tanh(x(k)) * gs;
  }
  return out;
}

}  // namespace fvi::kernel
