#include "fvi/family/natural_gaussian.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "support/reference.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::DiagGaussianNatural;
using fvi::FullRankGaussian;
using fvi::GaussianNatural;
using fvi::MeanFieldGaussian;

namespace {
MeanFieldGaussian<> mf(double m0, double m1, double s0, double s1) {
  return MeanFieldGaussian<>::from_mean_sd(Eigen::Vector2d(m0, m1), Eigen::Vector2d(s0, s1));
}
FullRankGaussian<> fr(double phase) {
  return FullRankGaussian<>::from_mean_covariance(Eigen::Vector3d(phase, -1, 0.5),
                                                  fvi::test::spd_matrix(3, 0.5, 2.0, phase));
}
// log q1(z) + log q2(z) - log q12(z) must not depend on z if q12 is the normalised product.
template <typename Q, typename F>
void check_constant_difference(const Q& q12, F&& logsum, int dim) {
  const Eigen::MatrixXd z = fvi::test::fixed_noise(dim, 5, 0.2);
  const Eigen::VectorXd lq = q12.log_density(z);
  const double c0 = logsum(z.col(0)) - lq[0];
  for (int s = 1; s < 5; ++s) CHECK_THAT(logsum(z.col(s)) - lq[s], WithinAbs(c0, 1e-12 * (1 + std::abs(c0))));
}
}  // namespace

TEST_CASE("natural parameters round-trip (spec 000 §2.3: eta = (Sigma^-1 mu, -1/2 Sigma^-1))", "[family][natural]") {
  const auto q = mf(0.5, -2, 0.3, 1.7);
  const auto eta = fvi::to_natural(q);
  CHECK_THAT(eta.eta1[0], WithinRel(0.5 / 0.09, 1e-14));
  CHECK_THAT(eta.eta2[1], WithinRel(-0.5 / (1.7 * 1.7), 1e-14));
  const auto back = fvi::to_mean_field(eta);
  CHECK((back.mean() - q.mean()).cwiseAbs().maxCoeff() <= 1e-14);
  CHECK((back.log_sd() - q.log_sd()).cwiseAbs().maxCoeff() <= 1e-14);

  const auto f = fr(0.3);
  const auto eta_f = fvi::to_natural(f);
  const auto back_f = fvi::to_full_rank(eta_f);
  CHECK((back_f.mean() - f.mean()).cwiseAbs().maxCoeff() <= 1e-13);
  CHECK((back_f.covariance() - f.covariance()).cwiseAbs().maxCoeff() <= 1e-13);

  const fvi::LogNormal<> ln(Eigen::Vector2d(0.1, 0.2), Eigen::Vector2d(-1, 0.5));
  const auto back_ln = fvi::to_log_normal(fvi::to_natural(ln));
  CHECK((back_ln.params() - ln.params()).cwiseAbs().maxCoeff() <= 1e-14);
}

TEST_CASE("product and quotient of factors are sums and differences of natural parameters", "[family][natural]") {
  const auto q1 = mf(0.5, -2, 0.3, 1.7), q2 = mf(-1, 1, 0.8, 0.6);
  const auto q12 = fvi::to_mean_field(fvi::natural_product(fvi::to_natural(q1), fvi::to_natural(q2)));
  check_constant_difference(
      q12, [&](const Eigen::VectorXd& z) { return q1.log_density(z)[0] + q2.log_density(z)[0]; }, 2);
  // Quotient undoes the product.
  const auto q1_again =
      fvi::to_mean_field(fvi::natural_quotient(fvi::to_natural(q12), fvi::to_natural(q2)));
  CHECK((q1_again.params() - q1.params()).cwiseAbs().maxCoeff() <= 1e-13);

  const auto f1 = fr(0.3), f2 = fr(1.4);
  const auto f12 = fvi::to_full_rank(fvi::natural_product(fvi::to_natural(f1), fvi::to_natural(f2)));
  check_constant_difference(
      f12, [&](const Eigen::VectorXd& z) { return f1.log_density(z)[0] + f2.log_density(z)[0]; }, 3);

  // log_factor is the exponent: log q(z) - log_factor(z) is the log normaliser, constant in z.
  const auto eta = fvi::to_natural(f1);
  check_constant_difference(
      f1, [&](const Eigen::VectorXd& z) { return 2 * f1.log_density(z)[0] - eta.log_factor(z)[0]; }, 3);
}

TEST_CASE("PVI / FedGVI factor algebra (seed 000 Eqs. 3, 5, 6; Prop. 4.3)", "[family][natural]") {
  const int m = 3;
  const auto prior = fvi::to_natural(mf(0, 0, 2, 2));
  std::vector<DiagGaussianNatural<>> factors(m, DiagGaussianNatural<>::zero(2));
  auto server = prior;
  // One synchronous round: each client "fits" q_m; the server adds the damped deltas.
  const std::vector<MeanFieldGaussian<>> fitted = {mf(1, -1, 0.5, 0.7), mf(0.4, 0.2, 0.9, 0.4), mf(-0.3, 0.8, 0.6, 0.5)};
  const std::vector<double> tau = {0.2, 0.5, 0.3};  // sum to 1
  auto new_server = server;
  for (int k = 0; k < m; ++k) {
    const auto cav = fvi::cavity(server, factors[k]);
    CHECK((cav.eta1 - server.eta1).norm() == 0);  // zero factors in round 1
    const auto updated = fvi::damped_factor_update(factors[k], fvi::to_natural(fitted[k]), server, tau[k]);
    new_server = fvi::natural_product(new_server, fvi::natural_quotient(updated, factors[k]));
    factors[k] = updated;
  }
  // Prop. 4.3: with sum tau_m = 1 the server is the log opinion pool prod_m q_m^{tau_m}.
  auto pool = DiagGaussianNatural<>::zero(2);
  for (int k = 0; k < m; ++k) pool = fvi::natural_product(pool, fvi::natural_power(fvi::to_natural(fitted[k]), tau[k]));
  CHECK((new_server.eta1 - pool.eta1).cwiseAbs().maxCoeff() <= 1e-13);
  CHECK((new_server.eta2 - pool.eta2).cwiseAbs().maxCoeff() <= 1e-13);
  // Server = prior * prod factors (seed 000 Eq. 6).
  auto total = prior;
  for (const auto& f : factors) total = fvi::natural_product(total, f);
  CHECK((total.eta1 - new_server.eta1).cwiseAbs().maxCoeff() <= 1e-13);

  // tau = 1 and a single client: the new server is exactly the client's posterior.
  const auto one = fvi::damped_factor_update(DiagGaussianNatural<>::zero(2), fvi::to_natural(fitted[0]), prior, 1.0);
  const auto s1 = fvi::natural_product(prior, one);
  CHECK((fvi::to_mean_field(s1).params() - fitted[0].params()).cwiseAbs().maxCoeff() <= 1e-13);
}

TEST_CASE("invalid natural parameters give clear errors; improper factors are allowed in the algebra",
          "[family][natural]") {
  DiagGaussianNatural<> bad{Eigen::Vector2d(0, 0), Eigen::Vector2d(-1, 0.25)};
  CHECK_FALSE(fvi::is_valid(bad));
  CHECK_THROWS_WITH(fvi::to_mean_field(bad), "to_mean_field: precision (-2 eta2)[1] must be positive but is -0.5");
  // A factor with negative precision is a legal factor (spec 000 §2.3 [repo]): products work.
  const auto q = fvi::to_natural(mf(0, 0, 1, 1));
  const auto fine = fvi::natural_product(q, bad);  // precision 3 and 1.5: proper again
  CHECK(fvi::is_valid(fine));
  CHECK_NOTHROW(fvi::to_mean_field(fine));

  DiagGaussianNatural<> nan{Eigen::Vector2d(std::nan(""), 0), Eigen::Vector2d(-1, -1)};
  CHECK_THROWS_WITH(fvi::to_mean_field(nan), "to_mean_field: eta1[0] is NaN");

  GaussianNatural<> indefinite{Eigen::Vector2d(0, 0), Eigen::Matrix2d::Zero()};
  indefinite.eta2 << -0.5, -1, -1, -0.5;  // precision [[1, 2], [2, 1]]
  CHECK_FALSE(fvi::is_valid(indefinite));
  CHECK_THROWS_WITH(fvi::to_full_rank(indefinite), "to_full_rank: precision (-2 eta2) is not positive definite");
  CHECK_THROWS_WITH(fvi::damped_factor_update(q, q, q, 1.5), Contains("tau must be in [0, 1]"));
  CHECK_THROWS_WITH(fvi::damped_factor_update(q, q, q, 0.0), Contains("tau must be in (0, 1]"));
  CHECK_THROWS_WITH(fvi::natural_product(q, DiagGaussianNatural<>::zero(3)), Contains("dimension has size 3 but 2"));
}
