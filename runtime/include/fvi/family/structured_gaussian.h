#pragma once
// The structured conditional Gaussian family of SFVI (spec 002 §2.5, seed 002 §3.4):
//
//   Z_G           = mu_G + sigma_G .* (L_G eps_G)                        q(Z_G) = N(mu_G, D_G L_G L_G^T D_G)
//   Z_{L_j} | Z_G = mu_j + C_j (Z_G - mu_G) + sigma_j .* (L_j eps_{L_j})
//
// with L_G, L_j unit lower triangular, sigma = exp(rho) and eps ~ N(0, I). The server holds the
// global block (StructuredGlobalGaussian); silo j holds its local block (StructuredLocalGaussian),
// which never leaves the silo. Z_{L_j} depends on the global parameters only through
// u = Z_G - mu_G = sigma_G .* (L_G eps_G), so it does not depend on mu_G.
//
// Structural options switch blocks off (and remove their parameters): `correlated = false` fixes
// L = I; `coupled = false` fixes C_j = 0. Mean-field is both off.
//
// Parameter vectors:
//   global: [mu_G (n); rho_G (n); strict lower triangle of L_G, column-major (n(n-1)/2, if correlated)]
//   local:  [mu_j (m); C_j column-major (m n, if coupled); rho_j (m); strict lower of L_j (if correlated)]
//
// Gradients are the STL estimator (seed 002 Eq. 6) split as in seed 002 Eqs. 9-11: the silo computes
// g_j^eta, its contribution to the gradient with respect to the global parameters, from its own
// log p(y_j, Z_{L_j} | Z_G) - log q(Z_{L_j} | Z_G) only (spec 002 §2.2, corrected L_0/L_j split).
#include <cmath>
#include <string>

#include "fvi/check.h"
#include "fvi/eigen_types.h"
#include "fvi/math/constants.h"

namespace fvi {
namespace internal {

template <typename Derived>
void check_unit_lower_triangular(const char* function, const char* name, const Eigen::MatrixBase<Derived>& l) {
  check_square(function, name, l);
  check_finite(function, name, l);
  for (Eigen::Index j = 0; j < l.cols(); ++j) {
    if (l(j, j) != 1) {
      throw_invalid(function, std::string(name) + " must have a unit diagonal but (" + std::to_string(j) + "," +
                                  std::to_string(j) + ") = " + to_string(l(j, j)));
    }
    for (Eigen::Index i = 0; i < j; ++i) {
      if (l(i, j) != 0) {
        throw_invalid(function, std::string(name) + " is not lower triangular: (" + std::to_string(i) + "," +
                                    std::to_string(j) + ") = " + to_string(l(i, j)));
      }
    }
  }
}

// log N(r; 0, D L L^T D) for each column of r, D = diag(sd), L unit lower triangular (nullptr: L = I).
template <typename T>
VectorX<T> log_density_unit_lower(const MatrixX<T>& r, const VectorX<T>& sd, const VectorX<T>& log_sd,
                                  const MatrixX<T>* unit_lower) {
  MatrixX<T> w = (r.array().colwise() / sd.array()).matrix();
  if (unit_lower) unit_lower->template triangularView<Eigen::UnitLower>().solveInPlace(w);
  const T constant = -T(0.5) * T(r.rows()) * T(kLog2Pi) - log_sd.sum();
  return (constant - T(0.5) * w.colwise().squaredNorm().array()).matrix().transpose();
}

// (D L L^T D)^{-1} r for each column (nullptr: L = I).
template <typename T>
MatrixX<T> precision_times_unit_lower(const MatrixX<T>& r, const VectorX<T>& sd, const MatrixX<T>* unit_lower) {
  MatrixX<T> w = (r.array().colwise() / sd.array()).matrix();
  if (unit_lower) {
    unit_lower->template triangularView<Eigen::UnitLower>().solveInPlace(w);
    unit_lower->transpose().template triangularView<Eigen::UnitUpper>().solveInPlace(w);
  }
  return (w.array().colwise() / sd.array()).matrix();
}

// L eps with L unit lower triangular (nullptr: L = I).
template <typename T>
MatrixX<T> apply_unit_lower(const MatrixX<T>& eps, const MatrixX<T>* unit_lower) {
  if (!unit_lower) return eps;
  return unit_lower->template triangularView<Eigen::UnitLower>() * eps;
}

}  // namespace internal

template <typename T = double>
class StructuredGlobalGaussian {
 public:
  using Scalar = T;
  using Vector = VectorX<T>;
  using Matrix = MatrixX<T>;

  StructuredGlobalGaussian() = default;

  // Correlated block: unit_lower is the n x n unit lower triangular L_G.
  StructuredGlobalGaussian(Vector mean, Vector log_sd, Matrix unit_lower)
      : mean_(std::move(mean)), log_sd_(std::move(log_sd)), lower_(std::move(unit_lower)), correlated_(true) {
    validate();
  }

  // Uncorrelated block (L_G = I; no n x n matrix is stored).
  StructuredGlobalGaussian(Vector mean, Vector log_sd)
      : mean_(std::move(mean)), log_sd_(std::move(log_sd)), correlated_(false) {
    validate();
  }

  // The member of the family with the given covariance: K = chol(Sigma), sigma = diag(K),
  // L = diag(1/sigma) K (rows scaled, so that D L = K and D L L^T D = Sigma). Used to map a
  // full-covariance barycenter back to (sigma_G, L_G) (spec 002 §2.4).
  static StructuredGlobalGaussian from_mean_covariance(const Vector& mean, const Matrix& covariance) {
    check_size("StructuredGlobalGaussian::from_mean_covariance", "covariance rows", covariance.rows(), mean.size());
    const auto llt =
        check_positive_definite("StructuredGlobalGaussian::from_mean_covariance", "covariance", covariance);
    const Matrix k = llt.matrixL();
    const Vector sd = k.diagonal();
    Matrix l = (sd.cwiseInverse().asDiagonal() * k).template triangularView<Eigen::Lower>();
    l.diagonal().setOnes();
    return StructuredGlobalGaussian(mean, sd.array().log().matrix(), l);
  }

  static Eigen::Index num_params_for(Eigen::Index n, bool correlated) {
    return 2 * n + (correlated ? n * (n - 1) / 2 : 0);
  }

  static StructuredGlobalGaussian from_params(const Vector& params, Eigen::Index n, bool correlated) {
    check_size("StructuredGlobalGaussian::from_params", "params", params.size(), num_params_for(n, correlated));
    check_finite("StructuredGlobalGaussian::from_params", "params", params);
    if (!correlated) return StructuredGlobalGaussian(params.head(n), params.segment(n, n));
    Matrix l = Matrix::Identity(n, n);
    Eigen::Index k = 2 * n;
    for (Eigen::Index j = 0; j < n; ++j) {
      for (Eigen::Index i = j + 1; i < n; ++i, ++k) l(i, j) = params[k];
    }
    return StructuredGlobalGaussian(params.head(n), params.segment(n, n), l);
  }

  Eigen::Index dim() const { return mean_.size(); }
  bool correlated() const { return correlated_; }
  Eigen::Index num_params() const { return num_params_for(dim(), correlated_); }
  const Vector& mean() const { return mean_; }
  const Vector& log_sd() const { return log_sd_; }
  const Vector& sd() const { return sd_; }
  // L_G (materialised as the identity for an uncorrelated block).
  Matrix unit_lower() const { return correlated_ ? lower_ : Matrix::Identity(dim(), dim()); }
  // sqrt(diag Sigma_GG): sigma_i times the norm of row i of L_G, without forming Sigma_GG
  // (n^2 doubles: 490 MB for the 7,850 globals of examples/multinomial_eb).
  Vector marginal_sd() const {
    if (!correlated_) return sd_;
    return sd_.cwiseProduct(lower_.rowwise().norm());
  }
  // Sigma_GG = D_G L_G L_G^T D_G (spec 002 §2.5).
  Matrix covariance() const {
    if (!correlated_) return Matrix(sd_.cwiseAbs2().asDiagonal());
    const Matrix k = sd_.asDiagonal() * lower_;
    return k * k.transpose();
  }

  Vector params() const {
    Vector p(num_params());
    p.head(dim()) = mean_;
    p.segment(dim(), dim()) = log_sd_;
    if (correlated_) {
      Eigen::Index k = 2 * dim();
      for (Eigen::Index j = 0; j < dim(); ++j) {
        for (Eigen::Index i = j + 1; i < dim(); ++i, ++k) p[k] = lower_(i, j);
      }
    }
    return p;
  }

  // u = Z_G - mu_G = sigma_G .* (L_G eps_G), n x S.
  Matrix offset(const Matrix& eps) const {
    check_size("StructuredGlobalGaussian::offset", "eps rows", eps.rows(), dim());
    const Matrix le = internal::apply_unit_lower<T>(eps, lower_ptr());
    return (le.array().colwise() * sd_.array()).matrix();
  }
  Matrix sample(const Matrix& eps) const { return offset(eps).colwise() + mean_; }

  Vector log_density(const Matrix& z) const {
    check_size("StructuredGlobalGaussian::log_density", "z rows", z.rows(), dim());
    return internal::log_density_unit_lower<T>(z.colwise() - mean_, sd_, log_sd_, lower_ptr());
  }
  // grad_{Z_G} log q(Z_G) = -Sigma_GG^{-1} (Z_G - mu_G), parameters fixed (spec 002 §2.5).
  Matrix score(const Matrix& z) const {
    check_size("StructuredGlobalGaussian::score", "z rows", z.rows(), dim());
    return -internal::precision_times_unit_lower<T>(z.colwise() - mean_, sd_, lower_ptr());
  }
  T entropy() const { return T(0.5) * T(dim()) * (T(kLog2Pi) + T(1)) + log_sd_.sum(); }

  // sum_s (dZ_G,s / dparams)^T g_s (spec 002 §2.5 VJPs): d mu = g; d rho = g .* (L eps) .* sigma;
  // d L[a,b] = g_a sigma_a eps_b (a > b).
  Vector vjp(const Matrix& eps, const Matrix& cotangent) const {
    Vector g = vjp_offset(eps, cotangent);
    g.head(dim()) = cotangent.rowwise().sum();
    return g;
  }

  // The same for the offset u = Z_G - mu_G (no mu component): how the global parameters move the
  // local draws Z_{L_j} = mu_j + C_j u + ... (seed 002 Eq. 10, second term).
  Vector vjp_offset(const Matrix& eps, const Matrix& cotangent) const {
    check_size("StructuredGlobalGaussian::vjp", "eps rows", eps.rows(), dim());
    check_size("StructuredGlobalGaussian::vjp", "cotangent rows", cotangent.rows(), dim());
    check_size("StructuredGlobalGaussian::vjp", "cotangent cols", cotangent.cols(), eps.cols());
    Vector g = Vector::Zero(num_params());
    const Matrix le = internal::apply_unit_lower<T>(eps, lower_ptr());
    g.segment(dim(), dim()) = (cotangent.array() * le.array()).rowwise().sum().matrix().cwiseProduct(sd_);
    if (correlated_) {
      const Matrix gl = (cotangent.array().colwise() * sd_.array()).matrix() * eps.transpose();
      Eigen::Index k = 2 * dim();
      for (Eigen::Index j = 0; j < dim(); ++j) {
        for (Eigen::Index i = j + 1; i < dim(); ++i, ++k) g[k] = gl(i, j);
      }
    }
    return g;
  }

  // Server term of seed 002 Eq. 9: STL gradient of E[log p(Z_G) - log q(Z_G)], averaged over S.
  Vector stl_gradient(const Matrix& eps, const Matrix& grad_log_p) const {
    return vjp(eps, grad_log_p - score(sample(eps))) / T(eps.cols());
  }

 private:
  void validate() {
    check_size("StructuredGlobalGaussian", "log_sd", log_sd_.size(), mean_.size());
    check_finite("StructuredGlobalGaussian", "mean", mean_);
    check_finite("StructuredGlobalGaussian", "log_sd", log_sd_);
    if (correlated_) {
      check_size("StructuredGlobalGaussian", "unit_lower rows", lower_.rows(), mean_.size());
      internal::check_unit_lower_triangular("StructuredGlobalGaussian", "unit_lower", lower_);
    }
    sd_ = log_sd_.array().exp().matrix();
    check_positive("StructuredGlobalGaussian", "exp(log_sd)", sd_);
  }

  const Matrix* lower_ptr() const { return correlated_ ? &lower_ : nullptr; }

  Vector mean_;
  Vector log_sd_;
  Vector sd_;
  Matrix lower_;  // empty unless correlated_
  bool correlated_ = false;
};

template <typename T = double>
class StructuredLocalGaussian {
 public:
  using Scalar = T;
  using Vector = VectorX<T>;
  using Matrix = MatrixX<T>;

  StructuredLocalGaussian() = default;

  // mean: mu_j (m); coupling: C_j (m x n) or an empty matrix for C_j = 0 (then global_dim gives n);
  // log_sd: rho_j (m); unit_lower: L_j (m x m) or an empty matrix for L_j = I.
  StructuredLocalGaussian(Vector mean, Matrix coupling, Vector log_sd, Matrix unit_lower, Eigen::Index global_dim)
      : mean_(std::move(mean)), coupling_(std::move(coupling)), log_sd_(std::move(log_sd)),
        lower_(std::move(unit_lower)), global_dim_(global_dim) {
    const char* fn = "StructuredLocalGaussian";
    coupled_ = coupling_.size() > 0;
    correlated_ = lower_.size() > 0;
    check_finite(fn, "mean", mean_);
    check_size(fn, "log_sd", log_sd_.size(), mean_.size());
    check_finite(fn, "log_sd", log_sd_);
    if (coupled_) {
      check_size(fn, "coupling rows", coupling_.rows(), mean_.size());
      check_size(fn, "coupling cols", coupling_.cols(), global_dim_);
      check_finite(fn, "coupling", coupling_);
    }
    if (correlated_) {
      check_size(fn, "unit_lower rows", lower_.rows(), mean_.size());
      internal::check_unit_lower_triangular(fn, "unit_lower", lower_);
    }
    sd_ = log_sd_.array().exp().matrix();
    check_positive(fn, "exp(log_sd)", sd_);
  }

  static Eigen::Index num_params_for(Eigen::Index m, Eigen::Index n, bool coupled, bool correlated) {
    return 2 * m + (coupled ? m * n : 0) + (correlated ? m * (m - 1) / 2 : 0);
  }

  static StructuredLocalGaussian from_params(const Vector& params, Eigen::Index m, Eigen::Index n, bool coupled,
                                             bool correlated) {
    check_size("StructuredLocalGaussian::from_params", "params", params.size(),
               num_params_for(m, n, coupled, correlated));
    check_finite("StructuredLocalGaussian::from_params", "params", params);
    Eigen::Index k = m;
    Matrix c;
    if (coupled) {
      c = Eigen::Map<const Matrix>(params.data() + k, m, n);
      k += m * n;
    }
    const Vector log_sd = params.segment(k, m);
    k += m;
    Matrix l;
    if (correlated) {
      l = Matrix::Identity(m, m);
      for (Eigen::Index j = 0; j < m; ++j) {
        for (Eigen::Index i = j + 1; i < m; ++i, ++k) l(i, j) = params[k];
      }
    }
    return StructuredLocalGaussian(params.head(m), c, log_sd, l, n);
  }

  Eigen::Index dim() const { return mean_.size(); }
  Eigen::Index global_dim() const { return global_dim_; }
  bool coupled() const { return coupled_; }
  bool correlated() const { return correlated_; }
  Eigen::Index num_params() const { return num_params_for(dim(), global_dim_, coupled_, correlated_); }
  const Vector& mean() const { return mean_; }
  // C_j (materialised as zeros for an uncoupled block).
  Matrix coupling() const { return coupled_ ? coupling_ : Matrix::Zero(dim(), global_dim_); }
  const Vector& log_sd() const { return log_sd_; }
  const Vector& sd() const { return sd_; }
  // L_j (materialised as the identity for an uncorrelated block).
  Matrix unit_lower() const { return correlated_ ? lower_ : Matrix::Identity(dim(), dim()); }
  // Conditional covariance Sigma_{L_j L_j} = D_j L_j L_j^T D_j.
  Matrix conditional_covariance() const {
    if (!correlated_) return Matrix(sd_.cwiseAbs2().asDiagonal());
    const Matrix k = sd_.asDiagonal() * lower_;
    return k * k.transpose();
  }
  // Marginal moments of Z_{L_j} given the global block: mean mu_j, covariance
  // C_j Sigma_GG C_j^T + Sigma_{L_j L_j} (derived from spec 002 §2.5); used for the silo's output.
  Matrix marginal_covariance(const StructuredGlobalGaussian<T>& global) const {
    check_size("StructuredLocalGaussian::marginal_covariance", "global dim", global.dim(), global_dim_);
    if (!coupled_) return conditional_covariance();
    return coupling_ * global.covariance() * coupling_.transpose() + conditional_covariance();
  }

  Vector params() const {
    Vector p(num_params());
    p.head(dim()) = mean_;
    Eigen::Index k = dim();
    if (coupled_) {
      p.segment(k, dim() * global_dim_) = Eigen::Map<const Vector>(coupling_.data(), dim() * global_dim_);
      k += dim() * global_dim_;
    }
    p.segment(k, dim()) = log_sd_;
    k += dim();
    if (correlated_) {
      for (Eigen::Index j = 0; j < dim(); ++j) {
        for (Eigen::Index i = j + 1; i < dim(); ++i, ++k) p[k] = lower_(i, j);
      }
    }
    return p;
  }

  // Z_L = mu_j + C_j u + sigma_j .* (L_j eps_L), u = Z_G - mu_G (n x S), eps_L (m x S).
  Matrix sample(const Matrix& u, const Matrix& eps) const {
    check_shapes("StructuredLocalGaussian::sample", u, eps);
    const Matrix le = internal::apply_unit_lower<T>(eps, lower_ptr());
    Matrix z = (le.array().colwise() * sd_.array()).matrix().colwise() + mean_;
    if (coupled_) z += coupling_ * u;
    return z;
  }

  // r = Z_L - mu_j - C_j u.
  Matrix residual(const Matrix& z, const Matrix& u) const {
    check_shapes("StructuredLocalGaussian::residual", u, z);
    if (!coupled_) return z.colwise() - mean_;
    return (z - coupling_ * u).colwise() - mean_;
  }

  // log q(Z_L | Z_G) per column.
  Vector log_density(const Matrix& z, const Matrix& u) const {
    return internal::log_density_unit_lower<T>(residual(z, u), sd_, log_sd_, lower_ptr());
  }
  // grad_{Z_L} log q(Z_L | Z_G) = -Sigma_LL^{-1} r (spec 002 §2.5).
  Matrix score_local(const Matrix& z, const Matrix& u) const {
    return -internal::precision_times_unit_lower<T>(residual(z, u), sd_, lower_ptr());
  }
  // grad_{Z_G} log q(Z_L | Z_G) = C_j^T Sigma_LL^{-1} r (spec 002 §2.5).
  Matrix score_global(const Matrix& z, const Matrix& u) const {
    if (!coupled_) return Matrix::Zero(global_dim_, z.cols());
    return coupling_.transpose() * internal::precision_times_unit_lower<T>(residual(z, u), sd_, lower_ptr());
  }
  // Conditional entropy H[q(Z_L | Z_G)] (the same for every Z_G).
  T entropy() const { return T(0.5) * T(dim()) * (T(kLog2Pi) + T(1)) + log_sd_.sum(); }

  // sum_s (dZ_L,s / d local params)^T h_s (spec 002 §2.5): d mu = h; d C = h u^T;
  // d rho = h .* (L eps) .* sigma; d L[a,b] = h_a sigma_a eps_b.
  Vector vjp(const Matrix& u, const Matrix& eps, const Matrix& cotangent) const {
    check_shapes("StructuredLocalGaussian::vjp", u, eps);
    check_size("StructuredLocalGaussian::vjp", "cotangent rows", cotangent.rows(), dim());
    check_size("StructuredLocalGaussian::vjp", "cotangent cols", cotangent.cols(), eps.cols());
    Vector g(num_params());
    g.head(dim()) = cotangent.rowwise().sum();
    Eigen::Index k = dim();
    if (coupled_) {
      const Matrix gc = cotangent * u.transpose();
      g.segment(k, dim() * global_dim_) = Eigen::Map<const Vector>(gc.data(), dim() * global_dim_);
      k += dim() * global_dim_;
    }
    const Matrix le = internal::apply_unit_lower<T>(eps, lower_ptr());
    g.segment(k, dim()) = (cotangent.array() * le.array()).rowwise().sum().matrix().cwiseProduct(sd_);
    k += dim();
    if (correlated_) {
      const Matrix gl = (cotangent.array().colwise() * sd_.array()).matrix() * eps.transpose();
      for (Eigen::Index j = 0; j < dim(); ++j) {
        for (Eigen::Index i = j + 1; i < dim(); ++i, ++k) g[k] = gl(i, j);
      }
    }
    return g;
  }

  // Cotangent on u = Z_G - mu_G induced by a cotangent h on Z_L: C_j^T h.
  Matrix offset_cotangent(const Matrix& cotangent) const {
    if (!coupled_) return Matrix::Zero(global_dim_, cotangent.cols());
    return coupling_.transpose() * cotangent;
  }

 private:
  void check_shapes(const char* fn, const Matrix& u, const Matrix& other) const {
    check_size(fn, "u rows", u.rows(), global_dim_);
    check_size(fn, "eps/z rows", other.rows(), dim());
    check_size(fn, "eps/z cols", other.cols(), u.cols());
  }

  const Matrix* lower_ptr() const { return correlated_ ? &lower_ : nullptr; }

  Vector mean_;
  Matrix coupling_;  // empty unless coupled_
  Vector log_sd_;
  Vector sd_;
  Matrix lower_;  // empty unless correlated_
  Eigen::Index global_dim_ = 0;
  bool coupled_ = false;
  bool correlated_ = false;
};

// What silo j computes in one SFVI iteration (seed 002 Alg. 1 steps 5-6), averaged over S draws.
template <typename T>
struct SfviSiloGradient {
  VectorX<T> global;  // g_j^eta, seed 002 Eq. 10: sent to the server
  VectorX<T> local;   // grad wrt eta_{L_j}, seed 002 Eq. 11: stays in the silo
};

// STL gradients of silo j's term L_j = log p(y_j, Z_L | Z_G) - log q(Z_L | Z_G) (spec 002 §2.2).
// grad_log_p_global / grad_log_p_local are grad_{Z_G} and grad_{Z_L} of log p(y_j, Z_L | Z_G) at
// Z_G = global.sample(eps_global), Z_L = local.sample(global.offset(eps_global), eps_local).
template <typename T>
SfviSiloGradient<T> sfvi_silo_gradient(const StructuredGlobalGaussian<T>& global,
                                       const StructuredLocalGaussian<T>& local, const MatrixArg<T>& eps_global,
                                       const MatrixArg<T>& eps_local, const MatrixArg<T>& grad_log_p_global,
                                       const MatrixArg<T>& grad_log_p_local) {
  const MatrixX<T> u = global.offset(eps_global);
  const MatrixX<T> z = local.sample(u, eps_local);
  // STL: subtract the scores of q(Z_L | Z_G) with its parameters held fixed (spec 002 §2.2).
  const MatrixX<T> a = grad_log_p_global - local.score_global(z, u);
  const MatrixX<T> h = grad_log_p_local - local.score_local(z, u);
  const T s = T(eps_global.cols());
  SfviSiloGradient<T> out;
  // seed 002 Eq. 10: through Z_G directly, and through Z_L's dependence on u.
  out.global = (global.vjp(eps_global, a) + global.vjp_offset(eps_global, local.offset_cotangent(h))) / s;
  out.local = local.vjp(u, eps_local, h) / s;  // seed 002 Eq. 11
  return out;
}

}  // namespace fvi
