// A PVI silo's fit coordinates theta = m + L z (fvi/engine/affine_coordinates.h), against the
// distribution of z = L^-1 (theta - m) computed from the moments, and the chain rule against
// central differences.
#include "fvi/engine/affine_coordinates.h"

#include <random>

#include <catch2/catch.hpp>

using namespace fvi::engine;

namespace {

Eigen::MatrixXd gaussian_matrix(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// A positive-definite matrix whose scales differ by 10^4, as raw predictors' posteriors do.
Eigen::MatrixXd badly_scaled_spd(Eigen::Index d, std::mt19937_64& rng) {
  const Eigen::MatrixXd a = gaussian_matrix(d, d, rng);
  Eigen::VectorXd scale(d);
  for (Eigen::Index i = 0; i < d; ++i) scale[i] = std::pow(10.0, 4.0 * double(i) / double(d - 1));
  return scale.asDiagonal() * (a * a.transpose() + Eigen::MatrixXd::Identity(d, d)) * scale.asDiagonal();
}

fvi::GaussianNatural<double> natural_of(const Eigen::VectorXd& mean, const Eigen::MatrixXd& cov) {
  const Eigen::MatrixXd precision = cov.inverse();
  return {precision * mean, -0.5 * precision};
}

}  // namespace

TEST_CASE("affine coordinates: a Gaussian read in z is the distribution of L^-1 (theta - m)", "[affine]") {
  std::mt19937_64 rng(5);
  const Eigen::Index d = 4;
  const Eigen::MatrixXd curvature = badly_scaled_spd(d, rng);
  const Eigen::VectorXd centre = 100 * gaussian_matrix(d, 1, rng);
  const AffineCoordinates from_h = AffineCoordinates::from_curvature(centre, curvature);
  const Eigen::MatrixXd chol = Eigen::LLT<Eigen::MatrixXd>(badly_scaled_spd(d, rng)).matrixL();
  const AffineCoordinates from_l = AffineCoordinates::from_cholesky(centre, chol);

  // The columns of the identity in z map to m + L e_j: L from their differences.
  const auto scale_of = [&](const AffineCoordinates& c) {
    Eigen::MatrixXd points(d, d + 1);
    points << Eigen::VectorXd::Zero(d), Eigen::MatrixXd::Identity(d, d);
    const Eigen::MatrixXd theta = c.to_theta(points);
    CHECK((theta.col(0) - centre).norm() == 0);
    return Eigen::MatrixXd(theta.rightCols(d).colwise() - theta.col(0));
  };
  const Eigen::MatrixXd l_h = scale_of(from_h);
  // L L^T = H^-1 (z ~ N(0, I) is the Laplace approximation N(m, H^-1)), read as L^T H L = I, which
  // does not lose H's condition number to an inverse.
  CHECK((l_h.transpose() * curvature * l_h - Eigen::MatrixXd::Identity(d, d)).cwiseAbs().maxCoeff() < 1e-9);
  CHECK((scale_of(from_l) - chol).cwiseAbs().maxCoeff() < 1e-9 * chol.cwiseAbs().maxCoeff());

  for (const AffineCoordinates* c : {&from_h, &from_l}) {
    // theta ~ N(m + L v, L S L^T) is z ~ N(v, S) by construction; S near I, as a posterior near
    // the Laplace approximation the coordinates came from.
    const Eigen::MatrixXd l = scale_of(*c);
    const Eigen::MatrixXd b = gaussian_matrix(d, d, rng);
    const Eigen::MatrixXd s = Eigen::MatrixXd::Identity(d, d) + 0.3 * b * b.transpose();
    const Eigen::VectorXd v = gaussian_matrix(d, 1, rng);
    const fvi::GaussianNatural<double> in_theta = natural_of(centre + l * v, l * s * l.transpose());
    const fvi::GaussianNatural<double> in_z = natural_of(v, s);
    // theta's precision carries H's condition number (10^8): its inverse's relative error.
    const double tol = 1e-6;
    const fvi::GaussianNatural<double> z = c->to_z(in_theta);
    CHECK((z.eta1 - in_z.eta1).cwiseAbs().maxCoeff() < tol * in_z.eta1.cwiseAbs().maxCoeff());
    CHECK((z.eta2 - in_z.eta2).cwiseAbs().maxCoeff() < tol * in_z.eta2.cwiseAbs().maxCoeff());
    const fvi::GaussianNatural<double> back = c->to_theta(in_z);
    CHECK((back.eta1 - in_theta.eta1).cwiseAbs().maxCoeff() < tol * in_theta.eta1.cwiseAbs().maxCoeff());
    CHECK((back.eta2 - in_theta.eta2).cwiseAbs().maxCoeff() < tol * in_theta.eta2.cwiseAbs().maxCoeff());
  }
}

TEST_CASE("affine coordinates: an improper factor keeps its log density up to a constant", "[affine]") {
  // A factor need not be a distribution (a cavity may be improper): exp(eta1^T theta + theta^T eta2
  // theta) read in z must differ from the original at theta = m + L z by one constant.
  std::mt19937_64 rng(6);
  const Eigen::Index d = 3;
  const Eigen::MatrixXd chol = Eigen::LLT<Eigen::MatrixXd>(badly_scaled_spd(d, rng)).matrixL();
  const AffineCoordinates c = AffineCoordinates::from_cholesky(gaussian_matrix(d, 1, rng), chol);
  Eigen::MatrixXd eta2 = gaussian_matrix(d, d, rng);
  eta2 = Eigen::MatrixXd(0.5 * (eta2 + eta2.transpose()));  // indefinite (a copy: Eigen would alias eta2 with its transpose)
  const fvi::GaussianNatural<double> factor{gaussian_matrix(d, 1, rng), eta2};
  const fvi::GaussianNatural<double> z_factor = c.to_z(factor);
  const Eigen::MatrixXd z = gaussian_matrix(d, 6, rng);
  const Eigen::VectorXd difference = factor.log_factor(c.to_theta(z)) - z_factor.log_factor(z);
  CHECK((difference.array() - difference[0]).abs().maxCoeff() < 1e-8 * difference.cwiseAbs().maxCoeff());
}

TEST_CASE("affine coordinates: the gradient in z is the chain rule's", "[affine]") {
  std::mt19937_64 rng(7);
  const Eigen::Index d = 3;
  const AffineCoordinates c =
      AffineCoordinates::from_curvature(gaussian_matrix(d, 1, rng), badly_scaled_spd(d, rng));
  const Eigen::VectorXd a = gaussian_matrix(d, 1, rng);
  const auto f = [&](const Eigen::VectorXd& theta) { return std::sin(a.dot(theta)) + 0.5 * theta.squaredNorm() * 1e-6; };
  const Eigen::VectorXd z = gaussian_matrix(d, 1, rng);
  const Eigen::VectorXd theta = c.to_theta(z);
  const Eigen::VectorXd d_theta = std::cos(a.dot(theta)) * a + 1e-6 * theta;
  const Eigen::VectorXd d_z = c.gradient_to_z(d_theta);
  for (Eigen::Index j = 0; j < d; ++j) {
    Eigen::VectorXd up = z, down = z;
    const double h = 1e-5;
    up[j] += h, down[j] -= h;
    const double central = (f(c.to_theta(up)) - f(c.to_theta(down))) / (2 * h);
    CHECK(std::abs(central - d_z[j]) < 1e-6 * std::max(1.0, std::abs(central)));
  }
}

TEST_CASE("affine coordinates: a curvature that is not positive definite is refused", "[affine]") {
  const Eigen::MatrixXd h = (Eigen::MatrixXd(2, 2) << 1, 2, 2, 1).finished();
  CHECK_THROWS_AS(AffineCoordinates::from_curvature(Eigen::VectorXd::Zero(2), h), std::invalid_argument);
}
