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
  check_vjp("dirichlet", {vec({0.2, 0.5, 0.3}), vec({1.5, 2.0, 0.7})}, 0);
  check_vjp("dirichlet", {vec({0.2, 0.5, 0.3}), vec({1.5, 2.0, 0.7})}, 1);
}
