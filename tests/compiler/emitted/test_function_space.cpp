// Seed 001's linearised function-space KL through generated kernels: for a model linear in its
// weights (multinomial_eb's categorical_logit(x * W + b)) the linearisation is exact, so f(x; m)
// and J_m(x) read from the kernel (fvi/engine/function_space.h) must equal the design written
// out, and the KL must equal the closed-form Gaussian KL in function space between
// N(X_r m, X_r Sigma X_r') and N(X_r m0, X_r Sigma0 X_r').
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "abi_data.h"
#include "fvi/engine/function_space.h"
#include "fvi/engine/pvi.h"
#include "fvi/engine/settings.h"
#include "fvi/rng.h"
#include "support/gradient_check.h"

extern "C" const fvi_model* fvi_model_multinomial_eb(void);

using fvi::engine::BoundFactor;
using fvic::test::Data;
using fvic::test::factor_named;
using fvic::test::scalar;

namespace {

// The data of multinomial_eb's silo: n rows of D covariates and labels.
struct SiloData {
  Data data;
  Eigen::MatrixXd x, y;
  SiloData(int n, int D, int K, std::mt19937_64& rng) : x(n, D), y(n, 1) {
    std::normal_distribution<double> normal;
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    for (int i = 0; i < n; ++i) y(i, 0) = 1 + i % K;
    data.add("D", scalar(D));
    data.add("K", scalar(K));
    data.add("N", scalar(n));
    data.add("x", x);
    data.add("y", y);
  }
};

}  // namespace

TEST_CASE("function-space KL of a linear model equals the closed-form Gaussian KL in function space",
          "[function_space]") {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  const int n = 5, D = 3, K = 4, P = D * K + K;
  SiloData silo(n, D, K, rng);
  const Eigen::MatrixXd& x = silo.x;
  const fvi_model& model = *fvi_model_multinomial_eb();
  BoundFactor likelihood(model, factor_named(model, "likelihood_y"), silo.data.abi());

  // The weights [W (D x K, column-major); b (K)] of q and of the prior.
  Eigen::VectorXd m(P), v(P), m0 = Eigen::VectorXd::Zero(P), v0(P);
  for (int i = 0; i < P; ++i) m[i] = normal(rng), v[i] = std::exp(normal(rng)), v0[i] = std::exp(normal(rng));

  for (int row = 0; row < n; ++row) {
    // The design of row r: f_c = sum_d x_rd W_dc + b_c, so J[c, d + c D] = x_rd and J[c, D K + c] = 1.
    Eigen::MatrixXd X = Eigen::MatrixXd::Zero(K, P);
    for (int c = 0; c < K; ++c) {
      for (int d = 0; d < D; ++d) X(c, d + c * D) = x(row, d);
      X(c, D * K + c) = 1;
    }
    const fvi::engine::LinearisedGaussian q = fvi::engine::linearise(likelihood, row, m, v);
    const fvi::engine::LinearisedGaussian p = fvi::engine::linearise(likelihood, row, m0, v0);
    CHECK((q.mean - X * m).cwiseAbs().maxCoeff() < 1e-12);
    CHECK((q.jacobian - X).cwiseAbs().maxCoeff() < 1e-12);
    CHECK((p.jacobian - X).cwiseAbs().maxCoeff() < 1e-12);

    // KL(N(X m, X V X') || N(X m0, X V0 X')), each matrix formed from the design alone.
    const Eigen::MatrixXd S1 = X * v.asDiagonal() * X.transpose(), S2 = X * v0.asDiagonal() * X.transpose();
    const Eigen::MatrixXd S2_inv = S2.inverse();
    const Eigen::VectorXd diff = X * m0 - X * m;
    const double want = 0.5 * ((S2_inv * S1).trace() + diff.dot(S2_inv * diff) - K + std::log(S2.determinant()) -
                               std::log(S1.determinant()));
    CHECK_THAT(fvi::engine::linearised_kl(q, p, 0).value, Catch::Matchers::WithinRel(want, 1e-9));
  }
}


TEST_CASE("context points are the silo's rows plus uniform noise, and the KL sums over them", "[function_space]") {
  std::mt19937_64 rng(33);
  std::normal_distribution<double> normal;
  const int n = 7, D = 3, K = 4, P = D * K + K;
  SiloData silo(n, D, K, rng);
  const fvi_model& model = *fvi_model_multinomial_eb();
  const int factor = factor_named(model, "likelihood_y");
  const double noise = 0.05;
  fvi::engine::ContextPoints context(model, factor, silo.data.abi(), n, 3, noise);
  CHECK(context.row_variables() == std::vector<std::string>{"x", "y"});
  fvi::CounterRng draws(fvi::RngKey{5, 1, 0, fvi::rng_stream::kContextPoints});
  Eigen::VectorXd m(P), v(P), m0(P), v0(P);
  for (int i = 0; i < P; ++i)
    m[i] = normal(rng), v[i] = std::exp(normal(rng)), m0[i] = 0.3 * normal(rng), v0[i] = std::exp(normal(rng));

  BoundFactor& points = context.draw(draws);
  REQUIRE(points.rows() == 3);
  double moved = 0;
  for (int row = 0; row < 3; ++row) {
    // For a linear model J[c, d + c D] is the point's covariate d: the nearest row of x must be
    // within the noise in every covariate.
    const fvi::engine::LinearisedGaussian q = fvi::engine::linearise(points, row, m, v);
    const Eigen::RowVectorXd point = q.jacobian.row(0).head(D);
    Eigen::Index nearest = 0;
    const double distance = (silo.x.rowwise() - point).cwiseAbs().rowwise().maxCoeff().minCoeff(&nearest);
    CHECK(distance <= noise);
    moved = std::max(moved, distance);
  }
  CHECK(moved > 0);  // the noise is there (P(every |u| < 1e-12) is nil)

  // The sum over the points and its gradient: the KL summed by hand, and finite differences in
  // every mean and variance at once (J does not depend on m for a linear model, so d_mean is exact).
  const fvi::engine::WeightSpaceGradient kl = fvi::engine::function_space_kl(points, m, v, m0, v0, 0);
  const auto total = [&](const Eigen::VectorXd& mean, const Eigen::VectorXd& variance) {
    double sum = 0;
    for (int row = 0; row < 3; ++row)
      sum += fvi::engine::linearised_kl(fvi::engine::linearise(points, row, mean, variance),
                                        fvi::engine::linearise(points, row, m0, v0), 0)
                 .value;
    return sum;
  };
  CHECK_THAT(kl.value, Catch::Matchers::WithinRel(total(m, v), 1e-12));
  Eigen::VectorXd at(2 * P), analytic(2 * P);
  at << m, v;
  analytic << kl.d_mean, kl.d_variance;
  const auto gradient = fvi::test::check_gradient(
      [&](const Eigen::VectorXd& x) { return total(x.head(P), x.tail(P)); }, at, analytic);
  INFO(gradient.report());
  CHECK(gradient.ok());

  // The same seed draws the same points; the next draw others.
  fvi::CounterRng again(fvi::RngKey{5, 1, 0, fvi::rng_stream::kContextPoints});
  const Eigen::VectorXd first = fvi::engine::linearise(context.draw(again), 0, m, v).jacobian.row(0);
  fvi::CounterRng replay(fvi::RngKey{5, 1, 0, fvi::rng_stream::kContextPoints});
  CHECK(fvi::engine::linearise(context.draw(replay), 0, m, v).jacobian.row(0) == first.transpose());
}

TEST_CASE("context_points below 1, negative context_noise and score matching are refused, naming the key", "[function_space]") {
  // The keys' one check (stdlib/inference_keys.cpp), for the model's block and for --set alike.
  CHECK_THROWS_WITH(fvi::engine::Settings({}, {"context_points=0"}), Catch::Matchers::Contains("context_points = 0"));
  CHECK_THROWS_WITH(fvi::engine::Settings({{"context_noise", "-1"}}, {}), Catch::Matchers::Contains("context_noise = -1"));
  const fvi::engine::PviOptions options =
      fvi::engine::PviOptions::from(fvi::engine::Settings({}, {"context_points=4"}), 2, "fedavg_fsvi");
  CHECK(options.context_points == 4);
  CHECK(options.function_space);
  // Score matching's closed-form silo update has no function-space term: refused, not dropped.
  CHECK_THROWS_WITH(fvi::engine::PviOptions::from(fvi::engine::Settings({}, {"loss=score_matching(se, 1)"}), 2,
                                                  "fedavg_fsvi"),
                    Catch::Matchers::Contains("cannot use loss = score_matching"));
}
