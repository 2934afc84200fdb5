#pragma once
// 2-Wasserstein barycenter of Gaussians, argmin_nu sum_k w_k W2(nu, pi_k)^2, used by SFVI-Avg to
// average the silos' global posteriors (spec 002 §2.4):
//   mean        mu_* = sum_k w_k mu_k                                             (seed 002 Eq. 14)
//   covariance  Sigma_* = sum_k w_k (Sigma_*^{1/2} Sigma_k Sigma_*^{1/2})^{1/2}   (seed 002 Eq. 15)
// Diagonal covariances commute, and Eq. 15 has the closed form sigma_* = sum_k w_k sigma_k
// (average the standard deviations, spec 002 §2.4). Full covariances use the fixed-point iteration
// of Alvarez-Esteban et al. 2016 (spec 002 §2.4):
//   S <- S^{-1/2} (sum_k w_k (S^{1/2} Sigma_k S^{1/2})^{1/2})^2 S^{-1/2},  from S = sum_k w_k Sigma_k.
// Weights default to 1/J; given weights must be non-negative with a positive sum and are normalised.
#include <cmath>
#include <string>
#include <vector>

#include "fvi/check.h"
#include "fvi/error.h"
#include "fvi/family/full_rank_gaussian.h"
#include "fvi/family/mean_field_gaussian.h"
#include "fvi/family/structured_gaussian.h"
#include "fvi/math/symmetric_sqrt.h"

namespace fvi {

struct BarycenterOptions {
  double relative_tolerance = 1e-13;  // stop when |S_new - S|_F <= tol |S|_F
  int max_iterations = 1000;
};

template <typename T = double>
struct FullBarycenter {
  FullRankGaussian<T> distribution;
  int iterations = 0;
  T relative_change = 0;  // |S_last - S_previous|_F / |S_last|_F
};

namespace internal {

template <typename T, typename Q>
VectorX<T> barycenter_weights(const char* fn, const std::vector<Q>& qs, const VectorX<T>& weights) {
  if (qs.empty()) throw_invalid(fn, "no distributions to average");
  for (std::size_t k = 1; k < qs.size(); ++k) {
    check_size(fn, ("distribution " + std::to_string(k) + " dimension").c_str(), qs[k].dim(), qs[0].dim());
  }
  if (weights.size() == 0) return VectorX<T>::Constant(Eigen::Index(qs.size()), T(1) / T(qs.size()));
  check_size(fn, "weights", weights.size(), Eigen::Index(qs.size()));
  for (Eigen::Index k = 0; k < weights.size(); ++k) check_nonnegative(fn, "weight", weights[k]);
  const T total = weights.sum();
  if (!(total > 0)) throw_invalid(fn, "weights sum to zero");
  return weights / total;
}

}  // namespace internal

// Diagonal closed form: mean of means, mean of standard deviations.
template <typename T>
MeanFieldGaussian<T> wasserstein_barycenter(const std::vector<MeanFieldGaussian<T>>& qs,
                                            const typename MeanFieldGaussian<T>::Vector& weights = VectorX<T>()) {
  const VectorX<T> w = internal::barycenter_weights("wasserstein_barycenter", qs, weights);
  VectorX<T> mean = VectorX<T>::Zero(qs[0].dim()), sd = VectorX<T>::Zero(qs[0].dim());
  for (std::size_t k = 0; k < qs.size(); ++k) {
    mean += w[Eigen::Index(k)] * qs[k].mean();  // seed 002 Eq. 14
    sd += w[Eigen::Index(k)] * qs[k].sd();      // spec 002 §2.4 diagonal case of Eq. 15
  }
  return MeanFieldGaussian<T>::from_mean_sd(mean, sd);
}

// Full covariances: fixed-point iteration; throws fvi::ConvergenceError if the tolerance is not
// reached within max_iterations.
template <typename T>
FullBarycenter<T> wasserstein_barycenter(const std::vector<FullRankGaussian<T>>& qs,
                                         const typename MeanFieldGaussian<T>::Vector& weights = VectorX<T>(),
                                         const BarycenterOptions& options = {}) {
  const char* fn = "wasserstein_barycenter";
  const VectorX<T> w = internal::barycenter_weights(fn, qs, weights);
  const Eigen::Index d = qs[0].dim();
  VectorX<T> mean = VectorX<T>::Zero(d);
  std::vector<MatrixX<T>> covs;
  MatrixX<T> s = MatrixX<T>::Zero(d, d);
  for (std::size_t k = 0; k < qs.size(); ++k) {
    mean += w[Eigen::Index(k)] * qs[k].mean();  // seed 002 Eq. 14
    covs.push_back(qs[k].covariance());
    s += w[Eigen::Index(k)] * covs.back();
  }
  FullBarycenter<T> out;
  T change = T(0);
  for (int it = 1; it <= options.max_iterations; ++it) {
    const MatrixX<T> root = symmetric_sqrt<T>(s, fn);
    const MatrixX<T> inv_root = symmetric_inverse_sqrt<T>(s, fn);
    MatrixX<T> m = MatrixX<T>::Zero(d, d);
    for (std::size_t k = 0; k < covs.size(); ++k) {
      MatrixX<T> inner = root * covs[k] * root;
      inner = T(0.5) * (inner + inner.transpose()).eval();
      m += w[Eigen::Index(k)] * symmetric_sqrt<T>(inner, fn);
    }
    MatrixX<T> next = inv_root * m * m * inv_root;  // Alvarez-Esteban et al. 2016, Thm 4.2
    next = T(0.5) * (next + next.transpose()).eval();
    change = (next - s).norm() / next.norm();
    s = next;
    out.iterations = it;
    if (change <= T(options.relative_tolerance)) {
      out.distribution = FullRankGaussian<T>::from_mean_covariance(mean, s);
      out.relative_change = change;
      return out;
    }
  }
  throw ConvergenceError(std::string(fn) + ": fixed point did not converge in " +
                         std::to_string(options.max_iterations) + " iterations (relative change " +
                         internal::to_string(double(change)) + ")");
}

// The SFVI-Avg server step on the structured global block (spec 002 §2.4, Alg. 2): uncorrelated
// blocks (L_G = I) use the diagonal closed form; correlated blocks the fixed point, mapped back to
// (sigma_G, L_G) by StructuredGlobalGaussian::from_mean_covariance.
template <typename T>
StructuredGlobalGaussian<T> wasserstein_barycenter(const std::vector<StructuredGlobalGaussian<T>>& qs,
                                                   const typename MeanFieldGaussian<T>::Vector& weights = VectorX<T>(),
                                                   const BarycenterOptions& options = {}) {
  if (qs.empty()) internal::throw_invalid("wasserstein_barycenter", "no distributions to average");
  bool correlated = false;
  for (const auto& q : qs) correlated = correlated || q.correlated();
  if (!correlated) {
    std::vector<MeanFieldGaussian<T>> diag;
    for (const auto& q : qs) diag.emplace_back(q.mean(), q.log_sd());
    const auto b = wasserstein_barycenter(diag, weights);
    return StructuredGlobalGaussian<T>(b.mean(), b.log_sd());
  }
  std::vector<FullRankGaussian<T>> full;
  for (const auto& q : qs) full.push_back(FullRankGaussian<T>::from_mean_covariance(q.mean(), q.covariance()));
  const auto b = wasserstein_barycenter(full, weights, options);
  return StructuredGlobalGaussian<T>::from_mean_covariance(b.distribution.mean(), b.distribution.covariance());
}

}  // namespace fvi
