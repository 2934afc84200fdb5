#include "fvi/family/reparam_expectation.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/family/full_rank_gaussian.h"
#include "fvi/rng.h"
#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;

TEST_CASE("reparameterised expectation of a quadratic matches the closed form within Monte Carlo error",
          "[family][reparam_expectation]") {
  // f(z) = a^T z + |z|^2 / 2: E f = a^T mu + (|mu|^2 + tr Sigma) / 2; grad_mu = a + mu, grad_Sigma = I/2.
  const auto q = fvi::FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(0.3, -0.5, 1.0), fvi::test::spd_matrix(3, 0.2, 1.0));
  const Eigen::Vector3d a(1.0, 2.0, -0.5);
  fvi::CounterRng rng(fvi::RngKey{8, 0, 0, 0});
  const int s = 40000;
  const Eigen::MatrixXd eps = rng.normal(3, s);
  auto f = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& v, Eigen::MatrixXd& g) {
    v = (a.transpose() * z).transpose() + 0.5 * z.colwise().squaredNorm().transpose();
    g = z.colwise() + a;
  };
  const auto est = fvi::reparam_expectation(q, eps, f);
  const double exact = a.dot(q.mean()) + 0.5 * (q.mean().squaredNorm() + q.covariance().trace());
  CHECK_THAT(est.value, WithinAbs(exact, 5 * est.standard_error));
  const Eigen::VectorXd exact_grad =
      q.params_gradient_from_covariance(a + q.mean(), 0.5 * Eigen::MatrixXd::Identity(3, 3));
  // Per-draw gradient terms are (z + a) eps^T etc., of size <= ~|z + a| |eps| ~ 10; SE <= 10 / sqrt(S).
  CHECK((est.params_gradient - exact_grad).cwiseAbs().maxCoeff() < 5 * 10 / std::sqrt(double(s)));
  CHECK_THROWS_WITH(fvi::reparam_expectation(q, Eigen::MatrixXd(3, 0), f), Contains("no draws"));
}
