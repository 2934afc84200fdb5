#pragma once
// The explicit Runge-Kutta pair that solves Stan's ODE calls (integrate_ode_rk45, ode_rk45, ...)
// in a statement program: Dormand and Prince's RK5(4)7M, the pair of Stan's rk45 (Boost.Odeint's
// runge_kutta_dopri5). The stages are bytecode (compiler/ir/statement_program.cpp), so the tape
// differentiates the discrete solution; the step sizes are chosen here from the values alone and
// are constants of that solution (no derivative through them). One step size serves every draw
// of a batch: the largest error over the draws decides, so each draw meets the tolerances.
//
// Dormand, J. R. and Prince, P. J. (1980), "A family of embedded Runge-Kutta formulae", J. Comp.
// Appl. Math. 6(1), Table 2; Hairer, Norsett and Wanner, Solving ODEs I (2nd ed.), II.4 (step
// control, Eq. 4.11-4.13) and the starting step of its section "Automatic step size control".
#include <algorithm>
#include <cmath>
#include <limits>

namespace fvi::kernel::ode {

constexpr int kStages = 7;
// c_i: the stage times; a_ij: the stage weights; b: the fifth-order weights (those of the last
// stage, so its derivative is the next step's first: "first same as last"); e = b - b*, b* the
// embedded fourth-order weights: h sum_i e_i k_i estimates the local error.
constexpr double kC[kStages] = {0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1, 1};
constexpr double kA[kStages][kStages - 1] = {
    {},
    {1.0 / 5},
    {3.0 / 40, 9.0 / 40},
    {44.0 / 45, -56.0 / 15, 32.0 / 9},
    {19372.0 / 6561, -25360.0 / 2187, 64448.0 / 6561, -212.0 / 729},
    {9017.0 / 3168, -355.0 / 33, 46732.0 / 5247, 49.0 / 176, -5103.0 / 18656},
    {35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84},
};
constexpr double kE[kStages] = {71.0 / 57600,      0,           -71.0 / 16695, 71.0 / 1920,
                                -17253.0 / 339200, 22.0 / 525, -1.0 / 40};

// Stan's defaults for the calls without tolerances.
constexpr double kDefaultRelativeTolerance = 1e-6;
constexpr double kDefaultAbsoluteTolerance = 1e-6;
constexpr long long kDefaultMaxSteps = 1000000;

// max_i |err_i| / (atol + rtol max(|y_i|, |y_new_i|)) over the components and the draws (HNW
// Eq. 4.11 with the max norm): a step is accepted when this is at most 1. Not a number (a stage
// that overflowed) is an infinite error: the step is rejected and tried shorter.
template <class ErrorValues, class Values>
double scaled_error(const ErrorValues& err, const Values& y, const Values& y_new, double rtol, double atol) {
  double worst = 0;
  for (long i = 0; i < err.size(); ++i) {
    const double e = std::abs(double(err(i)));
    const double scale = atol + rtol * std::max(std::abs(double(y(i))), std::abs(double(y_new(i))));
    const double r = e / scale;
    if (!(r <= std::numeric_limits<double>::max())) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, r);
  }
  return worst;
}

// The next step from this one's scaled error: h 0.9 err^(-1/5) (the pair's order 4 + 1), kept
// within 0.2 h and 5 h (HNW Eq. 4.13 with facmin 0.2, facmax 5, fac 0.9).
inline double next_step(double h, double error) {
  if (!(error < std::numeric_limits<double>::infinity())) return 0.2 * h;
  if (error == 0) return 5 * h;
  return h * std::clamp(0.9 * std::pow(error, -0.2), 0.2, 5.0);
}

// The first step (HNW II.4, "starting step size", with the max norm): h0 = 0.01 d0 / d1 from the
// scaled sizes of y0 and of its derivative f0, 1e-6 when either is tiny, at most the span.
inline double first_step(double y_scaled, double f_scaled, double span) {
  double h = (y_scaled < 1e-5 || f_scaled < 1e-5) ? 1e-6 : 0.01 * y_scaled / f_scaled;
  if (!(h > 0)) h = 1e-6;
  return std::min(h, span);
}

}  // namespace fvi::kernel::ode
