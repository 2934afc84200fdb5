#pragma once
// Log cumulative distribution functions, as the Lpdf node of a `normal_lcdf(y | mu, sigma)` or
// `student_t_lccdf(0 | 3, 0, 2.5)` call names them ("normal_lcdf", "student_t_lccdf"): log P(Y <= y)
// and log P(Y > y), elementwise, and their partial derivatives. distributions.h dispatches here.
//
// The location-scale families (normal, student_t, cauchy, logistic, double_exponential) are
// symmetric, so P(Y > y) = F(-z) with z = (y - mu) / sigma; each derivative is the density over
// the probability: d/dy log F(z) = f(y) / F(z), d/dmu = -f(y) / F(z), d/dsigma = -z f(y) / F(z).
// student_t's nu has no derivative here (the checker keeps parameters out of it).
//
// The exponential, extreme-value and power-law families have one tail in closed form, exp(-w)
// with w >= 0 an elementary function of y and the parameters (tail_exponent below): P(Y > y) =
// exp(-w) for exponential, weibull, rayleigh, pareto and pareto_type_2, P(Y <= y) = exp(-w) for
// frechet and gumbel. That
// tail's log is -w; the other's is log(1 - exp(-w)), whose derivative is w' / expm1(w).
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

namespace fvi::kernel::detail {

constexpr double kLogHalf = -0.69314718055994530942;
constexpr double kHalfLogTwoPi = 0.91893853320467274178;

// log I_x(a, b), the regularised incomplete beta function, with 1 - x given separately so that x
// near 1 loses nothing. The continued fraction of DLMF 8.17.22, evaluated by the modified Lentz
// method, converges fast for x < (a + 1) / (a + b + 2); above it, I_x(a, b) = 1 - I_{1-x}(b, a)
// (DLMF 8.17.4).
inline double log_incomplete_beta(double a, double b, double x, double one_minus_x) {
  if (x <= 0) return -std::numeric_limits<double>::infinity();
  if (one_minus_x <= 0) return 0;
  if (x > (a + 1) / (a + b + 2)) return std::log1p(-std::exp(log_incomplete_beta(b, a, one_minus_x, x)));
  constexpr double tiny = 1e-300, eps = 1e-16;
  const auto guard = [&](double v) { return std::abs(v) < tiny ? tiny : v; };
  double c = 1, d = 1 / guard(1 - (a + b) * x / (a + 1)), h = d;
  for (int m = 1; m <= 1000; ++m) {
    // d_{2m} and d_{2m+1} of DLMF 8.17.22.
    const double even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    const double odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const double step = d * c;
    h *= step;
    if (std::abs(step - 1) < eps) break;
  }
  const double log_beta = std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b);
  return a * std::log(x) + b * std::log(one_minus_x) - log_beta - std::log(a) + std::log(h);
}

// log Phi(z): erfc keeps the lower tail's precision; below z = -37.5 erfc underflows and the
// asymptotic series of Mills' ratio (DLMF 7.12.1) takes over.
inline double log_normal_cdf(double z) {
  if (z > 0) return std::log1p(-0.5 * std::erfc(z / std::sqrt(2.0)));
  if (z > -37.5) return std::log(0.5 * std::erfc(-z / std::sqrt(2.0)));
  const double w = 1 / (z * z);
  return -0.5 * z * z - std::log(-z) - kHalfLogTwoPi + std::log1p(w * (-1 + w * (3 - 15 * w)));
}

enum class CdfFamily {
  Normal, StudentT, Cauchy, Logistic, DoubleExponential, Lognormal,
  Exponential, Weibull, Frechet, Rayleigh, Pareto, ParetoType2, Gumbel,  // one tail exp(-w) in closed form
};

struct CdfName {
  CdfFamily family;
  bool upper;  // lccdf: log P(Y > y)
};

inline bool is_cdf_name(const std::string& d) {
  const auto ends = [&](const char* s) {
    const std::string t = s;
    return d.size() > t.size() && d.compare(d.size() - t.size(), t.size(), t) == 0;
  };
  return ends("_lcdf") || ends("_lccdf");
}

inline CdfName parse_cdf_name(const std::string& d) {
  const bool upper = d.size() > 6 && d.compare(d.size() - 6, 6, "_lccdf") == 0;
  const std::string base = d.substr(0, d.rfind('_'));
  static const std::pair<const char*, CdfFamily> families[] = {
      {"normal", CdfFamily::Normal},       {"student_t", CdfFamily::StudentT},
      {"cauchy", CdfFamily::Cauchy},       {"logistic", CdfFamily::Logistic},
      {"double_exponential", CdfFamily::DoubleExponential},
      {"lognormal", CdfFamily::Lognormal}, {"exponential", CdfFamily::Exponential},
      {"weibull", CdfFamily::Weibull},     {"frechet", CdfFamily::Frechet},
      {"rayleigh", CdfFamily::Rayleigh},   {"pareto", CdfFamily::Pareto},
      {"pareto_type_2", CdfFamily::ParetoType2}, {"gumbel", CdfFamily::Gumbel},
  };
  for (const auto& [name, family] : families)
    if (base == name) return {family, upper};
  throw std::invalid_argument("no cumulative distribution function '" + d + "'");
}

// log F(z) of the standard member (location 0, scale 1) of a symmetric family.
inline double log_standard_cdf(CdfFamily f, double z, double nu) {
  switch (f) {
    case CdfFamily::Normal:
    case CdfFamily::Lognormal: return log_normal_cdf(z);
    case CdfFamily::StudentT: {
      // F(z) = I_x(nu/2, 1/2) / 2 for z < 0, x = nu / (nu + z^2) (DLMF 8.17 with the t density).
      const double x = nu / (nu + z * z), one_minus_x = z * z / (nu + z * z);
      const double log_tail = kLogHalf + log_incomplete_beta(nu / 2, 0.5, x, one_minus_x);
      return z < 0 ? log_tail : std::log1p(-std::exp(log_tail));
    }
    case CdfFamily::Cauchy:
      // F(z) = 1/2 + atan(z)/pi = atan(-1/z)/pi for z < 0, exact in the lower tail.
      if (z == 0) return kLogHalf;
      return z < 0 ? std::log(std::atan(-1 / z) / M_PI) : std::log1p(-std::atan(1 / z) / M_PI);
    case CdfFamily::Logistic: return z < 0 ? z - std::log1p(std::exp(z)) : -std::log1p(std::exp(-z));
    case CdfFamily::DoubleExponential: return z < 0 ? kLogHalf + z : std::log1p(-0.5 * std::exp(-z));
    default: break;
  }
  throw std::logic_error("log_standard_cdf: not a symmetric family");
}

// log f(z) of the same standard member.
inline double log_standard_pdf(CdfFamily f, double z, double nu) {
  switch (f) {
    case CdfFamily::Normal:
    case CdfFamily::Lognormal: return -0.5 * z * z - kHalfLogTwoPi;
    case CdfFamily::StudentT:
      return std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2) - 0.5 * std::log(nu * M_PI) -
             (nu + 1) / 2 * std::log1p(z * z / nu);
    case CdfFamily::Cauchy: return -std::log(M_PI) - std::log1p(z * z);
    case CdfFamily::Logistic: return -std::abs(z) - 2 * std::log1p(std::exp(-std::abs(z)));
    case CdfFamily::DoubleExponential: return kLogHalf - std::abs(z);
    default: break;
  }
  throw std::logic_error("log_standard_pdf: not a symmetric family");
}

// w of a closed-tail family at y and its partial derivative in operand k (k < 0: w itself;
// 0 is y, then the parameters in Stan's order). `below` is set where y lies under the support,
// where the lower tail is empty. Parameters as in distributions.h: weibull and frechet (alpha,
// sigma), rayleigh (sigma), pareto (y_min, alpha), pareto_type_2 (mu, lambda, alpha), gumbel
// (mu, beta), exponential (beta).
struct TailExponent {
  double w;         // the exponent, or its derivative in operand k
  bool below;       // y is below the support: P(Y <= y) = 0
};
inline TailExponent tail_exponent(CdfFamily f, int k, double y, const double* a) {
  switch (f) {
    case CdfFamily::Exponential: {  // P(Y > y) = exp(-beta y), y >= 0
      const double beta = a[0];
      if (y <= 0) return {0, true};
      return {k < 0 ? beta * y : k == 0 ? beta : y, false};
    }
    case CdfFamily::Weibull: {  // P(Y > y) = exp(-(y / sigma)^alpha), y >= 0
      const double alpha = a[0], sigma = a[1];
      if (y <= 0) return {0, true};
      const double w = std::pow(y / sigma, alpha);
      return {k < 0 ? w : k == 0 ? alpha * w / y : k == 1 ? w * std::log(y / sigma) : -alpha * w / sigma, false};
    }
    case CdfFamily::Frechet: {  // P(Y <= y) = exp(-(y / sigma)^-alpha), y > 0
      const double alpha = a[0], sigma = a[1];
      if (y <= 0) return {0, true};
      const double w = std::pow(sigma / y, alpha);
      return {k < 0 ? w : k == 0 ? -alpha * w / y : k == 1 ? w * std::log(sigma / y) : alpha * w / sigma, false};
    }
    case CdfFamily::Rayleigh: {  // P(Y > y) = exp(-y^2 / (2 sigma^2)), y >= 0
      const double sigma = a[0];
      if (y <= 0) return {0, true};
      const double w = y * y / (2 * sigma * sigma);
      return {k < 0 ? w : k == 0 ? y / (sigma * sigma) : -2 * w / sigma, false};
    }
    case CdfFamily::Pareto: {  // P(Y > y) = (y_min / y)^alpha, y >= y_min
      const double y_min = a[0], alpha = a[1];
      if (y <= y_min) return {0, true};
      const double log_ratio = std::log(y / y_min);
      return {k < 0 ? alpha * log_ratio : k == 0 ? alpha / y : k == 1 ? -alpha / y_min : log_ratio, false};
    }
    case CdfFamily::ParetoType2: {  // P(Y > y) = (1 + (y - mu) / lambda)^-alpha, y >= mu
      const double mu = a[0], lambda = a[1], alpha = a[2];
      if (y <= mu) return {0, true};
      const double span = lambda + y - mu, log1p_u = std::log1p((y - mu) / lambda);
      switch (k) {
        case 0: return {alpha / span, false};
        case 1: return {-alpha / span, false};
        case 2: return {-alpha * (y - mu) / (lambda * span), false};
        case 3: return {log1p_u, false};
        default: return {alpha * log1p_u, false};
      }
    }
    case CdfFamily::Gumbel: {  // P(Y <= y) = exp(-exp(-(y - mu) / beta))
      const double mu = a[0], beta = a[1], z = (y - mu) / beta, w = std::exp(-z);
      return {k < 0 ? w : k == 0 ? -w / beta : k == 1 ? w / beta : w * z / beta, false};
    }
    default: break;
  }
  throw std::logic_error("tail_exponent: not a closed-tail family");
}

inline bool has_closed_tail(CdfFamily f) { return f >= CdfFamily::Exponential; }
// Which tail is exp(-w): the upper one, except for frechet and gumbel.
inline bool closed_tail_is_upper(CdfFamily f) { return f != CdfFamily::Frechet && f != CdfFamily::Gumbel; }

// One element: the value (k < 0) or the partial derivative in operand k of log P(Y <= y) or
// log P(Y > y). `a` holds the operands after y: (mu, sigma) or (nu, mu, sigma), or a closed-tail
// family's parameters (tail_exponent).
inline double cdf_element(const CdfName& n, int k, double y, const double* a) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (has_closed_tail(n.family)) {
    const TailExponent at = tail_exponent(n.family, -1, y, a);
    // Below the support (or at its lower end, w = 0 there for the upper-tail families) the
    // lower tail is empty and the upper one certain, and neither moves with the operands.
    if (at.below) return k < 0 ? (n.upper ? 0 : -inf) : 0;
    const bool closed = n.upper == closed_tail_is_upper(n.family);
    if (k < 0) return closed ? -at.w : std::log(-std::expm1(-at.w));  // log(1 - exp(-w))
    const double dw = tail_exponent(n.family, k, y, a).w;
    const double expm1_w = std::expm1(at.w);  // past w = 709 dw / expm1(w) ~ dw e^-w is 0
    return closed ? -dw : std::isinf(expm1_w) ? 0.0 : dw / expm1_w;
  }
  const bool t = n.family == CdfFamily::StudentT;
  const double nu = t ? a[0] : 0, mu = a[t ? 1 : 0], sigma = a[t ? 2 : 1];
  const bool lognormal = n.family == CdfFamily::Lognormal;
  if (lognormal && y <= 0) return k < 0 ? (n.upper ? 0 : -inf) : 0;
  const double z = ((lognormal ? std::log(y) : y) - mu) / sigma;
  const double value = log_standard_cdf(n.family, n.upper ? -z : z, nu);
  if (k < 0) return value;
  const int shifted = t && k > 0 ? k - 1 : k;  // 0 y, 1 mu, 2 sigma (nu is k = 1 of student_t)
  if (t && k == 1) throw std::invalid_argument("student_t's cumulative distribution functions have no derivative in nu");
  // r = f(z) / sigma / F: the derivative in the location; for the upper tail the sign turns.
  const double r = std::exp(log_standard_pdf(n.family, z, nu) - value) / sigma * (n.upper ? -1 : 1);
  switch (shifted) {
    case 0: return lognormal ? r / y : r;
    case 1: return -r;
    default: return -r * z;
  }
}

template <class T>
Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic> scalar_cdf(const std::string& d, int k,
                                                         const std::vector<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>>& v) {
  const CdfName n = parse_cdf_name(d);
  const Eigen::Index rows = v[0].rows(), cols = v[0].cols();
  Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic> out(rows, cols);
  double a[3] = {0, 0, 0};
  for (Eigen::Index c = 0; c < cols; ++c)
    for (Eigen::Index r = 0; r < rows; ++r) {
      for (size_t i = 1; i < v.size() && i <= 3; ++i) a[i - 1] = double(v[i](r, c));
      out(r, c) = T(cdf_element(n, k, double(v[0](r, c)), a));
    }
  return out;
}

}  // namespace fvi::kernel::detail
