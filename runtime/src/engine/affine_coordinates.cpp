#include "fvi/engine/affine_coordinates.h"

#include <stdexcept>

namespace fvi::engine {

namespace {

Eigen::MatrixXd symmetric(const Eigen::MatrixXd& m) { return 0.5 * (m + m.transpose()); }

}  // namespace

AffineCoordinates AffineCoordinates::from_curvature(const Eigen::VectorXd& mean, const Eigen::MatrixXd& curvature) {
  if (curvature.rows() != mean.size() || curvature.cols() != mean.size())
    throw std::invalid_argument("AffineCoordinates: the curvature's size is not the mean's");
  // H = R R^T (R lower) gives H^-1 = R^-T R^-1: L = R^-T, L^-1 = R^T.
  const Eigen::LLT<Eigen::MatrixXd> llt(symmetric(curvature));
  if (llt.info() != Eigen::Success || !curvature.allFinite())
    throw std::invalid_argument("AffineCoordinates: the curvature is not positive definite");
  const Eigen::MatrixXd r = llt.matrixL();
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(mean.size(), mean.size());
  Eigen::MatrixXd scale = r.transpose().triangularView<Eigen::Upper>().solve(identity);
  if (!scale.allFinite()) throw std::invalid_argument("AffineCoordinates: the curvature is too near singular");
  return AffineCoordinates(mean, std::move(scale), r.transpose());
}

AffineCoordinates AffineCoordinates::from_cholesky(const Eigen::VectorXd& mean, const Eigen::MatrixXd& chol) {
  if (chol.rows() != mean.size() || chol.cols() != mean.size())
    throw std::invalid_argument("AffineCoordinates: the Cholesky factor's size is not the mean's");
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(mean.size(), mean.size());
  Eigen::MatrixXd inverse = chol.triangularView<Eigen::Lower>().solve(identity);
  if (!inverse.allFinite()) throw std::invalid_argument("AffineCoordinates: the Cholesky factor is singular");
  return AffineCoordinates(mean, chol, std::move(inverse));
}

Eigen::MatrixXd AffineCoordinates::to_theta(const Eigen::MatrixXd& z) const {
  return (scale_ * z).colwise() + shift_;
}

Eigen::MatrixXd AffineCoordinates::gradient_to_z(const Eigen::MatrixXd& d_theta) const {
  return scale_.transpose() * d_theta;
}

// eta1^T (m + L z) + (m + L z)^T eta2 (m + L z) = const + (L^T (eta1 + 2 eta2 m))^T z + z^T (L^T eta2 L) z.
GaussianNatural<double> AffineCoordinates::to_z(const GaussianNatural<double>& theta) const {
  return {scale_.transpose() * (theta.eta1 + 2 * theta.eta2 * shift_),
          symmetric(scale_.transpose() * theta.eta2 * scale_)};
}

// The inverse of to_z: eta2 = L^-T eta2_z L^-1, eta1 = L^-T eta1_z - 2 eta2 m.
GaussianNatural<double> AffineCoordinates::to_theta(const GaussianNatural<double>& z) const {
  const Eigen::MatrixXd eta2 = symmetric(inverse_.transpose() * z.eta2 * inverse_);
  return {inverse_.transpose() * z.eta1 - 2 * eta2 * shift_, eta2};
}

}  // namespace fvi::engine
