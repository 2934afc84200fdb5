#pragma once
// Kernel operations (ops.h) for Gaussian processes and dense covariance matrices, draw by draw:
// the Cholesky factor and its adjoint, squared distances between data points (for
// gp_exp_quad_cov), diagonal matrices and their adjoint, and the multivariate normal given a
// Cholesky factor (distributions.h calls it as "multi_normal_cholesky").
#include <cmath>
#include <stdexcept>
#include <string>

#include <Eigen/Cholesky>
#include <Eigen/LU>

#include "fvi/kernel/tensor.h"

namespace fvi::kernel {

// The lower Cholesky factor L of each draw's symmetric positive-definite A (L L' = A), as Stan's
// cholesky_decompose: only A's lower triangle is read. A matrix that is not positive definite
// at some draw stops the evaluation with the draw's number (Stan rejects such a draw too).
template <class T>
Tensor<T> cholesky(const Tensor<T>& a) {
  if (a.rows != a.cols) throw ShapeError("cholesky_decompose of a " + shape_string(a) + " matrix: it must be square");
  Tensor<T> out(a.rows, a.cols, a.draws);
  for (Eigen::Index s = 0; s < a.draws; ++s) {
    const Mat<T> m = a.draw(s);
    if (!m.allFinite())
      throw std::domain_error("cholesky_decompose: the matrix holds a NaN or an infinity (draw " + std::to_string(s + 1) +
                              ")");
    Eigen::LLT<Mat<T>> llt(m);
    if (llt.info() != Eigen::Success)
      throw std::domain_error("cholesky_decompose: the matrix is not positive definite (draw " + std::to_string(s + 1) +
                              ", diagonal " + std::to_string(double(m.diagonal().minCoeff())) + " to " +
                              std::to_string(double(m.diagonal().maxCoeff())) + ")");
    out.draw(s) = llt.matrixL();
  }
  return out;
}

// The adjoint of A given L = cholesky(A) and the adjoint G of L (Murray 2016, "Differentiation of
// the Cholesky decomposition", eq. 10): with Phi(X) the lower triangle of X with its diagonal
// halved, S = L^-T Phi(L' tril(G)) L^-1, and A's adjoint is (S + S') / 2: symmetric, since a
// covariance matrix moves symmetrically (gp_exp_quad_cov's K, K + diag_matrix(...)).
template <class T>
Tensor<T> cholesky_grad(const Tensor<T>& l, const Tensor<T>& g) {
  const Eigen::Index S = joint_draws(l.draws, g.draws);
  Tensor<T> out(l.rows, l.cols, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Mat<T> L = l.draw(s);
    Mat<T> P = L.transpose() * Mat<T>(g.draw(s).template triangularView<Eigen::Lower>());
    P.template triangularView<Eigen::StrictlyUpper>().setZero();
    P.diagonal() *= T(0.5);
    // L^-T P L^-1 by two triangular solves.
    Mat<T> X = L.transpose().template triangularView<Eigen::Upper>().solve(P);
    X = L.transpose().template triangularView<Eigen::Upper>().solve(Mat<T>(X.transpose())).transpose();
    out.draw(s) = (X + X.transpose()) / T(2);
  }
  return out;
}

// The inverse of each draw's square matrix (LU with partial pivoting; inverse_spd is the same
// map). A singular matrix stops the evaluation with the draw's number.
template <class T>
Tensor<T> inverse(const Tensor<T>& a) {
  if (a.rows != a.cols) throw ShapeError("inverse of a " + shape_string(a) + " matrix: it must be square");
  Tensor<T> out(a.rows, a.cols, a.draws);
  for (Eigen::Index s = 0; s < a.draws; ++s) {
    const Mat<T> m = a.draw(s);
    const Eigen::FullPivLU<Mat<T>> lu(m);
    if (!m.allFinite() || !lu.isInvertible())
      throw std::domain_error("inverse: the matrix is singular or not finite (draw " + std::to_string(s + 1) + ")");
    out.draw(s) = lu.inverse();
  }
  return out;
}

// The adjoint of A given Y = inverse(A) and the adjoint G of Y: -Y' G Y'.
template <class T>
Tensor<T> inverse_grad(const Tensor<T>& y, const Tensor<T>& g) {
  const Eigen::Index S = joint_draws(y.draws, g.draws);
  Tensor<T> out(y.rows, y.cols, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Mat<T> Y = y.draw(s);
    out.draw(s) = -(Y.transpose() * Mat<T>(g.draw(s)) * Y.transpose());
  }
  return out;
}

// The squared Euclidean distances between the rows of data x (n x d: an array of reals is n x 1,
// an array of vectors one row per point): n x n, one draw.
template <class T>
Tensor<T> squared_distances(const Tensor<T>& x) {
  if (x.draws != 1) throw ShapeError("squared distances of points that vary with the draw");
  Tensor<T> out(x.rows, x.rows, 1);
  const Mat<T> X = x.draw(0);
  for (Eigen::Index j = 0; j < x.rows; ++j)
    for (Eigen::Index i = 0; i < x.rows; ++i) out.m(i, j) = (X.row(i) - X.row(j)).squaredNorm();
  return out;
}

// diag_matrix(v): v (n x 1) on the diagonal of an n x n matrix, per draw; its adjoint takes the
// diagonal back (diagonal(G), n x 1).
template <class T>
Tensor<T> diag_matrix(const Tensor<T>& v) {
  const Eigen::Index n = v.size();
  Tensor<T> out(n, n, v.draws);
  for (Eigen::Index s = 0; s < v.draws; ++s) out.draw(s).diagonal() = v.flat().col(s);
  return out;
}

template <class T>
Tensor<T> diagonal(const Tensor<T>& a) {
  const Eigen::Index n = std::min(a.rows, a.cols);
  Tensor<T> out(n, 1, a.draws);
  for (Eigen::Index s = 0; s < a.draws; ++s) out.draw(s) = a.draw(s).diagonal();
  return out;
}

namespace detail {

// multi_normal_cholesky(y | mu, L): one log density per draw, the sum over y's observations: y
// one K-vector (K x 1 or 1 x K), or N x K with one observation per row (an array of vectors, or
// a loop's rows); mu one value, one K-vector shared by every observation, or N x K; L lower
// triangular K x K. With D = y - mu (N x K) and Z = D L^-T (each row z_n = L^-1 d_n):
//   log p = -N K/2 log(2 pi) - N sum(log diag L) - |Z|^2 / 2.
// vjp_operand 0 (y), 1 (mu), 2 (L) gives that operand's adjoint for the result's adjoint g, with
// A = Z L^-1 (rows a_n = L^-T z_n): dy = -A, dmu = A (summed to mu's shape),
// dL = tril(A' Z) - N diag(1 / diag L).
template <class T>
Tensor<T> multi_normal_cholesky(const Tensor<T>& y, const Tensor<T>& mu, const Tensor<T>& l, const Tensor<T>* g,
                                int vjp_operand) {
  const Eigen::Index K = l.rows;
  const bool one = y.size() == K;
  const Eigen::Index N = one ? 1 : y.rows;
  const bool mu_shared = mu.size() == K || mu.size() == 1;
  if (l.cols != K || (!one && y.cols != K) || (!mu_shared && (mu.rows != N || mu.cols != K)))
    throw ShapeError("multi_normal_cholesky of " + shape_string(y) + " given " + shape_string(mu) + " and " +
                     shape_string(l));
  const Eigen::Index S = joint_draws(joint_draws(y.draws, mu.draws), l.draws);
  const Tensor<T>& like = vjp_operand == 0 ? y : vjp_operand == 1 ? mu : l;
  Tensor<T> out = vjp_operand < 0 ? Tensor<T>(1, 1, S) : Tensor<T>(like.rows, like.cols, like.draws);
  constexpr double kHalfLogTwoPi = 0.91893853320467274178;
  // A value's draw as N x K observations (one K-vector as one row: its elements in order).
  auto rows_of = [&](const Tensor<T>& t, Eigen::Index s, Eigen::Index n) {
    return Eigen::Map<const Mat<T>>(t.m.data() + (t.draws == 1 ? 0 : s) * t.size(), n, K);
  };
  for (Eigen::Index s = 0; s < S; ++s) {
    const Mat<T> L = l.draw(s);
    Mat<T> D = one ? Mat<T>(rows_of(y, s, 1)) : Mat<T>(y.draw(s));
    if (mu.size() == 1) D.array() -= mu.m(0, mu.draws == 1 ? 0 : s);
    else if (mu_shared) D.rowwise() -= rows_of(mu, s, 1).row(0);
    else D -= mu.draw(s);
    // Z' = L^-1 D'
    const Mat<T> Zt = L.template triangularView<Eigen::Lower>().solve(Mat<T>(D.transpose()));
    if (vjp_operand < 0) {
      out.m(0, s) = -T(N * K) * T(kHalfLogTwoPi) - T(N) * L.diagonal().array().log().sum() - Zt.squaredNorm() / T(2);
      continue;
    }
    const T gs = g->m(0, g->draws == 1 ? 0 : s);
    const Mat<T> At = L.transpose().template triangularView<Eigen::Upper>().solve(Zt);  // A' = L^-T Z'
    // A value that does not vary sums every draw's part into draw 0.
    T* target = out.m.data() + (like.draws == 1 ? 0 : s) * like.size();
    if (vjp_operand == 0) {
      Eigen::Map<Mat<T>>(target, one ? 1 : N, K) -= gs * At.transpose();
    } else if (vjp_operand == 1) {
      if (mu.size() == 1) target[0] += gs * At.sum();
      else if (mu_shared) Eigen::Map<Mat<T>>(target, 1, K) += gs * At.rowwise().sum().transpose();
      else Eigen::Map<Mat<T>>(target, N, K) += gs * At.transpose();
    } else {
      Mat<T> dl = (At * Zt.transpose()).template triangularView<Eigen::Lower>();
      dl.diagonal() -= T(N) * L.diagonal().cwiseInverse();
      Eigen::Map<Mat<T>>(target, K, K) += gs * dl;
    }
  }
  return out;
}

}  // namespace detail

}  // namespace fvi::kernel
