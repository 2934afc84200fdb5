// Every unary function of the kernels (fvi/kernel/ops_unary.h) against <cmath>: its value at
// points across its domain, and its derivative against central differences of the <cmath> value.
// The table must name every function the kernels have, so a new one cannot go untested.
#include "fvi/kernel/ops.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

using fvi::kernel::Tensor;

namespace {

struct Reference {
  std::function<double(double)> f;
  std::vector<double> points;
  bool differentiable = true;  // false: the kernels have no derivative (digamma)
  double tolerance = 1e-12;    // relative, of the value
};

double inv_logit(double x) { return 1 / (1 + std::exp(-x)); }

// digamma as the derivative of lgamma by Richardson-extrapolated central differences (error
// about 1e-12 at these points): independent of Eigen's series.
double digamma_reference(double x) {
  auto d = [&](double h) { return (std::lgamma(x + h) - std::lgamma(x - h)) / (2 * h); };
  return (4 * d(1e-4) - d(2e-4)) / 3;
}

const std::map<std::string, Reference>& references() {
  const std::vector<double> reals = {-3.2, -0.7, -1e-3, 0.4, 1.9, 5.5};
  const std::vector<double> positive = {1e-3, 0.3, 1.0, 2.7, 40.0};
  const std::vector<double> unit = {1e-3, 0.2, 0.5, 0.93};
  const std::vector<double> open_unit = {-0.95, -0.3, 1e-4, 0.6, 0.97};
  static const std::map<std::string, Reference> table = {
      {"exp", {[](double x) { return std::exp(x); }, reals}},
      {"log", {[](double x) { return std::log(x); }, positive}},
      {"log1p", {[](double x) { return std::log1p(x); }, {-0.9, -1e-8, 1e-8, 0.5, 30.0}}},
      {"expm1", {[](double x) { return std::expm1(x); }, {-4.0, -1e-9, 1e-9, 0.3, 3.0}}},
      {"log1m", {[](double x) { return std::log1p(-x); }, {-2.0, 1e-9, 0.5, 0.9}}},
      {"inv_logit", {inv_logit, reals}},
      {"logit", {[](double x) { return std::log(x / (1 - x)); }, unit}},
      {"log_inv_logit", {[](double x) { return -std::log1p(std::exp(-x)); }, reals}},
      {"log1m_inv_logit", {[](double x) { return -std::log1p(std::exp(x)); }, reals}},
      {"log1p_exp", {[](double x) { return std::log1p(std::exp(x)); }, reals}},
      {"tanh", {[](double x) { return std::tanh(x); }, reals}},
      {"sin", {[](double x) { return std::sin(x); }, reals}},
      {"cos", {[](double x) { return std::cos(x); }, reals}},
      {"sqrt", {[](double x) { return std::sqrt(x); }, positive}},
      {"safe_sqrt", {[](double x) { return std::sqrt(x); }, positive}},
      {"square", {[](double x) { return x * x; }, reals}},
      {"inv", {[](double x) { return 1 / x; }, {-3.0, -0.2, 0.5, 7.0}}},
      {"inv_sqrt", {[](double x) { return 1 / std::sqrt(x); }, positive}},
      {"relu", {[](double x) { return x > 0 ? x : 0.0; }, reals}},
      {"lgamma", {[](double x) { return std::lgamma(x); }, positive}},
      {"digamma", {digamma_reference, {0.3, 1.0, 2.7, 9.0}, false, 1e-9}},
      {"erf", {[](double x) { return std::erf(x); }, reals}},
      {"Phi", {[](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }, reals}},
      {"fabs", {[](double x) { return std::fabs(x); }, reals}},
      {"abs", {[](double x) { return std::fabs(x); }, reals}},
      {"neg", {[](double x) { return -x; }, reals}},
      {"asin", {[](double x) { return std::asin(x); }, open_unit}},
      {"acos", {[](double x) { return std::acos(x); }, open_unit}},
      {"atan", {[](double x) { return std::atan(x); }, reals}},
      {"tan", {[](double x) { return std::tan(x); }, {-1.2, -0.3, 1e-5, 0.8, 1.4}}},
      {"sinh", {[](double x) { return std::sinh(x); }, reals}},
      {"cosh", {[](double x) { return std::cosh(x); }, reals}},
      {"asinh", {[](double x) { return std::asinh(x); }, {-40.0, -0.7, -1e-9, 1e-6, 2.5, 1e3}}},
      {"acosh", {[](double x) { return std::acosh(x); }, {1.01, 1.3, 4.0, 1e3}}},
      {"atanh", {[](double x) { return std::atanh(x); }, {-0.99, -0.4, 1e-9, 0.5, 0.999}}},
      {"step", {[](double x) { return x < 0 ? 0.0 : 1.0; }, {-2.0, -1e-9, 0.0, 1e-9, 3.0}}},
      {"inv_cloglog", {[](double x) { return -std::expm1(-std::exp(x)); }, {-30.0, -2.0, 0.0, 1.5, 3.0}}},
      {"log1m_exp", {[](double x) { return std::log(-std::expm1(x)); }, {-40.0, -3.0, -0.7, -0.69, -1e-6}}},
      {"Phi_approx", {[](double x) { return inv_logit(0.07056 * x * x * x + 1.5976 * x); }, reals}},
      {"cbrt", {[](double x) { return std::cbrt(x); }, {-8.0, -0.3, 0.2, 27.0}}},
      {"exp2", {[](double x) { return std::exp2(x); }, reals}},
      {"erfc", {[](double x) { return std::erfc(x); }, reals}},
  };
  return table;
}

// f'(x) by central differences at steps h = 10^-k max(|x|, 0.01), k = 1..7, taking the estimate
// that agrees best with the one at the next larger step: truncation (h^2 f''' / 6) falls and
// rounding (eps f / h) grows as h shrinks, and where the two neighbours agree both are small.
// Steps that leave the domain give NaN and are never taken; below 1e-9 the differences are
// quantised, and two equal neighbours would look like agreement.
double central_difference(const std::function<double(double)>& f, double x) {
  std::vector<double> d;
  for (int k = 1; k <= 7; ++k) {
    const double h = std::pow(10.0, -k) * std::max(std::fabs(x), 0.01);
    d.push_back((f(x + h) - f(x - h)) / (2 * h));
  }
  double best = NAN, gap = INFINITY;
  for (size_t k = 0; k + 1 < d.size(); ++k) {
    const double g = std::fabs(d[k + 1] - d[k]);
    if (g < gap) gap = g, best = d[k + 1];
  }
  return best;
}

Tensor<double> column(const std::vector<double>& v) {
  Tensor<double> t(Eigen::Index(v.size()), 1, 1);
  for (size_t i = 0; i < v.size(); ++i) t.m(Eigen::Index(i), 0) = v[i];
  return t;
}

}  // namespace

TEST_CASE("the table below names every unary function of the kernels", "[kernel][unary]") {
  for (int i = 0;; ++i) {
    const std::string name = fvi::kernel::unary_name(fvi::kernel::UnaryFn(i));
    if (name == "?") break;
    INFO(name);
    CHECK(references().count(name) == 1);
  }
}

TEST_CASE("each unary function's value and derivative against <cmath>", "[kernel][unary]") {
  for (const auto& [name, ref] : references()) {
    INFO(name);
    const Tensor<double> x = column(ref.points);
    const Tensor<double> y = fvi::kernel::unary(name, x);
    for (size_t i = 0; i < ref.points.size(); ++i) {
      const double at = ref.points[i], want = ref.f(at);
      INFO("at " << at);
      // A few ulps of the result (Eigen's vectorised exp, log and erf differ from libm's in the
      // last bits), or an absolute 1e-15 where the value is near 0.
      CHECK_THAT(y.m(Eigen::Index(i), 0),
                 Catch::Matchers::WithinRel(want, ref.tolerance) || Catch::Matchers::WithinAbs(want, 1e-15));
    }
    if (!ref.differentiable) continue;
    const Tensor<double> d = fvi::kernel::unary_derivative(name, x, y);
    for (size_t i = 0; i < ref.points.size(); ++i) {
      const double at = ref.points[i];
      const double fd = central_difference(ref.f, at);
      INFO("at " << at);
      if (name == "step" || name == "relu" || name == "fabs" || name == "abs") {
        if (std::fabs(at) < 1e-6) continue;  // a kink at 0 (step's jump): no derivative there
      }
      CHECK_THAT(d.m(Eigen::Index(i), 0), Catch::Matchers::WithinRel(fd, 1e-6) || Catch::Matchers::WithinAbs(fd, 1e-8));
    }
  }
}
