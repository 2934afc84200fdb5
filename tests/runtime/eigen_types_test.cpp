#include "fvi/eigen_types.h"

#include <type_traits>

#include <catch2/catch.hpp>

TEST_CASE("scalar-templated Eigen aliases", "[eigen_types]") {
  STATIC_REQUIRE(std::is_same<fvi::VectorX<double>, Eigen::VectorXd>::value);
  STATIC_REQUIRE(std::is_same<fvi::MatrixX<float>, Eigen::MatrixXf>::value);
}
