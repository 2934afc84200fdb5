#include "fvi/math/symmetric_sqrt.h"

#include <catch2/catch.hpp>

#include "support/reference.h"

using Catch::Contains;

TEST_CASE("symmetric square roots", "[math][symmetric_sqrt]") {
  const Eigen::MatrixXd m = fvi::test::spd_matrix(4, 0.1, 5.0);
  const Eigen::MatrixXd r = fvi::symmetric_sqrt<double>(m);
  const Eigen::MatrixXd ri = fvi::symmetric_inverse_sqrt<double>(m);
  // Rounding of an eigendecomposition: a few eps times the condition number (50) times |m|.
  const double tol = 1e3 * 50 * 2.2e-16 * 5;
  CHECK((r * r - m).cwiseAbs().maxCoeff() <= tol);
  CHECK((r - r.transpose()).cwiseAbs().maxCoeff() <= tol);
  CHECK((ri * m * ri - Eigen::MatrixXd::Identity(4, 4)).cwiseAbs().maxCoeff() <= tol);
  // PSD with a zero eigenvalue: sqrt works, inverse sqrt refuses.
  Eigen::Matrix2d singular;
  singular << 1, 1, 1, 1;
  const Eigen::MatrixXd rs = fvi::symmetric_sqrt<double>(singular);
  CHECK((rs * rs - singular).cwiseAbs().maxCoeff() <= 1e-14);
  CHECK_THROWS_WITH(fvi::symmetric_inverse_sqrt<double>(singular), Contains("not positive definite"));
  Eigen::Matrix2d indefinite;
  indefinite << 1, 2, 2, 1;
  CHECK_THROWS_WITH(fvi::symmetric_sqrt<double>(indefinite), Contains("not positive semi-definite"));
}
