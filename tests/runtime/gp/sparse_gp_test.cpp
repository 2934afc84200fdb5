// The sparse-GP pieces of seed 003 against independent computations: the kernel against its
// formula, the DPO/CPO assembly of q(u | Z, beta) against dense inverses in u's own coordinates,
// the expected log-likelihood against Monte Carlo, every gradient against finite differences, and
// PVI with conjugate CPO factors against Titsias's collapsed posterior.
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/gp/inducing_posterior.h"
#include "fvi/gp/local_free_energy.h"
#include "fvi/gp/pseudo_observations.h"
#include "fvi/gp/se_ard_kernel.h"
#include "support/gradient_check.h"
#include "support/reference.h"

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using fvi::gp::FactorForm;
using fvi::gp::GpDraw;
using fvi::gp::PseudoObservationFactor;

MatrixXd uniform_points(int rows, int cols, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  MatrixXd m(rows, cols);
  for (int i = 0; i < m.size(); ++i) m.data()[i] = u(rng);
  return m;
}

VectorXd normal_vector(int n, unsigned seed, double sd = 1) { return fvi::test::seeded_normals(n, seed, sd); }

fvi::gp::SeArdKernel kernel_2d() {
  fvi::gp::SeArdKernel k;
  k.log_scale = std::log(1.3);
  k.log_lengthscales = VectorXd(2);
  k.log_lengthscales << std::log(0.9), std::log(1.6);
  return k;
}

// The kernel written out one pair at a time.
double se_ard_formula(const VectorXd& a, const VectorXd& b, const fvi::gp::SeArdKernel& k) {
  double s = 0;
  for (int d = 0; d < a.size(); ++d) {
    const double l = std::exp(k.log_lengthscales[d]);
    s += (a[d] - b[d]) * (a[d] - b[d]) / (l * l);
  }
  return std::exp(2 * k.log_scale) * std::exp(-0.5 * s);
}

MatrixXd dense_inverse(const MatrixXd& m) { return m.fullPivLu().inverse(); }

PseudoObservationFactor random_dpo(int rows, unsigned seed) {
  PseudoObservationFactor f = fvi::gp::initial_dpo(uniform_points(rows, 2, -2, 2, seed));
  f.targets = normal_vector(rows, seed + 1);
  f.log_noise = normal_vector(rows, seed + 2, 0.5).array() - 1.0;
  return f;
}

PseudoObservationFactor random_cpo(int m, unsigned seed) {
  PseudoObservationFactor f = fvi::gp::initial_cpo(m);
  f.h = normal_vector(m, seed);
  MatrixXd l = fvi::test::fixed_noise(m, m, seed).triangularView<Eigen::Lower>();
  l.diagonal() = l.diagonal().cwiseAbs().array() + 0.5;
  f.chol = 0.7 * l;
  return f;
}

// Factor t's natural parameters over u, computed densely: DPO P = K^-1 W' S^-1 W K^-1,
// h = K^-1 W' S^-1 m (spec 003 App. C, Eqs. 24-25); CPO P = L L', h.
void dense_naturals(const PseudoObservationFactor& f, const MatrixXd& z, const fvi::gp::SeArdKernel& k,
                    const MatrixXd& k_inv, MatrixXd* p, VectorXd* h) {
  if (f.form == FactorForm::Cpo) {
    const MatrixXd l = f.chol.triangularView<Eigen::Lower>();
    *p += l * l.transpose();
    *h += f.h;
    return;
  }
  MatrixXd w(f.inputs.rows(), z.rows());
  for (int i = 0; i < w.rows(); ++i)
    for (int j = 0; j < w.cols(); ++j) w(i, j) = se_ard_formula(f.inputs.row(i), z.row(j), k);
  const MatrixXd s_inv = (-f.log_noise).array().exp().matrix().asDiagonal();
  *p += k_inv * w.transpose() * s_inv * w * k_inv;
  *h += k_inv * w.transpose() * s_inv * f.targets;
}

double max_abs(const MatrixXd& m) { return m.cwiseAbs().maxCoeff(); }

}  // namespace

TEST_CASE("SE-ARD kernel and its reverse mode", "[gp]") {
  const auto k = kernel_2d();
  const MatrixXd a = uniform_points(4, 2, -2, 2, 1), b = uniform_points(3, 2, -2, 2, 2);
  const MatrixXd got = fvi::gp::se_ard(a, b, k);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(std::abs(got(i, j) - se_ard_formula(a.row(i), b.row(j), k)) <= 1e-15);
  CHECK_THROWS_WITH(fvi::gp::se_ard(uniform_points(2, 3, 0, 1, 3), b, k), Catch::Contains("3 dimensions"));

  // f = sum(C .* K(a, b)) for a fixed weight C: its gradient is the VJP with k_bar = C.
  const MatrixXd weight = fvi::test::fixed_noise(4, 3, 0.4);
  auto unpack = [&](const VectorXd& v, MatrixXd* aa, MatrixXd* bb, fvi::gp::SeArdKernel* kk) {
    *aa = Eigen::Map<const MatrixXd>(v.data(), 4, 2);
    *bb = Eigen::Map<const MatrixXd>(v.data() + 8, 3, 2);
    kk->log_scale = v[14];
    kk->log_lengthscales = v.segment(15, 2);
  };
  VectorXd x(17);
  x << Eigen::Map<const VectorXd>(a.data(), 8), Eigen::Map<const VectorXd>(b.data(), 6), k.log_scale,
      k.log_lengthscales;
  auto f = [&](const VectorXd& v) {
    MatrixXd aa, bb;
    fvi::gp::SeArdKernel kk;
    unpack(v, &aa, &bb, &kk);
    return fvi::gp::se_ard(aa, bb, kk).cwiseProduct(weight).sum();
  };
  MatrixXd a_bar = MatrixXd::Zero(4, 2), b_bar = MatrixXd::Zero(3, 2);
  fvi::gp::SeArdKernelAdjoint k_bar(2);
  fvi::gp::se_ard_vjp(a, b, k, got, weight, &a_bar, &b_bar, &k_bar);
  VectorXd analytic(17);
  analytic << Eigen::Map<const VectorXd>(a_bar.data(), 8), Eigen::Map<const VectorXd>(b_bar.data(), 6),
      k_bar.log_scale, k_bar.log_lengthscales;
  const auto result = fvi::test::check_gradient(f, x, analytic);
  INFO(result.report());
  CHECK(result.ok());
}

TEST_CASE("DPO and CPO assembly of q(u | Z, beta) equals the dense computation", "[gp]") {
  const auto k = kernel_2d();
  const int M = 6;
  const MatrixXd z = uniform_points(M, 2, -2, 2, 10);
  const double jitter = 1e-6;
  const std::vector<PseudoObservationFactor> factors = {random_dpo(4, 20), random_dpo(5, 30), random_dpo(3, 40),
                                                        random_cpo(M, 50)};
  std::vector<const PseudoObservationFactor*> all;
  for (const auto& f : factors) all.push_back(&f);
  const auto q = fvi::gp::inducing_posterior(z, k, jitter, all);

  MatrixXd kzz(M, M);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < M; ++j) kzz(i, j) = se_ard_formula(z.row(i), z.row(j), k) + (i == j ? jitter * 1.69 : 0);
  const MatrixXd k_inv = dense_inverse(kzz);
  MatrixXd precision = k_inv;  // the prior p(u) = N(0, K)
  VectorXd location = VectorXd::Zero(M);
  for (const auto& f : factors) dense_naturals(f, z, k, k_inv, &precision, &location);
  const MatrixXd cov = dense_inverse(precision);
  const VectorXd mean = cov * location;

  // Float error: the dense side multiplies by K^-1 twice; cond(K) here is ~1e3 (printed).
  INFO("cond(K) = " << kzz.norm() * k_inv.norm());
  CHECK(max_abs(q.natural_precision() - precision) <= 1e-10 * max_abs(precision));
  CHECK(max_abs(q.natural_location() - location) <= 1e-10 * max_abs(location));
  CHECK(max_abs(q.covariance() - cov) <= 1e-10 * max_abs(cov));
  CHECK(max_abs(q.mean() - mean) <= 1e-10 * max_abs(mean));

  // The cavity of the CPO silo: the same without its factor.
  all.pop_back();
  const auto cavity = fvi::gp::inducing_posterior(z, k, jitter, all);
  MatrixXd cavity_precision = precision;
  VectorXd cavity_location = location;
  cavity_precision -= MatrixXd(factors[3].chol.triangularView<Eigen::Lower>()) *
                      MatrixXd(factors[3].chol.triangularView<Eigen::Lower>()).transpose();
  cavity_location -= factors[3].h;
  CHECK(max_abs(cavity.natural_precision() - cavity_precision) <= 1e-10 * max_abs(cavity_precision));
  CHECK(max_abs(cavity.natural_location() - cavity_location) <= 1e-10 * max_abs(cavity_location));
}

TEST_CASE("DPO pseudo-observations at the data are Titsias's optimal q(u) (spec 003 §2.5)", "[gp]") {
  const auto k = kernel_2d();
  const int M = 5, N = 30;
  const MatrixXd z = uniform_points(M, 2, -2, 2, 11), x = uniform_points(N, 2, -2, 2, 12);
  const VectorXd y = normal_vector(N, 13);
  const double sigma = 0.4, jitter = 1e-6;
  PseudoObservationFactor f = fvi::gp::initial_dpo(x);
  f.targets = y;
  f.log_noise.setConstant(std::log(sigma * sigma));
  const auto q = fvi::gp::inducing_posterior(z, k, jitter, {&f});
  // Titsias (2009): Sigma = K (K + sigma^-2 K_zx K_xz)^-1 K, mu = sigma^-2 Sigma K^-1 K_zx y.
  const MatrixXd kzz = fvi::gp::inducing_covariance(z, k, jitter);
  const MatrixXd kzx = fvi::gp::se_ard(z, x, k);
  const MatrixXd sigma_u = kzz * dense_inverse(kzz + kzx * kzx.transpose() / (sigma * sigma)) * kzz;
  const VectorXd mu_u = sigma_u * dense_inverse(kzz) * kzx * y / (sigma * sigma);
  CHECK(max_abs(q.covariance() - sigma_u) <= 1e-10 * max_abs(sigma_u));
  CHECK(max_abs(q.mean() - mu_u) <= 1e-10 * max_abs(mu_u));
}

TEST_CASE("the closed-form expected log-likelihood agrees with Monte Carlo", "[gp]") {
  const auto k = kernel_2d();
  const int M = 5, N = 4;
  GpDraw draw{uniform_points(M, 2, -2, 2, 14), k, std::log(0.5)};
  const MatrixXd x = uniform_points(N, 2, -2, 2, 15);
  const VectorXd y = normal_vector(N, 16);
  const double jitter = 1e-6;
  const auto cavity_factor = random_dpo(4, 60);
  const auto own = random_dpo(3, 70);
  const auto fe = fvi::gp::local_free_energy(draw, {&x, &y, 1.0}, {&cavity_factor}, own, jitter, nullptr);

  // Draw u ~ q(u), then f(x) ~ p(f | u) = N(K_xz K^-1 u, K_xx - K_xz K^-1 K_zx) jointly over x.
  const auto q = fvi::gp::inducing_posterior(draw.z, k, jitter, {&cavity_factor, &own});
  const MatrixXd kzz = q.k_zz, kzx = fvi::gp::se_ard(draw.z, x, k), kxx = fvi::gp::se_ard(x, x, k);
  const MatrixXd proj = dense_inverse(kzz) * kzx;  // M x N
  const MatrixXd cond_cov = kxx - kzx.transpose() * proj + 1e-12 * MatrixXd::Identity(N, N);
  const MatrixXd lu = q.covariance().llt().matrixL(), lf = cond_cov.llt().matrixL();
  std::mt19937_64 rng(17);
  std::normal_distribution<double> std_normal;
  const int S = 200000;
  const double sigma = 0.5;
  double sum = 0, sum2 = 0;
  for (int s = 0; s < S; ++s) {
    VectorXd eu(M), ef(N);
    for (int i = 0; i < M; ++i) eu[i] = std_normal(rng);
    for (int i = 0; i < N; ++i) ef[i] = std_normal(rng);
    const VectorXd u = q.mean() + lu * eu;
    const VectorXd f = proj.transpose() * u + lf * ef;
    double l = 0;
    for (int n = 0; n < N; ++n) l += fvi::test::normal_logpdf(y[n], f[n], sigma);
    sum += l;
    sum2 += l * l;
  }
  const double mc = sum / S, se = std::sqrt((sum2 / S - mc * mc) / S);
  INFO("closed form " << fe.expected_log_likelihood << ", Monte Carlo " << mc << " +- " << se);
  CHECK(std::abs(fe.expected_log_likelihood - mc) <= 4 * se);
}

TEST_CASE("the KL to the cavity equals the dense Gaussian KL over u", "[gp]") {
  const auto k = kernel_2d();
  GpDraw draw{uniform_points(5, 2, -2, 2, 18), k, std::log(0.5)};
  const MatrixXd x = uniform_points(3, 2, -2, 2, 19);
  const VectorXd y = normal_vector(3, 20);
  const auto other = random_dpo(4, 80);
  const auto own = random_cpo(5, 90);
  const auto fe = fvi::gp::local_free_energy(draw, {&x, &y, 1.0}, {&other}, own, 1e-6, nullptr);
  const auto q = fvi::gp::inducing_posterior(draw.z, k, 1e-6, {&other, &own});
  const auto c = fvi::gp::inducing_posterior(draw.z, k, 1e-6, {&other});
  const MatrixXd s1 = q.covariance(), s0 = c.covariance(), s0_inv = dense_inverse(s0);
  const VectorXd dm = c.mean() - q.mean();
  const double kl = 0.5 * ((s0_inv * s1).trace() + dm.dot(s0_inv * dm) - 5 + std::log(s0.determinant()) -
                           std::log(s1.determinant()));
  CHECK(std::abs(fe.kl - kl) <= 1e-9 * std::max(1.0, std::abs(kl)));
}

TEST_CASE("the local free energy's gradient agrees with finite differences", "[gp]") {
  const auto k = kernel_2d();
  const int M = 4, N = 7;
  const MatrixXd x = uniform_points(N, 2, -2, 2, 21);
  const VectorXd y = normal_vector(N, 22);
  const double jitter = 1e-4;
  const auto other_dpo = random_dpo(3, 100);
  const auto other_cpo = random_cpo(M, 110);
  for (FactorForm form : {FactorForm::Dpo, FactorForm::Cpo}) {
    DYNAMIC_SECTION((form == FactorForm::Dpo ? "DPO" : "CPO")) {
      const PseudoObservationFactor own0 = form == FactorForm::Dpo ? random_dpo(3, 120) : random_cpo(M, 130);
      const GpDraw draw0{uniform_points(M, 2, -2, 2, 23), k, std::log(0.6)};
      const Eigen::Index nf = own0.parameter_count();
      auto unpack = [&](const VectorXd& v, GpDraw* d, PseudoObservationFactor* f) {
        *d = draw0;
        *f = own0;
        fvi::gp::unflatten(v.head(nf), f);
        d->z = Eigen::Map<const MatrixXd>(v.data() + nf, M, 2);
        d->kernel.log_scale = v[nf + 2 * M];
        d->kernel.log_lengthscales = v.segment(nf + 2 * M + 1, 2);
        d->log_noise_sd = v[nf + 2 * M + 3];
      };
      VectorXd x0(nf + 2 * M + 4);
      x0 << fvi::gp::flatten(own0), Eigen::Map<const VectorXd>(draw0.z.data(), 2 * M), draw0.kernel.log_scale,
          draw0.kernel.log_lengthscales, draw0.log_noise_sd;
      auto f = [&](const VectorXd& v) {
        GpDraw d;
        PseudoObservationFactor own;
        unpack(v, &d, &own);
        return fvi::gp::local_free_energy(d, {&x, &y, 2.5}, {&other_dpo, &other_cpo}, own, jitter, nullptr).value();
      };
      fvi::gp::GpDrawAdjoint adj(draw0, own0);
      fvi::gp::local_free_energy(draw0, {&x, &y, 2.5}, {&other_dpo, &other_cpo}, own0, jitter, &adj);
      VectorXd analytic(x0.size());
      analytic << adj.factor, Eigen::Map<const VectorXd>(adj.z.data(), 2 * M), adj.kernel.log_scale,
          adj.kernel.log_lengthscales, adj.log_noise_sd;
      fvi::test::GradientCheckOptions options;
      options.noise = 1e-12;  // Cholesky solves of matrices with condition ~1e4
      const auto result = fvi::test::check_gradient(f, x0, analytic, options);
      INFO(result.report());
      CHECK(result.ok());
    }
  }
}

TEST_CASE("sequential PVI with CPO factors reaches Titsias's collapsed posterior at fixed Z and beta", "[gp]") {
  const auto k = kernel_2d();
  const int M = 6, silos = 3;
  const double jitter = 1e-6;
  const GpDraw draw{uniform_points(M, 2, -2, 2, 30), k, std::log(0.3)};
  std::vector<MatrixXd> xs;
  std::vector<VectorXd> ys;
  for (int s = 0; s < silos; ++s) {
    xs.push_back(uniform_points(4 + 3 * s, 2, -2, 2, 31 + s));  // 4, 7, 10 rows: two with N_k >= M
    ys.push_back(xs.back().col(0).array().sin().matrix() + normal_vector(4 + 3 * s, 41 + s, 0.3));
  }
  std::vector<PseudoObservationFactor> factors(silos, fvi::gp::initial_cpo(M));
  for (int round = 0; round < 2; ++round)
    for (int s = 0; s < silos; ++s) factors[s] = fvi::gp::conjugate_cpo_factor(draw, {&xs[s], &ys[s], 1.0}, jitter);
  std::vector<const PseudoObservationFactor*> all;
  for (const auto& f : factors) all.push_back(&f);
  const auto q = fvi::gp::inducing_posterior(draw.z, k, jitter, all);

  // Titsias on the pooled data.
  MatrixXd x(4 + 7 + 10, 2);
  VectorXd y(21);
  x << xs[0], xs[1], xs[2];
  y << ys[0], ys[1], ys[2];
  const MatrixXd kzz = fvi::gp::inducing_covariance(draw.z, k, jitter), kzx = fvi::gp::se_ard(draw.z, x, k);
  const double s2 = 0.09;
  const MatrixXd sigma_u = kzz * dense_inverse(kzz + kzx * kzx.transpose() / s2) * kzz;
  const VectorXd mu_u = sigma_u * dense_inverse(kzz) * kzx * y / s2;
  CHECK(max_abs(q.covariance() - sigma_u) <= 1e-6 * max_abs(sigma_u));
  CHECK(max_abs(q.mean() - mu_u) <= 1e-6 * max_abs(mu_u));

  // And it is each silo's local optimum: F_k's gradient over its own factor vanishes there.
  for (int s = 0; s < silos; ++s) {
    std::vector<const PseudoObservationFactor*> cavity;
    for (int j = 0; j < silos; ++j)
      if (j != s) cavity.push_back(&factors[j]);
    fvi::gp::GpDrawAdjoint adj(draw, factors[s]);
    fvi::gp::local_free_energy(draw, {&xs[s], &ys[s], 1.0}, cavity, factors[s], jitter, &adj);
    INFO("silo " << s + 1 << ": |dF/dfactor| = " << adj.factor.cwiseAbs().maxCoeff());
    CHECK(adj.factor.cwiseAbs().maxCoeff() <= 1e-6 * std::max(1.0, fvi::gp::flatten(factors[s]).cwiseAbs().maxCoeff()));
  }
}

TEST_CASE("a minibatch's local free energy, scaled by N_k / B, averages over a partition to the full one", "[gp]") {
  // batch_size = B: each step scores B rows scaled by N_k / B. Over the N_k / B disjoint batches
  // of a partition (each equally likely under the silo's sampling of B rows without replacement,
  // by symmetry), the average of the estimates must be the full-data value and gradient exactly:
  // the data term is a sum over rows and the KL over u is counted once in every batch.
  const auto k = kernel_2d();
  const int M = 4, N = 12, B = 3;
  const MatrixXd x = uniform_points(N, 2, -2, 2, 51);
  const VectorXd y = normal_vector(N, 52);
  const double jitter = 1e-6;
  const auto other = random_dpo(3, 140);
  for (FactorForm form : {FactorForm::Dpo, FactorForm::Cpo}) {
    DYNAMIC_SECTION((form == FactorForm::Dpo ? "DPO" : "CPO")) {
      const PseudoObservationFactor own = form == FactorForm::Dpo ? random_dpo(3, 150) : random_cpo(M, 160);
      const GpDraw draw{uniform_points(M, 2, -2, 2, 53), k, std::log(0.4)};
      fvi::gp::GpDrawAdjoint full_adj(draw, own);
      const double full = fvi::gp::local_free_energy(draw, {&x, &y, 1.0}, {&other}, own, jitter, &full_adj).value();
      double average = 0;
      fvi::gp::GpDrawAdjoint batch_adj(draw, own);  // accumulates over the batches
      for (int b = 0; b < N / B; ++b) {
        const MatrixXd xb = x.middleRows(b * B, B);
        const VectorXd yb = y.segment(b * B, B);
        average += fvi::gp::local_free_energy(draw, {&xb, &yb, double(N) / B}, {&other}, own, jitter, &batch_adj)
                       .value() / (N / B);
      }
      CHECK(std::abs(average - full) <= 1e-10 * std::max(1.0, std::abs(full)));
      const double batches = N / B;
      CHECK(max_abs(batch_adj.factor / batches - full_adj.factor) <= 1e-9 * std::max(1.0, max_abs(full_adj.factor)));
      CHECK(max_abs(batch_adj.z / batches - full_adj.z) <= 1e-9 * std::max(1.0, max_abs(full_adj.z)));
      CHECK(std::abs(batch_adj.log_noise_sd / batches - full_adj.log_noise_sd) <=
            1e-9 * std::max(1.0, std::abs(full_adj.log_noise_sd)));
      CHECK(std::abs(batch_adj.kernel.log_scale / batches - full_adj.kernel.log_scale) <=
            1e-9 * std::max(1.0, std::abs(full_adj.kernel.log_scale)));
    }
  }
}
