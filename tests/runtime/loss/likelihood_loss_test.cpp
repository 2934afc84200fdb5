#include "fvi/loss/likelihood_loss.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::LossSpec;
using fvi::test::check_gradient;

namespace {
const std::vector<LossSpec> kLikelihoodSpecs = {LossSpec::nll(), LossSpec::generalized_cross_entropy(0.5),
                                                LossSpec::density_power(0.7), LossSpec::gamma(1.5)};
}

TEST_CASE("Bernoulli-logit losses: NLL value, gradients w.r.t. the linear predictor", "[loss][likelihood_loss]") {
  const std::vector<int> y = {1, 0, 0, 1, 1};
  const Eigen::VectorXd eta = (Eigen::VectorXd(5) << 0.3, -1.2, 2.5, -0.4, 4.0).finished();
  double nll = 0;
  for (int i = 0; i < 5; ++i) {
    const double p = 1 / (1 + std::exp(-eta[i]));
    nll -= y[i] ? std::log(p) : std::log(1 - p);
  }
  CHECK_THAT(fvi::bernoulli_logit_loss(LossSpec::nll(), y, eta), WithinRel(nll, 1e-14));
  for (const auto& spec : kLikelihoodSpecs) {
    Eigen::VectorXd g;
    fvi::bernoulli_logit_loss(spec, y, eta, &g);
    auto r = check_gradient([&](const Eigen::VectorXd& e) { return fvi::bernoulli_logit_loss(spec, y, e); }, eta, g);
    INFO(spec.name() << "\n" << r.report());
    CHECK(r.ok());
  }
  // Limits: GCE delta -> 0 and density power beta -> 0 approach the NLL at rate O(parameter).
  const double gce = fvi::bernoulli_logit_loss(LossSpec::generalized_cross_entropy(1e-7), y, eta);
  const double dp = fvi::bernoulli_logit_loss(LossSpec::density_power(1e-7), y, eta);
  // Each observation contributes at most 1e-7 (l^2/2 + H) with |l| <= 4.1, H <= log 2.
  CHECK_THAT(gce, WithinAbs(nll, 5 * 1e-7 * (4.1 * 4.1 / 2) * 1.01 + 1e-13));
  CHECK_THAT(dp, WithinAbs(nll, 5 * 1e-7 * (4.1 * 4.1 / 2 + std::log(2.0)) * 1.01 + 1e-13));
  CHECK_THROWS_WITH(fvi::bernoulli_logit_loss(LossSpec::nll(), std::vector<int>{1, 2, 0, 0, 1}, eta),
                    "bernoulli_logit_loss: y[1] = 2 is outside [0, 1]");
}

TEST_CASE("Poisson-log losses", "[loss][likelihood_loss]") {
  const Eigen::VectorXi y = (Eigen::VectorXi(4) << 0, 3, 7, 1).finished();
  const Eigen::VectorXd eta = (Eigen::VectorXd(4) << -0.5, 1.0, 2.2, 0.1).finished();
  double nll = 0;
  for (int i = 0; i < 4; ++i) nll -= y[i] * eta[i] - std::exp(eta[i]) - std::lgamma(y[i] + 1.0);
  CHECK_THAT(fvi::poisson_log_loss(LossSpec::nll(), y, eta), WithinRel(nll, 1e-14));
  for (const auto& spec : kLikelihoodSpecs) {
    Eigen::VectorXd g;
    fvi::poisson_log_loss(spec, y, eta, &g);
    auto r = check_gradient([&](const Eigen::VectorXd& e) { return fvi::poisson_log_loss(spec, y, e); }, eta, g);
    INFO(spec.name() << "\n" << r.report());
    CHECK(r.ok());
  }
  CHECK_THROWS_WITH(fvi::poisson_log_loss(LossSpec::nll(), Eigen::VectorXi::Constant(4, -1), eta), Contains("y[0] = -1"));
}

TEST_CASE("categorical-logit losses (0-based classes, one row of logits per observation)", "[loss][likelihood_loss]") {
  const std::vector<int> y = {2, 0, 1};
  Eigen::MatrixXd logits(3, 4);
  logits << 0.3, -1.2, 2.0, 0.1, 1.5, 0.2, -0.3, 0.0, -2.0, 3.0, 0.5, 1.0;
  double nll = 0;
  for (int i = 0; i < 3; ++i) nll -= logits(i, y[i]) - std::log(logits.row(i).array().exp().sum());
  CHECK_THAT(fvi::categorical_logit_loss(LossSpec::nll(), y, logits), WithinRel(nll, 1e-14));
  for (const auto& spec : kLikelihoodSpecs) {
    Eigen::MatrixXd g;
    fvi::categorical_logit_loss(spec, y, logits, &g);
    auto f = [&](const Eigen::VectorXd& v) {
      return fvi::categorical_logit_loss(spec, y, Eigen::MatrixXd(Eigen::Map<const Eigen::MatrixXd>(v.data(), 3, 4)));
    };
    auto r = check_gradient(f, Eigen::Map<const Eigen::VectorXd>(logits.data(), 12), Eigen::Map<const Eigen::VectorXd>(g.data(), 12));
    INFO(spec.name() << "\n" << r.report());
    CHECK(r.ok());
  }
  CHECK_THROWS_WITH(fvi::categorical_logit_loss(LossSpec::nll(), std::vector<int>{2, 4, 1}, logits),
                    "categorical_logit_loss: y[1] = 4 is outside [0, 3]");
}

TEST_CASE("normal losses with derivatives for mu and sigma", "[loss][likelihood_loss]") {
  const Eigen::Vector3d y(0.3, -1.0, 2.4), mu(0.1, -0.5, 1.0);
  const double sigma = 0.8;
  double nll = 0;
  for (int i = 0; i < 3; ++i) nll -= fvi::test::normal_logpdf(y[i], mu[i], sigma);
  CHECK_THAT(fvi::normal_loss(LossSpec::nll(), Eigen::VectorXd(y), Eigen::VectorXd(mu), sigma), WithinRel(nll, 1e-14));
  for (const auto& spec : kLikelihoodSpecs) {
    Eigen::VectorXd d_mu;
    double d_sigma;
    fvi::normal_loss(spec, Eigen::VectorXd(y), Eigen::VectorXd(mu), sigma, &d_mu, &d_sigma);
    Eigen::VectorXd x(4), g(4);
    x << mu, sigma;
    g << d_mu, d_sigma;
    auto r = check_gradient([&](const Eigen::VectorXd& v) { return fvi::normal_loss(spec, Eigen::VectorXd(y), Eigen::VectorXd(v.head(3)), v[3]); },
                            x, g);
    INFO(spec.name() << "\n" << r.report());
    CHECK(r.ok());
  }
}

TEMPLATE_TEST_CASE("likelihood losses compile and agree in float", "[loss][likelihood_loss][float]", float, double) {
  using T = TestType;
  const std::vector<int> y = {1, 0, 1};
  const Eigen::Vector3d eta(0.3, -1.2, 2.5);
  for (const auto& spec : kLikelihoodSpecs) {
    fvi::VectorX<T> g;
    const double ref = fvi::bernoulli_logit_loss(spec, y, Eigen::VectorXd(eta));
    const double got = fvi::bernoulli_logit_loss(spec, y, fvi::VectorX<T>(eta.cast<T>()), &g);
    CHECK_THAT(got, WithinAbs(ref, 100 * double(std::numeric_limits<T>::epsilon()) * 5));
  }
}
