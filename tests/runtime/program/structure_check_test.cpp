// The checks of a derived value declared a structured matrix (fvi/program/quantities.h,
// structure_violation), each against a matrix that meets it and ones that break it in each way.
#include <Eigen/Cholesky>
#include <catch2/catch.hpp>

#include "fvi/program/quantities.h"

using fvi::program::structure_violation;

TEST_CASE("structured matrices: each check passes a matrix that meets it and names what another breaks",
          "[quantities]") {
  Eigen::MatrixXd corr(2, 2);
  corr << 1, 0.3, 0.3, 1;
  CHECK(structure_violation(FVI_CORR_MATRIX, corr).empty());
  CHECK(structure_violation(FVI_COV_MATRIX, 4 * corr).empty());
  CHECK(structure_violation(FVI_CORR_MATRIX, 4 * corr).find("its diagonal [1,1] = 4, not 1") != std::string::npos);
  Eigen::MatrixXd asymmetric = corr;
  asymmetric(1, 0) = 0.2;
  CHECK(structure_violation(FVI_COV_MATRIX, asymmetric).find("not symmetric") != std::string::npos);
  Eigen::MatrixXd indefinite(2, 2);
  indefinite << 1, 1.2, 1.2, 1;
  CHECK(structure_violation(FVI_CORR_MATRIX, indefinite).find("not positive definite") != std::string::npos);

  const Eigen::MatrixXd l = corr.llt().matrixL();
  CHECK(structure_violation(FVI_CHOLESKY_CORR, l).empty());
  CHECK(structure_violation(FVI_CHOLESKY_COV, 3 * l).empty());
  CHECK(structure_violation(FVI_CHOLESKY_CORR, 3 * l).find("row 1 has length 3, not 1") != std::string::npos);
  Eigen::MatrixXd upper = l;
  upper(0, 1) = 0.1;
  CHECK(structure_violation(FVI_CHOLESKY_COV, upper).find("[1,2] = 0.1 above the diagonal") != std::string::npos);
  Eigen::MatrixXd negative = l;
  negative(1, 1) = -negative(1, 1);
  CHECK(structure_violation(FVI_CHOLESKY_CORR, negative).find("[2,2]") != std::string::npos);
  Eigen::MatrixXd nan = corr;
  nan(0, 1) = NAN;
  CHECK(structure_violation(FVI_COV_MATRIX, nan).find("NaN") != std::string::npos);
  // A unit_vector: length 1 within Stan's 1e-8 on the squared length.
  Eigen::MatrixXd direction(3, 1);
  direction << 0.6, 0, 0.8;
  CHECK(structure_violation(FVI_UNIT_VECTOR, direction).empty());
  CHECK(structure_violation(FVI_UNIT_VECTOR, 1.01 * direction).find("a unit_vector: its length is 1.01, not 1") !=
        std::string::npos);
}
