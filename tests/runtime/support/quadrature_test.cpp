// Tests of the test-only quadrature (tests/support/quadrature.h): it must be right before it can
// judge the runtime's closed forms.
#include "support/quadrature.h"

#include <cmath>

#include <catch2/catch.hpp>

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::test::integrate;
using fvi::test::integrate_real_line;

TEST_CASE("quadrature integrates polynomials up to degree 22 exactly on one panel", "[support][quadrature]") {
  // K15 is exact for degree <= 22 (3n + 1 with n = 7); 8 initial panels keep that property.
  for (int degree = 0; degree <= 22; ++degree) {
    const auto r = integrate([degree](double x) { return std::pow(x, degree); }, -1, 1);
    const double exact = (degree % 2 == 1) ? 0.0 : 2.0 / (degree + 1);
    CHECK_THAT(r.value, WithinAbs(exact, 1e-15));
  }
}

TEST_CASE("quadrature reproduces known integrals", "[support][quadrature]") {
  const double pi = std::acos(-1.0);
  CHECK_THAT(integrate_real_line([](double x) { return std::exp(-x * x); }, 0, 1).value, WithinRel(std::sqrt(pi), 1e-12));
  CHECK_THAT(integrate([](double x) { return std::sin(x); }, 0, pi).value, WithinRel(2.0, 1e-13));
  // A sharply peaked integrand: int_0^1 1 / (1e-4 + (x - 0.3)^2) dx.
  const double a = 1e-2;
  const double exact = (std::atan(0.7 / a) + std::atan(0.3 / a)) / a;
  CHECK_THAT(integrate([a](double x) { return 1 / (a * a + (x - 0.3) * (x - 0.3)); }, 0, 1).value, WithinRel(exact, 1e-11));
  // Heavy-ish tail: int 1 / (1 + x^2) over R = pi.
  CHECK_THAT(integrate_real_line([](double x) { return 1 / (1 + x * x); }, 0, 1, 1e-12, 1e-11).value,
             WithinRel(pi, 1e-9));
}
