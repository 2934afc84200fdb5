#pragma once
// Scalar special functions the densities need in forms that stay finite where the textbook ones
// overflow or underflow: log erfc and the derivative of log erfc (skew_normal, exp_mod_normal), and
// log I0 and I1 / I0 of the modified Bessel functions (von_mises).
#include <cmath>

namespace fvi::math {

// K(x) = erfc(x) exp(x^2) sqrt(pi) for x >= 8 by its continued fraction (Abramowitz and Stegun 7.1.14):
// 1 / (x + (1/2) / (x + 1 / (x + (3/2) / (x + 2 / (x + ...))))); 40 terms are exact to rounding
// from x = 8 on (the tail's terms are below 1e-20 there).
inline double erfc_scaled_tail(double x) {
  double f = x;
  for (int k = 40; k >= 1; --k) f = x + (0.5 * k) / f;
  return 1 / f;
}

// log(erfc(x)), finite for every finite x (erfc(x) underflows past x = 26.5).
inline double log_erfc(double x) {
  if (x < 8) return std::log(std::erfc(x));
  return -x * x + std::log(erfc_scaled_tail(x)) - 0.5 * std::log(M_PI);
}

// d log(erfc(x)) / dx = -2 exp(-x^2) / (sqrt(pi) erfc(x)), finite for every finite x.
inline double log_erfc_derivative(double x) {
  if (x < 8) return -M_2_SQRTPI * std::exp(-x * x) / std::erfc(x);
  return -2 / erfc_scaled_tail(x);  // exp(-x^2) / erfc(x) = sqrt(pi) / K(x)
}

// log I0(k) and I1(k) / I0(k) for k >= 0: std::cyl_bessel_i below 500 (I0(500) is about 1e215),
// Hankel's asymptotic series above (terms to 1/k^4, below 1e-12 relative there).
inline double log_bessel_i0(double k) {
  if (k < 500) return std::log(std::cyl_bessel_i(0.0, k));
  const double t = 1 / (8 * k);
  const double series = 1 + t * (1 + t * (9.0 / 2 + t * (225.0 / 6 + t * 11025.0 / 24)));
  return k - 0.5 * std::log(2 * M_PI * k) + std::log(series);
}

inline double bessel_i1_over_i0(double k) {
  if (k < 500) return std::cyl_bessel_i(1.0, k) / std::cyl_bessel_i(0.0, k);
  const double t = 1 / (8 * k);
  const double i0 = 1 + t * (1 + t * (9.0 / 2 + t * (225.0 / 6 + t * 11025.0 / 24)));
  const double i1 = 1 - t * (3 + t * (15.0 / 2 + t * (315.0 / 6 + t * 14175.0 / 24)));
  return i1 / i0;
}

}  // namespace fvi::math
