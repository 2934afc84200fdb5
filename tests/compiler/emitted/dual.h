#pragma once
// Forward-mode dual numbers for the engines' tests: a value and one directional derivative, so a
// hand-written objective gives its exact derivative along a chosen direction (no kernel, no
// engine code involved).
#include <cmath>

namespace fvic::test {

struct Dual {
  double v = 0, d = 0;
  Dual(double value = 0, double derivative = 0) : v(value), d(derivative) {}
};
inline Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.d + b.d}; }
inline Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.d - b.d}; }
inline Dual operator*(Dual a, Dual b) { return {a.v * b.v, a.d * b.v + a.v * b.d}; }
inline Dual operator/(Dual a, Dual b) { return {a.v / b.v, (a.d * b.v - a.v * b.d) / (b.v * b.v)}; }
inline Dual exp(Dual a) { return {std::exp(a.v), std::exp(a.v) * a.d}; }
inline Dual log(Dual a) { return {std::log(a.v), a.d / a.v}; }
inline Dual tanh(Dual a) {
  const double t = std::tanh(a.v);
  return {t, (1 - t * t) * a.d};
}
inline Dual log1p_exp(Dual a) {
  const double s = 1 / (1 + std::exp(-a.v));
  return {a.v > 0 ? a.v + std::log1p(std::exp(-a.v)) : std::log1p(std::exp(a.v)), s * a.d};
}

const double kHalfLog2Pi = 0.5 * std::log(2 * M_PI);

// log N(x; mu, sd), written out.
inline Dual normal_lpdf(Dual x, Dual mu, Dual sd) {
  const Dual z = (x - mu) / sd;
  return Dual(-kHalfLog2Pi) - Dual(0.5) * z * z - log(sd);
}

}  // namespace fvic::test
