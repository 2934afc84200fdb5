#include "fvi/loss/score_matching.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/divergence/kl_divergence.h"
#include "support/gradient_check.h"
#include "support/quadrature.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::ScoreWeight;
using fvi::test::check_gradient;

namespace {
Eigen::VectorXd v1(double x) { return Eigen::VectorXd::Constant(1, x); }

// The definition |w s|^2 + 2 div(w^2 s), s = grad_x log N(x; theta, sigma2 I), with the divergence
// taken by central differences in x (independent of the runtime's expansion).
double sm_by_definition(const Eigen::VectorXd& x, const Eigen::VectorXd& theta, double sigma2, const ScoreWeight<>& w,
                        const Eigen::VectorXd& center) {
  auto field = [&](const Eigen::VectorXd& z) {
    const double wz = w.value(z, center);
    return Eigen::VectorXd(wz * wz * (-(z - theta) / sigma2));
  };
  const double wx = w.value(x, center);
  double div = 0;
  const double h = 1e-4;
  for (int k = 0; k < x.size(); ++k) {
    Eigen::VectorXd xp = x, xm = x;
    xp[k] += h;
    xm[k] -= h;
    div += (field(xp)[k] - field(xm)[k]) / (2 * h);
  }
  return wx * wx * ((x - theta) / sigma2).squaredNorm() + 2 * div;
}
}  // namespace

TEST_CASE("weighted score matching equals its definition (seed 000 §3.1 item 4)", "[loss][score_matching]") {
  const double sigma2 = 1.3;
  const double beta = fvi::default_score_weight_scale(sigma2);
  const ScoreWeight<> weights[] = {ScoreWeight<>::squared_exponential(beta, 0.7), ScoreWeight<>::inverse_multiquadric(beta, 0.7),
                                   ScoreWeight<>::inverse_multiquadric(beta, 1.2, 1.5), ScoreWeight<>::constant(beta)};
  const Eigen::Vector2d x(0.4, -0.3), theta(0.1, 0.2), center(0.0, 0.5);
  for (const auto& w : weights) {
    const auto sm = fvi::score_matching_loss(Eigen::VectorXd(x), Eigen::VectorXd(theta), sigma2, w, Eigen::VectorXd(center));
    // Central difference of the field: error h^2/6 |f'''| ~ 1e-8 |f| for these smooth weights.
    CHECK_THAT(sm.value, WithinAbs(sm_by_definition(x, theta, sigma2, w, center), 1e-7));
    auto r = check_gradient(
        [&](const Eigen::VectorXd& t) { return fvi::score_matching_loss(Eigen::VectorXd(x), t, sigma2, w, Eigen::VectorXd(center)).value; },
        theta, sm.d_theta);
    INFO(r.report());
    CHECK(r.ok());
    // The weight's x-gradient.
    auto rw = check_gradient([&](const Eigen::VectorXd& z) { return w.value(z, center); }, x, w.gradient(x, center));
    INFO(rw.report());
    CHECK(rw.ok());
  }
  // SE weight in 1-D as the FedGVI code writes it: w' = -w (x - mu) / c^2.
  const auto se = ScoreWeight<>::squared_exponential(beta, 0.7);
  CHECK_THAT(se.gradient(v1(0.4), v1(0.0))[0], WithinRel(-se.value(v1(0.4), v1(0.0)) * 0.4 / 0.49, 1e-14));
}

TEST_CASE("constant weight sqrt(sigma^2/2): score matching is the NLL up to a constant", "[loss][score_matching]") {
  const double sigma2 = 0.8;
  const auto w = ScoreWeight<>::constant(fvi::default_score_weight_scale(sigma2));
  const Eigen::VectorXd x = v1(1.3), c = v1(0.0);
  for (double theta : {-1.0, 0.0, 0.5, 2.0}) {
    const double nll = -fvi::test::normal_logpdf(1.3, theta, std::sqrt(sigma2));
    const double sm = fvi::score_matching_loss(x, v1(theta), sigma2, w, c).value;
    // L_SM = (x - theta)^2 / (2 sigma^2) - 1 = NLL - 1/2 log(2 pi sigma^2) - 1.
    CHECK_THAT(sm, WithinAbs(nll - 0.5 * std::log(2 * std::acos(-1.0) * sigma2) - 1, 1e-14));
  }
}

TEST_CASE("expected score matching loss equals the integral over q", "[loss][score_matching]") {
  const double sigma2 = 1.1;
  const auto w = ScoreWeight<>::inverse_multiquadric(fvi::default_score_weight_scale(sigma2), 0.9);
  const auto q = fvi::MeanFieldGaussian<>::from_mean_sd(v1(0.3), v1(0.6));
  const Eigen::VectorXd x = v1(1.7), c = v1(0.1);
  const auto e = fvi::expected_score_matching_loss(x, q, sigma2, w, c);
  const auto integral = fvi::test::integrate_real_line(
      [&](double t) { return std::exp(fvi::test::normal_logpdf(t, 0.3, 0.6)) * fvi::score_matching_loss(x, v1(t), sigma2, w, c).value; },
      0.3, 0.6);
  CHECK_THAT(e.value, WithinAbs(integral.value, 10 * integral.error + 1e-14));
  auto r = check_gradient(
      [&](const Eigen::VectorXd& p) { return fvi::expected_score_matching_loss(x, fvi::MeanFieldGaussian<>::from_params(p), sigma2, w, c).value; },
      q.params(), e.params_gradient());
  INFO(r.report());
  CHECK(r.ok());
}

TEST_CASE("conjugate score-matching update (seed 000 Prop. 4.10)", "[loss][score_matching]") {
  const double sigma2 = 1.0;
  const Eigen::MatrixXd xs = (Eigen::MatrixXd(1, 6) << -0.5, 0.2, 1.1, 0.7, 6.0, 0.4).finished();
  const auto cav_q = fvi::MeanFieldGaussian<>::from_mean_sd(v1(0.2), v1(1.5));
  const auto cavity = fvi::to_natural(cav_q);

  SECTION("constant weight, k = 1: the Bayesian Gaussian update") {
    const auto w = ScoreWeight<>::constant(fvi::default_score_weight_scale(sigma2));
    const auto post = fvi::to_mean_field(fvi::score_matching_conjugate_update(cavity, xs, sigma2, w));
    const double prec = 1 / (1.5 * 1.5) + 6 / sigma2;
    const double mean = (0.2 / (1.5 * 1.5) + xs.sum() / sigma2) / prec;
    CHECK_THAT(post.mean()[0], WithinRel(mean, 1e-14));
    CHECK_THAT(post.variance()[0], WithinRel(1 / prec, 1e-14));
  }

  for (const auto& w : {ScoreWeight<>::squared_exponential(fvi::default_score_weight_scale(sigma2), 1.0),
                        ScoreWeight<>::inverse_multiquadric(fvi::default_score_weight_scale(sigma2), 1.0)}) {
    const double k = 0.7;
    const auto eta = fvi::score_matching_conjugate_update(cavity, xs, sigma2, w, k);
    // The FedGVI code's conjugate_update (spec 000 §2.6), written out here, times k:
    //   prec = prec_cav + 2 sum w^2 / sigma^4;  mean prec = mu_cav prec_cav + sum 2 w^2 (x - sigma^2 2 w'/w) / sigma^4
    double prec = 1 / 2.25, lin = 0.2 / 2.25;
    for (int i = 0; i < 6; ++i) {
      const double wi = w.value(v1(xs(0, i)), v1(0.2)), wd = w.gradient(v1(xs(0, i)), v1(0.2))[0];
      prec += k * 2 * wi * wi / (sigma2 * sigma2);
      lin += k * 2 * wi * wi * (xs(0, i) - sigma2 * 2 * wd / wi) / (sigma2 * sigma2);
    }
    const auto post = fvi::to_mean_field(eta);
    CHECK_THAT(post.variance()[0], WithinRel(1 / prec, 1e-13));
    CHECK_THAT(post.mean()[0], WithinRel(lin / prec, 1e-13));
    // Stationarity of E_q[sum_i L_SM] + (1/k) KL(q || cavity) at the update (weights fixed at the cavity mean).
    Eigen::VectorXd grad = fvi::kl_divergence_gradient(post, cav_q).params_gradient() / k;
    for (int i = 0; i < 6; ++i) grad += fvi::expected_score_matching_loss(Eigen::VectorXd(xs.col(i)), post, sigma2, w, v1(0.2)).params_gradient();
    CHECK(grad.cwiseAbs().maxCoeff() <= 1e-12);
    // The outlier at 6 barely moves the SE-weighted posterior (robustness): weight ~ e^{-17}.
    CHECK(w.value(v1(6.0), v1(0.2)) < 0.2 * w.value(v1(0.4), v1(0.2)));
  }

  // Full-covariance cavity in 2-D: stationarity again.
  const auto cav_f = fvi::FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0.1, -0.2), fvi::test::spd_matrix(2, 0.5, 2.0));
  const Eigen::MatrixXd x2 = fvi::test::fixed_noise(2, 5, 0.3);
  const auto w2 = ScoreWeight<>::squared_exponential(0.8, 1.4);
  const auto post_f = fvi::to_full_rank(fvi::score_matching_conjugate_update(fvi::to_natural(cav_f), x2, sigma2, w2));
  // Gradient of E_q[sum L] w.r.t. the mean: sum_i d_theta at the mean (quadratic); KL part from the runtime.
  Eigen::VectorXd g_mean = fvi::kl_divergence_gradient(post_f, cav_f).d_mean;
  for (int i = 0; i < 5; ++i) g_mean += fvi::score_matching_loss(Eigen::VectorXd(x2.col(i)), post_f.mean(), sigma2, w2, cav_f.mean()).d_theta;
  CHECK(g_mean.cwiseAbs().maxCoeff() <= 1e-12);
  CHECK_THROWS_WITH(ScoreWeight<>::squared_exponential(-1.0, 1.0), Contains("scale must be positive"));
}
