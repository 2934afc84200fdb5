#pragma once
// Log densities of the distributions of stdlib/builtins.cpp on batched tensors, and their
// vector-Jacobian products, as generated kernels call them; log CDFs ("normal_lcdf",
// "student_t_lccdf") go to cdfs.h the same way.
//
//   lpdf(dist, {y, a1, a2, ...})          one log density per outcome element: the shape of y
//                                         broadcast with the arguments (per row of logits for
//                                         categorical_logit; one per outcome for
//                                         ordered_logistic and ordered_probit; one value for
//                                         multinomial_logit
//                                         and dirichlet; one per draw for multi_normal_cholesky,
//                                         ops_cholesky.h)
//   lpdf_vjp(dist, k, g, {y, a1, ...})    d(sum of g .* lpdf)/d(operand k), in operand k's shape
//
// Integer outcomes and arguments arrive as real tensors holding whole numbers. The formulas are
// the distributions' standard densities (Stan's parameterisations); each partial derivative is
// checked against finite differences in tests/runtime/kernel/.
#include <Eigen/LU>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fvi/kernel/cdfs.h"
#include "fvi/kernel/ops.h"
#include "fvi/math/special_functions.h"

namespace fvi::kernel {

template <class T>
using Operands = std::vector<const Tensor<T>*>;
template <class T>
using Arr = Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>;

namespace detail {

constexpr double kLogSqrtTwoPi = 0.91893853320467274178;
constexpr double kLogPi = 1.14472988584940017414;

// The common shape of all operands (elementwise broadcasting, as in ops.h).
template <class T>
void common_shape(const Operands<T>& xs, Eigen::Index& r, Eigen::Index& c, Eigen::Index& s) {
  r = xs[0]->rows, c = xs[0]->cols, s = xs[0]->draws;
  for (size_t i = 1; i < xs.size(); ++i) {
    Eigen::Index nr, nc;
    broadcast_shape(r, c, xs[i]->rows, xs[i]->cols, nr, nc);
    r = nr, c = nc;
    s = joint_draws(s, xs[i]->draws);
  }
}

// Evaluates f(y, a1, ...) draw by draw on the operands expanded to the common shape.
template <class T, class F>
Tensor<T> elementwise(const Operands<T>& xs, F f) {
  Eigen::Index r, c, S;
  common_shape(xs, r, c, S);
  Tensor<T> out(r, c, S);
  std::vector<Arr<T>> v(xs.size());
  for (Eigen::Index s = 0; s < S; ++s) {
    for (size_t i = 0; i < xs.size(); ++i) v[i] = expand(*xs[i], r, c, s);
    out.draw(s).array() = f(v);
  }
  return out;
}

inline double lchoose(double n, double k) { return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1); }

template <class T>
Arr<T> log1p_exp(const Arr<T>& x) {
  return log1p_exp_array(x);
}
template <class T>
Arr<T> inv_logit(const Arr<T>& x) {
  return 1 / (1 + (-x).exp());
}
// Elementwise scalar special functions (fvi/math/special_functions.h), in double.
template <class T, class F>
Arr<T> apply(const Arr<T>& x, F f) {
  return x.unaryExpr([&](T v) { return T(f(double(v))); });
}
constexpr double kLog2 = 0.69314718055994530942;

// The log density, elementwise, of the scalar distributions.
template <class T>
Arr<T> scalar_lpdf(const std::string& d, const std::vector<Arr<T>>& v) {
  if (is_cdf_name(d)) return scalar_cdf<T>(d, -1, v);  // "normal_lcdf", "student_t_lccdf": cdfs.h
  const Arr<T>& y = v[0];
  if (d == "normal") {
    Arr<T> z = (y - v[1]) / v[2];
    return -0.5 * z.square() - v[2].log() - kLogSqrtTwoPi;
  }
  if (d == "student_t") {
    const Arr<T>&nu = v[1], &sigma = v[3];
    Arr<T> z = (y - v[2]) / sigma;
    return ((nu + 1) / 2).lgamma() - (nu / 2).lgamma() - 0.5 * (nu.log() + kLogPi) - sigma.log() -
           (nu + 1) / 2 * (z.square() / nu).log1p();
  }
  if (d == "cauchy") {
    Arr<T> z = (y - v[1]) / v[2];
    return -kLogPi - v[2].log() - z.square().log1p();
  }
  if (d == "double_exponential") return -std::log(2.0) - v[2].log() - (y - v[1]).abs() / v[2];
  if (d == "logistic") {
    Arr<T> z = (y - v[1]) / v[2];
    return -z - v[2].log() - 2 * log1p_exp<T>(-z);
  }
  if (d == "lognormal") {
    Arr<T> z = (y.log() - v[1]) / v[2];
    return -0.5 * z.square() - v[2].log() - y.log() - kLogSqrtTwoPi;
  }
  if (d == "exponential") return v[1].log() - v[1] * y;
  if (d == "gamma") return v[1] * v[2].log() - v[1].lgamma() + (v[1] - 1) * y.log() - v[2] * y;
  if (d == "weibull") {  // shape alpha, scale sigma: alpha/sigma (y/sigma)^(alpha-1) exp(-(y/sigma)^alpha)
    Arr<T> log_t = (y / v[2]).log();
    return v[1].log() - v[2].log() + (v[1] - 1) * log_t - (v[1] * log_t).exp();
  }
  if (d == "inv_gamma") return v[1] * v[2].log() - v[1].lgamma() - (v[1] + 1) * y.log() - v[2] / y;
  if (d == "beta")
    return (v[1] + v[2]).lgamma() - v[1].lgamma() - v[2].lgamma() + (v[1] - 1) * y.log() + (v[2] - 1) * (-y).log1p();
  if (d == "uniform") {
    Arr<T> inside = ((y >= v[1]) && (y <= v[2])).template cast<T>();
    return (inside > 0).select(-(v[2] - v[1]).log(), Arr<T>::Constant(y.rows(), y.cols(), -INFINITY));
  }
  if (d == "bernoulli") return y * v[1].log() + (1 - y) * (-v[1]).log1p();
  if (d == "bernoulli_logit") return y * v[1] - log1p_exp<T>(v[1]);
  if (d == "binomial") {
    Arr<T> lc = y.binaryExpr(v[1], [](T k, T n) { return T(lchoose(double(n), double(k))); });
    return lc + y * v[2].log() + (v[1] - y) * (-v[2]).log1p();
  }
  if (d == "binomial_logit") {
    Arr<T> lc = y.binaryExpr(v[1], [](T k, T n) { return T(lchoose(double(n), double(k))); });
    return lc + y * v[2] - v[1] * log1p_exp<T>(v[2]);
  }
  if (d == "poisson") return y * v[1].log() - v[1] - (y + 1).lgamma();
  if (d == "poisson_log") return y * v[1] - v[1].exp() - (y + 1).lgamma();
  if (d == "neg_binomial_2" || d == "neg_binomial_2_log") {
    const Arr<T>& phi = v[2];
    Arr<T> log_mu = d == "neg_binomial_2" ? Arr<T>(v[1].log()) : v[1];
    Arr<T> mu = log_mu.exp();
    return (y + phi).lgamma() - (y + 1).lgamma() - phi.lgamma() + y * log_mu + phi * phi.log() -
           (y + phi) * (mu + phi).log();
  }
  if (d == "neg_binomial")  // alpha, beta: lchoose(y + alpha - 1, y) (beta / (1 + beta))^alpha (1 + beta)^-y
    return (y + v[1]).lgamma() - (y + 1).lgamma() - v[1].lgamma() + v[1] * v[2].log() - (v[1] + y) * v[2].log1p();
  if (d == "beta_binomial") {  // N, alpha, beta: lchoose(N, y) + lbeta(y + alpha, N - y + beta) - lbeta(alpha, beta)
    const Arr<T>&n = v[1], &a = v[2], &b = v[3];
    Arr<T> lc = y.binaryExpr(n, [](T k, T m) { return T(lchoose(double(m), double(k))); });
    return lc + (y + a).lgamma() + (n - y + b).lgamma() - (n + a + b).lgamma() - a.lgamma() - b.lgamma() +
           (a + b).lgamma();
  }
  if (d == "beta_proportion") {  // mean mu, precision kappa: beta(mu kappa, (1 - mu) kappa)
    const Arr<T> a = v[1] * v[2], b = (1 - v[1]) * v[2];
    return v[2].lgamma() - a.lgamma() - b.lgamma() + (a - 1) * y.log() + (b - 1) * (-y).log1p();
  }
  if (d == "gumbel") {  // location mu, scale beta: exp(-z - exp(-z)) / beta
    Arr<T> z = (y - v[1]) / v[2];
    return -v[2].log() - z - (-z).exp();
  }
  if (d == "frechet") {  // shape alpha, scale sigma: alpha/sigma (y/sigma)^(-1-alpha) exp(-(y/sigma)^-alpha)
    Arr<T> log_t = (y / v[2]).log();
    return v[1].log() - v[2].log() - (1 + v[1]) * log_t - (-v[1] * log_t).exp();
  }
  if (d == "pareto") {  // y_min, alpha: alpha y_min^alpha / y^(alpha+1) for y >= y_min
    Arr<T> inside = v[2].log() + v[2] * v[1].log() - (v[2] + 1) * y.log();
    return (y >= v[1]).select(inside, Arr<T>::Constant(y.rows(), y.cols(), -INFINITY));
  }
  if (d == "pareto_type_2") {  // mu, lambda, alpha: alpha / lambda (1 + (y - mu) / lambda)^-(alpha+1), y >= mu
    Arr<T> inside = v[3].log() - v[2].log() - (v[3] + 1) * ((y - v[1]) / v[2]).log1p();
    return (y >= v[1]).select(inside, Arr<T>::Constant(y.rows(), y.cols(), -INFINITY));
  }
  if (d == "rayleigh") return y.log() - 2 * v[1].log() - y.square() / (2 * v[1].square());
  if (d == "chi_square") return -(v[1] / 2) * kLog2 - (v[1] / 2).lgamma() + (v[1] / 2 - 1) * y.log() - y / 2;
  if (d == "inv_chi_square") return -(v[1] / 2) * kLog2 - (v[1] / 2).lgamma() - (v[1] / 2 + 1) * y.log() - 1 / (2 * y);
  if (d == "scaled_inv_chi_square") {  // nu, s
    const Arr<T> h = v[1] / 2;
    return h * h.log() - h.lgamma() + v[1] * v[2].log() - (h + 1) * y.log() - h * v[2].square() / y;
  }
  if (d == "skew_normal") {  // xi, omega, alpha: 2 / omega phi(z) Phi(alpha z), Phi(x) = erfc(-x / sqrt 2) / 2
    Arr<T> z = (y - v[1]) / v[2];
    return -0.5 * z.square() - v[2].log() - kLogSqrtTwoPi + apply<T>(-v[3] * z * T(M_SQRT1_2), math::log_erfc);
  }
  if (d == "exp_mod_normal") {  // mu, sigma, lambda: lambda/2 exp(lambda (mu + lambda sigma^2 / 2 - y)) erfc(w)
    const Arr<T>&mu = v[1], &sigma = v[2], &lambda = v[3];
    Arr<T> w = (mu + lambda * sigma.square() - y) / (sigma * T(M_SQRT2));
    return lambda.log() - kLog2 + lambda * (mu + lambda * sigma.square() / 2 - y) + apply<T>(w, math::log_erfc);
  }
  if (d == "von_mises")  // mu, kappa: exp(kappa cos(y - mu)) / (2 pi I0(kappa))
    return v[2] * (y - v[1]).cos() - std::log(2 * M_PI) - apply<T>(v[2], math::log_bessel_i0);
  throw std::invalid_argument("no kernel for the distribution '" + d + "'");
}

// d(log density)/d(operand k), elementwise, for the scalar distributions.
template <class T>
Arr<T> scalar_partial(const std::string& d, size_t k, const std::vector<Arr<T>>& v) {
  if (is_cdf_name(d)) return scalar_cdf<T>(d, static_cast<int>(k), v);
  const Arr<T>& y = v[0];
  auto zeros = [&] { return Arr<T>::Zero(y.rows(), y.cols()); };
  if (d == "normal") {
    Arr<T> z = (y - v[1]) / v[2];
    if (k == 0) return -z / v[2];
    if (k == 1) return z / v[2];
    return (z.square() - 1) / v[2];
  }
  if (d == "student_t") {
    const Arr<T>&nu = v[1], &sigma = v[3];
    Arr<T> z = (y - v[2]) / sigma;
    Arr<T> denom = nu + z.square();
    if (k == 0) return -(nu + 1) * z / (sigma * denom);
    if (k == 2) return (nu + 1) * z / (sigma * denom);
    if (k == 3) return -1 / sigma + (nu + 1) * z.square() / (sigma * denom);
    return 0.5 * (((nu + 1) / 2).digamma() - (nu / 2).digamma() - 1 / nu - (z.square() / nu).log1p() +
                  (nu + 1) * z.square() / (nu * denom));
  }
  if (d == "cauchy") {
    Arr<T> z = (y - v[1]) / v[2];
    Arr<T> dz = -2 * z / (1 + z.square());  // d/dz
    if (k == 0) return dz / v[2];
    if (k == 1) return -dz / v[2];
    return -1 / v[2] - dz * z / v[2];
  }
  if (d == "double_exponential") {
    Arr<T> sign = (y - v[1]).sign();
    if (k == 0) return -sign / v[2];
    if (k == 1) return sign / v[2];
    return -1 / v[2] + (y - v[1]).abs() / v[2].square();
  }
  if (d == "logistic") {
    Arr<T> z = (y - v[1]) / v[2];
    Arr<T> dz = 1 - 2 * inv_logit<T>(z);
    if (k == 0) return dz / v[2];
    if (k == 1) return -dz / v[2];
    return -1 / v[2] - z * dz / v[2];
  }
  if (d == "lognormal") {
    Arr<T> z = (y.log() - v[1]) / v[2];
    if (k == 0) return -1 / y - z / (v[2] * y);
    if (k == 1) return z / v[2];
    return (z.square() - 1) / v[2];
  }
  if (d == "exponential") return k == 0 ? Arr<T>(-v[1]) : Arr<T>(1 / v[1] - y);
  if (d == "weibull") {
    const Arr<T> log_t = (y / v[2]).log(), t_alpha = (v[1] * log_t).exp();
    if (k == 0) return ((v[1] - 1) - v[1] * t_alpha) / y;
    if (k == 1) return 1 / v[1] + log_t - t_alpha * log_t;
    return v[1] * (t_alpha - 1) / v[2];
  }
  if (d == "gamma") {
    if (k == 0) return (v[1] - 1) / y - v[2];
    if (k == 1) return v[2].log() - v[1].digamma() + y.log();
    return v[1] / v[2] - y;
  }
  if (d == "inv_gamma") {
    if (k == 0) return -(v[1] + 1) / y + v[2] / y.square();
    if (k == 1) return v[2].log() - v[1].digamma() - y.log();
    return v[1] / v[2] - 1 / y;
  }
  if (d == "beta") {
    if (k == 0) return (v[1] - 1) / y - (v[2] - 1) / (1 - y);
    if (k == 1) return (v[1] + v[2]).digamma() - v[1].digamma() + y.log();
    return (v[1] + v[2]).digamma() - v[2].digamma() + (-y).log1p();
  }
  if (d == "uniform") {
    if (k == 0) return zeros();
    if (k == 1) return 1 / (v[2] - v[1]);
    return -1 / (v[2] - v[1]);
  }
  if (d == "bernoulli") return k == 0 ? zeros() : Arr<T>(y / v[1] - (1 - y) / (1 - v[1]));
  if (d == "bernoulli_logit") return k == 0 ? zeros() : Arr<T>(y - inv_logit<T>(v[1]));
  if (d == "binomial") return k < 2 ? zeros() : Arr<T>(y / v[2] - (v[1] - y) / (1 - v[2]));
  if (d == "binomial_logit") return k < 2 ? zeros() : Arr<T>(y - v[1] * inv_logit<T>(v[2]));
  if (d == "poisson") return k == 0 ? zeros() : Arr<T>(y / v[1] - 1);
  if (d == "poisson_log") return k == 0 ? zeros() : Arr<T>(y - v[1].exp());
  if (d == "neg_binomial_2" || d == "neg_binomial_2_log") {
    if (k == 0) return zeros();
    const Arr<T>& phi = v[2];
    Arr<T> mu = d == "neg_binomial_2" ? v[1] : Arr<T>(v[1].exp());
    if (k == 1) {
      Arr<T> dmu = y / mu - (y + phi) / (mu + phi);
      return d == "neg_binomial_2" ? dmu : Arr<T>(dmu * mu);
    }
    return (y + phi).digamma() - phi.digamma() + phi.log() + 1 - (mu + phi).log() - (y + phi) / (mu + phi);
  }
  if (d == "neg_binomial") {
    if (k == 0) return zeros();
    if (k == 1) return (y + v[1]).digamma() - v[1].digamma() + v[2].log() - v[2].log1p();
    return v[1] / v[2] - (v[1] + y) / (1 + v[2]);
  }
  if (d == "beta_binomial") {
    if (k < 2) return zeros();
    const Arr<T>&n = v[1], &a = v[2], &b = v[3];
    const Arr<T> common = (a + b).digamma() - (n + a + b).digamma();
    if (k == 2) return common + (y + a).digamma() - a.digamma();
    return common + (n - y + b).digamma() - b.digamma();
  }
  if (d == "beta_proportion") {
    const Arr<T>&mu = v[1], &kappa = v[2];
    const Arr<T> a = mu * kappa, b = (1 - mu) * kappa, log_y = y.log(), log1m_y = (-y).log1p();
    if (k == 0) return (a - 1) / y - (b - 1) / (1 - y);
    if (k == 1) return kappa * (b.digamma() - a.digamma() + log_y - log1m_y);
    return kappa.digamma() - mu * a.digamma() - (1 - mu) * b.digamma() + mu * log_y + (1 - mu) * log1m_y;
  }
  if (d == "gumbel") {
    Arr<T> z = (y - v[1]) / v[2], e = (-z).exp();
    if (k == 0) return (e - 1) / v[2];
    if (k == 1) return (1 - e) / v[2];
    return (z - 1 - z * e) / v[2];
  }
  if (d == "frechet") {
    Arr<T> log_t = (y / v[2]).log(), p = (-v[1] * log_t).exp();  // p = (y / sigma)^-alpha
    if (k == 0) return (v[1] * p - (1 + v[1])) / y;
    if (k == 1) return 1 / v[1] - log_t + log_t * p;
    return v[1] * (1 - p) / v[2];
  }
  if (d == "pareto") {
    if (k == 0) return -(v[2] + 1) / y;
    if (k == 1) return v[2] / v[1];
    return 1 / v[2] + v[1].log() - y.log();
  }
  if (d == "pareto_type_2") {
    const Arr<T>&lambda = v[2], &alpha = v[3];
    Arr<T> r = (y - v[1]) / lambda, per = (alpha + 1) / (lambda * (1 + r));
    if (k == 0) return -per;
    if (k == 1) return per;
    if (k == 2) return -1 / lambda + per * r;
    return 1 / alpha - r.log1p();
  }
  if (d == "rayleigh") return k == 0 ? Arr<T>(1 / y - y / v[1].square()) : Arr<T>(-2 / v[1] + y.square() / v[1].cube());
  if (d == "chi_square") {
    if (k == 0) return (v[1] / 2 - 1) / y - T(0.5);
    return T(0.5) * (y.log() - kLog2 - (v[1] / 2).digamma());
  }
  if (d == "inv_chi_square") {
    if (k == 0) return -(v[1] / 2 + 1) / y + 1 / (2 * y.square());
    return T(-0.5) * (y.log() + kLog2 + (v[1] / 2).digamma());
  }
  if (d == "scaled_inv_chi_square") {
    const Arr<T>&nu = v[1], &s = v[2];
    if (k == 0) return -(nu / 2 + 1) / y + nu * s.square() / (2 * y.square());
    if (k == 1) return T(0.5) * ((nu / 2).log() + 1 - (nu / 2).digamma() - y.log() - s.square() / y) + s.log();
    return nu / s - nu * s / y;
  }
  if (d == "skew_normal") {
    const Arr<T>&omega = v[2], &alpha = v[3];
    Arr<T> z = (y - v[1]) / omega;
    // d/dz of the log density: -z + r (-alpha / sqrt 2), r = (log erfc)' at w = -alpha z / sqrt 2
    Arr<T> r = apply<T>(-alpha * z * T(M_SQRT1_2), math::log_erfc_derivative);
    Arr<T> dz = -z - r * alpha * T(M_SQRT1_2);
    if (k == 0) return dz / omega;
    if (k == 1) return -dz / omega;
    if (k == 2) return -1 / omega - dz * z / omega;
    return -r * z * T(M_SQRT1_2);
  }
  if (d == "exp_mod_normal") {
    const Arr<T>&mu = v[1], &sigma = v[2], &lambda = v[3];
    Arr<T> w = (mu + lambda * sigma.square() - y) / (sigma * T(M_SQRT2));
    Arr<T> r = apply<T>(w, math::log_erfc_derivative);
    if (k == 0) return -lambda - r / (sigma * T(M_SQRT2));
    if (k == 1) return lambda + r / (sigma * T(M_SQRT2));
    // dw/dsigma = lambda / sqrt 2 - (mu - y) / (sigma^2 sqrt 2)
    if (k == 2) return lambda.square() * sigma + r * (lambda - (mu - y) / sigma.square()) * T(M_SQRT1_2);
    return 1 / lambda + mu + lambda * sigma.square() - y + r * sigma * T(M_SQRT1_2);
  }
  if (d == "von_mises") {
    if (k == 0) return -v[2] * (y - v[1]).sin();
    if (k == 1) return v[2] * (y - v[1]).sin();
    return (y - v[1]).cos() - apply<T>(v[2], math::bessel_i1_over_i0);
  }
  throw std::invalid_argument("no derivative for the distribution '" + d + "'");
}

// categorical_logit: y holds categories 1..K; logits is one row per outcome (n x K), or one
// vector of K logits shared by every outcome.
template <class T>
Tensor<T> categorical_logit(const Tensor<T>& y, const Tensor<T>& logits, const Tensor<T>* g, bool vjp) {
  Eigen::Index n = y.size();
  bool shared = logits.cols == 1;
  Eigen::Index K = shared ? logits.rows : logits.cols;
  if (!shared && logits.rows != n) throw ShapeError("categorical_logit: " + std::to_string(n) + " outcomes, " +
                                                    std::to_string(logits.rows) + " rows of logits");
  Eigen::Index S = logits.draws;
  Tensor<T> out = vjp ? Tensor<T>(logits.rows, logits.cols, S) : Tensor<T>(n, 1, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    Mat<T> L = shared ? Mat<T>(logits.draw(s).transpose()) : Mat<T>(logits.draw(s));  // rows x K
    Eigen::Matrix<T, Eigen::Dynamic, 1> mx = L.rowwise().maxCoeff();
    Eigen::Matrix<T, Eigen::Dynamic, 1> lse =
        mx.array() + (L.colwise() - mx).array().exp().rowwise().sum().log();
    for (Eigen::Index i = 0; i < n; ++i) {
      Eigen::Index row = shared ? 0 : i;
      auto k = static_cast<Eigen::Index>(y.m(i, 0)) - 1;
      if (k < 0 || k >= K) throw std::out_of_range("categorical outcome " + std::to_string(k + 1) + " outside 1.." + std::to_string(K));
      if (!vjp) {
        out.draw(s)(i, 0) = L(row, k) - lse(row);
        continue;
      }
      T gi = g->draw(s)(i, 0);
      for (Eigen::Index j = 0; j < K; ++j) {
        T d = gi * ((j == k ? T(1) : T(0)) - std::exp(L(row, j) - lse(row)));
        if (shared) out.draw(s)(j, 0) += d;
        else out.draw(s)(i, j) += d;
      }
    }
  }
  return out;
}

// ordered_logistic and ordered_probit (Stan's): y holds categories 1..K, eta one value per outcome
// (or one for all), c the K - 1 cutpoints in increasing order (one vector for every outcome), and
// with F the logistic or normal CDF, a = eta - c_{k-1} and b = eta - c_k (c_0 = -inf, c_K = inf):
//   P(y = k) = F(a) - F(b).
// Each term's log and its derivatives with respect to a and b, computed where the difference does
// not cancel; cutpoints out of order give NaN (no probability), which the engines drop as a
// non-finite draw, as Stan rejects them.
struct OrderedTerm {
  double lp = 0, da = 0, db = 0;
};

}  // namespace detail

// The ordinal densities, and their link's CDF F (probit: the normal's, else the logistic's): what
// their random draws and held-out class probabilities read, P(y <= k) = F(c_k - eta).
inline bool ordinal_density(const std::string& d) { return d == "ordered_logistic" || d == "ordered_probit"; }
inline double ordinal_cdf(bool probit, double x) { return probit ? 0.5 * std::erfc(-x / M_SQRT2) : 1 / (1 + std::exp(-x)); }

namespace detail {

inline double log1m_exp_of(double x) { return x > -M_LN2 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x)); }

// Logistic: log P(1) = -log1p_exp(b), log P(K) = -log1p_exp(-a), else
// log P(k) = a - log1p_exp(a) + log1m_exp(b - a) - log1p_exp(b); with D = 1 - e^(b - a),
// d/da = inv_logit(-a) / (inv_logit(-b) D), d/db = -inv_logit(b) / (inv_logit(a) D)
// (1 - inv_logit(x) taken as inv_logit(-x): no cancellation).
inline OrderedTerm ordered_logistic_term(bool has_a, double a, bool has_b, double b) {
  auto log1p_exp = [](double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); };
  auto inv_logit = [](double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); };
  OrderedTerm t;
  if (has_a && has_b) {
    if (!(b < a)) return {std::numeric_limits<double>::quiet_NaN(), 0, 0};
    const double d = -std::expm1(b - a);
    t.lp = a - log1p_exp(a) + std::log(d) - log1p_exp(b);
    t.da = inv_logit(-a) / (inv_logit(-b) * d);
    t.db = -inv_logit(b) / (inv_logit(a) * d);
  } else if (has_a) {
    t.lp = -log1p_exp(-a), t.da = inv_logit(-a);
  } else if (has_b) {
    t.lp = -log1p_exp(b), t.db = -inv_logit(b);
  }
  return t;
}

// Probit: log Phi(x) = log erfc(-x / sqrt 2) - log 2 (finite in either tail); the difference of
// two Phi's in the upper tail as one of survival functions, in the lower tail of Phi's in logs,
// across 0 by erf (accurate near 0); d/da = phi(a) / P, d/db = -phi(b) / P taken in logs.
inline OrderedTerm ordered_probit_term(bool has_a, double a, bool has_b, double b) {
  auto log_phi_cdf = [](double x) { return math::log_erfc(-x / M_SQRT2) - M_LN2; };
  auto log_phi_pdf = [](double x) { return -0.5 * x * x - 0.5 * std::log(2 * M_PI); };
  OrderedTerm t;
  if (has_a && has_b) {
    if (!(b < a)) return {std::numeric_limits<double>::quiet_NaN(), 0, 0};
    if (b >= 0) {
      const double upper = log_phi_cdf(-b);
      t.lp = upper + log1m_exp_of(log_phi_cdf(-a) - upper);
    } else if (a <= 0) {
      const double upper = log_phi_cdf(a);
      t.lp = upper + log1m_exp_of(log_phi_cdf(b) - upper);
    } else {
      t.lp = std::log(0.5 * (std::erf(a / M_SQRT2) - std::erf(b / M_SQRT2)));
    }
  } else if (has_a) {
    t.lp = log_phi_cdf(a);
  } else if (has_b) {
    t.lp = log_phi_cdf(-b);
  }
  if (has_a) t.da = std::exp(log_phi_pdf(a) - t.lp);
  if (has_b) t.db = -std::exp(log_phi_pdf(b) - t.lp);
  return t;
}

// vjp_operand < 0: the log densities (n x 1 per draw); 1 or 2: the adjoint of eta or c (eta gets
// d/da + d/db, c_{k-1} -d/da, c_k -d/db).
template <class T>
Tensor<T> ordered(const std::string& dist, const Tensor<T>& y, const Tensor<T>& eta, const Tensor<T>& c,
                  const Tensor<T>* g, int vjp_operand) {
  const bool probit = dist == "ordered_probit";
  const Eigen::Index n = y.size(), cuts = c.rows * c.cols;
  const bool shared_eta = eta.rows * eta.cols == 1;
  if (!shared_eta && eta.rows * eta.cols != n)
    throw ShapeError(dist + ": " + std::to_string(n) + " outcomes, " + std::to_string(eta.rows * eta.cols) +
                     " values of eta");
  const Eigen::Index S = std::max(eta.draws, c.draws);
  Tensor<T> out = vjp_operand == 1   ? Tensor<T>::zeros_like(eta)
                  : vjp_operand == 2 ? Tensor<T>::zeros_like(c)
                                     : Tensor<T>(n, 1, S);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Eigen::Index se = eta.draws == 1 ? 0 : s, sc = c.draws == 1 ? 0 : s;
    const auto cut = c.flat().col(sc);
    for (Eigen::Index i = 0; i < n; ++i) {
      const auto k = static_cast<Eigen::Index>(y.flat()(i, 0));  // 1..K, K = cuts + 1
      if (k < 1 || k > cuts + 1)
        throw std::out_of_range(dist + " outcome " + std::to_string(k) + " outside 1.." + std::to_string(cuts + 1));
      const double e = double(eta.flat()(shared_eta ? 0 : i, se));
      const bool has_a = k > 1, has_b = k <= cuts;
      const double a = has_a ? e - double(cut(k - 2)) : 0, b = has_b ? e - double(cut(k - 1)) : 0;
      const OrderedTerm t = probit ? ordered_probit_term(has_a, a, has_b, b) : ordered_logistic_term(has_a, a, has_b, b);
      if (vjp_operand < 0) {
        out.m(i, s) = T(t.lp);
        continue;
      }
      const T gi = g->flat()(g->size() == 1 ? 0 : i, g->draws == 1 ? 0 : s);
      if (vjp_operand == 1) {
        out.flat()(shared_eta ? 0 : i, se) += gi * T(t.da + t.db);
      } else {
        if (has_a) out.flat()(k - 2, sc) -= gi * T(t.da);
        if (has_b) out.flat()(k - 1, sc) -= gi * T(t.db);
      }
    }
  }
  return out;
}

// multinomial_logit: y is one vector of K counts, gamma K logits: one log density per draw.
template <class T>
Tensor<T> multinomial_logit(const Tensor<T>& y, const Tensor<T>& gamma, const Tensor<T>* g, bool vjp) {
  Tensor<T> ls = log_softmax(gamma);
  Eigen::Matrix<T, Eigen::Dynamic, 1> counts = y.flat().col(0);
  T N = counts.sum();
  if (vjp) {
    Tensor<T> out(gamma.rows, gamma.cols, gamma.draws);
    for (Eigen::Index s = 0; s < gamma.draws; ++s)
      out.flat().col(s) = g->m(0, g->draws == 1 ? 0 : s) *
                          (counts - N * ls.flat().col(s).array().exp().matrix());
    return out;
  }
  T constant = std::lgamma(double(N) + 1);
  for (Eigen::Index i = 0; i < counts.size(); ++i) constant -= std::lgamma(double(counts[i]) + 1);
  Tensor<T> out(1, 1, gamma.draws);
  for (Eigen::Index s = 0; s < gamma.draws; ++s) out.m(0, s) = constant + counts.dot(ls.flat().col(s));
  return out;
}

// dirichlet: theta on the simplex, alpha > 0, both K-vectors: one log density per draw.
template <class T>
Tensor<T> dirichlet(const Tensor<T>& theta, const Tensor<T>& alpha, const Tensor<T>* g, int vjp_operand) {
  Eigen::Index S = joint_draws(theta.draws, alpha.draws);
  if (vjp_operand < 0) {
    Tensor<T> out(1, 1, S);
    for (Eigen::Index s = 0; s < S; ++s) {
      auto t = theta.flat().col(theta.draws == 1 ? 0 : s).array();
      auto a = alpha.flat().col(alpha.draws == 1 ? 0 : s).array();
      out.m(0, s) = std::lgamma(a.sum()) - a.lgamma().sum() + ((a - 1) * t.log()).sum();
    }
    return out;
  }
  const Tensor<T>& like = vjp_operand == 0 ? theta : alpha;
  Tensor<T> out(like.rows, like.cols, like.draws);
  for (Eigen::Index s = 0; s < S; ++s) {
    auto t = theta.flat().col(theta.draws == 1 ? 0 : s).array();
    auto a = alpha.flat().col(alpha.draws == 1 ? 0 : s).array();
    T gs = g->m(0, g->draws == 1 ? 0 : s);
    Arr<T> d = vjp_operand == 0 ? Arr<T>((a - 1) / t) : Arr<T>(Arr<T>::Constant(a.rows(), 1, a.sum()).digamma() - a.digamma() + t.log());
    out.flat().col(like.draws == 1 ? 0 : s).array() += gs * d;
  }
  return out;
}

// lkj_corr_cholesky(L | eta): the LKJ density of the correlation matrix L L' (Lewandowski,
// Kurowicka and Joe 2009), det(L L')^(eta - 1) / c_K(eta), carried to its Cholesky factor by the
// Jacobian prod_i L_ii^(K - i): log p = sum_{i=2..K} (K - i + 2 eta - 2) log L_ii - log c_K(eta),
// log c_K(eta) = sum_{k=1..K-1} [(2 eta - 2 + K - k)(K - k) log 2 + (K - k) lbeta(b_k, b_k)],
// b_k = eta + (K - k - 1) / 2 (1-based i and k). One value per draw; only L's diagonal is read.
// log c_K(eta), LKJ's normalising constant (above), and its derivative in eta.
inline double lkj_log_constant(double eta, Eigen::Index K, double* d_eta) {
  double log_c = 0, d = 0;
  for (Eigen::Index k = 1; k < K; ++k) {
    const double r = double(K - k), b = eta + (r - 1) / 2;
    log_c += (2 * eta - 2 + r) * r * M_LN2 + r * (2 * std::lgamma(b) - std::lgamma(2 * b));
    d += 2 * r * M_LN2 + r * (2 * double(Eigen::numext::digamma(b)) - 2 * double(Eigen::numext::digamma(2 * b)));
  }
  if (d_eta) *d_eta = d;
  return log_c;
}

// The multivariate log gamma function of dimension K, and its derivative:
// log Gamma_K(x) = K(K-1)/4 log pi + sum_{j=1..K} lgamma(x + (1 - j)/2).
inline double lmgamma(Eigen::Index K, double x, double* d_x) {
  double v = double(K) * double(K - 1) / 4 * std::log(M_PI), d = 0;
  for (Eigen::Index j = 1; j <= K; ++j) {
    v += std::lgamma(x + (1 - double(j)) / 2);
    d += double(Eigen::numext::digamma(x + (1 - double(j)) / 2));
  }
  if (d_x) *d_x = d;
  return v;
}

// lkj_corr(Omega | eta) = det(Omega)^(eta - 1) / c_K(eta); wishart(W | nu, S) and
// inv_wishart(W | nu, S) with Stan's parameterisations:
//   wishart:     ((nu-K-1)/2) log|W| - tr(S^-1 W)/2 - (nu K/2) log 2 - (nu/2) log|S| - log Gamma_K(nu/2)
//   inv_wishart: (nu/2) log|S| - (nu K/2) log 2 - log Gamma_K(nu/2) - ((nu+K+1)/2) log|W| - tr(S W^-1)/2
// One value per draw. Determinants and inverses by LU, as functions of every element (so each
// adjoint is the general matrix's: d log|W| = W^-T, d tr(A W) = A^T), which on a symmetric W is
// the symmetric adjoint its transform expects.
template <class T>
Tensor<T> matrix_density(const std::string& dist, const Operands<T>& xs, const Tensor<T>* g, int vjp_operand) {
  const Tensor<T>& w = *xs[0];
  const Eigen::Index K = w.rows;
  const bool lkj = dist == "lkj_corr", inverse = dist == "inv_wishart";
  if (w.cols != K || xs[1]->size() != 1 || (!lkj && (xs[2]->rows != K || xs[2]->cols != K)))
    throw ShapeError(dist + " of " + shape_string(w) + " given " + shape_string(*xs[1]) +
                     (lkj ? "" : " and " + shape_string(*xs[2])));
  Eigen::Index S = joint_draws(w.draws, xs[1]->draws);
  if (!lkj) S = joint_draws(S, xs[2]->draws);
  const Tensor<T>& like = vjp_operand < 0 ? w : *xs[size_t(vjp_operand)];
  Tensor<T> out = vjp_operand < 0 ? Tensor<T>(1, 1, S) : Tensor<T>(like.rows, like.cols, like.draws);
  for (Eigen::Index s = 0; s < S; ++s) {
    const Eigen::MatrixXd W = w.draw(s).template cast<double>();
    const double a = double(xs[1]->m(0, xs[1]->draws == 1 ? 0 : s));
    const Eigen::PartialPivLU<Eigen::MatrixXd> lu_w(W);
    const double log_det_w = std::log(std::fabs(lu_w.determinant()));
    Eigen::MatrixXd grad;  // this draw's adjoint of the operand
    double value = 0, d_scalar = 0;
    if (lkj) {
      double d_log_c = 0;
      value = (a - 1) * log_det_w - lkj_log_constant(a, K, &d_log_c);
      if (vjp_operand == 0) grad = (a - 1) * lu_w.inverse().transpose();
      d_scalar = log_det_w - d_log_c;
    } else {
      const Eigen::MatrixXd Sm = xs[2]->draw(s).template cast<double>();
      const Eigen::PartialPivLU<Eigen::MatrixXd> lu_s(Sm);
      const double log_det_s = std::log(std::fabs(lu_s.determinant()));
      double d_lmgamma = 0;
      const double common = -a * double(K) / 2 * M_LN2 - lmgamma(K, a / 2, &d_lmgamma);
      const Eigen::MatrixXd w_inv = lu_w.inverse(), s_inv = lu_s.inverse();
      if (!inverse) {
        value = (a - double(K) - 1) / 2 * log_det_w - (s_inv * W).trace() / 2 - a / 2 * log_det_s + common;
        d_scalar = log_det_w / 2 - double(K) / 2 * M_LN2 - log_det_s / 2 - d_lmgamma / 2;
        if (vjp_operand == 0) grad = ((a - double(K) - 1) / 2 * w_inv - s_inv / 2).transpose();
        if (vjp_operand == 2) grad = (-a / 2 * s_inv + s_inv * W * s_inv / 2).transpose();
      } else {
        value = a / 2 * log_det_s - (a + double(K) + 1) / 2 * log_det_w - (Sm * w_inv).trace() / 2 + common;
        d_scalar = log_det_s / 2 - double(K) / 2 * M_LN2 - d_lmgamma / 2 - log_det_w / 2;
        if (vjp_operand == 0) grad = (-(a + double(K) + 1) / 2 * w_inv + w_inv * Sm * w_inv / 2).transpose();
        if (vjp_operand == 2) grad = (a / 2 * s_inv - w_inv / 2).transpose();
      }
    }
    if (vjp_operand < 0) {
      out.m(0, s) = T(value);
      continue;
    }
    const T gs = g->m(0, g->draws == 1 ? 0 : s);
    if (vjp_operand == 1) out.m(0, like.draws == 1 ? 0 : s) += gs * T(d_scalar);
    else out.draw(s) += gs * grad.cast<T>();  // a value that does not vary sums into draw 0
  }
  return out;
}

template <class T>
Tensor<T> lkj_corr_cholesky(const Tensor<T>& l, const Tensor<T>& eta, const Tensor<T>* g, int vjp_operand) {
  const Eigen::Index K = l.rows;
  if (l.cols != K || eta.size() != 1)
    throw ShapeError("lkj_corr_cholesky of " + shape_string(l) + " given " + shape_string(eta));
  const Eigen::Index S = joint_draws(l.draws, eta.draws);
  const Tensor<T>& like = vjp_operand == 0 ? l : eta;
  Tensor<T> out = vjp_operand < 0 ? Tensor<T>(1, 1, S) : Tensor<T>(like.rows, like.cols, like.draws);
  for (Eigen::Index s = 0; s < S; ++s) {
    const auto L = l.draw(s);
    const double e = double(eta.m(0, eta.draws == 1 ? 0 : s));
    if (vjp_operand == 0) {
      const T gs = g->m(0, g->draws == 1 ? 0 : s);
      auto target = out.draw(s);
      for (Eigen::Index i = 1; i < K; ++i) target(i, i) += gs * T(double(K - i - 1) + 2 * e - 2) / L(i, i);
      continue;
    }
    double d_log_c = 0;
    const double log_c = lkj_log_constant(e, K, &d_log_c);
    double sum_log_diagonal = 0, weighted = 0;
    for (Eigen::Index i = 1; i < K; ++i) {  // 0-based i: the exponent K - (i + 1) + 2 eta - 2
      const double log_lii = std::log(double(L(i, i)));
      sum_log_diagonal += log_lii;
      weighted += (double(K - i - 1) + 2 * e - 2) * log_lii;
    }
    if (vjp_operand < 0) out.m(0, s) = T(weighted - log_c);
    else out.m(0, eta.draws == 1 ? 0 : s) += g->m(0, g->draws == 1 ? 0 : s) * T(2 * sum_log_diagonal - d_log_c);
  }
  return out;
}

}  // namespace detail

template <class T>
Tensor<T> lpdf(const std::string& dist, const Operands<T>& xs) {
  if (dist == "categorical_logit") return detail::categorical_logit<T>(*xs[0], *xs[1], nullptr, false);
  if (dist == "multinomial_logit") return detail::multinomial_logit<T>(*xs[0], *xs[1], nullptr, false);
  if (ordinal_density(dist)) return detail::ordered<T>(dist, *xs[0], *xs[1], *xs[2], nullptr, -1);
  if (dist == "dirichlet") return detail::dirichlet<T>(*xs[0], *xs[1], nullptr, -1);
  if (dist == "multi_normal_cholesky") return detail::multi_normal_cholesky<T>(*xs[0], *xs[1], *xs[2], nullptr, -1);
  if (dist == "lkj_corr_cholesky") return detail::lkj_corr_cholesky<T>(*xs[0], *xs[1], nullptr, -1);
  if (dist == "lkj_corr" || dist == "wishart" || dist == "inv_wishart") return detail::matrix_density<T>(dist, xs, nullptr, -1);
  return detail::elementwise(xs, [&](const std::vector<Arr<T>>& v) { return detail::scalar_lpdf<T>(dist, v); });
}

// The adjoint of lpdf for operand k given the adjoint g of its result.
template <class T>
Tensor<T> lpdf_vjp(const std::string& dist, size_t k, const Tensor<T>& g, const Operands<T>& xs) {
  if (dist == "categorical_logit") {
    if (k == 0) return Tensor<T>::zeros_like(*xs[0]);
    return detail::categorical_logit<T>(*xs[0], *xs[1], &g, true);
  }
  if (dist == "multinomial_logit") {
    if (k == 0) return Tensor<T>::zeros_like(*xs[0]);
    return detail::multinomial_logit<T>(*xs[0], *xs[1], &g, true);
  }
  if (ordinal_density(dist)) {
    if (k == 0) return Tensor<T>::zeros_like(*xs[0]);
    return detail::ordered<T>(dist, *xs[0], *xs[1], *xs[2], &g, static_cast<int>(k));
  }
  if (dist == "dirichlet") return detail::dirichlet<T>(*xs[0], *xs[1], &g, static_cast<int>(k));
  if (dist == "multi_normal_cholesky")
    return detail::multi_normal_cholesky<T>(*xs[0], *xs[1], *xs[2], &g, static_cast<int>(k));
  if (dist == "lkj_corr_cholesky") return detail::lkj_corr_cholesky<T>(*xs[0], *xs[1], &g, static_cast<int>(k));
  if (dist == "lkj_corr" || dist == "wishart" || dist == "inv_wishart")
    return detail::matrix_density<T>(dist, xs, &g, static_cast<int>(k));
  Tensor<T> partial =
      detail::elementwise(xs, [&](const std::vector<Arr<T>>& v) { return detail::scalar_partial<T>(dist, k, v); });
  return sum_like(mul(g, partial), *xs[k]);
}

}  // namespace fvi::kernel
