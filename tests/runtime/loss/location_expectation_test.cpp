#include "fvi/loss/location_expectation.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/family/reparam_expectation.h"
#include "fvi/rng.h"
#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Matchers::WithinAbs;
using fvi::LossSpec;
using fvi::test::check_gradient;

namespace {
// The loss at one theta, from the per-observation log likelihood and the power integral.
double loss_at(const LossSpec& spec, double x, double theta, double sigma) {
  const double l = fvi::test::normal_logpdf(x, theta, sigma);
  const double li = spec.needs_integral() ? fvi::normal_log_power_integral(spec.integral_power(), sigma).value : 0.0;
  return fvi::evaluate_loss(spec, l, li).value;
}
const std::vector<LossSpec> kLocationSpecs = {LossSpec::nll(), LossSpec::generalized_cross_entropy(0.8),
                                              LossSpec::generalized_cross_entropy(0.2), LossSpec::density_power(0.7),
                                              LossSpec::gamma(1.5)};
}  // namespace

TEST_CASE("closed-form expected losses equal integrals over q (1-D location model)", "[loss][location_expectation]") {
  const double x = 2.3, m = 0.4, s = 0.7, sigma = 1.1;
  const auto q = fvi::MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, m), Eigen::VectorXd::Constant(1, s));
  for (const auto& spec : kLocationSpecs) {
    const auto e = fvi::expected_location_loss(spec, Eigen::VectorXd::Constant(1, x), q, sigma);
    const auto integral = fvi::test::integrate_real_line(
        [&](double t) { return std::exp(fvi::test::normal_logpdf(t, m, s)) * loss_at(spec, x, t, sigma); }, m, s);
    INFO(spec.name());
    CHECK_THAT(e.value, WithinAbs(integral.value, 10 * integral.error + 1e-13));
    auto r = check_gradient(
        [&](const Eigen::VectorXd& p) {
          return fvi::expected_location_loss(spec, Eigen::VectorXd::Constant(1, x), fvi::MeanFieldGaussian<>::from_params(p), sigma).value;
        },
        q.params(), e.params_gradient());
    INFO(r.report());
    CHECK(r.ok());
  }
}

TEST_CASE("expected losses tend to the expected NLL at their limits", "[loss][location_expectation]") {
  const auto q = fvi::MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.4, -0.2), Eigen::Vector2d(0.7, 0.3));
  const Eigen::VectorXd x = Eigen::Vector2d(2.3, 0.1);
  const double sigma = 1.1;
  const double nll = fvi::expected_location_loss(LossSpec::nll(), x, q, sigma).value;
  CHECK(fvi::expected_location_loss(LossSpec::generalized_cross_entropy(0.0), x, q, sigma).value == nll);
  for (auto make : {+[](double t) { return LossSpec::generalized_cross_entropy(t); }, +[](double t) { return LossSpec::density_power(t); },
                    +[](double t) { return LossSpec::gamma(1 + t); }}) {
    const double dev = std::abs(fvi::expected_location_loss(make(1e-3), x, q, sigma).value - nll);
    CHECK(dev < 0.1);  // O(t) with an O(1) constant (about E_q[l^2]/2 here)
    for (double t : {1e-6, 1e-9}) {
      CHECK_THAT(fvi::expected_location_loss(make(t), x, q, sigma).value, WithinAbs(nll, 2 * dev * t / 1e-3 + 1e-14 * nll));
    }
  }
}

TEST_CASE("closed-form expectations agree with reparameterised Monte Carlo in 2-D", "[loss][location_expectation]") {
  const auto q = fvi::MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.4, -0.2), Eigen::Vector2d(0.7, 0.3));
  const Eigen::Vector2d x(1.3, 0.1);
  const double sigma = 1.1;
  const auto spec = LossSpec::generalized_cross_entropy(0.8);
  fvi::CounterRng rng(fvi::RngKey{11, 0, 0, 0});
  const Eigen::MatrixXd eps = rng.normal(2, 50000);
  const auto mc = fvi::reparam_expectation(q, eps, [&](const Eigen::MatrixXd& z, Eigen::VectorXd& v, Eigen::MatrixXd& g) {
    for (Eigen::Index s = 0; s < z.cols(); ++s) {
      const Eigen::VectorXd r = x - z.col(s);
      const double l = -r.squaredNorm() / (2 * sigma * sigma) - std::log(2 * std::acos(-1.0) * sigma * sigma);
      const auto t = fvi::generalized_cross_entropy_loss(l, 0.8);
      v[s] = t.value;
      g.col(s) = t.d_loglik * r / (sigma * sigma);  // dl/dtheta = (x - theta) / sigma^2
    }
  });
  const auto exact = fvi::expected_location_loss(spec, Eigen::VectorXd(x), q, sigma);
  CHECK_THAT(mc.value, WithinAbs(exact.value, 5 * mc.standard_error));
  // Gradient: the MC gradient is a mean of bounded per-draw terms (|dL/dtheta| <= max|r|/sigma^2 ~ 5);
  // its standard error is below 5 / sqrt(S) = 0.022; use 5 of those.
  CHECK((mc.params_gradient - exact.params_gradient()).cwiseAbs().maxCoeff() < 5 * 5 / std::sqrt(50000.0));
}
