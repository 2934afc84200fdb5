#include "fvi/diagnostics/psis.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/error.h"

using Catch::Matchers::WithinAbs;
using fvi::diagnostics::fit_generalized_pareto;
using fvi::diagnostics::khat_reading;
using fvi::diagnostics::psis;
using fvi::diagnostics::weighted_means;
using fvi::diagnostics::weighted_sds;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kPi = 3.14159265358979323846;

// Uniforms in (0, 1) and standard normals from mt19937_64 by formulas of our own, so the draws
// do not depend on the standard library's distributions.
struct Draws {
  explicit Draws(std::uint64_t seed) : engine(seed) {}
  double uniform() { return (static_cast<double>(engine() >> 11) + 0.5) * 0x1p-53; }
  double normal() {  // Box-Muller
    const double u = uniform(), v = uniform();
    return std::sqrt(-2 * std::log(u)) * std::cos(2 * kPi * v);
  }
  std::mt19937_64 engine;
};

// Inverse CDF of the generalized Pareto: x = sigma ((1 - u)^(-k) - 1) / k.
std::vector<double> pareto_draws(double k, double sigma, int n, std::uint64_t seed) {
  Draws rng(seed);
  std::vector<double> x(n);
  for (double& xi : x) xi = sigma * (std::pow(1 - rng.uniform(), -k) - 1) / k;
  return x;
}

// Generalized Pareto log-likelihood from its density (1/sigma) (1 + k x/sigma)^(-1/k - 1).
double pareto_log_lik(const std::vector<double>& x, double k, double sigma) {
  if (!(sigma > 0)) return -kInf;
  double sum = 0;
  for (double xi : x) {
    const double z = 1 + k * xi / sigma;
    if (!(z > 0)) return -kInf;
    sum += -std::log(sigma) - (1 / k + 1) * std::log(z);
  }
  return sum;
}

// Maximiser of a unimodal f on [lo, hi] by golden-section search.
template <typename F>
double golden_max(F f, double lo, double hi) {
  const double g = (std::sqrt(5.0) - 1) / 2;
  double a = hi - g * (hi - lo), b = lo + g * (hi - lo), fa = f(a), fb = f(b);
  for (int i = 0; i < 100; ++i) {
    if (fa < fb) {
      lo = a, a = b, fa = fb, b = lo + g * (hi - lo), fb = f(b);
    } else {
      hi = b, b = a, fb = fa, a = hi - g * (hi - lo), fa = f(a);
    }
  }
  return (lo + hi) / 2;
}

double normal_logpdf(double x, double mean, double sd) {
  const double z = (x - mean) / sd;
  return -0.5 * z * z - std::log(sd) - 0.5 * std::log(2 * kPi);
}

double log_sum_exp(const std::vector<double>& v) {
  const double top = *std::max_element(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += std::exp(x - top);
  return top + std::log(sum);
}

}  // namespace

TEST_CASE("generalized Pareto fit recovers k and sigma from exact draws", "[diagnostics][psis]") {
  const int n = 20000;
  std::uint64_t seed = 20240;
  for (double k : {0.2, 0.5, 0.8}) {
    for (double sigma : {1.0, 3.0}) {
      const auto x = pareto_draws(k, sigma, n, ++seed);
      // Asymptotic sds of the MLE (inverse Fisher information of the generalized Pareto):
      // sd(k) = (1 + k) / sqrt(n), sd(sigma) = sigma sqrt(2 (1 + k)) / sqrt(n).
      const double sd_k = (1 + k) / std::sqrt(n), sd_sigma = sigma * std::sqrt(2 * (1 + k)) / std::sqrt(n);
      for (bool prior : {true, false}) {
        const auto fit = fit_generalized_pareto(x, prior);
        INFO("k = " << k << ", sigma = " << sigma << ", prior = " << prior << ": fit k = " << fit.k
                    << ", sigma = " << fit.sigma);
        CHECK(std::abs(fit.k - k) < 4 * sd_k);
        CHECK(std::abs(fit.sigma - sigma) < 4 * sd_sigma);
      }
    }
  }
}

TEST_CASE("generalized Pareto fit is near the maximum-likelihood estimate found by direct search",
          "[diagnostics][psis]") {
  // Zhang & Stephens' estimate is a posterior mean, not the MLE, but both are efficient: on a
  // moderate sample their log-likelihoods differ by much less than one unit. The MLE here is a
  // nested golden-section search over (k, log sigma) of the density written out above.
  for (double k : {-0.2, 0.3, 0.9}) {
    const auto x = pareto_draws(k, 2.0, 1000, 77);
    const auto fit = fit_generalized_pareto(x, false);
    const double x_max = *std::max_element(x.begin(), x.end());
    auto best_sigma = [&](double kk) {
      // The support needs sigma > -k x_max when k < 0.
      const double lo = kk < 0 ? std::log(-kk * x_max) + 1e-9 : -5.0;
      return std::exp(golden_max([&](double ls) { return pareto_log_lik(x, kk, std::exp(ls)); }, lo, 5.0));
    };
    const double k_mle = golden_max([&](double kk) { return pareto_log_lik(x, kk, best_sigma(kk)); }, -0.9, 2.0);
    const double ll_mle = pareto_log_lik(x, k_mle, best_sigma(k_mle));
    const double ll_fit = pareto_log_lik(x, fit.k, fit.sigma);
    INFO("k = " << k << ": fit k = " << fit.k << ", MLE k = " << k_mle << ", log-lik gap " << ll_mle - ll_fit);
    CHECK(ll_fit <= ll_mle + 1e-6);
    CHECK(ll_mle - ll_fit < 0.1);
    CHECK(std::abs(fit.k - k_mle) < 0.02);
  }
}

TEST_CASE("generalized Pareto fit rejects input it cannot fit", "[diagnostics][psis]") {
  CHECK(std::isinf(fit_generalized_pareto({}).k));
  CHECK(std::isinf(fit_generalized_pareto({1.0}).k));
  CHECK(std::isinf(fit_generalized_pareto({0, 0, 0, 0, 0, 0}).k));
  CHECK(std::isinf(fit_generalized_pareto({1, 2, -1, 3, 4, 5}).k));
  CHECK(std::isinf(fit_generalized_pareto({1, 2, std::nan(""), 3, 4, 5}).k));
}

TEST_CASE("psis of constant log ratios: exact q, uniform weights", "[diagnostics][psis]") {
  const int S = 4000;
  const auto result = psis(std::vector<double>(S, -3.7));
  CHECK(result.khat < 0.5);
  CHECK(std::string(khat_reading(result.khat)) == "good");
  REQUIRE(result.log_weights.size() == static_cast<std::size_t>(S));
  for (double lw : result.log_weights) CHECK_THAT(lw, WithinAbs(-std::log(S), 1e-12));
}

TEST_CASE("psis of log ratios constant up to float error (an exact conjugate q) reads exact", "[diagnostics][psis]") {
  // log p - log q of a conjugate model's exact q: -107.085 in every draw but for rounding in the
  // last bits of two sums of about a hundred terms.
  const int S = 1000;
  Draws rng(11);
  std::vector<double> ratios(S);
  for (double& r : ratios) r = -107.085 + 3e-14 * rng.normal();
  const auto result = psis(ratios);
  CHECK(std::isinf(result.khat));
  CHECK(result.khat < 0);
  for (double lw : result.log_weights) CHECK_THAT(lw, WithinAbs(-std::log(S), 1e-9));
  // A millionth more spread is a real difference and is fitted.
  for (double& r : ratios) r = -107.085 + 1e-3 * rng.normal();
  CHECK(std::isfinite(psis(ratios).khat));
}

TEST_CASE("psis: Pareto ratios with k = 0.9 read poor, a wider q reads good", "[diagnostics][psis]") {
  const int S = 4000;
  // exp(log r) = u^(-0.9) is exactly Pareto with tail index 1/0.9, so the exceedances over the
  // cutoff are exactly generalized Pareto with k = 0.9.
  Draws rng(5);
  std::vector<double> heavy(S), light(S), analytic(S);
  for (double& lr : heavy) lr = -0.9 * std::log(rng.uniform());
  const auto h = psis(heavy);
  INFO("heavy k-hat " << h.khat);
  CHECK(h.tail_length == 190);  // ceil(min(0.2 * 4000, 3 sqrt(4000))) = ceil(189.7)
  CHECK(h.khat > 0.7);
  CHECK(std::string(khat_reading(h.khat)) == "poor");
  // With M = 190 tail draws the shape's sd is about (1 + k) / sqrt(M) = 0.14.
  CHECK(std::abs(h.khat - 0.9) < 4 * 1.9 / std::sqrt(190.0));

  // q = N(0, 1.5^2), p = N(0, 1): the ratio is bounded by 1.5, k is negative.
  for (double& lr : light) {
    const double theta = 1.5 * rng.normal();
    lr = normal_logpdf(theta, 0, 1) - normal_logpdf(theta, 0, 1.5);
  }
  const auto l = psis(light);
  INFO("light k-hat " << l.khat);
  CHECK(l.khat < 0.5);
  CHECK(std::string(khat_reading(l.khat)) == "good");

  // q = N(0, 1), p = N(0, 2^2): r grows like exp(3 theta^2 / 8), so P(r > t) ~ t^(-4/3) up to a
  // slowly varying factor and k = 1 - 1/2^2 = 0.75; allow for the factor's pre-asymptotic bias.
  for (double& lr : analytic) {
    const double theta = rng.normal();
    lr = normal_logpdf(theta, 0, 2) - normal_logpdf(theta, 0, 1);
  }
  const auto a = psis(analytic);
  INFO("normal/normal k-hat " << a.khat);
  CHECK(a.khat > 0.5);
  CHECK(a.khat < 1.0);
}

TEST_CASE("psis smooths only the tail and keeps the ratios' order", "[diagnostics][psis]") {
  const int S = 1000;
  Draws rng(11);
  std::vector<double> lr(S);
  for (double& x : lr) x = -0.6 * std::log(rng.uniform()) + 0.1 * rng.normal();
  const auto result = psis(lr);
  REQUIRE(std::isfinite(result.khat));
  CHECK(result.tail_length == 95);  // ceil(min(200, 3 sqrt(1000) = 94.87))
  CHECK_THAT(log_sum_exp(result.log_weights), WithinAbs(0.0, 1e-12));
  std::vector<int> order(S);
  for (int s = 0; s < S; ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return lr[a] < lr[b]; });
  const int body = S - static_cast<int>(result.tail_length);
  // Below the tail each weight is its raw ratio over one common normaliser.
  const double shift = result.log_weights[order[0]] - lr[order[0]];
  for (int i = 0; i < body; ++i) CHECK_THAT(result.log_weights[order[i]] - lr[order[i]], WithinAbs(shift, 1e-9));
  // In the tail the smoothed weights rise with the raw ratios, start above the cutoff and never
  // exceed the largest raw ratio.
  for (int i = body; i < S; ++i) {
    CHECK(result.log_weights[order[i]] >= result.log_weights[order[i - 1]]);
    CHECK(result.log_weights[order[i]] <= lr[order[S - 1]] + shift + 1e-12);
  }
}

TEST_CASE("psis: non-finite ratios and short samples give Inf without crashing", "[diagnostics][psis]") {
  Draws rng(3);
  std::vector<double> lr(4000);
  for (double& x : lr) x = rng.normal();
  for (double bad : {std::nan(""), kInf, -kInf}) {
    auto broken = lr;
    broken[17] = bad;
    const auto result = psis(broken);
    CHECK(std::isinf(result.khat));
    CHECK(result.khat > 0);
    CHECK(result.log_weights.size() == lr.size());
    CHECK(std::string(khat_reading(result.khat)) == "poor");
  }
  CHECK(std::isinf(psis({}).khat));
  CHECK(psis({}).log_weights.empty());
  // M = ceil(0.2 S) is below 5 up to S = 20: no fit, and the weights are the raw ratios normalised.
  for (int S : {1, 2, 5, 9, 20}) {
    const std::vector<double> small(lr.begin(), lr.begin() + S);
    const auto result = psis(small);
    CHECK(std::isinf(result.khat));
    CHECK(result.tail_length < 5);
    const double norm = log_sum_exp(small);
    for (int s = 0; s < S; ++s) CHECK_THAT(result.log_weights[s], WithinAbs(small[s] - norm, 1e-12));
  }
  const auto first_fit = psis(std::vector<double>(lr.begin(), lr.begin() + 21));
  CHECK(first_fit.tail_length == 5);
  CHECK(std::isfinite(first_fit.khat));
  // A flat tail (the top 20% of draws tie) cannot be fitted: Inf, as in loo.
  std::vector<double> tied(100, 0.0);
  for (int s = 0; s < 50; ++s) tied[s] = -1.0 - s;
  CHECK(std::isinf(psis(tied).khat));
}

TEST_CASE("weighted means recover the target's moments from draws of q", "[diagnostics][psis]") {
  // q = N(0, 1.5^2), p = N(0.3, 1): E_p[theta] = 0.3, E_p[theta^2] = 1.09.
  const int S = 4000;
  Draws rng(21);
  Eigen::MatrixXd draws(2, S);
  std::vector<double> lr(S);
  for (int s = 0; s < S; ++s) {
    const double theta = 1.5 * rng.normal();
    draws(0, s) = theta;
    draws(1, s) = theta * theta;
    lr[s] = normal_logpdf(theta, 0.3, 1) - normal_logpdf(theta, 0, 1.5);
  }
  const auto result = psis(lr);
  const auto means = weighted_means(draws, result.log_weights);
  REQUIRE(means.size() == 2);
  // Monte Carlo sd of a self-normalised estimate: sqrt(sum_s w_s^2 (h_s - mean)^2).
  const double truth[2] = {0.3, 1.09};
  for (int d = 0; d < 2; ++d) {
    double var = 0;
    for (int s = 0; s < S; ++s) var += std::exp(2 * result.log_weights[s]) * std::pow(draws(d, s) - truth[d], 2);
    INFO("dimension " << d << ": " << means[d] << " vs " << truth[d] << ", mc sd " << std::sqrt(var));
    CHECK(std::abs(means[d] - truth[d]) < 4 * std::sqrt(var));
  }
  CHECK_THROWS_AS(weighted_means(draws, std::vector<double>(S - 1, 0.0)), fvi::InvalidArgument);
  // The sd of theta under p is 1: by the delta method, the estimate's Monte Carlo sd is that of
  // the self-normalised mean of ((theta - 0.3)^2 - 1) / 2.
  const auto sds = weighted_sds(draws, result.log_weights);
  double var = 0;
  for (int s = 0; s < S; ++s)
    var += std::exp(2 * result.log_weights[s]) * std::pow((std::pow(draws(0, s) - 0.3, 2) - 1) / 2, 2);
  INFO("sd " << sds[0] << " vs 1, mc sd " << std::sqrt(var));
  CHECK(std::abs(sds[0] - 1) < 4 * std::sqrt(var));
  CHECK_THROWS_AS(weighted_sds(draws, std::vector<double>(S - 1, 0.0)), fvi::InvalidArgument);
}

TEST_CASE("k-hat readings follow the 0.5 / 0.7 thresholds", "[diagnostics][psis]") {
  CHECK(std::string(khat_reading(-kInf)) == "good");
  CHECK(std::string(khat_reading(0.49)) == "good");
  CHECK(std::string(khat_reading(0.5)) == "usable");
  CHECK(std::string(khat_reading(0.7)) == "usable");
  CHECK(std::string(khat_reading(0.71)) == "poor");
  CHECK(std::string(khat_reading(kInf)) == "poor");
  CHECK(std::string(khat_reading(std::nan(""))) == "poor");
}
