#include "fvi/divergence/alpha_renyi_divergence.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/divergence/kl_divergence.h"
#include "support/divergence_reference.h"
#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::MeanFieldGaussian;
using fvi::test::check_gradient;

namespace {
MeanFieldGaussian<> mf1(double m, double s) {
  return MeanFieldGaussian<>::from_mean_sd(Eigen::VectorXd::Constant(1, m), Eigen::VectorXd::Constant(1, s));
}
// The digest's closed form with determinants and inverses (spec 000 §3.2 item 3), in the test.
double ar_direct(const FullRankGaussian<>& q, const FullRankGaussian<>& p, double a) {
  const Eigen::MatrixXd sq = q.covariance(), sp = p.covariance();
  const Eigen::MatrixXd sa = a * sp + (1 - a) * sq;
  const Eigen::VectorXd d = q.mean() - p.mean();
  return 0.5 * d.dot(sa.inverse() * d) - std::log(sa.determinant()) / (2 * a * (a - 1)) -
         std::log(sq.determinant()) / (2 * a) + std::log(sp.determinant()) / (2 * (a - 1));
}
}  // namespace

TEST_CASE("alpha-Renyi between univariate Gaussians equals 1/(a(a-1)) log int q^a p^(1-a)", "[divergence][alpha_renyi]") {
  // q narrower than p, so Sigma_a stays positive definite for the large alphas of the paper.
  const double mq = 0.4, sq = 0.6, mp = -0.5, sp = 1.1;
  // (For alpha = -0.5 the integral diverges: alpha + (1 - alpha) sq^2/sp^2 < 0; see the error test.)
  for (double alpha : {-0.2, 0.3, 0.5, 0.7, 1.5, 2.5, 3.0}) {
    const double closed = fvi::alpha_renyi_divergence(mf1(mq, sq), mf1(mp, sp), alpha);
    const auto integral = fvi::test::renyi_integral(alpha, mq, sq, mp, sp);
    const double numeric = std::log(integral.value) / (alpha * (alpha - 1));
    // Error propagation: d numeric = d I / (I |a (a - 1)|).
    const double tol = 10 * integral.error / (integral.value * std::abs(alpha * (alpha - 1))) + 1e-13;
    INFO("alpha " << alpha << ": closed " << closed << " integral " << numeric);
    CHECK_THAT(closed, WithinAbs(numeric, tol));
  }
}

TEST_CASE("alpha-Renyi limits: alpha -> 1 is KL(q||p), alpha -> 0 is KL(p||q)", "[divergence][alpha_renyi]") {
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0.5, -1, 2), Eigen::Vector3d(0.7, 1.3, 0.4));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0, 0.5, 1.5), Eigen::Vector3d(1.1, 0.9, 0.8));
  const double kl = fvi::kl_divergence(q, p), rkl = fvi::kl_divergence(p, q);
  CHECK_THAT(fvi::alpha_renyi_divergence(q, p, 1.0), WithinRel(kl, 1e-13));
  CHECK_THAT(fvi::alpha_renyi_divergence(q, p, 0.0), WithinRel(rkl, 1e-13));
  // Approaching the limits: D(1 + h) - KL = O(h). The slope is bounded by the divergence's alpha
  // derivative, estimated at h0 = 1e-3; at h = 1e-9 the difference must be ~1e-6 of that, so a
  // formula with a 1/(alpha - 1) cancellation (error ~ eps / h ~ 1e-7 relative) fails.
  const double h0 = 1e-3;
  const double slope1 = std::abs(fvi::alpha_renyi_divergence(q, p, 1 + h0) - kl) / h0;
  const double slope0 = std::abs(fvi::alpha_renyi_divergence(q, p, h0) - rkl) / h0;
  for (double h : {1e-5, 1e-9, 1e-12}) {
    CHECK_THAT(fvi::alpha_renyi_divergence(q, p, 1 + h), WithinAbs(kl, 2 * slope1 * h + 1e-14 * kl));
    CHECK_THAT(fvi::alpha_renyi_divergence(q, p, 1 - h), WithinAbs(kl, 2 * slope1 * h + 1e-14 * kl));
    CHECK_THAT(fvi::alpha_renyi_divergence(q, p, h), WithinAbs(rkl, 2 * slope0 * h + 1e-14 * rkl));
    CHECK_THAT(fvi::alpha_renyi_divergence(q, p, -h), WithinAbs(rkl, 2 * slope0 * h + 1e-14 * rkl));
  }
  // Gradients at the limits are the KL gradients.
  const auto g1 = fvi::alpha_renyi_divergence_gradient(q, p, 1.0).params_gradient();
  const auto gk = fvi::kl_divergence_gradient(q, p).params_gradient();
  CHECK((g1 - gk).cwiseAbs().maxCoeff() <= 1e-14 * (1 + gk.cwiseAbs().maxCoeff()));
}

TEST_CASE("alpha-Renyi full covariance equals the closed form and the diagonal case", "[divergence][alpha_renyi]") {
  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.0));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 1.2, 2.5, 1.7));
  for (double alpha : {-0.1, 0.25, 0.5, 1.5, 2.5}) {
    CHECK_THAT(fvi::alpha_renyi_divergence(qc, pc, alpha), WithinRel(ar_direct(qc, pc, alpha), 1e-10));
  }
  CHECK_THAT(fvi::alpha_renyi_divergence(qc, pc, 1.0), WithinRel(fvi::kl_divergence(qc, pc), 1e-12));
  CHECK_THAT(fvi::alpha_renyi_divergence(qc, pc, 0.0), WithinRel(fvi::kl_divergence(pc, qc), 1e-12));
  // Diagonal covariances: full == mean-field.
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.5, -1), Eigen::Vector2d(0.7, 1.3));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0.5), Eigen::Vector2d(1.1, 0.9));
  const FullRankGaussian<> qf(q.mean(), q.sd().asDiagonal().toDenseMatrix());
  const FullRankGaussian<> pf(p.mean(), p.sd().asDiagonal().toDenseMatrix());
  for (double alpha : {0.0, 0.3, 1.0, 1.2}) {
    CHECK_THAT(fvi::alpha_renyi_divergence(qf, pf, alpha), WithinRel(fvi::alpha_renyi_divergence(q, p, alpha), 1e-12));
  }
  // 1-D full against the integral.
  const FullRankGaussian<> q1(Eigen::VectorXd::Constant(1, 0.4), Eigen::MatrixXd::Constant(1, 1, 0.6));
  const FullRankGaussian<> p1(Eigen::VectorXd::Constant(1, -0.5), Eigen::MatrixXd::Constant(1, 1, 1.1));
  const auto integral = fvi::test::renyi_integral(2.5, 0.4, 0.6, -0.5, 1.1);
  CHECK_THAT(fvi::alpha_renyi_divergence(q1, p1, 2.5),
             WithinAbs(std::log(integral.value) / (2.5 * 1.5), 10 * integral.error / (integral.value * 3.75) + 1e-13));
}

TEST_CASE("alpha-Renyi gradients match finite differences", "[divergence][alpha_renyi]") {
  const auto q = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0.5, -1, 2), Eigen::Vector3d(0.7, 0.6, 0.4));
  const auto p = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector3d(0, 0.5, 1.5), Eigen::Vector3d(1.1, 0.9, 0.8));
  const auto qc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.2, 0.1, -0.3), fvi::test::spd_matrix(3, 0.3, 1.0));
  const auto pc = FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0, 0.5, 0), fvi::test::spd_matrix(3, 1.2, 2.5, 1.7));
  // alpha < 0 needs alpha + (1 - alpha) r > 0 for the eigenvalues r of Sigma_p^{-1} Sigma_q (>= 0.12
  // for the full pair, >= 0.25 for the diagonal pair): -0.1 keeps both finite.
  for (double alpha : {-0.1, 0.0, 0.5, 1.0, 1.5, 2.5}) {
    auto r = check_gradient(
        [&](const Eigen::VectorXd& x) { return fvi::alpha_renyi_divergence(MeanFieldGaussian<>::from_params(x), p, alpha); },
        q.params(), fvi::alpha_renyi_divergence_gradient(q, p, alpha).params_gradient());
    INFO("alpha " << alpha << "\n" << r.report());
    CHECK(r.ok());
    const auto g = fvi::alpha_renyi_divergence_gradient(qc, pc, alpha);
    auto rf = check_gradient(
        [&](const Eigen::VectorXd& x) { return fvi::alpha_renyi_divergence(FullRankGaussian<>::from_params(x), pc, alpha); },
        qc.params(), qc.params_gradient_from_covariance(g.d_mean, g.d_cov));
    INFO("alpha " << alpha << " (full)\n" << rf.report());
    CHECK(rf.ok());
  }
}

TEST_CASE("alpha-Renyi: infinite divergence and bad alpha are reported", "[divergence][alpha_renyi]") {
  // alpha = 5 with q three times wider than p: 5 + (1 - 5) 9 < 0.
  CHECK_THROWS_WITH(fvi::alpha_renyi_divergence(mf1(0, 3), mf1(0, 1), 5.0),
                    Contains("not positive definite for alpha = 5, so the divergence is +infinity"));
  CHECK_THROWS_WITH(fvi::alpha_renyi_divergence(mf1(0.4, 0.6), mf1(-0.5, 1.1), -0.5), Contains("alpha = -0.5"));
  const FullRankGaussian<> q(Eigen::VectorXd::Zero(2), 3 * Eigen::MatrixXd::Identity(2, 2));
  const FullRankGaussian<> p(Eigen::VectorXd::Zero(2), Eigen::MatrixXd::Identity(2, 2));
  CHECK_THROWS_WITH(fvi::alpha_renyi_divergence(q, p, 5.0), Contains("divergence is +infinity"));
  CHECK_THROWS_WITH(fvi::alpha_renyi_divergence(mf1(0, 1), mf1(0, 1), std::nan("")),
                    "alpha_renyi_divergence: alpha is NaN");
}

TEMPLATE_TEST_CASE("alpha-Renyi compiles and agrees in float", "[divergence][alpha_renyi][float]", float, double) {
  using T = TestType;
  const auto qd = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0.5, -1), Eigen::Vector2d(0.7, 0.6));
  const auto pd = MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(0, 0.5), Eigen::Vector2d(1.1, 0.9));
  const MeanFieldGaussian<T> q(qd.mean().cast<T>(), qd.log_sd().cast<T>()), p(pd.mean().cast<T>(), pd.log_sd().cast<T>());
  const FullRankGaussian<T> qf(q.mean(), fvi::MatrixX<T>(q.sd().asDiagonal()));
  const FullRankGaussian<T> pf(p.mean(), fvi::MatrixX<T>(p.sd().asDiagonal()));
  const double tol = 200 * double(std::numeric_limits<T>::epsilon()) * 5;  // O(1) terms, ~100 roundings
  for (double alpha : {0.0, 0.5, 1.0, 2.5}) {
    const double ref = fvi::alpha_renyi_divergence(qd, pd, alpha);
    CHECK_THAT(double(fvi::alpha_renyi_divergence(q, p, T(alpha))), WithinAbs(ref, tol));
    CHECK_THAT(double(fvi::alpha_renyi_divergence(qf, pf, T(alpha))), WithinAbs(ref, tol));
  }
}

TEMPLATE_TEST_CASE("alpha-Renyi's gradient keeps its digits when q is next to p", "[divergence][alpha_renyi][float]",
                   float, double) {
  // Near the end of a client's optimisation q sits within a few ulp-scale steps of the cavity: the
  // gradient with respect to log sd is then (v_q - v_p) / sigma_a^2 up to a small term, a
  // difference of nearly equal numbers. Compare it with the same formula in long double, from the
  // same (rounded) inputs: a relative error of a few T roundings, not the 1 / delta amplification
  // that v_q - v_p computed as a difference of squares would give.
  using T = TestType;
  using L = long double;
  const T eps = std::numeric_limits<T>::epsilon();
  for (double delta : {1e-3, 300.0 * double(eps), 8.0 * double(eps)}) {
    for (double alpha : {0.3, 1.0, 2.5}) {
      const T p_mean = T(0.25), p_sd = T(0.7), q_sd = T(0.7 * (1 + delta)), q_mean = T(0.25 + 1e-3 * delta);
      const T p_log_sd = std::log(p_sd), q_log_sd = std::log(q_sd);
      T g_mean, g_log_sd;
      fvi::alpha_renyi_block<T>(1, &q_mean, &q_log_sd, &q_sd, &p_mean, &p_log_sd, &p_sd, T(alpha), &g_mean, &g_log_sd);
      const L vq = L(q_sd) * L(q_sd), vp = L(p_sd) * L(p_sd), va = L(alpha) * vp + (1 - L(alpha)) * vq;
      const L s = (L(q_mean) - L(p_mean)) / va;
      // v_q - v_p factored so that long double holds it to its own precision (its squares of
      // double inputs would each be rounded: 53 x 2 bits do not fit in 64).
      const L expected = (L(q_sd) - L(p_sd)) * (L(q_sd) + L(p_sd)) / va - (1 - L(alpha)) * vq * s * s;
      INFO("delta " << delta << " alpha " << alpha);
      CHECK(std::abs(L(g_log_sd) - expected) <= 8 * L(eps) * std::abs(expected));
      CHECK(std::abs(L(g_mean) - s) <= 8 * L(eps) * std::abs(s));
    }
  }
}
