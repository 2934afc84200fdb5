// random_draws (fvi/kernel/random.h), the samplers behind `dist_rng` in generated quantities:
// each distribution's sample mean and variance against its closed forms, within 5 Monte Carlo
// standard errors (the variance's from the sample's fourth central moment); Cauchy, which has
// neither, by its quartiles. And draws are a function of (key, stream, element) alone.
#include <catch2/catch.hpp>
#include <cmath>

#include "fvi/kernel/random.h"

namespace {

using fvi::kernel::Operands;
using fvi::kernel::Tensor;

constexpr Eigen::Index kDraws = 200000;

Tensor<double> scalar_tensor(double v) { return Tensor<double>::constant(v); }

Eigen::ArrayXd draws_of(const std::string& dist, std::vector<double> args, uint32_t stream = 7) {
  std::vector<Tensor<double>> ts;
  for (double a : args) ts.push_back(scalar_tensor(a));
  Operands<double> ops;
  for (const auto& t : ts) ops.push_back(&t);
  const Tensor<double> out = fvi::kernel::random_draws<double>(dist, ops, 1, 1, kDraws, 20261126, stream);
  REQUIRE(out.draws == kDraws);
  return out.m.row(0).transpose().array();
}

void check_moments(const std::string& dist, std::vector<double> args, double mean, double variance) {
  const Eigen::ArrayXd x = draws_of(dist, args);
  const double n = double(x.size());
  const double m = x.mean();
  const Eigen::ArrayXd c = x - m;
  const double v = c.square().sum() / (n - 1);
  const double m4 = c.pow(4).mean();
  INFO(dist << ": mean " << m << " (want " << mean << "), variance " << v << " (want " << variance << ")");
  CHECK(std::fabs(m - mean) < 5 * std::sqrt(variance / n));
  CHECK(std::fabs(v - variance) < 5 * std::sqrt(std::max(m4 - v * v, 1e-300) / n));
}

}  // namespace

TEST_CASE("random draws: each distribution's mean and variance", "[random]") {
  check_moments("normal", {1.5, 2.0}, 1.5, 4.0);
  const double mu = 0.2, s = 0.5;
  check_moments("lognormal", {mu, s}, std::exp(mu + s * s / 2), (std::exp(s * s) - 1) * std::exp(2 * mu + s * s));
  check_moments("logistic", {-1, 0.7}, -1, 0.49 * M_PI * M_PI / 3);
  check_moments("double_exponential", {2, 1.3}, 2, 2 * 1.3 * 1.3);
  check_moments("exponential", {2.5}, 0.4, 0.16);
  check_moments("uniform", {-1, 3}, 1, 16.0 / 12);
  check_moments("bernoulli", {0.3}, 0.3, 0.21);
  const double p = 1 / (1 + std::exp(0.4));
  check_moments("bernoulli_logit", {-0.4}, p, p * (1 - p));
  check_moments("poisson", {3.5}, 3.5, 3.5);
  check_moments("poisson", {1000}, 1000, 1000);
  check_moments("poisson_log", {std::log(0.2)}, 0.2, 0.2);
  check_moments("binomial", {20, 0.3}, 6, 4.2);
  check_moments("binomial_logit", {1000, std::log(0.01 / 0.99)}, 10, 9.9);
}

// Shapes with finite eighth moments where the variance's standard error needs the fourth.
TEST_CASE("random draws: the inverse-CDF, gamma-based and count distributions' means and variances", "[random]") {
  auto g = [](double x) { return std::tgamma(x); };
  check_moments("weibull", {2, 1.5}, 1.5 * g(1.5), 2.25 * (g(2) - g(1.5) * g(1.5)));
  check_moments("frechet", {9, 2}, 2 * g(1 - 1.0 / 9), 4 * (g(1 - 2.0 / 9) - g(1 - 1.0 / 9) * g(1 - 1.0 / 9)));
  check_moments("gumbel", {1, 2}, 1 + 2 * 0.57721566490153286, M_PI * M_PI * 4 / 6);
  check_moments("pareto", {1, 9}, 9.0 / 8, 9.0 / (64 * 7));
  check_moments("pareto_type_2", {0.5, 2, 9}, 0.5 + 2.0 / 8, 4 * 9.0 / (64 * 7));
  check_moments("rayleigh", {1.3}, 1.3 * std::sqrt(M_PI / 2), (4 - M_PI) / 2 * 1.69);
  check_moments("gamma", {2.5, 1.5}, 2.5 / 1.5, 2.5 / 2.25);
  check_moments("gamma", {0.4, 2}, 0.2, 0.1);
  check_moments("inv_gamma", {11, 2}, 0.2, 4.0 / (100 * 9));
  check_moments("chi_square", {3}, 3, 6);
  check_moments("inv_chi_square", {20}, 1.0 / 18, 2.0 / (18 * 18 * 16));
  check_moments("scaled_inv_chi_square", {20, 0.5}, 20 * 0.25 / 18, 2 * 400 * 0.0625 / (18 * 18 * 16));
  check_moments("beta", {2, 3}, 0.4, 0.04);
  check_moments("beta_proportion", {0.3, 5}, 0.3, 0.3 * 0.7 / 6);
  check_moments("student_t", {12, 1, 2}, 1, 4 * 12.0 / 10);
  check_moments("neg_binomial_2", {4, 2.5}, 4, 4 + 16 / 2.5);
  check_moments("neg_binomial_2_log", {std::log(4.0), 2.5}, 4, 4 + 16 / 2.5);
  check_moments("neg_binomial", {2.5, 0.5}, 5, 15);
  check_moments("beta_binomial", {10, 2, 3}, 4, 6);
}

TEST_CASE("random draws: Cauchy by its quartiles", "[random]") {
  const Eigen::ArrayXd x = draws_of("cauchy", {3, 2});
  const double n = double(x.size());
  // A fraction's standard error is sqrt(p (1 - p) / n).
  for (const auto& [at, p] : std::vector<std::pair<double, double>>{{1, 0.25}, {3, 0.5}, {5, 0.75}})
    CHECK(std::fabs((x <= at).cast<double>().mean() - p) < 5 * std::sqrt(p * (1 - p) / n));
}

TEST_CASE("random draws: a value depends on its key, stream and element only", "[random]") {
  const Eigen::ArrayXd a = draws_of("normal", {0, 1}, 7), b = draws_of("normal", {0, 1}, 7), c = draws_of("normal", {0, 1}, 8);
  CHECK((a == b).all());
  CHECK((a != c).count() > kDraws - 10);
  // Element j is the same whether it is drawn alone or among others (a 3 x 1 call's first row).
  const Tensor<double> zero = scalar_tensor(0), one = scalar_tensor(1);
  const Tensor<double> three = fvi::kernel::random_draws<double>("normal", {&zero, &one}, 3, 1, 2, 20261126, 7);
  CHECK(three.draw(0)(0, 0) == a(0));
  CHECK(three.draw(1)(0, 0) == a(3));  // draw 1, element 0: j = (1 * 1 + 0) * 3 + 0
}

namespace {

// Each category's frequency among a call's draws (one category per draw) within 5 binomial
// standard errors of its probability p(k), k = 1..K.
void check_category_frequencies(const Tensor<double>& out, const Eigen::ArrayXd& p) {
  REQUIRE(out.rows == 1);
  REQUIRE(out.draws == kDraws);
  const Eigen::Index K = p.size();
  Eigen::ArrayXd count = Eigen::ArrayXd::Zero(K);
  for (Eigen::Index s = 0; s < kDraws; ++s) {
    const double k = out.m(0, s);
    REQUIRE((k >= 1 && k <= double(K) && k == std::floor(k)));
    count(static_cast<Eigen::Index>(k) - 1) += 1;
  }
  for (Eigen::Index k = 0; k < K; ++k) {
    INFO("category " << k + 1 << ": frequency " << count(k) / kDraws << ", probability " << p(k));
    CHECK(std::fabs(count(k) / kDraws - p(k)) < 5 * std::sqrt(p(k) * (1 - p(k)) / kDraws));
  }
}

}  // namespace

TEST_CASE("random draws: categorical_logit's category frequencies are softmax(beta)", "[random]") {
  Tensor<double> beta(4, 1, 1);
  beta.m << 0.5, -1.0, 2.0, 0.0;
  const Eigen::ArrayXd p = (beta.m.array() - 2.0).exp() / (beta.m.array() - 2.0).exp().sum();
  check_category_frequencies(
      fvi::kernel::random_draws<double>("categorical_logit", {&beta}, 1, 1, kDraws, 20261127, 3), p);
}

TEST_CASE("random draws: ordered_logistic's category frequencies are the differences of logistic CDFs",
          "[random]") {
  // P(y = k) = P(y <= k) - P(y <= k - 1), P(y <= k) = inv_logit(c_k - eta), computed here.
  Tensor<double> eta(1, 1, 1), c(3, 1, 1);
  eta.m << 0.4;
  c.m.col(0) << -1.0, 0.2, 1.5;
  Eigen::ArrayXd cdf(5), p(4);
  cdf << 0, 1 / (1 + std::exp(0.4 + 1.0)), 1 / (1 + std::exp(0.4 - 0.2)), 1 / (1 + std::exp(0.4 - 1.5)), 1;
  for (int k = 0; k < 4; ++k) p(k) = cdf(k + 1) - cdf(k);
  check_category_frequencies(
      fvi::kernel::random_draws<double>("ordered_logistic", {&eta, &c}, 1, 1, kDraws, 20261130, 3), p);
}

TEST_CASE("random draws: ordered_probit's category frequencies are the differences of normal CDFs", "[random]") {
  // P(y <= k) = Phi(c_k - eta), Phi by std::erfc here.
  Tensor<double> eta(1, 1, 1), c(2, 1, 1);
  eta.m << -0.3;
  c.m.col(0) << -0.5, 0.8;
  auto phi = [](double x) { return 0.5 * std::erfc(-x / M_SQRT2); };
  Eigen::ArrayXd p(3);
  p << phi(-0.5 + 0.3), phi(0.8 + 0.3) - phi(-0.5 + 0.3), 1 - phi(0.8 + 0.3);
  check_category_frequencies(
      fvi::kernel::random_draws<double>("ordered_probit", {&eta, &c}, 1, 1, kDraws, 20261131, 3), p);
}

TEST_CASE("random draws: multi_normal's and multi_normal_cholesky's means and covariances", "[random]") {
  // mu + L z: the sample mean within 5 Monte Carlo standard errors of mu, each sample covariance
  // within 5 of its own (the variance of a product of centred normals is Sigma_ii Sigma_jj +
  // Sigma_ij^2).
  Tensor<double> mu(3, 1, 1), sigma(3, 3, 1);
  mu.m.col(0) << 1.0, -2.0, 0.5;
  sigma.m << 2.0, 0.6, -0.3, 0.6, 1.0, 0.2, -0.3, 0.2, 0.5;
  Tensor<double> factor(3, 3, 1);
  factor.m = Eigen::MatrixXd(sigma.m).llt().matrixL();
  for (const char* dist : {"multi_normal", "multi_normal_cholesky"}) {
    INFO(dist);
    const Tensor<double>& scale = std::string(dist) == "multi_normal" ? sigma : factor;
    const Tensor<double> x = fvi::kernel::random_draws<double>(dist, {&mu, &scale}, 1, 1, kDraws, 20261128, 3);
    REQUIRE(x.rows == 3);
    REQUIRE(x.cols == 1);
    REQUIRE(x.draws == kDraws);
    const Eigen::MatrixXd d = x.m;  // 3 x kDraws
    const Eigen::VectorXd mean = d.rowwise().mean();
    const Eigen::MatrixXd c = d.colwise() - mean;
    const Eigen::MatrixXd cov = c * c.transpose() / double(kDraws - 1);
    for (int i = 0; i < 3; ++i) {
      CHECK(std::fabs(mean(i) - mu.m(i, 0)) < 5 * std::sqrt(sigma.m(i, i) / kDraws));
      for (int j = 0; j < 3; ++j) {
        const double se = std::sqrt((sigma.m(i, i) * sigma.m(j, j) + sigma.m(i, j) * sigma.m(i, j)) / kDraws);
        CHECK(std::fabs(cov(i, j) - sigma.m(i, j)) < 5 * se);
      }
    }
  }
  // Two means, the rows of a 2 x 3 array of vectors: a row each, centred on its own mean.
  Tensor<double> two(2, 3, 1);
  two.m << 10, 0, 0, -10, 0, 0;
  const Tensor<double> rows = fvi::kernel::random_draws<double>("multi_normal", {&two, &sigma}, 1, 1, 2000, 5, 4);
  REQUIRE(rows.rows == 2);
  REQUIRE(rows.cols == 3);
  double sum0 = 0, sum1 = 0;
  for (Eigen::Index s = 0; s < rows.draws; ++s) sum0 += rows.draw(s)(0, 0), sum1 += rows.draw(s)(1, 0);
  CHECK(std::fabs(sum0 / 2000 - 10) < 5 * std::sqrt(2.0 / 2000));
  CHECK(std::fabs(sum1 / 2000 + 10) < 5 * std::sqrt(2.0 / 2000));
  // A covariance that is not positive definite is refused.
  Tensor<double> bad(3, 3, 1);
  bad.m = -Eigen::MatrixXd::Identity(3, 3);
  CHECK_THROWS_AS(fvi::kernel::random_draws<double>("multi_normal", {&mu, &bad}, 1, 1, 1, 5, 4), std::domain_error);
}
