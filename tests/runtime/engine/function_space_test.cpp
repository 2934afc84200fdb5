// Seed 001's linearised function-space KL (fvi/engine/function_space.h) against a Gaussian KL
// written out for two outputs (2 x 2 inverse and determinant by hand), against Monte Carlo, and
// its gradients against finite differences.
#include "fvi/engine/function_space.h"

#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"

using fvi::engine::FunctionSpaceKl;
using fvi::engine::LinearisedGaussian;
using fvi::engine::linearised_kl;

namespace {

LinearisedGaussian random_gaussian(std::mt19937_64& rng, Eigen::Index C, Eigen::Index P) {
  std::normal_distribution<double> normal;
  LinearisedGaussian g;
  g.mean.resize(C);
  g.jacobian.resize(C, P);
  g.variance.resize(P);
  for (Eigen::Index i = 0; i < C; ++i) g.mean[i] = normal(rng);
  for (Eigen::Index i = 0; i < g.jacobian.size(); ++i) g.jacobian.data()[i] = normal(rng);
  for (Eigen::Index i = 0; i < P; ++i) g.variance[i] = std::exp(0.5 * normal(rng));
  return g;
}

// KL(N(m1, S1) || N(m2, S2)) for 2 x 2 covariances, each entry of J diag(v) J' summed by hand.
double kl_two_outputs(const LinearisedGaussian& q, const LinearisedGaussian& p) {
  auto cov = [](const LinearisedGaussian& g, int i, int j) {
    double s = 0;
    for (Eigen::Index k = 0; k < g.variance.size(); ++k) s += g.jacobian(i, k) * g.variance[k] * g.jacobian(j, k);
    return s;
  };
  const double a = cov(q, 0, 0), b = cov(q, 0, 1), d = cov(q, 1, 1);
  const double e = cov(p, 0, 0), f = cov(p, 0, 1), h = cov(p, 1, 1);
  const double det_q = a * d - b * b, det_p = e * h - f * f;
  // S2^-1 = [h -f; -f e] / det_p.
  const double trace = (h * a - 2 * f * b + e * d) / det_p;
  const double x = p.mean[0] - q.mean[0], y = p.mean[1] - q.mean[1];
  const double quad = (h * x * x - 2 * f * x * y + e * y * y) / det_p;
  return 0.5 * (trace + quad - 2 + std::log(det_p) - std::log(det_q));
}

}  // namespace

TEST_CASE("linearised function-space KL: the Gaussian KL of two outputs written out", "[function_space]") {
  std::mt19937_64 rng(1);
  for (int trial = 0; trial < 20; ++trial) {
    const LinearisedGaussian q = random_gaussian(rng, 2, 5), p = random_gaussian(rng, 2, 5);
    const double want = kl_two_outputs(q, p);
    CHECK_THAT(linearised_kl(q, p, 0).value, Catch::Matchers::WithinRel(want, 1e-10));
  }
  // The KL of a Gaussian with itself is 0, whatever its Jacobian.
  const LinearisedGaussian q = random_gaussian(rng, 3, 7);
  CHECK(std::abs(linearised_kl(q, q, 0).value) < 1e-12);
}

TEST_CASE("linearised function-space KL: Monte Carlo E_q[log q - log p] agrees within its error",
          "[function_space]") {
  std::mt19937_64 rng(2);
  const LinearisedGaussian q = random_gaussian(rng, 3, 4), p = random_gaussian(rng, 3, 4);
  const Eigen::MatrixXd A = q.covariance(), B = p.covariance();
  const Eigen::LLT<Eigen::MatrixXd> a(A), b(B);
  const Eigen::MatrixXd La = a.matrixL();
  auto log_density = [](const Eigen::LLT<Eigen::MatrixXd>& l, const Eigen::VectorXd& mean, const Eigen::VectorXd& x) {
    const Eigen::VectorXd z = l.matrixL().solve(x - mean);
    const double log_det = 2 * l.matrixL().toDenseMatrix().diagonal().array().log().sum();
    return -0.5 * (z.squaredNorm() + log_det + double(x.size()) * std::log(2 * M_PI));
  };
  std::normal_distribution<double> normal;
  const int draws = 200000;
  double sum = 0, sum_sq = 0;
  for (int s = 0; s < draws; ++s) {
    Eigen::VectorXd eps(3);
    for (int i = 0; i < 3; ++i) eps[i] = normal(rng);
    const Eigen::VectorXd x = q.mean + La * eps;
    const double r = log_density(a, q.mean, x) - log_density(b, p.mean, x);
    sum += r, sum_sq += r * r;
  }
  const double mean = sum / draws, se = std::sqrt((sum_sq / draws - mean * mean) / draws);
  const double kl = linearised_kl(q, p, 0).value;
  INFO("closed form " << kl << ", Monte Carlo " << mean << " +- " << se);
  CHECK(std::abs(kl - mean) < 4 * se);
}

TEST_CASE("linearised function-space KL: gradients in q's function mean and weight variances match finite differences",
          "[function_space]") {
  std::mt19937_64 rng(3);
  const LinearisedGaussian q = random_gaussian(rng, 3, 6), p = random_gaussian(rng, 3, 6);
  const double jitter = 1e-3;
  const FunctionSpaceKl kl = linearised_kl(q, p, jitter);
  // Both gradients at once: x = [f's mean; the weights' variances].
  const Eigen::Index C = q.mean.size(), P = q.variance.size();
  Eigen::VectorXd at(C + P), analytic(C + P);
  at << q.mean, q.variance;
  analytic << kl.d_mean, kl.d_variance;
  auto check = fvi::test::check_gradient(
      [&](const Eigen::VectorXd& x) {
        LinearisedGaussian moved = q;
        moved.mean = x.head(C);
        moved.variance = x.tail(P);
        return linearised_kl(moved, p, jitter).value;
      },
      at, analytic);
  INFO(check.report());
  CHECK(check.ok());
}

TEST_CASE("linearised function-space KL: a singular covariance is refused with a message", "[function_space]") {
  std::mt19937_64 rng(4);
  LinearisedGaussian q = random_gaussian(rng, 2, 3), p = random_gaussian(rng, 2, 3);
  p.jacobian.setZero();  // a prior that reaches no output
  CHECK_THROWS_WITH(linearised_kl(q, p, 0), Catch::Matchers::Contains("not positive definite"));
  CHECK(std::isfinite(linearised_kl(q, p, 1e-6).value));
}
