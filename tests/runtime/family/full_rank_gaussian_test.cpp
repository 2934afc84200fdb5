#include "fvi/family/full_rank_gaussian.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::FullRankGaussian;
using fvi::test::check_gradient;

namespace {
FullRankGaussian<> full_rank_example() {
  Eigen::Vector3d mean(0.3, -0.7, 1.2);
  return FullRankGaussian<>::from_mean_covariance(mean, fvi::test::spd_matrix(3, 0.4, 2.5));
}
}  // namespace

TEST_CASE("full-rank Gaussian: construction, parameters and moments", "[family][full_rank]") {
  const Eigen::MatrixXd cov = fvi::test::spd_matrix(3, 0.4, 2.5);
  const auto q = full_rank_example();
  CHECK((q.covariance() - cov).cwiseAbs().maxCoeff() <= 1e-14 * cov.cwiseAbs().maxCoeff() * 10);
  CHECK((q.precision() * cov - Eigen::MatrixXd::Identity(3, 3)).cwiseAbs().maxCoeff() <= 1e-13);
  CHECK(q.num_params() == 9);
  const auto back = FullRankGaussian<>::from_params(q.params());
  CHECK((back.chol() - q.chol()).cwiseAbs().maxCoeff() <= 1e-15 * 10);
  CHECK((back.mean() - q.mean()).cwiseAbs().maxCoeff() == 0);
  CHECK_THAT(q.log_det_covariance(), WithinRel(std::log(cov.determinant()), 1e-13));
}

TEST_CASE("full-rank Gaussian: density, entropy, score", "[family][full_rank]") {
  const auto q = full_rank_example();
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 5);
  const Eigen::MatrixXd z = q.sample(eps);
  const Eigen::VectorXd lq = q.log_density(z);
  const Eigen::MatrixXd cov = q.covariance();
  for (int s = 0; s < 5; ++s) {
    CHECK_THAT(lq[s], WithinRel(fvi::test::mvn_logpdf(z.col(s), q.mean(), cov), 1e-12));
  }
  const double pi = std::acos(-1.0);
  CHECK_THAT(q.entropy(), WithinRel(0.5 * std::log((2 * pi * std::exp(1.0) * cov).determinant()), 1e-13));

  const Eigen::VectorXd z0 = z.col(2);
  auto r = check_gradient([&](const Eigen::VectorXd& x) { return q.log_density(x)[0]; }, z0, q.score(z0));
  INFO(r.report());
  CHECK(r.ok());
  auto re = check_gradient([](const Eigen::VectorXd& p) { return FullRankGaussian<>::from_params(p).entropy(); },
                           q.params(), q.entropy_gradient());
  INFO(re.report());
  CHECK(re.ok());
}

TEST_CASE("full-rank Gaussian: vjp and covariance chain rule match finite differences", "[family][full_rank]") {
  const auto q = full_rank_example();
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 4, 0.5);
  const Eigen::MatrixXd cot = fvi::test::fixed_noise(3, 4, 1.5);
  auto pushforward = [&](const Eigen::VectorXd& p) {
    return (FullRankGaussian<>::from_params(p).sample(eps).array() * cot.array()).sum();
  };
  auto r1 = check_gradient(pushforward, q.params(), q.vjp(eps, cot));
  INFO(r1.report());
  CHECK(r1.ok());

  // f(Sigma) = sum_ij A_ij Sigma_ij + 0.5 a^T mu, for a non-symmetric A: df = tr(A^T dSigma).
  Eigen::Matrix3d a;
  a << 1, 2, -1, 0.5, -3, 0.2, 0.7, 1.1, 2;
  const Eigen::Vector3d lin(0.3, -0.2, 0.9);
  auto f = [&](const Eigen::VectorXd& p) {
    const auto g = FullRankGaussian<>::from_params(p);
    return (a.array() * g.covariance().array()).sum() + 0.5 * lin.dot(g.mean());
  };
  auto r2 = check_gradient(f, q.params(), q.params_gradient_from_covariance(0.5 * lin, a));
  INFO(r2.report());
  CHECK(r2.ok());
}

TEST_CASE("full-rank Gaussian: STL gradient", "[family][full_rank][stl]") {
  const auto q = full_rank_example();
  const Eigen::Vector3d mp(1, 0, -1);
  const Eigen::MatrixXd prec_p = fvi::test::spd_matrix(3, 0.5, 3.0, 1.9);
  const Eigen::MatrixXd eps = fvi::test::fixed_noise(3, 6, 0.8);
  auto objective = [&](const Eigen::VectorXd& p) {
    const Eigen::MatrixXd z = FullRankGaussian<>::from_params(p).sample(eps);
    const Eigen::MatrixXd d = z.colwise() - mp;
    const Eigen::VectorXd lp = -0.5 * (d.array() * (prec_p * d).array()).colwise().sum().transpose();
    return (lp - q.log_density(z)).mean();
  };
  const Eigen::MatrixXd z = q.sample(eps);
  const Eigen::MatrixXd glp = -prec_p * (z.colwise() - mp);
  auto r = check_gradient(objective, q.params(), q.stl_gradient(eps, glp));
  INFO(r.report());
  CHECK(r.ok());
  // Sticking the landing.
  CHECK(q.stl_gradient(eps, q.score(z)).cwiseAbs().maxCoeff() <= 1e-13);
}

TEST_CASE("full-rank Gaussian rejects invalid input", "[family][full_rank]") {
  Eigen::Matrix2d not_pd;
  not_pd << 1, 2, 2, 1;
  CHECK_THROWS_WITH(FullRankGaussian<>::from_mean_covariance(Eigen::Vector2d(0, 0), not_pd),
                    "FullRankGaussian::from_mean_covariance: covariance is not positive definite");
  Eigen::Matrix2d upper;
  upper << 1, 0.5, 0, 1;
  CHECK_THROWS_WITH(FullRankGaussian<>(Eigen::Vector2d(0, 0), upper), Contains("chol is not lower triangular"));
  Eigen::Matrix2d negdiag;
  negdiag << 1, 0, 0.5, -1;
  CHECK_THROWS_WITH(FullRankGaussian<>(Eigen::Vector2d(0, 0), negdiag), Contains("non-positive diagonal"));
  CHECK_THROWS_WITH(FullRankGaussian<>::from_params(Eigen::VectorXd::Zero(7)), Contains("not D + D(D+1)/2"));
  CHECK_THROWS_WITH(FullRankGaussian<>(Eigen::Vector2d(0, std::nan("")), Eigen::Matrix2d::Identity()),
                    "FullRankGaussian: mean[1] is NaN");
}
