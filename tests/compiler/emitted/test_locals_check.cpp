// The check of a silo's q(Z_L | Z_G) at the end of an SFVI run (SfviSilo::locals_khat): the Pareto
// k-hat of p(y_j, Z_L | Z_G) / q(Z_L | Z_G) over draws of the locals. On a Gaussian model whose
// locals' posterior given the globals is N(m, Sigma) in closed form, a q = N(m, c^2 Sigma) gives
// ratios whose right tail has shape k = 1 - 1/c^2 (w = exp(x^2 (1 - 1/c^2) / (2 c^2 s^2)) for x ~
// N(0, c^2 s^2) along each axis: P(w > t) ~ t^(-1 / (1 - 1/c^2))): k-hat must read poor for a q
// too narrow and good for one too wide.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "abi_data.h"
#include "test_models.h"
#include "fvi/engine/sfvi.h"

extern "C" const fvi_model* fvi_model_local_slopes(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
namespace locals_check_test {

using fvi::engine::SfviOptions;
using fvi::engine::SfviSilo;
using fvic::test::Data;
using fvic::test::scalar;
using Global = fvi::StructuredGlobalGaussian<double>;

TEST_CASE("locals check: k-hat of q(Z_L | Z_G) reads a q narrower than the locals' posterior as poor, a wider one "
          "as good",
          "[locals_khat]") {
  // local_slopes.fvi at center = off: y ~ N(a + b x, sigma), b ~ N(mu_b, 0.5), a ~ N(mu_a, tau),
  // locals (b, a). At mu_a = 1, mu_b = 0.5, tau = sigma = 1 their posterior is Gaussian with
  // precision Lambda = diag(1 / 0.25, 1) + X^T X (X's rows (x_i, 1)) and mean Lambda^-1 (prior
  // precision times prior mean + X^T y).
  const fvi_model& model = *fvi_model_local_slopes();
  std::mt19937_64 rng(41);
  std::normal_distribution<double> normal;
  const int N = 15, P = 4, M = 2, S = 8, K = 256;
  Eigen::MatrixXd x(N, 1), y(N, 1);
  Eigen::Matrix2d precision = Eigen::Vector2d(1 / 0.25, 1.0).asDiagonal();
  Eigen::Vector2d score(0.5 / 0.25, 1.0);
  for (int i = 0; i < N; ++i) {
    x(i, 0) = 10 + 2 * normal(rng);
    y(i, 0) = 1 + 0.5 * x(i, 0) + normal(rng);
    const Eigen::Vector2d row(x(i, 0), 1.0);
    precision += row * row.transpose();
    score += row * y(i, 0);
  }
  const Eigen::Matrix2d covariance = precision.inverse();
  const Eigen::Vector2d mean = covariance * score;
  Data data;
  data.add("N", scalar(N));
  data.add("x", x);
  data.add("y", y);
  // q(Z_G) at (mu_a, mu_b, log tau, log sigma) = (1, 0.5, 0, 0); eps_G = 0: every draw there.
  Eigen::VectorXd global_params(Global::num_params_for(P, false));
  global_params << 1.0, 0.5, 0.0, 0.0, Eigen::VectorXd::Constant(P, -3.0);
  const Global q = Global::from_params(global_params, P, false);
  const Eigen::MatrixXd eps_global = Eigen::MatrixXd::Zero(P, S);
  Eigen::MatrixXd eps_local(M, S * K);
  for (Eigen::Index i = 0; i < eps_local.size(); ++i) eps_local.data()[i] = normal(rng);

  SfviOptions options;
  options.correlated_local = true;  // full-rank q(Z_L | Z_G): the posterior's correlation of b and a
  options.local_samples = 1;
  options.local_samples_given = true;
  options.centre_local_slopes = false;
  SfviSilo silo(model, data.abi(), 1, options, false);
  auto khat_at = [&](double c) {  // q = N(mean, c^2 covariance), not coupled to Z_G
    const Eigen::Matrix2d lower = Eigen::Matrix2d(covariance.llt().matrixL()) * c;
    const Eigen::Vector2d sd = lower.diagonal();
    const Eigen::Matrix2d unit_lower = sd.cwiseInverse().asDiagonal() * lower;
    silo.set_local_params(
        fvi::StructuredLocalGaussian<double>(mean, Eigen::MatrixXd(), sd.array().log().matrix(), unit_lower, P).params());
    const SfviSilo::LocalsCheck check = silo.locals_khat(q, Eigen::VectorXd(), eps_global, eps_local);
    CHECK(check.elements == 1);  // read as a whole: one block
    CHECK(check.poor == (check.worst > 0.7 ? 1 : 0));
    return check.worst;
  };
  // k = 1 - 1 / c^2: 0.94 at c = 0.25, -0.56 at 1.6. The estimate from the 48 largest
  // of 256 ratios (loo's prior draws it toward 0.5 by 10 pseudo-draws) has sd about 0.1; the
  // median of 8 halves that.
  const double narrow = khat_at(0.25), wide = khat_at(1.6);
  INFO("k-hat at c = 0.25: " << narrow << ", at 1.6: " << wide);
  CHECK(narrow > 0.7);
  CHECK(wide < 0.5);

  // The importance-weighted bound's path (a structured silo, K = 16 by default, its locals read as
  // a whole) weighs the same draws: the same k-hat for the same diagonal q.
  SfviOptions structured;
  structured.local_samples_given = false;
  structured.centre_local_slopes = false;
  SfviSilo bound(model, data.abi(), 1, structured, false);
  REQUIRE(bound.local_samples() == 16);
  const Eigen::Vector2d log_sd(std::log(0.05), std::log(0.8));
  const Eigen::VectorXd diagonal = fvi::StructuredLocalGaussian<double>(mean, Eigen::MatrixXd(), log_sd, Eigen::MatrixXd(), P).params();
  bound.set_local_params(diagonal);
  SfviOptions plain = structured;
  plain.local_samples = 1;
  plain.local_samples_given = true;
  SfviSilo single(model, data.abi(), 1, plain, false);
  single.set_local_params(diagonal);
  const double by_bound = bound.locals_khat(q, Eigen::VectorXd(), eps_global, eps_local).worst;
  const double by_plain = single.locals_khat(q, Eigen::VectorXd(), eps_global, eps_local).worst;
  CHECK(std::isfinite(by_bound));
  CHECK(by_bound == Approx(by_plain).epsilon(1e-10));
}

}  // namespace locals_check_test
