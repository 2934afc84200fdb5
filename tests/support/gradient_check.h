#pragma once
// One finite-difference gradient check for every gradient test in the project (runtime losses,
// divergences and families now; the compiler's adjoint rules later). Header-only, no test
// framework dependency: it returns a result with ok() and a printable report().
//
// Method. For each coordinate i, central differences with steps h, 2h and 4h,
//     D(h) = (f(x + h e_i) - f(x - h e_i)) / 2h = f'(x) + c2 h^2 + c4 h^4 + ...
// are combined by Richardson extrapolation into R(h) = (4 D(h) - D(2h)) / 3 = f'(x) + O(h^4).
// The step is h_i = eps^(1/5) max(|x_i|, 1), which balances the O(h^4) truncation against the
// eps F / h rounding error (F = the scale of f), so R(h) is accurate to about eps^(4/5) F.
//
// Tolerance, per coordinate, from the two error sources (no constants tuned to any function):
//     truncation  |R(h) - R(2h)|   (R(2h) has 16x the h^4 error of R(h), so this over-estimates
//                                   the truncation error of R(h) by about 15x)
//     rounding    1.5 * noise * F / h   (the rounding error of R(h): (4 + 1/2)/3 times that of D(h)
//                                   for a function computed with relative error `noise`)
// tol_i = safety * (truncation + rounding), and the check passes when |g_i - R_i(h)| <= tol_i.
// F = max(|f| at the evaluated points, options.function_scale): set function_scale when f is a
// small difference of large terms (the cancellation error scales with the terms, not with f).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include <Eigen/Dense>

namespace fvi {
namespace test {

struct GradientCheckOptions {
  // Relative error with which f itself is computed (a few ulps for closed forms; larger for
  // iterative solvers or long sums).
  double noise = 16 * std::numeric_limits<double>::epsilon();
  // Magnitude of the terms f is computed from, if larger than |f| (cancellation).
  double function_scale = 0;
  // Multiplier on the error estimate.
  double safety = 10;
  // Override the step (0: eps^(1/5) max(|x_i|, 1)).
  double step = 0;
};

struct GradientCheckResult {
  Eigen::VectorXd analytic;
  Eigen::VectorXd numeric;
  Eigen::VectorXd tolerance;
  Eigen::VectorXd step;

  bool ok() const {
    for (Eigen::Index i = 0; i < analytic.size(); ++i) {
      if (!(std::abs(analytic[i] - numeric[i]) <= tolerance[i])) return false;
    }
    return true;
  }

  // max_i |g_i - R_i| / tol_i; ok() iff this is <= 1.
  double worst_ratio() const {
    double worst = 0;
    for (Eigen::Index i = 0; i < analytic.size(); ++i) {
      const double r = std::abs(analytic[i] - numeric[i]) / tolerance[i];
      worst = std::max(worst, std::isnan(r) ? std::numeric_limits<double>::infinity() : r);
    }
    return worst;
  }

  std::string report() const {
    std::ostringstream os;
    os.precision(12);
    os << "gradient check (" << (ok() ? "ok" : "FAILED") << ", worst |error|/tol = " << worst_ratio() << ")\n";
    os << "  i  analytic  finite-difference  |error|  tolerance  step\n";
    for (Eigen::Index i = 0; i < analytic.size(); ++i) {
      const double err = std::abs(analytic[i] - numeric[i]);
      os << "  " << i << "  " << analytic[i] << "  " << numeric[i] << "  " << err << "  " << tolerance[i] << "  "
         << step[i] << (err <= tolerance[i] ? "" : "   <-- mismatch") << "\n";
    }
    return os.str();
  }
};

// Richardson-extrapolated central-difference gradient and its error estimate.
inline GradientCheckResult numerical_gradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                              const Eigen::VectorXd& x, const GradientCheckOptions& options = {}) {
  const double eps = std::numeric_limits<double>::epsilon();
  const Eigen::Index n = x.size();
  GradientCheckResult out;
  out.numeric.resize(n);
  out.tolerance.resize(n);
  out.step.resize(n);
  const double f0 = f(x);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double h = options.step > 0 ? options.step : std::pow(eps, 0.2) * std::max(std::abs(x[i]), 1.0);
    double scale = std::max(std::abs(f0), options.function_scale);
    double d[3];
    double actual_h = h;
    for (int k = 0; k < 3; ++k) {
      const double hk = h * double(1 << k);
      Eigen::VectorXd xp = x, xm = x;
      xp[i] += hk;
      xm[i] -= hk;
      const double fp = f(xp), fm = f(xm);
      scale = std::max({scale, std::abs(fp), std::abs(fm)});
      d[k] = (fp - fm) / (xp[i] - xm[i]);  // xp - xm is exact (Sterbenz), so is the step
      if (k == 0) actual_h = 0.5 * (xp[i] - xm[i]);
    }
    const double r1 = (4 * d[0] - d[1]) / 3;
    const double r2 = (4 * d[1] - d[2]) / 3;
    const double truncation = std::abs(r1 - r2);
    const double rounding = 1.5 * options.noise * scale / actual_h;
    out.numeric[i] = r1;
    out.tolerance[i] = options.safety * (truncation + rounding);
    out.step[i] = actual_h;
  }
  return out;
}

// Compare an analytic gradient with finite differences of f at x.
inline GradientCheckResult check_gradient(const std::function<double(const Eigen::VectorXd&)>& f,
                                          const Eigen::VectorXd& x, const Eigen::VectorXd& analytic,
                                          const GradientCheckOptions& options = {}) {
  GradientCheckResult out = numerical_gradient(f, x, options);
  out.analytic = analytic;
  if (analytic.size() != x.size()) {
    // Make the mismatch visible in the report rather than reading out of bounds.
    out.analytic = Eigen::VectorXd::Constant(x.size(), std::numeric_limits<double>::quiet_NaN());
  }
  return out;
}

}  // namespace test
}  // namespace fvi
