#pragma once
// Alpha-Renyi divergence between Gaussians, in the normalisation of seed 000 §3.3 (main text; the
// App. D.1 sign is a typo, spec 000 §3.2 item 3):
//   D_AR^(alpha)(q : p) = 1/(alpha (alpha - 1)) log int q^alpha p^(1 - alpha)
// with closed form (spec 000 §3.2 item 3), Sigma_a = alpha Sigma_p + (1 - alpha) Sigma_q, d = mu_q - mu_p:
//   D = 1/2 d^T Sigma_a^{-1} d - log det Sigma_a / (2 alpha (alpha - 1))
//       - log det Sigma_q / (2 alpha) + log det Sigma_p / (2 (alpha - 1)).
// alpha = 1 is KL(q || p) and alpha = 0 is KL(p || q) (seed 000 §5.5).
//
// Evaluation (derived). With r_i the eigenvalues of Sigma_p^{-1} Sigma_q, the log-det terms reduce to
// sum_i g(alpha, r_i), g = -log(alpha + (1 - alpha) r) / (2 alpha (alpha - 1)) - log r / (2 alpha),
// and g = -[log1p(-t x) / t + log r] / (2 alpha) with t = alpha - 1, x = r - 1. This has no 1/(alpha-1)
// cancellation, so the divergence is continuous through alpha = 1 to rounding. For alpha < 1/2 we use
// D^(alpha)(q : p) = D^(1 - alpha)(p : q) (which follows from the integral form), removing the 1/alpha
// cancellation near alpha = 0. Gradients with respect to q:
//   d mu_q    = Sigma_a^{-1} d
//   d Sigma_q = 1/2 Sigma_a^{-1} (Sigma_q - Sigma_p) Sigma_q^{-1} - 1/2 (1 - alpha) Sigma_a^{-1} d d^T Sigma_a^{-1}
// (the first term is (Sigma_a^{-1} - Sigma_q^{-1}) / (2 alpha) with the 1/alpha removed).
//
// The divergence is +infinity when Sigma_a is not positive definite (possible for alpha > 1 when q is
// wider than p, or alpha < 0 when p is wider than q); that throws fvi::InvalidArgument.
#include <algorithm>
#include <cmath>
#include <string>

#include "fvi/divergence/divergence_gradient.h"
#include "fvi/family/full_rank_gaussian.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/math/array_math.h"

namespace fvi {
namespace internal {

// log1p(-t x) / t, continuous at t = 0 (value -x).
template <typename T>
T log1p_scaled(T t, T x) {
  return t == T(0) ? -x : std::log1p(-t * x) / t;
}

// g(alpha, r) above, given log r; `a` = alpha + (1 - alpha) r must be > 0 (checked by caller).
template <typename T>
T alpha_renyi_logdet_term(T alpha, T log_r) {
  if (alpha >= T(0.5)) {
    return -(log1p_scaled(alpha - T(1), std::expm1(log_r)) + log_r) / (T(2) * alpha);
  }
  // Swapped form: D^(alpha)(q:p) = D^(1-alpha)(p:q), eigenvalue 1/r.
  const T alpha_s = T(1) - alpha;
  return -(log1p_scaled(-alpha, std::expm1(-log_r)) - log_r) / (T(2) * alpha_s);
}

[[noreturn]] inline void throw_alpha_renyi_infinite(double alpha) {
  throw_invalid("alpha_renyi_divergence",
                "alpha Sigma_p + (1 - alpha) Sigma_q is not positive definite for alpha = " + to_string(alpha) +
                    ", so the divergence is +infinity (for alpha > 1, q is too wide relative to p; for alpha < 0, "
                    "p is too wide relative to q)");
}

}  // namespace internal

// The mean-field divergence on one block of n <= kMathBlock coordinates, from raw arrays (q's
// mean, log sd and sd, the same of p): writes the gradient with respect to q's mean and log sd
// and returns the block's share of the divergence (0 when !with_value). A client evaluates this at
// every optimiser step on every weight of a network (fvi/engine/meanfield_shards.h fuses it with
// Adam block by block), so the gradient costs one division and no transcendental function, and
// the log sds are read only for the value. With v = sigma^2 and sigma_a^2 = alpha v_p + (1 - alpha) v_q
// (= v_p a, a = alpha + (1 - alpha) r of the header):
//   d mean  = d / sigma_a^2
//   d log sd = 2 v_q d/dv_q = (v_q - v_p) / sigma_a^2 - (1 - alpha) v_q (d / sigma_a^2)^2
// (the header's d Sigma_q with (r - 1)/a = (v_q - v_p)/sigma_a^2; v_q - v_p is computed as
// (sd_q - sd_p)(sd_q + sd_p), exact to a few ulp when q is near p, where it matters).
template <typename T>
T alpha_renyi_block(Eigen::Index n, const T* q_mean, const T* q_log_sd, const T* q_sd, const T* p_mean,
                    const T* p_log_sd, const T* p_sd, T alpha, T* d_mean, T* d_log_sd, bool with_value = true) {
  using Block = MathBlock<T>;
  using In = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
  using Out = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
  const In sd_q(q_sd, n), sd_p(p_sd, n);
  const Block v_q = sd_q.square(), v_p = sd_p.square();
  const Block v_a = alpha * v_p + (T(1) - alpha) * v_q;  // sigma_a^2
  if (!(v_a > T(0)).all()) internal::throw_alpha_renyi_infinite(double(alpha));
  const Block inv_v_a = v_a.inverse();  // the one division per coordinate
  const Block d = In(q_mean, n) - In(p_mean, n);
  const Block s = d * inv_v_a;  // Sigma_a^{-1} d
  Out(d_mean, n) = s;
  Out(d_log_sd, n) = (sd_q - sd_p) * (sd_q + sd_p) * inv_v_a - (T(1) - alpha) * v_q * s.square();
  if (!with_value) return T(0);
  // g(alpha, r) of the header: -[log1p(-t x) / t + log r] / (2 alpha), t = alpha - 1, x = r - 1
  // (where 1 - t x = a); for alpha < 1/2 the swapped form with eigenvalue 1/r, 1/r - 1 = -x / r.
  const Block log_r = T(2) * (In(q_log_sd, n) - In(p_log_sd, n));
  const Block x = expm1_block(log_r);
  Block logdet;
  if (alpha >= T(0.5)) {
    const T t = alpha - T(1);
    const Block scaled = t == T(0) ? Block(-x) : Block(log1p_block(-t * x) / t);
    logdet = -(scaled + log_r) / (T(2) * alpha);
  } else {
    const Block xs = -x / (T(1) + x);
    const Block scaled = alpha == T(0) ? Block(-xs) : Block(log1p_block(alpha * xs) / -alpha);
    logdet = -(scaled - log_r) / (T(2) * (T(1) - alpha));
  }
  return (T(0.5) * d * s + logdet).sum();
}

// Coordinatewise, a block of kMathBlock coordinates at a time (alpha_renyi_block).
template <typename T>
DiagDivergenceGradient<T> alpha_renyi_divergence_gradient(const MeanFieldGaussian<T>& q,
                                                          const MeanFieldGaussian<T>& p, T alpha) {
  internal::check_same_dim("alpha_renyi_divergence", q, p);
  check_finite("alpha_renyi_divergence", "alpha", alpha);
  DiagDivergenceGradient<T> out;
  out.value = T(0);
  out.d_mean.resize(q.dim());
  out.d_log_sd.resize(q.dim());
  for (Eigen::Index i = 0; i < q.dim(); i += kMathBlock) {
    const Eigen::Index n = std::min(kMathBlock, q.dim() - i);
    out.value += alpha_renyi_block(n, q.mean().data() + i, q.log_sd().data() + i, q.sd().data() + i,
                                   p.mean().data() + i, p.log_sd().data() + i, p.sd().data() + i, alpha,
                                   out.d_mean.data() + i, out.d_log_sd.data() + i);
  }
  return out;
}

template <typename T>
T alpha_renyi_divergence(const MeanFieldGaussian<T>& q, const MeanFieldGaussian<T>& p, T alpha) {
  return alpha_renyi_divergence_gradient(q, p, alpha).value;
}

template <typename T>
FullDivergenceGradient<T> alpha_renyi_divergence_gradient(const FullRankGaussian<T>& q,
                                                          const FullRankGaussian<T>& p, T alpha) {
  internal::check_same_dim("alpha_renyi_divergence", q, p);
  check_finite("alpha_renyi_divergence", "alpha", alpha);
  // Whiten by L_p: Sigma_p -> I, Sigma_q -> W = M M^T with M = L_p^{-1} L_q; W = V diag(r) V^T.
  const auto lp = p.chol().template triangularView<Eigen::Lower>();
  const MatrixX<T> m = lp.solve(q.chol());
  Eigen::SelfAdjointEigenSolver<MatrixX<T>> eig(m * m.transpose());
  const VectorX<T> r = eig.eigenvalues();
  const MatrixX<T>& v = eig.eigenvectors();
  const VectorX<T> a = (alpha + (T(1) - alpha) * r.array()).matrix();
  if (!(a.minCoeff() > 0) || !(r.minCoeff() > 0)) internal::throw_alpha_renyi_infinite(double(alpha));
  FullDivergenceGradient<T> out;
  out.value = T(0);
  for (Eigen::Index i = 0; i < q.dim(); ++i) {
    out.value += internal::alpha_renyi_logdet_term(alpha, T(std::log(r[i])));
  }
  const VectorX<T> w = lp.solve(q.mean() - p.mean());           // L_p^{-1} d
  const VectorX<T> vw = v.transpose() * w;
  const VectorX<T> s_white = v * vw.cwiseQuotient(a);           // (whitened Sigma_a)^{-1} L_p^{-1} d
  out.value += T(0.5) * vw.dot(vw.cwiseQuotient(a));
  const VectorX<T> s = p.chol().transpose().template triangularView<Eigen::Upper>().solve(s_white);  // Sigma_a^{-1} d
  out.d_mean = s;
  // 1/2 Sigma_a^{-1}(Sigma_q - Sigma_p)Sigma_q^{-1} = L_p^{-T} V diag((r - 1) / (2 a r)) V^T L_p^{-1}.
  const VectorX<T> c = (r.array() - T(1)) / (T(2) * a.array() * r.array());
  const MatrixX<T> inner = v * c.asDiagonal() * v.transpose();
  const MatrixX<T> lp_inv = lp.solve(MatrixX<T>::Identity(q.dim(), q.dim()));
  MatrixX<T> d_cov = lp_inv.transpose() * inner * lp_inv - T(0.5) * (T(1) - alpha) * s * s.transpose();
  out.d_cov = T(0.5) * (d_cov + d_cov.transpose());
  return out;
}

template <typename T>
T alpha_renyi_divergence(const FullRankGaussian<T>& q, const FullRankGaussian<T>& p, T alpha) {
  return alpha_renyi_divergence_gradient(q, p, alpha).value;
}

}  // namespace fvi
