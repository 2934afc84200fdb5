// The sparse-GP engine (fvi/engine/sparse_gp.h) against independent computations: the weighted
// KL against its closed form and finite differences, the layout's chain rule, the evaluation and
// the predictive against Titsias's posterior written out densely, a silo's update against the
// conjugate optimum it cannot pass, and the server's refusals.
#include <cmath>
#include <random>

#include <catch2/catch.hpp>

#include "fvi/engine/sparse_gp.h"
#include "fvi/gp/inducing_posterior.h"
#include "support/gradient_check.h"
#include "support/reference.h"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using fvi::engine::DiagNatural;
using fvi::engine::SparseGpLayout;

VectorXd normals(int n, unsigned seed, double sd = 1) { return fvi::test::seeded_normals(n, seed, sd); }

// Z (M x 1) random in theta at 0, an isotropic lengthscale at M, the noise at M + 1, the scale fixed.
SparseGpLayout one_dimensional(int M) {
  SparseGpLayout L;
  L.inducing = M, L.dimensions = 1, L.dim = M + 2;
  L.z.offset = 0, L.z.count = M;
  L.log_scale.value = VectorXd::Constant(1, std::log(1.2));
  L.log_lengthscale.offset = M;
  L.log_noise_sd.offset = M + 1;
  return L;
}

// Everything fixed: Z, the kernel and the noise (theta has no coordinate).
SparseGpLayout all_fixed(const MatrixXd& z, double log_scale, double log_l, double log_sigma) {
  SparseGpLayout L;
  L.inducing = z.rows(), L.dimensions = z.cols(), L.dim = 0;
  L.z.value = Eigen::Map<const VectorXd>(z.data(), z.size());
  L.log_scale.value = VectorXd::Constant(1, log_scale);
  L.log_lengthscale.value = VectorXd::Constant(1, log_l);
  L.log_noise_sd.value = VectorXd::Constant(1, log_sigma);
  return L;
}

}  // namespace

TEST_CASE("the weighted diagonal KL equals its closed form and its gradient finite differences", "[gp]") {
  const VectorXd mean = normals(4, 1), log_sd = normals(4, 2, 0.3), w = (VectorXd(4) << 1, 0.1, 1, 0.5).finished();
  const VectorXd cm = normals(4, 3), cs = normals(4, 4, 0.3).array().exp();
  const DiagNatural cavity{cm.cwiseQuotient(cs.cwiseAbs2()), -0.5 * cs.cwiseAbs2().cwiseInverse()};
  double expected = 0;
  for (int i = 0; i < 4; ++i) {
    const double s = std::exp(log_sd[i]);
    expected += w[i] * (std::log(cs[i] / s) + (s * s + (mean[i] - cm[i]) * (mean[i] - cm[i])) / (2 * cs[i] * cs[i]) - 0.5);
  }
  VectorXd gm = VectorXd::Zero(4), gs = VectorXd::Zero(4);
  CHECK(std::abs(fvi::engine::weighted_kl(mean, log_sd, cavity, w, &gm, &gs) - expected) <= 1e-12);
  VectorXd x(8), analytic(8);
  x << mean, log_sd;
  analytic << gm, gs;
  auto f = [&](const VectorXd& v) { return fvi::engine::weighted_kl(v.head(4), v.tail(4), cavity, w, nullptr, nullptr); };
  const auto r = fvi::test::check_gradient(f, x, analytic);
  INFO(r.report());
  CHECK(r.ok());
}

TEST_CASE("the layout's chain rule: F at theta's draw, differentiated through the layout", "[gp]") {
  const int M = 4;
  const SparseGpLayout L = one_dimensional(M);
  REQUIRE(L.problem().empty());
  const MatrixXd x = normals(6, 5);
  const VectorXd y = normals(6, 6);
  auto own = fvi::gp::initial_dpo(normals(3, 7));
  own.targets = normals(3, 8);
  VectorXd theta(M + 2);
  theta << normals(M, 9), std::log(0.7), std::log(0.4);
  auto f = [&](const VectorXd& t) {
    return fvi::gp::local_free_energy(L.draw(t), {&x, &y, 1.0}, {}, own, 1e-6, nullptr).value();
  };
  const fvi::gp::GpDraw d = L.draw(theta);
  CHECK(d.kernel.log_lengthscales.size() == 1);
  CHECK(d.kernel.log_scale == std::log(1.2));
  fvi::gp::GpDrawAdjoint adj(d, own);
  fvi::gp::local_free_energy(d, {&x, &y, 1.0}, {}, own, 1e-6, &adj);
  VectorXd analytic = VectorXd::Zero(M + 2);
  L.add_adjoint(adj, &analytic);
  fvi::test::GradientCheckOptions options;
  options.noise = 1e-12;
  const auto r = fvi::test::check_gradient(f, theta, analytic, options);
  INFO(r.report());
  CHECK(r.ok());
  CHECK(L.kl_weights(0.1).head(M).isConstant(0.1));
  CHECK(L.kl_weights(0.1).tail(2).isOnes());
}

TEST_CASE("a silo's evaluation and the predictive equal Titsias's posterior written out", "[gp]") {
  const MatrixXd z = (MatrixXd(3, 1) << -1, 0, 1.2).finished();
  const double log_scale = std::log(1.1), log_l = std::log(0.8), sigma = 0.3;
  const SparseGpLayout L = all_fixed(z, log_scale, log_l, std::log(sigma));
  const MatrixXd x = normals(8, 10);
  const VectorXd y = normals(8, 11);
  fvi::engine::SparseGpOptions o;
  o.form = fvi::gp::FactorForm::Cpo;
  o.evaluation_draws = 3;  // every draw the same: nothing is random
  const fvi::engine::SparseGpClient client(L, x, y, o, 1);
  const auto conj = fvi::gp::conjugate_cpo_factor(L.draw(VectorXd()), {&x, &y, 1.0}, o.jitter);
  const DiagNatural empty{VectorXd(), VectorXd()};
  const auto e = client.evaluate(1, empty, {conj}, MatrixXd());

  // Dense: q(u) = N(mu, S) from Titsias; f(x_n) | q ~ N(k_n K^-1 mu, k_nn - Q_nn + k_n K^-1 S K^-1 k_n').
  fvi::gp::SeArdKernel k;
  k.log_scale = log_scale;
  k.log_lengthscales = VectorXd::Constant(1, log_l);
  const MatrixXd kzz = fvi::gp::inducing_covariance(z, k, o.jitter), kzx = fvi::gp::se_ard(z, x, k);
  const MatrixXd kinv = kzz.inverse();
  const MatrixXd s = kzz * (kzz + kzx * kzx.transpose() / (sigma * sigma)).inverse() * kzz;
  const VectorXd mu = s * kinv * kzx * y / (sigma * sigma);
  double ell = 0, lpd = 0;
  for (int n = 0; n < 8; ++n) {
    const VectorXd kn = kzx.col(n);
    const double m = kn.dot(kinv * mu), v = 1.21 - kn.dot(kinv * kn) + kn.dot(kinv * s * kinv * kn);
    ell += -0.5 * std::log(2 * M_PI * sigma * sigma) - ((y[n] - m) * (y[n] - m) + v) / (2 * sigma * sigma);
    lpd += fvi::test::normal_logpdf(y[n], m, std::sqrt(v + sigma * sigma));
  }
  CHECK(std::abs(e.expected_log_likelihood - ell) <= 1e-9 * std::abs(ell));
  CHECK(std::abs(e.predictive_log_density - lpd) <= 1e-9 * std::abs(lpd));
  const auto score = fvi::engine::predictive_score(L, MatrixXd(0, 2), {conj}, MatrixXd(), o.jitter, x, y);
  CHECK(std::abs(score.log_density - lpd / 8) <= 1e-9 * std::abs(lpd));
}

TEST_CASE("a silo's update climbs its free energy and never passes the conjugate optimum", "[gp]") {
  const MatrixXd z = (MatrixXd(4, 1) << -1.5, -0.5, 0.5, 1.5).finished();
  const SparseGpLayout L = all_fixed(z, 0, std::log(0.7), std::log(0.25));
  const MatrixXd x = normals(20, 12);
  const VectorXd y = x.col(0).array().sin().matrix() + normals(20, 13, 0.25);
  fvi::engine::SparseGpOptions o;
  o.form = fvi::gp::FactorForm::Cpo;
  o.local_steps = 2000;
  o.learning_rate = 0.02;
  const fvi::engine::SparseGpClient client(L, x, y, o, 1);
  const DiagNatural empty{VectorXd(), VectorXd()};
  const auto start = client.initial_factor();
  const auto u = client.update(1, empty, empty, start, {}, MatrixXd());
  const fvi::gp::GpDraw d = L.draw(VectorXd());
  auto F = [&](const fvi::gp::PseudoObservationFactor& f) {
    return fvi::gp::local_free_energy(d, {&x, &y, 1.0}, {}, f, o.jitter, nullptr).value();
  };
  const double before = F(start), after = F(u.pseudo), best = F(fvi::gp::conjugate_cpo_factor(d, {&x, &y, 1.0}, o.jitter));
  INFO("F: start " << before << ", after the update " << after << ", conjugate optimum " << best);
  CHECK(after > before);
  CHECK(after <= best + 1e-9 * std::abs(best));
}

TEST_CASE("a silo's factor over theta never has negative precision", "[gp]") {
  const int M = 3;
  const SparseGpLayout L = one_dimensional(M);
  const MatrixXd x = normals(10, 14);
  const VectorXd y = normals(10, 15);
  fvi::engine::SparseGpOptions o;
  o.local_steps = 50;
  const fvi::engine::SparseGpClient client(L, x, y, o, 2);
  // A cavity far narrower than the data want in some coordinates, far wider in others.
  const VectorXd precision = (VectorXd(M + 2) << 1e4, 1e-4, 1, 1e4, 1e-2).finished();
  const DiagNatural q{VectorXd::Zero(M + 2), -0.5 * precision};
  const DiagNatural own = DiagNatural::zero(M + 2);
  const auto u = client.update(1, q, own, client.initial_factor(), {}, MatrixXd());
  CHECK((u.factor.eta2.array() <= 0).all());
  CHECK(u.factor.eta1.allFinite());
}

TEST_CASE("CPO's first round fits the factor over u at the starting q(theta), which it hands back unchanged",
          "[gp]") {
  const int M = 3;
  const SparseGpLayout L = one_dimensional(M);
  const MatrixXd x = normals(12, 18);
  const VectorXd y = x.col(0).array().sin().matrix() + normals(12, 19, 0.2);
  fvi::engine::SparseGpOptions o;
  o.form = fvi::gp::FactorForm::Cpo;
  o.local_steps = 60;
  const fvi::engine::SparseGpClient client(L, x, y, o, 1);
  // q: the inducing inputs spread over the data, lengthscale and noise near 1 and 0.3, each
  // coordinate's sd 0.1; the silo's own factor a tenth of q's precision.
  VectorXd mean(M + 2), precision = VectorXd::Constant(M + 2, 100);
  mean << -1, 0, 1, 0, std::log(0.3);
  const DiagNatural q{mean.cwiseProduct(precision), -0.5 * precision};
  const DiagNatural own{q.eta1 / 10, q.eta2 / 10};
  const auto start = client.initial_factor();
  const auto first = client.update(1, q, own, start, {}, MatrixXd());
  CHECK((first.factor.eta1 - own.eta1).cwiseAbs().maxCoeff() <= 1e-9 * own.eta1.cwiseAbs().maxCoeff());
  CHECK((first.factor.eta2 - own.eta2).cwiseAbs().maxCoeff() <= 1e-9 * own.eta2.cwiseAbs().maxCoeff());
  CHECK((fvi::gp::flatten(first.pseudo) - fvi::gp::flatten(start)).cwiseAbs().maxCoeff() > 1e-3);
  // From the second round q(theta) is fitted too: the factor over theta moves.
  const auto second = client.update(2, q, own, first.pseudo, {}, MatrixXd());
  CHECK((second.factor.eta1 - own.eta1).cwiseAbs().maxCoeff() > 1e-3);
}

TEST_CASE("the server refuses malformed updates and keeps q = prior x factors", "[gp]") {
  const int M = 3;
  const SparseGpLayout L = one_dimensional(M);
  fvi::engine::SparseGpOptions o;
  o.pseudo_cap = 5;
  o.init_sd = 0;  // start at the prior: q is then the prior times the factors accepted
  const DiagNatural prior{VectorXd::Zero(M + 2), VectorXd::Constant(M + 2, -0.5)};
  fvi::engine::SparseGpServer server(L, prior, 2, o);
  fvi::engine::SparseGpUpdate good;
  good.factor = {VectorXd::Constant(M + 2, 0.3), VectorXd::Constant(M + 2, -0.2)};
  good.pseudo = fvi::gp::initial_dpo(normals(4, 16));
  CHECK(server.accept(0, good, 1, 1, 1).empty());
  CHECK((server.posterior().eta2 - (prior.eta2 + good.factor.eta2)).cwiseAbs().maxCoeff() == 0);
  auto bad = good;
  bad.factor.eta1[1] = std::nan("");
  CHECK_THAT(server.accept(1, bad, 1, 1, 1), Catch::Contains("non-finite"));
  bad = good;
  bad.pseudo = fvi::gp::initial_dpo(normals(6, 17));  // 6 > pseudo_cap
  CHECK_THAT(server.accept(1, bad, 1, 1, 1), Catch::Contains("wrong sizes"));
  bad = good;
  bad.factor.eta2.setConstant(0.8);  // q's precision 1 + 0.4 - 1.6 < 0
  CHECK_THAT(server.accept(1, bad, 1, 1, 1), Catch::Contains("improper"));
  CHECK(!server.pseudo(1));
  // The checkpoint holds everything: a restored server sends the same factors.
  fvi::engine::SparseGpServer restored(L, prior, 2, o);
  restored.restore(server.state());
  REQUIRE(restored.pseudo(0));
  CHECK(fvi::gp::flatten(*restored.pseudo(0)) == fvi::gp::flatten(*server.pseudo(0)));
  CHECK(restored.posterior().eta1 == server.posterior().eta1);
  std::vector<double> truncated = server.state();
  truncated.pop_back();
  CHECK_THROWS(restored.restore(truncated));
}

TEST_CASE("the starting q: sd init_sd, hyperparameters at the prior mean, the inducing inputs apart", "[gp]") {
  const int M = 4;
  const SparseGpLayout L = one_dimensional(M);
  fvi::engine::SparseGpOptions o;  // init_sd 0.1
  const VectorXd prior_mean = (VectorXd(M + 2) << 0, 0, 0, 0, 0.5, -1).finished();
  const DiagNatural prior{prior_mean, VectorXd::Constant(M + 2, -0.5)};  // sd 1
  const fvi::engine::SparseGpServer server(L, prior, 3, o);
  const auto q = fvi::to_mean_field(server.posterior());
  CHECK((q.sd().array() - 0.1).abs().maxCoeff() <= 1e-12);
  CHECK((q.mean().tail(2) - prior_mean.tail(2)).cwiseAbs().maxCoeff() <= 1e-12);
  for (int i = 0; i < M; ++i)
    for (int j = i + 1; j < M; ++j) CHECK(q.mean()[i] != q.mean()[j]);
  for (int k = 0; k < 3; ++k) CHECK((server.factor(k).eta2.array() <= 0).all());
}
