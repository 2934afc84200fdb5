#include "fvi/math/constants.h"

#include <cmath>

#include <catch2/catch.hpp>

using Catch::Matchers::WithinRel;

TEST_CASE("numeric constants", "[math][constants]") {
  CHECK_THAT(fvi::kLog2Pi, WithinRel(std::log(2 * std::acos(-1.0)), 1e-15));
  CHECK_THAT(fvi::kSqrt2, WithinRel(std::sqrt(2.0), 1e-15));
}
