#include "fvi/check.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

using Catch::Contains;
using fvi::InvalidArgument;

TEST_CASE("check_finite names the function and the offending element", "[check]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Eigen::VectorXd v(3);
  v << 1, nan, 2;
  CHECK_THROWS_AS(fvi::check_finite("f", "x", v), InvalidArgument);
  CHECK_THROWS_WITH(fvi::check_finite("f", "x", v), "f: x[1] is NaN");
  Eigen::MatrixXd m = Eigen::MatrixXd::Zero(2, 3);
  m(1, 2) = -inf;
  CHECK_THROWS_WITH(fvi::check_finite("g", "m", m), "g: m(1,2) is inf");
  CHECK_THROWS_WITH(fvi::check_finite("h", "a", nan), "h: a is NaN");
  CHECK_NOTHROW(fvi::check_finite("f", "x", Eigen::VectorXd::Ones(4)));
}

TEST_CASE("check_positive and check_bounded report the value", "[check]") {
  CHECK_THROWS_WITH(fvi::check_positive("f", "sigma", -1.0), "f: sigma must be positive but is -1");
  CHECK_THROWS_WITH(fvi::check_positive("f", "sigma", 0.0), Contains("must be positive"));
  Eigen::Vector2d v(1, 0);
  CHECK_THROWS_WITH(fvi::check_positive("f", "sd", v), "f: sd[1] must be positive but is 0");
  CHECK_THROWS_WITH(fvi::check_bounded("f", "tau", 1.5, 0.0, 1.0), "f: tau must be in [0, 1] but is 1.5");
  CHECK_THROWS_WITH(fvi::check_nonnegative("f", "y", -2.0), Contains("non-negative"));
  CHECK_NOTHROW(fvi::check_bounded("f", "tau", 1.0, 0.0, 1.0));
}

TEST_CASE("check_positive_definite rejects non-PD, asymmetric and non-finite matrices", "[check]") {
  Eigen::Matrix2d pd;
  pd << 2, 1, 1, 2;
  CHECK_NOTHROW(fvi::check_positive_definite("f", "S", pd));
  Eigen::Matrix2d indefinite;
  indefinite << 1, 2, 2, 1;  // eigenvalues 3 and -1
  CHECK_THROWS_WITH(fvi::check_positive_definite("f", "S", indefinite), "f: S is not positive definite");
  Eigen::Matrix2d asym;
  asym << 2, 1, 0, 2;
  CHECK_THROWS_WITH(fvi::check_positive_definite("f", "S", asym), Contains("S is not symmetric"));
  Eigen::Matrix2d nan = pd;
  nan(0, 1) = nan(1, 0) = std::nan("");
  CHECK_THROWS_WITH(fvi::check_positive_definite("f", "S", nan), Contains("is NaN"));
  CHECK_THROWS_WITH(fvi::check_positive_definite("f", "S", Eigen::MatrixXd::Ones(2, 3)), Contains("must be square"));
}

TEST_CASE("check_cholesky_factor and check_size", "[check]") {
  Eigen::Matrix2d l;
  l << 1, 0, 0.5, 2;
  CHECK_NOTHROW(fvi::check_cholesky_factor("f", "L", l));
  l(0, 1) = 0.1;
  CHECK_THROWS_WITH(fvi::check_cholesky_factor("f", "L", l), Contains("not lower triangular"));
  l(0, 1) = 0;
  l(1, 1) = -2;
  CHECK_THROWS_WITH(fvi::check_cholesky_factor("f", "L", l), Contains("non-positive diagonal"));
  CHECK_THROWS_WITH(fvi::check_size("f", "x", 3, 4), "f: x has size 3 but 4 was expected");
}
