#pragma once
// Coordinates z of the global parameters with theta = shift + scale z, for a PVI silo's local
// fit. A Gaussian in theta is a Gaussian in z, and KL, reverse KL, weighted KL and Renyi's alpha
// divergence are the same in either, so the local problem's optimum maps back exactly; what the
// coordinates change is its conditioning. With `scale` the Cholesky factor of the silo's tilted
// posterior's Laplace covariance, a regression on raw predictors (income in dollars beside age in
// years: posterior sds 10^5 apart, the intercept on a ridge with the slopes) is, in z, close to
// N(0, I), where Adam's steps of lr are lr posterior sds in every direction.
#include "fvi/eigen_types.h"
#include "fvi/family/natural_gaussian.h"

namespace fvi::engine {

class AffineCoordinates {
 public:
  // theta = mean + L z with L L^T = curvature^-1: z ~ N(0, I) is the Laplace approximation
  // N(mean, curvature^-1). Throws std::invalid_argument when curvature is not positive definite.
  static AffineCoordinates from_curvature(const Eigen::VectorXd& mean, const Eigen::MatrixXd& curvature);
  // theta = mean + chol z: z ~ N(0, I) is N(mean, chol chol^T).
  static AffineCoordinates from_cholesky(const Eigen::VectorXd& mean, const Eigen::MatrixXd& chol);

  // theta at each column of z.
  Eigen::MatrixXd to_theta(const Eigen::MatrixXd& z) const;
  // d/dz from d/dtheta at each column: L^T d.
  Eigen::MatrixXd gradient_to_z(const Eigen::MatrixXd& d_theta) const;
  // A Gaussian factor exp(eta1^T theta + theta^T eta2 theta) read in z (proper or not), and back.
  GaussianNatural<double> to_z(const GaussianNatural<double>& theta) const;
  GaussianNatural<double> to_theta(const GaussianNatural<double>& z) const;

 private:
  AffineCoordinates(Eigen::VectorXd shift, Eigen::MatrixXd scale, Eigen::MatrixXd inverse)
      : shift_(std::move(shift)), scale_(std::move(scale)), inverse_(std::move(inverse)) {}
  Eigen::VectorXd shift_;
  Eigen::MatrixXd scale_;    // L
  Eigen::MatrixXd inverse_;  // L^-1
};

}  // namespace fvi::engine
