// Distributions on batched tensors: each log density integrates (or sums) to one over its
// support, and each vector-Jacobian product matches finite differences.
#include "fvi/kernel/distributions.h"

#include <catch2/catch.hpp>
#include <random>

#include "support/gradient_check.h"
#include "support/quadrature.h"

using fvi::kernel::Tensor;
using T = Tensor<double>;

namespace {

T scalar(double v) { return T::constant(v); }

double density(const std::string& dist, double y, const std::vector<double>& args) {
  std::vector<T> ts{scalar(y)};
  for (double a : args) ts.push_back(scalar(a));
  fvi::kernel::Operands<double> xs;
  for (const T& t : ts) xs.push_back(&t);
  return std::exp(fvi::kernel::lpdf(dist, xs).m(0, 0));
}

struct Case {
  std::string dist;
  std::vector<double> args;
  double lo, hi;   // support (continuous) or the integer range to sum over (discrete)
  bool discrete;
};

}  // namespace

TEST_CASE("weibull's density at a point: alpha/sigma (y/sigma)^(alpha-1) exp(-(y/sigma)^alpha)", "[kernel][distributions]") {
  // alpha 2, sigma 1, y 1.5: 2 * 1.5 * exp(-2.25); alpha 0.5, sigma 3, y 2: (0.5/3) (2/3)^-0.5 exp(-(2/3)^0.5).
  CHECK(density("weibull", 1.5, {2.0, 1.0}) == Approx(3.0 * std::exp(-2.25)).epsilon(1e-14));
  CHECK(density("weibull", 2.0, {0.5, 3.0}) ==
        Approx(0.5 / 3.0 * std::pow(2.0 / 3.0, -0.5) * std::exp(-std::sqrt(2.0 / 3.0))).epsilon(1e-14));
}

TEST_CASE("each density is normalised over its support", "[kernel][distributions]") {
  const double inf = INFINITY;
  std::vector<Case> cases = {
      {"normal", {0.3, 1.7}, -inf, inf, false},
      {"student_t", {3.5, -0.4, 0.8}, -inf, inf, false},
      {"cauchy", {0.2, 0.6}, -inf, inf, false},
      {"double_exponential", {1.0, 0.5}, -inf, inf, false},
      {"logistic", {-0.5, 1.3}, -inf, inf, false},
      {"lognormal", {0.2, 0.5}, 0, inf, false},
      {"exponential", {1.7}, 0, inf, false},
      {"gamma", {2.5, 1.5}, 0, inf, false},
      {"inv_gamma", {3.0, 2.0}, 0, inf, false},
      {"weibull", {1.8, 2.5}, 0, inf, false},
      {"beta", {2.5, 3.5}, 0, 1, false},
      {"uniform", {-1.0, 2.0}, -1, 2, false},
      {"bernoulli", {0.3}, 0, 1, true},
      {"bernoulli_logit", {-0.7}, 0, 1, true},
      {"binomial", {12, 0.35}, 0, 12, true},
      {"binomial_logit", {9, 0.4}, 0, 9, true},
      {"poisson", {3.2}, 0, 60, true},
      {"poisson_log", {1.1}, 0, 60, true},
      {"neg_binomial_2", {4.0, 2.5}, 0, 400, true},
      {"neg_binomial_2_log", {1.2, 3.0}, 0, 400, true},
      {"neg_binomial", {2.5, 0.8}, 0, 400, true},
      {"beta_binomial", {15, 1.7, 0.6}, 0, 15, true},
      {"beta_proportion", {0.3, 7.0}, 0, 1, false},
      {"gumbel", {0.4, 1.3}, -inf, inf, false},
      {"frechet", {2.5, 1.5}, 0, inf, false},
      {"pareto", {0.5, 2.5}, 0.5, inf, false},
      {"pareto_type_2", {0.0, 1.5, 3.0}, 0, inf, false},
      {"rayleigh", {1.4}, 0, inf, false},
      {"chi_square", {3.5}, 0, inf, false},
      {"inv_chi_square", {4.5}, 0, inf, false},
      {"scaled_inv_chi_square", {5.0, 0.7}, 0, inf, false},
      {"skew_normal", {0.3, 1.2, -2.5}, -inf, inf, false},
      {"exp_mod_normal", {0.2, 0.8, 1.5}, -inf, inf, false},
      {"von_mises", {0.5, 3.0}, -M_PI, M_PI, false},
  };
  for (const Case& c : cases) {
    INFO(c.dist);
    double total = 0;
    if (c.discrete) {
      for (int k = static_cast<int>(c.lo); k <= static_cast<int>(c.hi); ++k) total += density(c.dist, k, c.args);
      CHECK_THAT(total, Catch::Matchers::WithinAbs(1.0, 1e-10));
    } else {
      auto f = [&](double y) { return density(c.dist, y, c.args); };
      fvi::test::QuadratureResult q;
      if (std::isinf(c.lo) && std::isinf(c.hi)) q = fvi::test::integrate_real_line(f, 0.0, 1.0);
      else if (std::isinf(c.hi)) q = fvi::test::integrate_real_line([&](double t) { return t > 0 ? f(t) : 0.0; }, 1.0, 1.0);
      else q = fvi::test::integrate(f, c.lo, c.hi);
      // Heavy tails (Cauchy, Student-t) converge more slowly under the mapping; 1e-6 is far below
      // any formula error, which would be O(1).
      CHECK_THAT(q.value, Catch::Matchers::WithinAbs(1.0, 1e-6));
    }
  }
}

TEST_CASE("ordered_logistic and ordered_probit: P(y = k) = F(eta - c_{k-1}) - F(eta - c_k), summing to one",
          "[kernel][distributions]") {
  // The direct difference of the two CDFs F (logistic; normal, by std::erfc) with c_0 = -inf,
  // c_K = +inf at moderate values, and the sum over k at values where the direct form loses every
  // digit (eta 40 from a cutpoint, two cutpoints 1e-6 apart).
  for (const std::string dist : {"ordered_logistic", "ordered_probit"}) {
  INFO(dist);
  auto inv_logit = [&](double x) { return dist == "ordered_probit" ? 0.5 * std::erfc(-x / M_SQRT2) : 1 / (1 + std::exp(-x)); };
  const std::vector<std::vector<double>> cutpoints = {{-1.3, 0.2, 0.25, 2.0}, {-1e-6, 0.0, 40.0}};
  for (const std::vector<double>& cut : cutpoints) {
    const int K = int(cut.size()) + 1;
    T c(int(cut.size()), 1, 1);
    for (size_t j = 0; j < cut.size(); ++j) c.m(Eigen::Index(j), 0) = cut[j];
    for (double eta_value : {-2.0, 0.1, 0.7, 45.0, -40.0}) {
      T eta = scalar(eta_value);
      double total = 0;
      for (int k = 1; k <= K; ++k) {
        T y = scalar(k);
        const double p = std::exp(fvi::kernel::lpdf<double>(dist, {&y, &eta, &c}).m(0, 0));
        total += p;
        const double upper = k == 1 ? 1.0 : inv_logit(eta_value - cut[size_t(k - 2)]);
        const double lower = k == K ? 0.0 : inv_logit(eta_value - cut[size_t(k - 1)]);
        INFO("eta " << eta_value << ", k " << k);
        if (std::abs(eta_value) < 10 && cut.back() < 10) CHECK(p == Approx(upper - lower).epsilon(1e-12));
      }
      CHECK_THAT(total, Catch::Matchers::WithinAbs(1.0, 1e-12));
    }
  }
  // Cutpoints out of order: no probability (NaN), for the engines to drop.
  T y = scalar(2), eta = scalar(0.0), c(2, 1, 1);
  c.m << 0.5, -0.5;
  CHECK(std::isnan(fvi::kernel::lpdf<double>(dist, {&y, &eta, &c}).m(0, 0)));
  }
  // The probit's tails, where Phi differences underflow: P(y = 2 | eta = 40, c = (0, 1)) =
  // Phi(-39) - Phi(-40) to 1e-10 relative, from log erfc (std::erfc(39 / sqrt 2) is 1e-333: 0).
  T y = scalar(2), eta = scalar(40.0), c(2, 1, 1);
  c.m << 0.0, 1.0;
  const double expected = fvi::math::log_erfc(39 / M_SQRT2) - M_LN2 +
                          std::log1p(-std::exp(fvi::math::log_erfc(40 / M_SQRT2) - fvi::math::log_erfc(39 / M_SQRT2)));
  CHECK(fvi::kernel::lpdf<double>("ordered_probit", {&y, &eta, &c}).m(0, 0) == Approx(expected).epsilon(1e-10));
}

TEST_CASE("categorical_logit, multinomial_logit and dirichlet are normalised", "[kernel][distributions]") {
  T logits(1, 4, 1);
  logits.m << 0.3, -1.2, 2.0, 0.1;
  double total = 0;
  for (int k = 1; k <= 4; ++k) {
    T y = scalar(k);
    total += std::exp(fvi::kernel::lpdf<double>("categorical_logit", {&y, &logits}).m(0, 0));
  }
  CHECK_THAT(total, Catch::Matchers::WithinAbs(1.0, 1e-12));

  // Multinomial with 3 trials over 3 categories: sum over all count vectors.
  T gamma(3, 1, 1);
  gamma.m << 0.5, -0.3, 1.1;
  total = 0;
  for (int a = 0; a <= 3; ++a)
    for (int b = 0; a + b <= 3; ++b) {
      T y(3, 1, 1);
      y.m << a, b, 3 - a - b;
      total += std::exp(fvi::kernel::lpdf<double>("multinomial_logit", {&y, &gamma}).m(0, 0));
    }
  CHECK_THAT(total, Catch::Matchers::WithinAbs(1.0, 1e-12));

  // Dirichlet(2, 3) on the 1-simplex is Beta(2, 3).
  T alpha(2, 1, 1);
  alpha.m << 2.0, 3.0;
  T theta(2, 1, 1);
  theta.m << 0.3, 0.7;
  double dir = fvi::kernel::lpdf<double>("dirichlet", {&theta, &alpha}).m(0, 0);
  T y = scalar(0.3), a = scalar(2.0), b = scalar(3.0);
  double beta = fvi::kernel::lpdf<double>("beta", {&y, &a, &b}).m(0, 0);
  CHECK_THAT(dir, Catch::Matchers::WithinAbs(beta, 1e-12));
}

namespace {

// Checks lpdf_vjp for operand k with random values inside the support, two draws, a vector
// outcome and a mix of scalar and vector arguments.
void check_vjp(const std::string& dist, const std::vector<T>& operands, size_t k) {
  std::mt19937 rng(7 + k);
  std::normal_distribution<double> normal;
  T seed = fvi::kernel::lpdf<double>(dist, [&] {
    fvi::kernel::Operands<double> xs;
    for (const T& t : operands) xs.push_back(&t);
    return xs;
  }());
  T g = T::zeros_like(seed);
  for (Eigen::Index i = 0; i < g.m.size(); ++i) g.m.data()[i] = normal(rng);

  auto value_at = [&](const Eigen::VectorXd& x) {
    std::vector<T> ops = operands;
    ops[k].m = Eigen::Map<const Eigen::MatrixXd>(x.data(), ops[k].m.rows(), ops[k].m.cols());
    fvi::kernel::Operands<double> xs;
    for (const T& t : ops) xs.push_back(&t);
    return fvi::kernel::mul(g, fvi::kernel::lpdf(dist, xs)).m.sum();
  };
  fvi::kernel::Operands<double> xs;
  for (const T& t : operands) xs.push_back(&t);
  T grad = fvi::kernel::lpdf_vjp(dist, k, g, xs);
  REQUIRE(grad.m.size() == operands[k].m.size());
  Eigen::VectorXd x = Eigen::Map<const Eigen::VectorXd>(operands[k].m.data(), operands[k].m.size());
  Eigen::VectorXd analytic = Eigen::Map<const Eigen::VectorXd>(grad.m.data(), grad.m.size());
  auto result = fvi::test::check_gradient(value_at, x, analytic);
  INFO(dist << " operand " << k << "\n" << result.report());
  CHECK(result.ok());
}

T vec(std::vector<double> v, Eigen::Index draws = 1) {
  Eigen::Index n = static_cast<Eigen::Index>(v.size()) / draws;
  T t(n, 1, draws);
  for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = v[i];
  return t;
}

}  // namespace

// The tails the textbook formulas lose: log erfc past erfc's underflow and I0 past its overflow,
// against std::erfc and std::cyl_bessel_i where those still hold, and the skew normal and von
// Mises densities at a point written with them.
TEST_CASE("log erfc, log I0 and I1 / I0 in their tails; skew_normal and von_mises at a point", "[kernel][distributions]") {
  using namespace fvi::math;
  for (double x : {-3.0, 0.5, 7.9, 8.0, 12.0, 25.0}) {
    INFO(x);
    CHECK(log_erfc(x) == Approx(std::log(std::erfc(x))).epsilon(1e-13));
    CHECK(log_erfc_derivative(x) == Approx(-M_2_SQRTPI * std::exp(-x * x) / std::erfc(x)).epsilon(1e-12));
  }
  // Past 26.5 erfc underflows: the leading terms of its asymptotic series, -x^2 - log(x sqrt(pi))
  // + log(1 - 1/(2x^2) + 3/(4x^4)), are exact to 1e-9 at x = 40.
  const double x = 40;
  CHECK(log_erfc(x) == Approx(-x * x - std::log(x * std::sqrt(M_PI)) + std::log(1 - 1 / (2 * x * x) + 3 / (4 * x * x * x * x))).epsilon(1e-12));
  for (double k : {0.0, 0.7, 30.0, 499.0, 501.0, 650.0}) {
    INFO(k);
    CHECK(log_bessel_i0(k) == Approx(std::log(std::cyl_bessel_i(0.0, k))).epsilon(1e-13).margin(1e-15));
    CHECK(bessel_i1_over_i0(k) == Approx(std::cyl_bessel_i(1.0, k) / std::cyl_bessel_i(0.0, k)).epsilon(1e-12).margin(1e-15));
  }
  const double y = 0.4, xi = -0.2, omega = 1.3, alpha = 2.2, z = (y - xi) / omega;
  const double skew = 2 / omega * std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI) * 0.5 * std::erfc(-alpha * z / std::sqrt(2.0));
  CHECK(density("skew_normal", y, {xi, omega, alpha}) == Approx(skew).epsilon(1e-13));
  CHECK(density("von_mises", 1.1, {0.3, 2.5}) ==
        Approx(std::exp(2.5 * std::cos(0.8)) / (2 * M_PI * std::cyl_bessel_i(0.0, 2.5))).epsilon(1e-13));
  CHECK(density("gumbel", 0.9, {0.2, 1.5}) ==
        Approx(std::exp(-0.7 / 1.5 - std::exp(-0.7 / 1.5)) / 1.5).epsilon(1e-13));
}

TEST_CASE("vector-Jacobian products of the densities match finite differences", "[kernel][distributions]") {
  // Outcome: 3 values; first argument varies over 2 draws; the rest are scalars or data.
  struct VjpCase {
    std::string dist;
    std::vector<T> operands;
    std::vector<size_t> differentiable;
  };
  std::vector<VjpCase> cases = {
      {"normal", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(1.3)}, {0, 1, 2}},
      {"student_t", {vec({0.5, -1.2, 2.0}), scalar(4.5), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.8)}, {0, 1, 2, 3}},
      {"cauchy", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.7)}, {0, 1, 2}},
      {"double_exponential", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.25, 0.4, 0.0, 1.0}, 2), scalar(0.7)}, {0, 1, 2}},
      {"logistic", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.9)}, {0, 1, 2}},
      {"lognormal", {vec({0.5, 1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.6)}, {0, 1, 2}},
      {"exponential", {vec({0.5, 1.2, 2.0}), vec({1.1, 0.3, 2.2, 0.4, 0.9, 1.0}, 2)}, {0, 1}},
      {"gamma", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(1.7)}, {0, 1, 2}},
      {"inv_gamma", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(1.7)}, {0, 1, 2}},
      {"weibull", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(1.7)}, {0, 1, 2}},
      {"beta", {vec({0.2, 0.55, 0.9}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(1.7)}, {0, 1, 2}},
      {"uniform", {vec({0.2, 0.55, 0.9}), scalar(-0.5), scalar(1.5)}, {1, 2}},
      {"bernoulli", {vec({1, 0, 1}), vec({0.2, 0.5, 0.9, 0.4, 0.1, 0.7}, 2)}, {1}},
      {"bernoulli_logit", {vec({1, 0, 1}), vec({0.2, -3.5, 0.9, 4.0, 0.1, -0.7}, 2)}, {1}},
      {"binomial", {vec({3, 0, 5}), scalar(6), vec({0.2, 0.5, 0.9, 0.4, 0.1, 0.7}, 2)}, {2}},
      {"binomial_logit", {vec({3, 0, 5}), scalar(6), vec({0.2, -1.5, 0.9, 2.0, 0.1, -0.7}, 2)}, {2}},
      {"poisson", {vec({3, 0, 5}), vec({0.2, 1.5, 4.9, 2.0, 0.1, 0.7}, 2)}, {1}},
      {"poisson_log", {vec({3, 0, 5}), vec({0.2, -1.5, 1.9, 2.0, 0.1, -0.7}, 2)}, {1}},
      {"neg_binomial_2", {vec({3, 0, 5}), vec({0.2, 1.5, 4.9, 2.0, 0.1, 0.7}, 2), scalar(2.5)}, {1, 2}},
      {"neg_binomial_2_log", {vec({3, 0, 5}), vec({0.2, -1.5, 1.9, 2.0, 0.1, -0.7}, 2), scalar(2.5)}, {1, 2}},
      {"neg_binomial", {vec({3, 0, 5}), vec({0.2, 1.5, 4.9, 2.0, 0.1, 0.7}, 2), scalar(0.8)}, {1, 2}},
      {"beta_binomial", {vec({3, 0, 5}), scalar(6), vec({0.2, 1.5, 4.9, 2.0, 0.1, 0.7}, 2), scalar(1.3)}, {2, 3}},
      {"beta_proportion", {vec({0.2, 0.55, 0.9}), vec({0.1, 0.3, 0.8, 0.4, 0.5, 0.6}, 2), scalar(4.5)}, {0, 1, 2}},
      {"gumbel", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.9)}, {0, 1, 2}},
      {"frechet", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(1.7)}, {0, 1, 2}},
      {"pareto", {vec({0.5, 1.2, 2.0}), scalar(0.3), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2)}, {0, 1, 2}},
      {"pareto_type_2", {vec({0.5, 1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, -1.0}, 2), scalar(1.3), scalar(2.2)}, {0, 1, 2, 3}},
      {"rayleigh", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2)}, {0, 1}},
      {"chi_square", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2)}, {0, 1}},
      {"inv_chi_square", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2)}, {0, 1}},
      {"scaled_inv_chi_square", {vec({0.5, 1.2, 2.0}), vec({1.1, 2.3, 2.2, 0.8, 0.9, 1.5}, 2), scalar(0.7)}, {0, 1, 2}},
      // skew_normal at alpha z = -50 too: past erfc's underflow, log erfc from its continued fraction
      {"skew_normal", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.7), vec({-2.5, 30.0}, 2)}, {0, 1, 2, 3}},
      {"exp_mod_normal", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.7), scalar(1.9)}, {0, 1, 2, 3}},
      {"von_mises", {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), vec({3.0, 800.0}, 2)}, {0, 1, 2}},
  };
  for (const VjpCase& c : cases)
    for (size_t k : c.differentiable) check_vjp(c.dist, c.operands, k);

  // Vector-valued densities, with edge values: large logits.
  T y = vec({2, 1, 3});
  T logits(3, 3, 2);
  logits.m << 0.3, -1.2, 2.0, 30.0, 0.1, -0.5,
              1.0, 0.0, -2.0, -25.0, 0.4, 0.9,
              0.7, 0.2, 0.1, 0.0, -0.3, 0.5;
  check_vjp("categorical_logit", {y, logits}, 1);
  check_vjp("categorical_logit", {y, vec({0.3, -1.2, 2.0, 0.1, 0.5, -0.5}, 2)}, 1);
  check_vjp("multinomial_logit", {vec({2, 0, 3}), vec({0.3, -1.2, 2.0, 0.1, 0.5, -0.5}, 2)}, 1);
  // ordered_logistic: every category (first, middle, last), eta per outcome or one for all, the
  // cutpoints one vector for every outcome, each over 2 draws; eta far beyond a cutpoint too.
  const T ordinal = vec({1, 2, 3, 4, 2, 4});
  const T cutpoints = vec({-1.0, 0.3, 0.4, -0.8, 0.5, 2.5}, 2);
  for (const char* dist : {"ordered_logistic", "ordered_probit"})
    for (size_t k : {1, 2}) {
      check_vjp(dist, {ordinal, vec({0.2, -0.4, 1.5, 0.3, 25.0, -0.1, 0.7, 0.0, -1.1, 2.2, 0.4, -30.0}, 2), cutpoints},
                k);
      check_vjp(dist, {ordinal, vec({0.2, -0.4}, 2), cutpoints}, k);
    }
  check_vjp("dirichlet", {vec({0.2, 0.5, 0.3}), vec({1.5, 2.0, 0.7})}, 0);
  check_vjp("dirichlet", {vec({0.2, 0.5, 0.3}), vec({1.5, 2.0, 0.7})}, 1);

  // multi_normal_cholesky: y a 3-vector, mu varying over 2 draws (and one value for every
  // element), L lower triangular with a positive diagonal, 2 draws.
  T chol(3, 3, 2);
  chol.m << 1.3, 0.0, 0.0, 0.9, 0.0, 0.0,
            0.4, 0.8, 0.0, -0.3, 1.1, 0.0,
            -0.6, 0.2, 1.7, 0.5, 0.7, 0.6;
  const T y3 = vec({0.5, -1.2, 2.0});
  for (size_t k : {0, 1, 2}) {
    check_vjp("multi_normal_cholesky", {y3, vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), chol}, k);
    check_vjp("multi_normal_cholesky", {y3, scalar(0.25), chol}, k);
  }
  // Four observations, one per row (an array of vectors): mu shared (a 3-vector) or per row.
  T rows(4, 3, 1);
  rows.m << 0.5, -1.2, 2.0, 0.1, 0.3, -0.7, 1.5, 0.0, -0.4, 0.9, 1.1, -2.0;
  T per_row(4, 3, 2);
  for (Eigen::Index i = 0; i < per_row.m.size(); ++i) per_row.m.data()[i] = 0.1 * double(i % 7) - 0.3;
  for (size_t k : {0, 1, 2}) {
    check_vjp("multi_normal_cholesky", {rows, vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), chol}, k);
    check_vjp("multi_normal_cholesky", {rows, per_row, chol}, k);
  }
}

TEST_CASE("multi_normal_cholesky of an array of vectors is the sum of each vector's density", "[kernel][distributions]") {
  T chol(3, 3, 1);
  chol.m << 1.3, 0.0, 0.0, 0.4, 0.8, 0.0, -0.6, 0.2, 1.7;
  T rows(2, 3, 1);
  rows.m << 0.5, -1.2, 2.0, 0.1, 0.3, -0.7;
  const T mu = vec({0.2, -0.1, 0.4});
  const T all = fvi::kernel::lpdf<double>("multi_normal_cholesky", {&rows, &mu, &chol});
  double sum = 0;
  for (Eigen::Index i = 0; i < 2; ++i) {
    T one(3, 1, 1);
    one.m.col(0) = rows.m.row(i).transpose();
    sum += fvi::kernel::lpdf<double>("multi_normal_cholesky", {&one, &mu, &chol}).m(0, 0);
  }
  CHECK(all.m(0, 0) == Approx(sum).epsilon(1e-14));
}

// ---- cumulative distribution functions (fvi/kernel/cdfs.h) ---------------------------------

namespace {

double log_cdf(const std::string& name, double y, const std::vector<double>& args) {
  std::vector<T> ts{scalar(y)};
  for (double a : args) ts.push_back(scalar(a));
  fvi::kernel::Operands<double> xs;
  for (const T& t : ts) xs.push_back(&t);
  return fvi::kernel::lpdf(name, xs).m(0, 0);
}

}  // namespace

TEST_CASE("each log CDF is the log of its density's integral, both tails", "[kernel][distributions]") {
  struct CdfCase {
    std::string dist;
    std::vector<double> args;
    std::vector<double> at;  // inside the support, tails included
    double lo;               // the support's lower end
  };
  const std::vector<CdfCase> cases = {
      {"normal", {0.3, 1.7}, {-6.0, -1.0, 0.3, 2.5, 9.0}, -INFINITY},
      {"student_t", {3.5, -0.4, 0.8}, {-30.0, -1.0, -0.4, 0.7, 12.0}, -INFINITY},
      {"student_t", {1.0, 0.0, 1.0}, {-50.0, -0.5, 0.5, 40.0}, -INFINITY},
      {"student_t", {30.0, 1.0, 2.0}, {-8.0, 0.0, 4.0}, -INFINITY},
      {"cauchy", {0.2, 0.6}, {-100.0, -0.3, 0.2, 5.0, 300.0}, -INFINITY},
      {"logistic", {-0.5, 1.3}, {-30.0, -1.0, 2.0, 25.0}, -INFINITY},
      {"double_exponential", {1.0, 0.5}, {-8.0, 0.7, 1.0, 1.3, 9.0}, -INFINITY},
      {"lognormal", {0.2, 0.5}, {0.1, 1.0, 1.22, 4.0, 20.0}, 0},
      {"exponential", {1.7}, {0.01, 0.5, 2.0, 9.0}, 0},
      {"weibull", {1.6, 2.0}, {0.05, 1.0, 2.0, 4.5, 9.0}, 0},
      {"weibull", {0.7, 0.5}, {0.01, 0.3, 2.0, 12.0}, 0},
      {"frechet", {2.5, 1.5}, {0.4, 1.0, 1.5, 4.0, 30.0}, 0},
      {"rayleigh", {0.8}, {0.02, 0.5, 1.0, 3.5}, 0},
      {"pareto", {0.5, 3.0}, {0.51, 0.7, 2.0, 40.0}, 0.5},
      {"pareto_type_2", {-1.0, 2.0, 2.5}, {-0.9, 0.0, 3.0, 60.0}, -1.0},
      {"gumbel", {0.4, 1.2}, {-3.0, 0.0, 0.4, 3.0, 15.0}, -INFINITY},
  };
  for (const CdfCase& c : cases)
    for (double y : c.at) {
      INFO(c.dist << " at " << y);
      auto f = [&](double x) { return density(c.dist, x, c.args); };
      // The smaller tail by quadrature (to its own relative precision: no kink of the density
      // inside it), the other as its complement.
      fvi::test::QuadratureResult lower, upper;
      if (std::isinf(c.lo))
        lower = fvi::test::integrate_real_line([&](double t) { return t < y ? f(t) : 0.0; }, y - 1, 1.0, 1e-300, 1e-12);
      else
        lower = fvi::test::integrate([&](double t) { return f(t); }, c.lo, y, 1e-300, 1e-12);
      upper = fvi::test::integrate_real_line([&](double t) { return t > y ? f(t) : 0.0; }, y + 1, 1.0, 1e-300, 1e-12);
      const bool lower_smaller = lower.value < upper.value;
      const double small = lower_smaller ? lower.value : upper.value;
      const double log_lower = lower_smaller ? std::log(small) : std::log1p(-small);
      const double log_upper = lower_smaller ? std::log1p(-small) : std::log(small);
      const double lcdf = log_cdf(c.dist + "_lcdf", y, c.args), lccdf = log_cdf(c.dist + "_lccdf", y, c.args);
      // 1e-8 in the log is a relative 1e-8 in the probability, far above the quadrature's error.
      CHECK_THAT(lcdf, Catch::Matchers::WithinAbs(log_lower, 1e-8));
      CHECK_THAT(lccdf, Catch::Matchers::WithinAbs(log_upper, 1e-8));
    }
}

TEST_CASE("log CDFs against closed forms and far in the tails", "[kernel][distributions]") {
  // Student-t with nu = 2: F(z) = 1/2 + z / (2 sqrt(2 + z^2)), for z < 0 without the
  // cancellation: 1 / (r (r - z)), r = sqrt(2 + z^2); nu = 1 is the Cauchy.
  for (double z : {-1e4, -7.0, -0.3, 0.0, 0.8, 5.0}) {
    INFO("z = " << z);
    const double r = std::sqrt(2 + z * z);
    CHECK_THAT(std::exp(log_cdf("student_t_lcdf", z, {2.0, 0.0, 1.0})),
               Catch::Matchers::WithinRel(z < 0 ? 1 / (r * (r - z)) : 0.5 + z / (2 * r), 1e-12));
    CHECK_THAT(log_cdf("student_t_lcdf", z, {1.0, 0.0, 1.0}), Catch::Matchers::WithinAbs(log_cdf("cauchy_lcdf", z, {0.0, 1.0}), 1e-12));
  }
  // At its location every symmetric family has half its mass on each side (brms's half-t term).
  CHECK_THAT(log_cdf("student_t_lccdf", 0, {3.0, 0.0, 2.5}), Catch::Matchers::WithinAbs(std::log(0.5), 1e-15));
  CHECK_THAT(log_cdf("normal_lcdf", 0, {0.0, 1.0}), Catch::Matchers::WithinAbs(std::log(0.5), 1e-15));
  // exponential: log P(Y > y) = -beta y exactly.
  CHECK(log_cdf("exponential_lccdf", 3.0, {2.0}) == -6.0);
  // Phi(-1.959963984540054) = 0.025 (the normal's 2.5% quantile).
  CHECK_THAT(std::exp(log_cdf("normal_lcdf", -1.959963984540054, {0.0, 1.0})), Catch::Matchers::WithinRel(0.025, 1e-12));
  // log Phi across z = -37.5, where erfc gives way to the asymptotic series: the two methods meet
  // with the slope phi/Phi = |z| + 1/|z| + O(|z|^-3) of log Phi there (a term missing from the
  // series would jump by 3/z^4 = 1.5e-6 or more).
  const double left = log_cdf("normal_lcdf", -37.5 - 1e-6, {0.0, 1.0}), right = log_cdf("normal_lcdf", -37.5 + 1e-6, {0.0, 1.0});
  CHECK(std::isfinite(log_cdf("normal_lcdf", -1e3, {0.0, 1.0})));
  CHECK_THAT(right - left, Catch::Matchers::WithinAbs((37.5 + 1 / 37.5) * 2e-6, 1e-9));
  // Outside the support of a positive distribution.
  CHECK(log_cdf("lognormal_lcdf", -1.0, {0.0, 1.0}) == -INFINITY);
  CHECK(log_cdf("exponential_lccdf", 0.0, {2.0}) == 0.0);
  CHECK(log_cdf("weibull_lcdf", 0.0, {1.5, 2.0}) == -INFINITY);
  CHECK(log_cdf("weibull_lccdf", -1.0, {1.5, 2.0}) == 0.0);
  CHECK(log_cdf("pareto_lcdf", 0.4, {0.5, 3.0}) == -INFINITY);
  CHECK(log_cdf("pareto_type_2_lccdf", -2.0, {-1.0, 2.0, 2.5}) == 0.0);
  CHECK(log_cdf("frechet_lcdf", 0.0, {2.5, 1.5}) == -INFINITY);
  // The closed tails exactly: weibull's log P(Y > y) = -(y / sigma)^alpha; with alpha = 1 it is
  // the exponential of rate 1 / sigma, and rayleigh's is the weibull with alpha = 2, sigma sqrt 2.
  CHECK_THAT(log_cdf("weibull_lccdf", 3.0, {2.0, 1.5}), Catch::Matchers::WithinRel(-4.0, 1e-15));
  CHECK_THAT(log_cdf("weibull_lcdf", 0.7, {1.0, 2.0}), Catch::Matchers::WithinRel(log_cdf("exponential_lcdf", 0.7, {0.5}), 1e-14));
  CHECK_THAT(log_cdf("rayleigh_lcdf", 1e-5, {0.8}),
             Catch::Matchers::WithinRel(log_cdf("weibull_lcdf", 1e-5, {2.0, 0.8 * std::sqrt(2.0)}), 1e-12));
  // Far in the upper tail log(1 - exp(-w)) keeps its precision: gumbel at z = 40 is -e^-40.
  CHECK_THAT(log_cdf("gumbel_lccdf", 40.0, {0.0, 1.0}), Catch::Matchers::WithinRel(std::log(-std::expm1(-std::exp(-40.0))), 1e-14));
  CHECK_THAT(log_cdf("gumbel_lcdf", 40.0, {0.0, 1.0}), Catch::Matchers::WithinRel(-std::exp(-40.0), 1e-14));
}

TEST_CASE("vector-Jacobian products of the log CDFs match finite differences", "[kernel][distributions]") {
  for (const char* tail : {"_lcdf", "_lccdf"}) {
    const std::string t = tail;
    check_vjp("normal" + t, {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(1.3)}, 0);
    check_vjp("normal" + t, {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(1.3)}, 1);
    check_vjp("normal" + t, {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(1.3)}, 2);
    for (size_t k : {0, 2, 3})
      check_vjp("student_t" + t, {vec({0.5, -1.2, 2.0}), scalar(4.5), vec({0.1, 0.3, -0.2, 0.4, 0.0, 1.0}, 2), scalar(0.8)}, k);
    for (const char* d : {"cauchy", "logistic", "double_exponential", "lognormal"})
      for (size_t k : {0, 1, 2})
        check_vjp(d + t, {vec({0.5, 1.2, 2.0}), vec({0.1, 0.3, -0.25, 0.4, 0.0, 1.0}, 2), scalar(0.7)}, k);
    for (size_t k : {0, 1}) check_vjp("exponential" + t, {vec({0.5, 1.2, 2.0}), vec({1.1, 0.3, 2.2, 0.4, 0.9, 1.0}, 2)}, k);
    for (const char* d : {"weibull", "frechet"})
      for (size_t k : {0, 1, 2})
        check_vjp(d + t, {vec({0.5, 1.2, 2.0}), vec({1.1, 0.6, 2.2, 0.4, 0.9, 3.0}, 2), scalar(0.9)}, k);
    for (size_t k : {0, 1}) check_vjp("rayleigh" + t, {vec({0.5, 1.2, 2.0}), vec({1.1, 0.6, 2.2, 0.4, 0.9, 3.0}, 2)}, k);
    for (size_t k : {0, 1, 2}) check_vjp("pareto" + t, {vec({0.5, 1.2, 2.0}), scalar(0.3), vec({1.1, 0.6, 2.2, 0.4, 0.9, 3.0}, 2)}, k);
    for (size_t k : {0, 1, 2, 3})
      check_vjp("pareto_type_2" + t, {vec({0.5, 1.2, 2.0}), scalar(-0.4), vec({1.1, 0.6, 2.2, 0.4, 0.9, 3.0}, 2), scalar(1.7)}, k);
    for (size_t k : {0, 1, 2}) check_vjp("gumbel" + t, {vec({0.5, -1.2, 2.0}), vec({0.1, 0.3, -0.25, 0.4, 0.0, 1.0}, 2), scalar(0.7)}, k);
  }
}
