#include "fvi/family/structured_gaussian.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::StructuredGlobalGaussian;
using fvi::StructuredLocalGaussian;
using fvi::test::check_gradient;

namespace {

StructuredGlobalGaussian<> global_example() {
  Eigen::Vector3d mean(0.2, -0.5, 1.0), log_sd(-0.2, 0.3, 0.1);
  Eigen::Matrix3d l;
  l << 1, 0, 0, 0.4, 1, 0, -0.7, 0.25, 1;
  return StructuredGlobalGaussian<>(mean, log_sd, l);
}

StructuredLocalGaussian<> local_example(bool coupled, bool correlated, double phase = 0) {
  Eigen::Vector2d mean(0.7 + phase, -1.1);
  Eigen::Vector2d log_sd(-0.4, 0.15 + phase);
  Eigen::MatrixXd c;
  if (coupled) c = fvi::test::fixed_noise(2, 3, 0.6 + phase) * 0.5;
  Eigen::MatrixXd l;
  if (correlated) {
    l = Eigen::Matrix2d::Identity();
    l(1, 0) = -0.6 + phase;
  }
  return StructuredLocalGaussian<>(mean, c, log_sd, l, 3);
}

}  // namespace

TEST_CASE("structured global block: covariance, density and the mapping from a covariance",
          "[family][structured]") {
  const auto g = global_example();
  const Eigen::MatrixXd d_l = g.sd().asDiagonal() * g.unit_lower();
  const Eigen::MatrixXd cov = d_l * d_l.transpose();  // spec 002 §2.5: D_G L_G L_G^T D_G
  CHECK((g.covariance() - cov).cwiseAbs().maxCoeff() <= 1e-15 * 10);
  CHECK((g.marginal_sd() - cov.diagonal().cwiseSqrt()).cwiseAbs().maxCoeff() <= 1e-15 * 10);
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 4);
  const Eigen::MatrixXd z = g.sample(eps);
  for (int s = 0; s < 4; ++s) {
    const Eigen::VectorXd by_hand = g.mean() + g.sd().cwiseProduct(g.unit_lower() * eps.col(s));
    CHECK((z.col(s) - by_hand).cwiseAbs().maxCoeff() <= 1e-15 * 10);
    CHECK_THAT(g.log_density(z)[s], WithinRel(fvi::test::mvn_logpdf(z.col(s), g.mean(), cov), 1e-12));
  }
  const double pi = std::acos(-1.0);
  CHECK_THAT(g.entropy(), WithinRel(0.5 * std::log((2 * pi * std::exp(1.0) * cov).determinant()), 1e-13));

  const Eigen::MatrixXd target = fvi::test::spd_matrix(3, 0.3, 2.0);
  const auto back = StructuredGlobalGaussian<>::from_mean_covariance(g.mean(), target);
  CHECK((back.covariance() - target).cwiseAbs().maxCoeff() <= 1e-14 * 10);
  CHECK((back.unit_lower().diagonal().array() == 1).all());
  CHECK(back.unit_lower().triangularView<Eigen::StrictlyUpper>().toDenseMatrix().isZero(0));
}

TEST_CASE("structured family: joint density equals the joint Gaussian of spec 002 §2.5", "[family][structured]") {
  const auto g = global_example();
  const auto loc = local_example(true, true);
  const Eigen::MatrixXd sgg = g.covariance();
  const Eigen::MatrixXd c = loc.coupling();
  const Eigen::MatrixXd d_l = loc.sd().asDiagonal() * loc.unit_lower();
  const Eigen::MatrixXd sll = d_l * d_l.transpose();
  // Joint covariance of (Z_G, Z_L): Cov(Z_L, Z_G) = C Sigma_GG (the digest's dimensionally
  // corrected form).
  Eigen::MatrixXd joint(5, 5);
  joint << sgg, sgg * c.transpose(), c * sgg, c * sgg * c.transpose() + sll;
  Eigen::VectorXd joint_mean(5);
  joint_mean << g.mean(), loc.mean();
  CHECK((loc.marginal_covariance(g) - joint.bottomRightCorner(2, 2)).cwiseAbs().maxCoeff() <= 1e-14 * 10);

  const Eigen::MatrixXd eg = fvi::test::fixed_noise(3, 3, 0.1), el = fvi::test::fixed_noise(2, 3, 0.9);
  const Eigen::MatrixXd u = g.offset(eg);
  const Eigen::MatrixXd zg = g.sample(eg), zl = loc.sample(u, el);
  const Eigen::VectorXd lg = g.log_density(zg), ll = loc.log_density(zl, u);
  for (int s = 0; s < 3; ++s) {
    Eigen::VectorXd z(5);
    z << zg.col(s), zl.col(s);
    CHECK_THAT(lg[s] + ll[s], WithinRel(fvi::test::mvn_logpdf(z, joint_mean, joint), 1e-12));
  }
}

TEST_CASE("structured family: scores and VJPs match finite differences", "[family][structured]") {
  const auto g = global_example();
  const Eigen::MatrixXd eg = fvi::test::fixed_noise(3, 1, 0.3);
  const Eigen::VectorXd zg = g.sample(eg);
  auto r1 = check_gradient([&](const Eigen::VectorXd& z) { return g.log_density(z)[0]; }, zg, g.score(zg));
  INFO(r1.report());
  CHECK(r1.ok());

  const Eigen::MatrixXd eg4 = fvi::test::fixed_noise(3, 4, 0.7), cot = fvi::test::fixed_noise(3, 4, 1.3);
  for (bool correlated : {true, false}) {
    const auto gg = correlated ? g : StructuredGlobalGaussian<>(g.mean(), g.log_sd());
    auto push = [&](const Eigen::VectorXd& p) {
      return (StructuredGlobalGaussian<>::from_params(p, 3, correlated).sample(eg4).array() * cot.array()).sum();
    };
    auto r2 = check_gradient(push, gg.params(), gg.vjp(eg4, cot));
    INFO(r2.report());
    CHECK(r2.ok());
    auto push_offset = [&](const Eigen::VectorXd& p) {
      return (StructuredGlobalGaussian<>::from_params(p, 3, correlated).offset(eg4).array() * cot.array()).sum();
    };
    auto r3 = check_gradient(push_offset, gg.params(), gg.vjp_offset(eg4, cot));
    INFO(r3.report());
    CHECK(r3.ok());
  }

  for (bool coupled : {true, false}) {
    for (bool correlated : {true, false}) {
      const auto loc = local_example(coupled, correlated);
      const Eigen::MatrixXd u = g.offset(eg4), el = fvi::test::fixed_noise(2, 4, 2.2);
      const Eigen::MatrixXd cl = fvi::test::fixed_noise(2, 4, 3.1);
      auto push = [&](const Eigen::VectorXd& p) {
        const auto l2 = StructuredLocalGaussian<>::from_params(p, 2, 3, coupled, correlated);
        return (l2.sample(u, el).array() * cl.array()).sum();
      };
      auto r4 = check_gradient(push, loc.params(), loc.vjp(u, el, cl));
      INFO("coupled=" << coupled << " correlated=" << correlated << "\n" << r4.report());
      CHECK(r4.ok());
      // Round trip of the parameter vector.
      CHECK(StructuredLocalGaussian<>::from_params(loc.params(), 2, 3, coupled, correlated).params() == loc.params());

      // Scores of log q(Z_L | Z_G) with respect to Z_L and to Z_G (through u = Z_G - mu_G).
      const Eigen::VectorXd zl = loc.sample(u.col(0), el.col(0));
      const Eigen::VectorXd u0 = u.col(0);
      auto r5 = check_gradient([&](const Eigen::VectorXd& z) { return loc.log_density(z, u0)[0]; }, zl,
                               loc.score_local(zl, u0));
      INFO(r5.report());
      CHECK(r5.ok());
      auto r6 = check_gradient([&](const Eigen::VectorXd& uu) { return loc.log_density(zl, uu)[0]; }, u0,
                               loc.score_global(zl, u0));
      INFO(r6.report());
      CHECK(r6.ok());
    }
  }
}

TEST_CASE("SFVI gradients equal the centralised STL gradient (spec 002 §4.4 check 2)", "[family][structured][sfvi]") {
  // Two silos with structured local blocks; a toy joint with server prior log p(Z_G) and silo terms
  // log p(y_j, Z_Lj | Z_G) = -1/2 |Z_Lj - A_j tanh(Z_G) - b_j|^2 - 1/8 |Z_Lj|^2.
  const auto g = global_example();
  const auto l1 = local_example(true, true, 0.0);
  const auto l2 = local_example(true, false, 0.3);
  const Eigen::MatrixXd a1 = fvi::test::fixed_noise(2, 3, 4.0), a2 = fvi::test::fixed_noise(2, 3, 5.0);
  const Eigen::Vector2d b1(0.5, -0.2), b2(-1.0, 0.3);
  const int s = 3;
  const Eigen::MatrixXd eg = fvi::test::fixed_noise(3, s, 6.0);
  const Eigen::MatrixXd e1 = fvi::test::fixed_noise(2, s, 7.0), e2 = fvi::test::fixed_noise(2, s, 8.0);

  auto log_p_server = [](const Eigen::MatrixXd& zg) -> Eigen::VectorXd {
    return -0.5 * zg.colwise().squaredNorm().transpose() / 4.0;
  };
  auto log_p_silo = [](const Eigen::MatrixXd& zg, const Eigen::MatrixXd& zl, const Eigen::MatrixXd& a,
                       const Eigen::Vector2d& b) -> Eigen::VectorXd {
    const Eigen::MatrixXd r = (zl - a * zg.array().tanh().matrix()).colwise() - b;
    return -0.5 * r.colwise().squaredNorm().transpose() - 0.125 * zl.colwise().squaredNorm().transpose();
  };
  auto silo_grads = [](const Eigen::MatrixXd& zg, const Eigen::MatrixXd& zl, const Eigen::MatrixXd& a,
                       const Eigen::Vector2d& b, Eigen::MatrixXd& d_zg, Eigen::MatrixXd& d_zl) {
    const Eigen::MatrixXd r = (zl - a * zg.array().tanh().matrix()).colwise() - b;
    d_zl = -r - 0.25 * zl;
    d_zg = ((a.transpose() * r).array() * (1 - zg.array().tanh().square())).matrix();
  };

  // The centralised single-sample STL objective over all parameters, q's parameters frozen in log q.
  const Eigen::Index ng = g.num_params(), n1 = l1.num_params(), n2 = l2.num_params();
  Eigen::VectorXd theta(ng + n1 + n2);
  theta << g.params(), l1.params(), l2.params();
  auto objective = [&](const Eigen::VectorXd& p) {
    const auto gp = StructuredGlobalGaussian<>::from_params(p.head(ng), 3, true);
    const auto p1 = StructuredLocalGaussian<>::from_params(p.segment(ng, n1), 2, 3, true, true);
    const auto p2 = StructuredLocalGaussian<>::from_params(p.tail(n2), 2, 3, true, false);
    const Eigen::MatrixXd zg = gp.sample(eg);
    const Eigen::MatrixXd u = gp.offset(eg);
    const Eigen::MatrixXd z1 = p1.sample(u, e1), z2 = p2.sample(u, e2);
    // Frozen q: densities at the original parameters, evaluated at the moving draws.
    const Eigen::MatrixXd u_frozen = zg.colwise() - g.mean();
    const Eigen::VectorXd f = log_p_server(zg) - g.log_density(zg) + log_p_silo(zg, z1, a1, b1) -
                              l1.log_density(z1, u_frozen) + log_p_silo(zg, z2, a2, b2) -
                              l2.log_density(z2, u_frozen);
    return f.mean();
  };

  // Federated: server term (seed 002 Eq. 9 first term) + silo messages g_j (Eq. 10); local Eq. 11.
  const Eigen::MatrixXd zg = g.sample(eg), u = g.offset(eg);
  const Eigen::MatrixXd z1 = l1.sample(u, e1), z2 = l2.sample(u, e2);
  Eigen::MatrixXd dg1, dl1, dg2, dl2;
  silo_grads(zg, z1, a1, b1, dg1, dl1);
  silo_grads(zg, z2, a2, b2, dg2, dl2);
  const auto s1 = fvi::sfvi_silo_gradient(g, l1, eg, e1, dg1, dl1);
  const auto s2 = fvi::sfvi_silo_gradient(g, l2, eg, e2, dg2, dl2);
  const Eigen::MatrixXd grad_server = -zg / 4.0;
  Eigen::VectorXd federated(theta.size());
  federated << g.stl_gradient(eg, grad_server) + s1.global + s2.global, s1.local, s2.local;

  auto r = check_gradient(objective, theta, federated);
  INFO(r.report());
  CHECK(r.ok());
}

TEST_CASE("structured family rejects invalid blocks", "[family][structured]") {
  Eigen::Matrix2d not_unit;
  not_unit << 2, 0, 0.5, 1;
  CHECK_THROWS_WITH(StructuredGlobalGaussian<>(Eigen::Vector2d(0, 0), Eigen::Vector2d(0, 0), not_unit),
                    Contains("unit_lower must have a unit diagonal"));
  CHECK_THROWS_WITH(StructuredLocalGaussian<>(Eigen::Vector2d(0, 0), Eigen::MatrixXd::Zero(2, 4),
                                              Eigen::Vector2d(0, 0), Eigen::MatrixXd(), 3),
                    Contains("coupling cols has size 4 but 3"));
  Eigen::Matrix2d indefinite;
  indefinite << 1, 3, 3, 1;
  CHECK_THROWS_WITH(StructuredGlobalGaussian<>::from_mean_covariance(Eigen::Vector2d(0, 0), indefinite),
                    Contains("not positive definite"));
}

TEST_CASE("uncorrelated and uncoupled blocks store no dense matrices (ProdLDA-size blocks)", "[family][structured]") {
  // spec 002 §3.2: n_G = 42,000 global and ~132,000 local dimensions per silo. Dense identity or
  // zero coupling matrices would need 10^10 entries; the mean-field path must stay O(n + m).
  const Eigen::Index n = 42000, m = 132000;
  const StructuredGlobalGaussian<> g(Eigen::VectorXd::Zero(n), Eigen::VectorXd::Constant(n, -1.0));
  const StructuredLocalGaussian<> loc(Eigen::VectorXd::Ones(m), Eigen::MatrixXd(), Eigen::VectorXd::Zero(m), Eigen::MatrixXd(), n);
  const Eigen::MatrixXd eg = Eigen::MatrixXd::Constant(n, 1, 0.5), el = Eigen::MatrixXd::Constant(m, 1, -1.0);
  const Eigen::MatrixXd u = g.offset(eg);
  const Eigen::MatrixXd zl = loc.sample(u, el);
  CHECK(zl(7, 0) == 0.0);  // 1 + exp(0) * (-1)
  CHECK_THAT(g.log_density(g.sample(eg))[0], WithinRel(-0.5 * n * std::log(2 * std::acos(-1.0)) + n - 0.5 * n * 0.25, 1e-12));  // -n/2 log 2pi - sum log sigma - |eps|^2/2
  const auto grads = fvi::sfvi_silo_gradient(g, loc, eg, el, Eigen::MatrixXd::Zero(n, 1), Eigen::MatrixXd::Zero(m, 1));
  CHECK(grads.global.size() == 2 * n);
  CHECK(grads.local.size() == 2 * m);
}
