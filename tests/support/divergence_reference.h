#pragma once
// Numerical integrals of divergences between univariate Gaussians, computed with the test
// quadrature from log densities written in the test (independent of the runtime).
#include <cmath>

#include "support/quadrature.h"
#include "support/reference.h"

namespace fvi {
namespace test {

// int q log(q / p).
inline QuadratureResult kl_integral(double mq, double sq, double mp, double sp) {
  return integrate_real_line(
      [=](double x) {
        const double lq = normal_logpdf(x, mq, sq), lp = normal_logpdf(x, mp, sp);
        return std::exp(lq) * (lq - lp);
      },
      mq, sq);
}

// int q^alpha p^(1 - alpha); the bulk of the integrand is between the two means.
inline QuadratureResult renyi_integral(double alpha, double mq, double sq, double mp, double sp) {
  return integrate_real_line(
      [=](double x) { return std::exp(alpha * normal_logpdf(x, mq, sq) + (1 - alpha) * normal_logpdf(x, mp, sp)); },
      0.5 * (mq + mp), std::max(sq, sp));
}

// |closed - integral| <= 10 x (quadrature error estimate) + relative rounding of the closed form.
inline bool matches_integral(double closed, const QuadratureResult& q, double rounding = 1e-13) {
  return std::abs(closed - q.value) <= 10 * q.error + rounding * std::max(1.0, std::abs(q.value));
}

}  // namespace test
}  // namespace fvi
