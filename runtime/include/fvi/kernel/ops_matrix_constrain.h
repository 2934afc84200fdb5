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
//   "corr"            corr_matrix[K]: the same K(K-1)/2 values and factor L, the value L L'. The
//                     Jacobian of L -> L L' (free elements to free elements) is prod_i L_ii^(K-1-i)
//                     (0-based), and log L_ii = sum_{k<i} log sech(u_ik), so
//                     log|J| = sum over i > k of (K - k) log sech(u_ik).
//   "cov"             cov_matrix[K]: K(K+1)/2 values, row by row through the lower triangle, each
//                     row's diagonal last: L_ij = u for j < i, L_ii = exp(u); the value L L'. Stan's
//                     cov_matrix_constrain: log|J| = K log 2 + sum_i (K - i + 1) u_ii (0-based i).
//   "cholesky_cov"    cholesky_factor_cov[M, N] (M >= N; [K] is [K, K]): N(N+1)/2 + (M - N) N
//                     values, the first N rows as cov's L, the others free; the value L itself
//                     (Stan's cholesky_factor_constrain). Its log|J|, sum of the diagonal's u,
//                     is sum(log(diagonal(L))), which the IR computes (ir/lower.cpp): N is a
//                     size of the data, not of u alone.
//   "unit"            unit_vector[K]: K values u, the value u / |u|. Stan's unit_vector_constrain
//                     adds -|u|^2 / 2 as its "log-Jacobian": the length |u| is an auxiliary with a
//                     chi(K) density, independent of the direction, so the density of u is proper
//                     and its direction's is the model's.
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

inline void require_kind(const std::string& kind) {
  if (kind != "cholesky_corr" && kind != "corr" && kind != "cov" && kind != "cholesky_cov" && kind != "unit")
    throw std::invalid_argument("no structured matrix transform '" + kind + "'");
}

// K from the K(K+1)/2 unconstrained values of a cov_matrix[K].
inline Eigen::Index covariance_dimension(Eigen::Index m) {
  const auto k = Eigen::Index(std::llround((std::sqrt(1 + 8.0 * double(m)) - 1) / 2));
  if (k * (k + 1) / 2 != m)
    throw ShapeError("cov_matrix: " + std::to_string(m) + " unconstrained values are not K(K+1)/2 for any K");
  return k;
}

// The cholesky_factor_corr of u (above), the rows' square roots as products of sechs.
template <class T>
Tensor<T> cholesky_corr_factor(const Tensor<T>& u) {
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

// The adjoint of u given the adjoint G of cholesky_corr_factor(u). Row i's values depend only on
// row i's u: with S_ij = sum_{j' > j} G_ij' L_ij' (L_ii included), d/du_ij = G_ij w_ij sech^2(u_ij)
// - tanh(u_ij) S_ij (w_ij' carries the factor sech(u_ij) for every j' > j, whose log-derivative is
// -tanh(u_ij)).
template <class T>
Tensor<T> cholesky_corr_factor_grad(const Tensor<T>& u, const Tensor<T>& g) {
  const Eigen::Index K = correlation_dimension(u.size());
  const Tensor<T> l = cholesky_corr_factor(u);
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

// The lower factor of a cov_matrix: L_ij = u (j < i), L_ii = exp(u), row by row.
template <class T>
Tensor<T> covariance_factor(const Tensor<T>& u) {
  const Eigen::Index K = covariance_dimension(u.size());
  Tensor<T> out(K, K, u.draws);
  for (Eigen::Index s = 0; s < u.draws; ++s) {
    auto x = u.flat().col(s);
    auto L = out.draw(s);
    Eigen::Index k = 0;
    for (Eigen::Index i = 0; i < K; ++i) {
      for (Eigen::Index j = 0; j < i; ++j) L(i, j) = x(k++);
      L(i, i) = std::exp(x(k++));
    }
  }
  return out;
}

// u / |u| per draw (a K x 1 u).
template <class T>
Tensor<T> unit_vector(const Tensor<T>& u) {
  Tensor<T> out(u.rows, u.cols, u.draws);
  for (Eigen::Index s = 0; s < u.draws; ++s) out.draw(s) = u.draw(s) / u.draw(s).norm();
  return out;
}

// The M x N factor of a cholesky_factor_cov[M, N] from its N(N+1)/2 + (M - N) N values: rows
// 0..N-1 as covariance_factor's, then (M - N) rows of N free values.
inline Eigen::Index factor_rows(Eigen::Index m, Eigen::Index n) {
  const Eigen::Index triangle = n * (n + 1) / 2;
  if (n < 1 || m < triangle || (m - triangle) % n != 0)
    throw ShapeError("cholesky_factor_cov: " + std::to_string(m) + " unconstrained values are not N(N+1)/2 + (M - N) N " +
                     "for N = " + std::to_string(n) + " and some M >= N");
  return n + (m - triangle) / n;
}
template <class T>
Tensor<T> cholesky_factor(const Tensor<T>& u, Eigen::Index n) {
  const Eigen::Index M = factor_rows(u.size(), n);
  Tensor<T> out(M, n, u.draws);
  for (Eigen::Index s = 0; s < u.draws; ++s) {
    auto x = u.flat().col(s);
    auto L = out.draw(s);
    L.setZero();
    Eigen::Index k = 0;
    for (Eigen::Index i = 0; i < M; ++i) {
      for (Eigen::Index j = 0; j < std::min(i, n); ++j) L(i, j) = x(k++);
      if (i < n) L(i, i) = std::exp(x(k++));
    }
  }
  return out;
}

// L L' per draw, and the adjoint of L given the adjoint G of L L': (G + G') L.
template <class T>
Tensor<T> self_outer(const Tensor<T>& l) {
  Tensor<T> out(l.rows, l.rows, l.draws);
  for (Eigen::Index s = 0; s < l.draws; ++s) out.draw(s) = Mat<T>(l.draw(s)) * Mat<T>(l.draw(s)).transpose();
  return out;
}
template <class T>
Tensor<T> self_outer_grad(const Tensor<T>& l, const Tensor<T>& g) {
  const Eigen::Index S = joint_draws(l.draws, g.draws);
  Tensor<T> out(l.rows, l.cols, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Mat<T> G = g.draw(s);
    out.draw(s) = ((G + G.transpose()) * Mat<T>(l.draw(s))).template triangularView<Eigen::Lower>();
  }
  return out;
}

}  // namespace matrix_constrain_detail

// The declared value (rows x cols per draw) from the unconstrained values u (m x 1 per draw);
// `cols` is the value's (cholesky_cov's N, 0 for a square factor; the other kinds' follow from m).
template <class T>
Tensor<T> matrix_constrain(const std::string& kind, const Tensor<T>& u, Eigen::Index cols = 0) {
  using namespace matrix_constrain_detail;
  require_kind(kind);
  if (kind == "cholesky_corr") return cholesky_corr_factor(u);
  if (kind == "cholesky_cov") return cholesky_factor(u, cols > 0 ? cols : covariance_dimension(u.size()));
  if (kind == "unit") return unit_vector(u);
  return self_outer(kind == "corr" ? cholesky_corr_factor(u) : covariance_factor(u));
}

// d(sum of G .* value)/du given the adjoint G of the value.
template <class T>
Tensor<T> matrix_constrain_grad(const std::string& kind, const Tensor<T>& u, const Tensor<T>& g) {
  using namespace matrix_constrain_detail;
  require_kind(kind);
  if (kind == "corr") return cholesky_corr_factor_grad(u, self_outer_grad(cholesky_corr_factor(u), g));
  if (kind == "unit") {  // d(u / |u|)' g = (g - x (x' g)) / |u|
    const Eigen::Index S = joint_draws(u.draws, g.draws);
    Tensor<T> out(u.rows, u.cols, S);
    for (Eigen::Index s = 0; s < S; ++s) {
      const Mat<T> x = u.draw(s) / u.draw(s).norm();
      const Mat<T> gs = g.draw(s);
      out.draw(s) = (gs - x * (x.transpose() * gs)) / u.draw(s).norm();
    }
    return out;
  }
  if (kind == "cov" || kind == "cholesky_cov") {  // through L L' (cov), then L_ij = u, L_ii = exp(u)
    const Tensor<T> l = kind == "cov" ? covariance_factor(u) : cholesky_factor(u, g.cols);
    const Tensor<T> gl = kind == "cov" ? self_outer_grad(l, g) : g;
    const Eigen::Index S = joint_draws(gl.draws, l.draws);
    Tensor<T> out(u.rows, u.cols, S);
    for (Eigen::Index s = 0; s < S; ++s) {
      Eigen::Index k = 0;
      for (Eigen::Index i = 0; i < l.rows; ++i) {
        for (Eigen::Index j = 0; j < std::min(i, l.cols); ++j) out.flat()(k++, s) = gl.draw(s)(i, j);
        if (i < l.cols) out.flat()(k++, s) = gl.draw(s)(i, i) * l.draw(s)(i, i);
      }
    }
    return out;
  }
  return cholesky_corr_factor_grad(u, g);
}

// log|J| of the transform, one value per draw.
template <class T>
Tensor<T> matrix_log_jacobian(const std::string& kind, const Tensor<T>& u) {
  using namespace matrix_constrain_detail;
  require_kind(kind);
  if (kind == "cholesky_cov") throw std::invalid_argument("cholesky_cov's log-Jacobian is sum(log(diagonal(L))), the IR's");
  Tensor<T> out(1, 1, u.draws);
  if (kind == "unit") {
    for (Eigen::Index s = 0; s < u.draws; ++s) out.m(0, s) = -T(0.5) * u.draw(s).squaredNorm();
    return out;
  }
  if (kind == "cov") {
    const Eigen::Index K = covariance_dimension(u.size());
    for (Eigen::Index s = 0; s < u.draws; ++s) {
      T total = T(double(K) * M_LN2);
      Eigen::Index k = 0;
      for (Eigen::Index i = 0; i < K; ++i) {
        k += i;
        total += T(K - i + 1) * u.flat()(k++, s);
      }
      out.m(0, s) = total;
    }
    return out;
  }
  const Eigen::Index K = correlation_dimension(u.size());
  const bool corr = kind == "corr";
  for (Eigen::Index s = 0; s < u.draws; ++s) {
    auto x = u.flat().col(s);
    T total = 0;
    Eigen::Index k = 0;
    for (Eigen::Index i = 1; i < K; ++i)
      for (Eigen::Index j = 0; j < i; ++j, ++k) total += T(corr ? K - j : i - j + 1) * log_sech(x(k));
    out.m(0, s) = total;
  }
  return out;
}

// d(g log|J|)/du: g times each value's weight in log|J| (above), times -tanh(u) for the
// correlations' (the derivative of log sech).
template <class T>
Tensor<T> matrix_log_jacobian_grad(const std::string& kind, const Tensor<T>& u, const Tensor<T>& g) {
  using namespace matrix_constrain_detail;
  require_kind(kind);
  if (kind == "cholesky_cov") throw std::invalid_argument("cholesky_cov's log-Jacobian is sum(log(diagonal(L))), the IR's");
  const Eigen::Index S = joint_draws(u.draws, g.draws);
  Tensor<T> out(u.rows, u.cols, S);
  if (kind == "unit") {
    for (Eigen::Index s = 0; s < S; ++s) out.draw(s) = -g.m(0, g.draws == 1 ? 0 : s) * u.draw(u.draws == 1 ? 0 : s);
    return out;
  }
  if (kind == "cov") {
    const Eigen::Index K = covariance_dimension(u.size());
    for (Eigen::Index s = 0; s < S; ++s) {
      const T gs = g.m(0, g.draws == 1 ? 0 : s);
      Eigen::Index k = 0;
      for (Eigen::Index i = 0; i < K; ++i) {
        k += i;
        out.flat()(k++, s) = T(K - i + 1) * gs;
      }
    }
    return out;
  }
  const Eigen::Index K = correlation_dimension(u.size());
  const bool corr = kind == "corr";
  for (Eigen::Index s = 0; s < S; ++s) {
    auto x = u.flat().col(u.draws == 1 ? 0 : s);
    const T gs = g.m(0, g.draws == 1 ? 0 : s);
    Eigen::Index k = 0;
    for (Eigen::Index i = 1; i < K; ++i)
      for (Eigen::Index j = 0; j < i; ++j, ++k)
        out.flat()(k, s) = -T(corr ? K - j : i - j + 1) * std::tanh(x(k)) * gs;
  }
  return out;
}

}  // namespace fvi::kernel
