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
#include "fvi/message/codec.h"
#include "fvi/program/pvi_rounds.h"
#include "fvi/rng.h"
#include "support/gradient_check.h"

extern "C" const fvi_model* fvi_model_multinomial_eb(void);
extern "C" const fvi_model* fvi_model_linreg_conjugate(void);

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

namespace {

using MeanField = fvi::MeanFieldGaussian<double>;

// A fedavg_fsvi (or other PVI-engine) client of linreg_conjugate (f(x) = x w, w ~ normal(0, 1))
// on one row, whose context points are therefore that row exactly (context_noise = 0), after
// one update from the prior: its function-space prior is then the prior.
struct OneRowSilo {
  Data data;
  Eigen::RowVectorXd x0;
  fvi::engine::PviServer<MeanField> server;
  fvi::engine::PviClient<MeanField> client;
  OneRowSilo(const std::string& method, const Eigen::RowVectorXd& x, long context_points, double beta)
      : data(make_data(x)),
        x0(x),
        server(*fvi_model_linreg_conjugate(), data.abi(), 1),
        client(*fvi_model_linreg_conjugate(), data.abi(), 1,
               fvi::engine::PviOptions::from(
                   fvi::engine::Settings({}, {"context_points=" + std::to_string(context_points), "context_noise=0",
                                              "local_steps=2", "function_kl_weight=" + std::to_string(beta)}),
                   1, method)) {
    // fedavg's factor q_s / prior, as the server sends it: the cavity is the prior.
    client.set_factor(fvi::natural_quotient(server.posterior(), server.prior()));
    client.update(server.posterior(), 1);
  }
  static Data make_data(const Eigen::RowVectorXd& x) {
    Data d;
    d.add("D", scalar(double(x.size())));
    d.add("sigma", scalar(0.7));
    d.add("N", scalar(1));
    d.add("x", Eigen::MatrixXd(x));
    d.add("y", Eigen::MatrixXd::Constant(1, 1, 0.4));
    return d;
  }
};

}  // namespace

TEST_CASE("FedAvg FSVI's objective: each silo's term adds beta times the function-space KL at its context points",
          "[function_space]") {
  // seed 001 Eq. 27, for a linear f: KL(N(x m, sum_d x_d^2 v_d) || N(0, sum_d x_d^2)) at the one
  // row, written out, times beta and the context points per step; the expected loss is the
  // weight-space fedavg client's at the same draws.
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal;
  const int D = 3;
  const long points = 3;
  const double beta = 0.5, jitter = fvi::engine::PviOptions::kFunctionSpaceJitter;
  Eigen::RowVectorXd x(D);
  for (int d = 0; d < D; ++d) x[d] = normal(rng);
  OneRowSilo fsvi("fedavg_fsvi", x, points, beta), plain("fedavg", x, points, beta), fedvem("fedvem_hsvi", x, points, beta);
  Eigen::VectorXd m(D), sd(D);
  for (int d = 0; d < D; ++d) m[d] = normal(rng), sd[d] = std::exp(0.5 * normal(rng));
  const auto q = fvi::to_natural(MeanField::from_mean_sd(m, sd));

  const double f_mean = x.dot(m), f_var = x.array().square().matrix().dot(sd.array().square().matrix()) + jitter;
  const double p_var = x.squaredNorm() + jitter;
  const double kl = 0.5 * (f_var / p_var + f_mean * f_mean / p_var - 1 + std::log(p_var) - std::log(f_var));
  const double loss = plain.client.evaluate(q, 2);
  CHECK_THAT(fsvi.client.evaluate(q, 2) - loss, Catch::Matchers::WithinRel(beta * double(points) * kl, 1e-9));
  // FedVEM HSVI evaluates its silos at the server's N(mu, sigma^2) itself: the KL term is 0.
  CHECK_THAT(fedvem.client.evaluate(q, 2), Catch::Matchers::WithinRel(loss, 1e-12));

  // What the silo's stopping rule watches: f's linearised mean and sd at every evaluation point.
  Eigen::VectorXd mean, sd_f;
  REQUIRE(fsvi.client.function_moments(q, mean, sd_f));
  REQUIRE(mean.size() == points * 4);  // kEvaluationContextSets sets of `points`
  CHECK((mean.array() - f_mean).abs().maxCoeff() < 1e-12);
  CHECK((sd_f.array() - std::sqrt(f_var)).abs().maxCoeff() < 1e-12);
  CHECK_FALSE(plain.client.function_moments(q, mean, sd_f));
}

TEST_CASE("a function-space silo says whether q's function at its context points has settled", "[function_space]") {
  // kPviSettled (silo_settling.h): settled after evaluations at one q; moving when q's function
  // mean walks 0.5 of its sd per round.
  Eigen::RowVectorXd x(2);
  x << 0.8, -1.3;
  OneRowSilo silo("fedavg_fsvi", x, 2, 1.0);
  fvi::program::PviSiloEndpoint<MeanField> endpoint(silo.client);
  const Eigen::VectorXd sd = Eigen::VectorXd::Constant(2, 0.3);
  const double f_sd = std::sqrt(x.squaredNorm() * 0.09);
  const auto evaluate = [&](uint32_t round, double shift) {
    const Eigen::VectorXd m = Eigen::Vector2d(0.2, 0.1) + shift * f_sd * x.transpose() / x.squaredNorm();
    endpoint.handle(round, fvi::program::Phase::kPviEvaluate,
                    fvi::message::Writer().natural(fvi::to_natural(MeanField::from_mean_sd(m, sd))).done());
  };
  const auto settled = [&] { return endpoint.handle(9, fvi::program::Phase::kPviSettled, {0.05}); };
  evaluate(1, 0), evaluate(2, 0);
  CHECK(settled()[0] == 0);  // two windows: too few to judge
  evaluate(3, 0), evaluate(4, 0);
  const fvi::program::Message still = settled();
  CHECK(still[0] == 1);
  CHECK(still[1] < 1e-9);
  for (uint32_t r = 5; r <= 10; ++r) evaluate(r, 0.5 * double(r - 4));
  const fvi::program::Message moving = settled();
  CHECK(moving[0] == 0);
  CHECK(moving[1] > 1);
  CHECK_THROWS(endpoint.handle(9, fvi::program::Phase::kPviSettled, {2.0}));  // tol_param outside (0, 1)
}
