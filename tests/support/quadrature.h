#pragma once
// Adaptive Gauss-Kronrod (7/15) quadrature for tests: an integrator independent of the code under
// test, to check closed forms (divergences, expected losses, power integrals) against numerical
// integrals. Globally adaptive: always bisects the interval with the largest error estimate
// |K15 - G7| until the summed estimate is below max(abs_tol, rel_tol |I|).
//
// Nodes and weights: QUADPACK qk15 (Piessens, de Doncker-Kapenga, Ueberhuber, Kahaner 1983).
// Infinite ranges are mapped to (-1, 1) by x = c + s t / (1 - t^2) (the open rule never evaluates
// the endpoints), so the integrand must decay; pass c and s near the bulk of the mass.
#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <stdexcept>
#include <vector>

namespace fvi {
namespace test {

struct QuadratureResult {
  double value = 0;
  double error = 0;  // summed |K15 - G7| estimate
  int evaluations = 0;
};

namespace detail {

struct Segment {
  double a, b, value, error;
  bool operator<(const Segment& o) const { return error < o.error; }
};

inline Segment gauss_kronrod_15(const std::function<double(double)>& f, double a, double b, int& evals) {
  static const double xgk[8] = {0.991455371120812639206854697526329, 0.949107912342758524526189684047851,
                                0.864864423359769072789712788640926, 0.741531185599394439863864773280788,
                                0.586087235467691130294144838258730, 0.405845151377397166906606412076961,
                                0.207784955007898467600689403773245, 0.0};
  static const double wgk[8] = {0.022935322010529224963732008058970, 0.063092092629978553290700663189204,
                                0.104790010322250183839876322541518, 0.140653259715525918745189590510238,
                                0.169004726639267902826583426598550, 0.190350578064785409913256402421014,
                                0.204432940075298892414161999234649, 0.209482141084727828012999174891714};
  static const double wg[4] = {0.129484966168869693270611432679082, 0.279705391489276667901467771423780,
                               0.381830050505118944950369775488975, 0.417959183673469387755102040816327};
  const double c = 0.5 * (a + b), h = 0.5 * (b - a);
  const double fc = f(c);
  double kronrod = fc * wgk[7];
  double gauss = fc * wg[3];
  for (int j = 0; j < 7; ++j) {
    const double f1 = f(c - h * xgk[j]), f2 = f(c + h * xgk[j]);
    kronrod += wgk[j] * (f1 + f2);
    if (j % 2 == 1) gauss += wg[j / 2] * (f1 + f2);
  }
  evals += 15;
  return {a, b, kronrod * h, std::abs((kronrod - gauss) * h)};
}

}  // namespace detail

inline QuadratureResult integrate(const std::function<double(double)>& f, double a, double b,
                                  double abs_tol = 1e-13, double rel_tol = 1e-12, int max_segments = 5000) {
  QuadratureResult out;
  std::priority_queue<detail::Segment> queue;
  // Start from 8 panels so narrow features are seen.
  const int initial = 8;
  double value = 0, error = 0;
  for (int k = 0; k < initial; ++k) {
    const double lo = a + (b - a) * k / initial, hi = a + (b - a) * (k + 1) / initial;
    const auto s = detail::gauss_kronrod_15(f, lo, hi, out.evaluations);
    value += s.value;
    error += s.error;
    queue.push(s);
  }
  while (error > std::max(abs_tol, rel_tol * std::abs(value)) && static_cast<int>(queue.size()) < max_segments) {
    const auto worst = queue.top();
    queue.pop();
    const double mid = 0.5 * (worst.a + worst.b);
    const auto left = detail::gauss_kronrod_15(f, worst.a, mid, out.evaluations);
    const auto right = detail::gauss_kronrod_15(f, mid, worst.b, out.evaluations);
    value += left.value + right.value - worst.value;
    error += left.error + right.error - worst.error;
    queue.push(left);
    queue.push(right);
  }
  // Re-sum to avoid drift from the running updates.
  value = 0;
  error = 0;
  while (!queue.empty()) {
    value += queue.top().value;
    error += queue.top().error;
    queue.pop();
  }
  out.value = value;
  out.error = error;
  return out;
}

// Integral over the real line; `center` and `scale` locate the bulk of the integrand.
inline QuadratureResult integrate_real_line(const std::function<double(double)>& f, double center, double scale,
                                            double abs_tol = 1e-13, double rel_tol = 1e-12) {
  auto g = [&](double t) {
    const double d = 1 - t * t;
    const double x = center + scale * t / d;
    const double jac = scale * (1 + t * t) / (d * d);
    const double v = f(x);
    return v == 0 ? 0.0 : v * jac;
  };
  return integrate(g, -1, 1, abs_tol, rel_tol);
}

}  // namespace test
}  // namespace fvi
