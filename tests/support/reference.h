#pragma once
// Textbook formulas written independently of the runtime, for tests to compare against: densities
// via full inverses and determinants (not the runtime's Cholesky paths).
#include <cmath>

#include <random>

#include <Eigen/Dense>

namespace fvi {
namespace test {

inline double normal_logpdf(double x, double mean, double sd) {
  const double pi = std::acos(-1.0);
  return -0.5 * std::log(2 * pi * sd * sd) - 0.5 * (x - mean) * (x - mean) / (sd * sd);
}

inline double mvn_logpdf(const Eigen::VectorXd& x, const Eigen::VectorXd& mean, const Eigen::MatrixXd& cov) {
  const double pi = std::acos(-1.0);
  const Eigen::VectorXd d = x - mean;
  return -0.5 * std::log((2 * pi * cov).determinant()) - 0.5 * d.dot(cov.inverse() * d);
}

// Random symmetric positive-definite matrix with eigenvalues in [lo, hi], from a seedless
// deterministic construction (a rotation built from sines).
inline Eigen::MatrixXd spd_matrix(int d, double lo, double hi, double phase = 0.3) {
  Eigen::MatrixXd a(d, d);
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) a(i, j) = std::sin(1.7 * i + 2.3 * j + phase) + (i == j ? 0.5 : 0.0);
  }
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  const Eigen::MatrixXd q = qr.householderQ();
  Eigen::VectorXd ev(d);
  for (int i = 0; i < d; ++i) ev[i] = d == 1 ? lo : lo + (hi - lo) * i / (d - 1);
  return q * ev.asDiagonal() * q.transpose();
}

// Deterministic "noise" matrix with entries in [-2, 2] (for eps in reparameterisation tests).
inline Eigen::MatrixXd fixed_noise(int rows, int cols, double phase = 0.0) {
  Eigen::MatrixXd e(rows, cols);
  for (int j = 0; j < cols; ++j) {
    for (int i = 0; i < rows; ++i) e(i, j) = 2 * std::sin(12.9898 * (i + 1) + 78.233 * (j + 1) + phase);
  }
  return e;
}

// n independent N(0, sd^2) numbers from a seeded Mersenne Twister (test data, not the runtime's RNG).
inline Eigen::VectorXd seeded_normals(int n, unsigned seed, double sd = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, sd);
  Eigen::VectorXd v(n);
  for (int i = 0; i < n; ++i) v[i] = z(rng);
  return v;
}

}  // namespace test
}  // namespace fvi
