// The PVI engine's pieces on generated kernels: robust losses through the kernel ABI (gradients
// against finite differences, values against the runtime's loss functions called directly), the
// quadratic probe, message packing, and one closed-form client update against the Gaussian
// posterior computed by hand.
#include <catch2/catch.hpp>

#include <random>

#include "fvi/engine/factor_loss.h"
#include "fvi/engine/pvi.h"
#include "fvi/message/codec.h"
#include "fvi/message/sizes.h"
#include "fvi/loss/likelihood_loss.h"
#include "support/gradient_check.h"
#include "abi_data.h"

extern "C" const fvi_model* fvi_model_robust_logreg(void);
extern "C" const fvi_model* fvi_model_linreg_conjugate(void);
extern "C" const fvi_model* fvi_model_clutter(void);
extern "C" const fvi_model* fvi_model_hier_logreg(void);

namespace {

using fvi::engine::BoundFactor;
using fvic::test::Data;
using fvic::test::factor_named;
using fvic::test::logreg_data;
using fvic::test::scalar;

}  // namespace

TEST_CASE("robust losses through the kernel: values match the runtime's, gradients match finite differences",
          "[engine]") {
  std::mt19937_64 rng(11);
  const int n = 7, d = 2, S = 3;
  Data data = logreg_data(n, d, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  CHECK(f.rows() == n);
  std::normal_distribution<double> normal;
  Eigen::MatrixXd theta(d + 1, S);
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = 2 * normal(rng);
  for (const fvi::LossSpec& loss : {fvi::LossSpec::nll(), fvi::LossSpec::generalized_cross_entropy(0.8),
                                    fvi::LossSpec::density_power(0.7), fvi::LossSpec::gamma(1.5)}) {
    INFO(loss.name());
    const double scale = 2.5;
    auto value = [&](const Eigen::VectorXd& flat) {
      const Eigen::MatrixXd t = Eigen::Map<const Eigen::MatrixXd>(flat.data(), d + 1, S);
      return fvi::engine::factor_loss(f, loss, 2, 4, {t}, scale, false).value;
    };
    // Independent value: the runtime's bernoulli_logit_loss on eta = x w + b, rows 2..5.
    double expected = 0;
    for (int s = 0; s < S; ++s) {
      Eigen::VectorXd eta = data.values[2].middleRows(2, 4) * theta.col(s).head(d);
      eta.array() += theta(d, s);
      Eigen::VectorXi y = data.values[3].middleRows(2, 4).col(0).cast<int>();
      expected += fvi::bernoulli_logit_loss(loss, y, eta);
    }
    expected *= scale / S;
    const Eigen::VectorXd flat = Eigen::Map<const Eigen::VectorXd>(theta.data(), theta.size());
    CHECK(value(flat) == Approx(expected).epsilon(1e-12));
    const auto l = fvi::engine::factor_loss(f, loss, 2, 4, {theta}, scale, true);
    const Eigen::VectorXd analytic = Eigen::Map<const Eigen::VectorXd>(l.gradients[0].data(), l.gradients[0].size());
    auto check = fvi::test::check_gradient(value, flat, analytic);
    INFO(check.report());
    CHECK(check.ok());
  }
}

TEST_CASE("robust losses through the mean-field kernels: gradients in the mean and sd match finite differences",
          "[engine]") {
  // With the noise key fixed the kernels' draws are a smooth function of (mean, sd), so the
  // chained loss (factor_loss_meanfield) must be its exact gradient.
  std::mt19937_64 rng(12);
  const int n = 9, d = 2, S = 4;
  Data data = logreg_data(n, d, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  std::normal_distribution<double> normal;
  Eigen::VectorXd mean(d + 1), sd(d + 1);
  for (int i = 0; i <= d; ++i) mean[i] = normal(rng), sd[i] = 0.3 + 0.5 * std::abs(normal(rng));
  for (const fvi::LossSpec& loss : {fvi::LossSpec::nll(), fvi::LossSpec::generalized_cross_entropy(0.8),
                                    fvi::LossSpec::density_power(0.7), fvi::LossSpec::gamma(1.5)}) {
    INFO(loss.name());
    auto value = [&](const Eigen::VectorXd& p) {
      return fvi::engine::factor_loss_meanfield<double>(f, loss, 1, 6, {p.head(d + 1)}, {p.tail(d + 1)}, S, 77, 1.7, false).value;
    };
    Eigen::VectorXd p(2 * (d + 1));
    p << mean, sd;
    const auto l = fvi::engine::factor_loss_meanfield<double>(f, loss, 1, 6, {mean}, {sd}, S, 77, 1.7, true);
    Eigen::VectorXd analytic(2 * (d + 1));
    analytic << l.gradient.d_means[0], l.gradient.d_sds[0];
    auto check = fvi::test::check_gradient(value, p, analytic);
    INFO(check.report());
    CHECK(check.ok());
  }
}

TEST_CASE("the density-power loss of a normal likelihood: a constant sigma argument gets a seed of its own",
          "[engine]") {
  // clutter: x ~ normal(theta, 1), the constant sigma after the parameter.
  const fvi_model& model = *fvi_model_clutter();
  Data data;
  Eigen::MatrixXd x(5, 1);
  x << -2, -1.5, 0.3, 4, 5;
  data.add("N", scalar(5));
  data.add("x", x);
  BoundFactor f(model, factor_named(model, "likelihood_x"), data.abi());
  REQUIRE(f.info().seed_count == 3);  // output, mu, sigma
  const fvi::LossSpec loss = fvi::LossSpec::density_power(0.5);
  Eigen::MatrixXd theta(1, 2);
  theta << -1.0, 0.5;
  auto value = [&](const Eigen::VectorXd& t) {
    return fvi::engine::factor_loss(f, loss, 0, -1, {Eigen::MatrixXd(t.transpose())}, 1.0, false).value;
  };
  double expected = 0;
  for (int s = 0; s < 2; ++s)
    expected += fvi::normal_loss<double>(loss, Eigen::VectorXd(x.col(0)), Eigen::VectorXd(Eigen::VectorXd::Constant(5, theta(0, s))), 1.0);
  const Eigen::VectorXd flat = theta.row(0).transpose();
  CHECK(value(flat) == Approx(expected / 2).epsilon(1e-12));
  const auto l = fvi::engine::factor_loss(f, loss, 0, -1, {theta}, 1.0, true);
  auto check = fvi::test::check_gradient(value, flat, l.gradients[0].row(0).transpose());
  INFO(check.report());
  CHECK(check.ok());
}

TEST_CASE("the quadratic probe recovers a Gaussian exactly and refuses anything else", "[engine]") {
  Eigen::MatrixXd a(3, 3);
  a << 2, 0.5, 0, 0.5, 1, -0.3, 0, -0.3, 3;
  const Eigen::Vector3d h(0.1, -2, 4);
  auto quadratic = [&](const Eigen::MatrixXd& t) { return Eigen::MatrixXd((-(a * t)).colwise() + h); };
  auto q = fvi::engine::probe_quadratic(3, false, 1, quadratic);
  REQUIRE(q);
  CHECK((q->full() - a).cwiseAbs().maxCoeff() < 1e-12);
  CHECK((q->h - h).cwiseAbs().maxCoeff() < 1e-12);
  // Probed as diagonal, the off-diagonal curvature is caught by the check at a random point.
  CHECK_FALSE(fvi::engine::probe_quadratic(3, true, 1, quadratic));
  auto cubic = [&](const Eigen::MatrixXd& t) { return Eigen::MatrixXd(-t.array().cube()); };
  CHECK_FALSE(fvi::engine::probe_quadratic(3, false, 1, cubic));
}

TEST_CASE("natural parameters survive the message format", "[engine]") {
  fvi::GaussianNatural<double> full{Eigen::Vector3d(1, 2, 3), Eigen::Matrix3d::Zero()};
  full.eta2 << -1, 0.2, 0.1, 0.2, -2, 0.3, 0.1, 0.3, -3;
  fvi::GaussianNatural<double> back;
  const std::vector<double> message = fvi::message::Writer().natural(full).done();
  CHECK(message.size() == 3 + 6);  // (D*D + 3*D)/2
  CHECK(fvi::message::gaussian_natural_size<int64_t>(3, true) == 9);  // what `fvic plan` prints
  fvi::message::Reader in(message, "q");
  in.natural(3, back, "eta");
  in.finish();
  CHECK(back.eta1 == full.eta1);
  CHECK(back.eta2 == full.eta2);
  fvi::DiagGaussianNatural<double> diag{Eigen::Vector2d(1, 2), Eigen::Vector2d(-1, -3)}, diag_back;
  const std::vector<double> diag_message = fvi::message::Writer().natural(diag).done();
  CHECK(diag_message == std::vector<double>{1, 2, -1, -3});
  CHECK(fvi::message::gaussian_natural_size<int64_t>(2, false) == 4);
  fvi::message::Reader diag_in(diag_message, "q");
  diag_in.natural(2, diag_back, "eta");
  diag_in.finish();
  CHECK(diag_back.eta1 == diag.eta1);
  CHECK(diag_back.eta2 == diag.eta2);
  // A short message, a non-finite value and values left over are refused, naming the field.
  fvi::message::Reader short_in(diag_message, "q");
  CHECK_THROWS_WITH(short_in.natural(3, diag_back, "eta"), Catch::Contains("q too short for eta"));
  std::vector<double> bad = diag_message;
  bad[2] = std::numeric_limits<double>::infinity();
  fvi::message::Reader bad_in(bad, "q");
  CHECK_THROWS_WITH(bad_in.natural(2, diag_back, "eta"), Catch::Contains("q: eta is not finite"));
  fvi::message::Reader long_in(message, "q");
  long_in.natural(2, diag_back, "eta");
  CHECK_THROWS_WITH(long_in.finish(), Catch::Contains("q has 5 extra values"));
}

TEST_CASE("a closed-form client update on linreg_conjugate is the Gaussian posterior computed by hand",
          "[engine]") {
  std::mt19937_64 rng(5);
  const int n = 9, d = 3;
  const double sigma = 0.7;
  Data data = fvic::test::linreg_data(n, d, sigma, rng);
  const Eigen::MatrixXd& x = data.values[3];
  const Eigen::MatrixXd& y = data.values[4];
  const fvi_model& model = *fvi_model_linreg_conjugate();
  using Q = fvi::FullRankGaussian<double>;
  fvi::engine::PviOptions options;
  options.damping = 1;
  fvi::engine::PviServer<Q> server(model, data.abi(), 1);
  // The prior w ~ normal(0, 1): precision I, eta1 0.
  CHECK((server.prior().precision() - Eigen::MatrixXd::Identity(d, d)).cwiseAbs().maxCoeff() < 1e-12);
  fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
  REQUIRE(client.closed_form());
  auto u = client.update(server.posterior(), 1);
  CHECK(u.steps == 0);
  server.apply(u.delta, 1);
  const Eigen::MatrixXd precision = Eigen::MatrixXd::Identity(d, d) + x.transpose() * x / (sigma * sigma);
  const Eigen::VectorXd mean = precision.ldlt().solve(x.transpose() * y.col(0) / (sigma * sigma));
  const Q q = server.distribution();
  CHECK((q.mean() - mean).cwiseAbs().maxCoeff() < 1e-10);
  CHECK((q.precision() - precision).cwiseAbs().maxCoeff() < 1e-9);
}

TEST_CASE("PVI refuses a model with local parameters, naming the factor", "[engine]") {
  // hier_logreg has local intercepts: its silo factors read the local group.
  const fvi_model& model = *fvi_model_hier_logreg();
  std::mt19937_64 rng(3);
  Data data = logreg_data(4, 2, rng);
  using Q = fvi::MeanFieldGaussian<double>;
  try {
    fvi::engine::PviClient<Q> client(model, data.abi(), 1, fvi::engine::PviOptions{});
    FAIL("accepted a model with local parameters");
  } catch (const fvi::engine::ModelError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("sfvi"));
  }
}

namespace {

// E[softplus(-s z)] for z ~ N(mu, sd^2) by Gauss-Hermite quadrature (nodes from the Golub-Welsch
// eigenproblem): E[-log sigmoid(s z)], one row's negative log likelihood under q.
double expected_softplus(double mu, double sd, double sign, const Eigen::VectorXd& nodes, const Eigen::VectorXd& weights) {
  double total = 0;
  for (Eigen::Index k = 0; k < nodes.size(); ++k) {
    const double z = -sign * (mu + std::sqrt(2.0) * sd * nodes[k]);
    total += weights[k] * (z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)));
  }
  return total / std::sqrt(3.14159265358979323846);
}

// Two predictors and an intercept: y_i ~ Bernoulli(logit^-1(w . x_i + b)), x_i ~ N(0, I).
void logistic_rows(int n, uint64_t seed, double w0, double w1, double b, Eigen::MatrixXd& x, Eigen::MatrixXd& y,
                   Data& data) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  x.resize(n, 2), y.resize(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) {
    const double eta = w0 * x(i, 0) + w1 * x(i, 1) + b;
    y(i, 0) = uniform(rng) < 1 / (1 + std::exp(-eta)) ? 1 : 0;
  }
  data.add("D", scalar(2));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);
}

// q after one client update of robust_logreg (PviOptions' defaults: loss nll, divergence kl) from
// the prior, and the steps it took.
fvi::MeanFieldGaussian<double> one_update(Data& data, fvi::engine::PviOptions options, long& steps) {
  using Q = fvi::MeanFieldGaussian<double>;
  const fvi_model& model = *fvi_model_robust_logreg();
  options.damping = 1;
  fvi::engine::PviServer<Q> server(model, data.abi(), 1);
  fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
  REQUIRE_FALSE(client.closed_form());
  auto u = client.update(server.posterior(), 1);
  steps = u.steps;
  server.apply(u.delta, 1);
  return server.distribution();
}

}  // namespace

TEST_CASE("an adaptive client update reaches the local optimum that a fixed 100 steps stop short of",
          "[engine]") {
  // robust_logreg with loss = nll and divergence = kl from its prior N(0, 10^2): one client
  // update from q_s = the prior is argmin E_q[-log p(y | w, b)] + KL(q : prior) over mean-field
  // q. The reference minimises that objective here, independently: each row's x w + b is
  // normal under q, so its expectation is a 1-D Gauss-Hermite sum, minimised by gradient descent
  // with central differences. The optimum's means are several units from 0, so 100 Adam steps of
  // lr 0.01 cannot reach them.
  const int n = 40, d = 2;
  Eigen::MatrixXd x, y;
  Data data;
  logistic_rows(n, 11, 3, 2, -3, x, y, data);

  // Gauss-Hermite, 40 nodes.
  const int k = 40;
  Eigen::MatrixXd jacobi = Eigen::MatrixXd::Zero(k, k);
  for (int i = 1; i < k; ++i) jacobi(i, i - 1) = jacobi(i - 1, i) = std::sqrt(i / 2.0);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(jacobi);
  const Eigen::VectorXd nodes = eig.eigenvalues();
  const Eigen::VectorXd weights =
      std::sqrt(3.14159265358979323846) * eig.eigenvectors().row(0).transpose().array().square().matrix();
  // q's parameters [mean w, mean b; log sd w, log sd b]: the model's order is w then b.
  const double prior_sd = 10;
  auto objective = [&](const Eigen::VectorXd& p) {
    const Eigen::VectorXd m = p.head(d + 1), s = p.tail(d + 1).array().exp();
    double f = 0;
    for (int i = 0; i < n; ++i) {
      double mu = m[d], var = s[d] * s[d];
      for (int j = 0; j < d; ++j) mu += x(i, j) * m[j], var += x(i, j) * x(i, j) * s[j] * s[j];
      f += expected_softplus(mu, std::sqrt(var), y(i, 0) > 0 ? 1 : -1, nodes, weights);
    }
    for (int j = 0; j <= d; ++j)  // KL(N(m, s^2) : N(0, prior_sd^2))
      f += std::log(prior_sd / s[j]) + (s[j] * s[j] + m[j] * m[j]) / (2 * prior_sd * prior_sd) - 0.5;
    return f;
  };
  Eigen::VectorXd p = Eigen::VectorXd::Zero(2 * (d + 1));
  double f = objective(p), step = 0.1;
  for (int it = 0; it < 20000 && step > 1e-12; ++it) {
    Eigen::VectorXd g(p.size());
    for (Eigen::Index j = 0; j < p.size(); ++j) {
      Eigen::VectorXd a = p, b = p;
      a[j] += 1e-6, b[j] -= 1e-6;
      g[j] = (objective(a) - objective(b)) / 2e-6;
    }
    if (g.norm() < 1e-8) break;
    for (;; step /= 2) {  // backtracking: accept the first step that lowers f
      const Eigen::VectorXd trial = p - step * g;
      const double ft = objective(trial);
      if (ft < f - 1e-4 * step * g.squaredNorm() || step < 1e-12) {
        p = trial, f = ft;
        break;
      }
    }
    step *= 2;
  }
  const Eigen::VectorXd ref_mean = p.head(d + 1), ref_sd = p.tail(d + 1).array().exp();
  REQUIRE(ref_mean.cwiseAbs().maxCoeff() > 2);  // far from the prior's mean: the test can tell

  using Q = fvi::MeanFieldGaussian<double>;
  auto fit = [&](bool adaptive, long& steps) {
    fvi::engine::PviOptions options;
    options.adaptive_steps = adaptive;
    return one_update(data, options, steps);
  };
  long steps = 0;
  const Q q = fit(true, steps);
  double worst = 0, worst_sd = 0;
  for (int j = 0; j <= d; ++j) {
    worst = std::max(worst, std::abs(q.mean()[j] - ref_mean[j]) / ref_sd[j]);
    worst_sd = std::max(worst_sd, std::abs(q.sd()[j] / ref_sd[j] - 1));
  }
  INFO("adaptive update: " << steps << " steps; means " << q.mean().transpose() << " vs " << ref_mean.transpose()
                           << "; sds " << q.sd().transpose() << " vs " << ref_sd.transpose());
  // The rule stops when the averaged means are stationary within tol_param = 0.05 q sds with a
  // standard error below 0.05 sds: 0.15 is three times that. The sds' Monte Carlo error is of the
  // same order relative to themselves.
  CHECK(worst < 0.15);
  CHECK(worst_sd < 0.15);
  CHECK(steps < 5000);  // it stopped by the rule, not at the cap
  const Q fixed = fit(false, steps);
  double fixed_worst = 0;
  for (int j = 0; j <= d; ++j) fixed_worst = std::max(fixed_worst, std::abs(fixed.mean()[j] - ref_mean[j]) / ref_sd[j]);
  INFO("100 fixed steps: means " << fixed.mean().transpose());
  CHECK(steps == 100);
  CHECK(fixed_worst > 0.5);
}

TEST_CASE("an adaptive client update over a large silo minibatches by default and reaches the all-rows optimum",
          "[engine]") {
  // 5,000 rows (over PviOptions::kFullBatchRows): without batch_size the adaptive update takes
  // minibatches of 1,024 rows, 5 per pass; with batch_size = 0 given it takes every row each step
  // (that path is checked against Gauss-Hermite above). Both optimise the same objective, so
  // their results must agree within the rule's tolerance: each average is within 0.05 q sd of its
  // optimum (and its sds within 5%) at two standard errors, so 0.15 between the two.
  Eigen::MatrixXd x, y;
  Data data;
  logistic_rows(5000, 12, 1.5, -1, 0.5, x, y, data);
  using Q = fvi::MeanFieldGaussian<double>;
  auto fit = [&](bool all_rows, long& steps) {
    fvi::engine::PviOptions options;
    options.adaptive_steps = true;
    options.batch_size_given = all_rows;  // batch_size stays 0: all rows
    fvi::engine::PviClient<Q> client(*fvi_model_robust_logreg(), data.abi(), 1, options);
    REQUIRE(client.batches() == (all_rows ? 1 : 5));
    return one_update(data, options, steps);
  };
  long steps_minibatch = 0, steps_all = 0;
  const Q minibatch = fit(false, steps_minibatch), all = fit(true, steps_all);
  double worst = 0, worst_sd = 0;
  for (int j = 0; j < 3; ++j) {
    worst = std::max(worst, std::abs(minibatch.mean()[j] - all.mean()[j]) / all.sd()[j]);
    worst_sd = std::max(worst_sd, std::abs(minibatch.sd()[j] / all.sd()[j] - 1));
  }
  INFO("minibatches: " << steps_minibatch << " steps, means " << minibatch.mean().transpose() << ", sds "
                       << minibatch.sd().transpose() << "; all rows: " << steps_all << " steps, means "
                       << all.mean().transpose() << ", sds " << all.sd().transpose());
  CHECK(worst < 0.15);
  CHECK(worst_sd < 0.15);
  CHECK(steps_minibatch < 5000);  // both stopped by the rule, not at the cap
  CHECK(steps_all < 5000);
}

TEST_CASE("a PVI client made anew for each update computes what one kept for the run computes", "[engine]") {
  // A silo asked in some rounds only (clients_per_round) remakes its client when asked and drops
  // it after (program/pvi_run.cpp): the server sends the silo's factor t_k and whether the update
  // is its first with each request, and nothing else carries over. Three rounds of robust_logreg
  // (stochastic updates, mean-field): the kept client's delta each round, and a fresh client's
  // given the kept one's factor and first-update flag, made without the closed-form probe (as the
  // host remakes a client that had no closed form), are equal bit for bit.
  using Q = fvi::MeanFieldGaussian<double>;
  const fvi_model& model = *fvi_model_robust_logreg();
  std::mt19937_64 rng(17);
  Data data = logreg_data(60, 3, rng);
  fvi::engine::PviOptions options;
  options.damping = 0.5;
  options.batch_size = 16;
  fvi::engine::PviServer<Q> server(model, data.abi(), 1);
  fvi::engine::PviClient<Q> kept(model, data.abi(), 1, options);
  REQUIRE_FALSE(kept.closed_form());
  fvi::engine::PviOptions remade = options;
  remade.probe_closed_form = false;
  for (uint32_t round = 1; round <= 3; ++round) {
    INFO("round " << round);
    fvi::engine::PviClient<Q> fresh(model, data.abi(), 1, remade);
    fresh.set_factor(kept.factor());
    fresh.set_first_update(kept.first_update());
    const auto want = kept.update(server.posterior(), round);
    const auto got = fresh.update(server.posterior(), round);
    CHECK(got.steps == want.steps);
    CHECK(got.delta.eta1 == want.delta.eta1);
    CHECK(got.delta.eta2 == want.delta.eta2);
    CHECK(got.delta.eta1.cwiseAbs().maxCoeff() > 0);  // an update that moved q
    server.apply(want.delta, 1);
  }
}

TEST_CASE("a full-rank client update on raw predictors reaches the local optimum", "[engine]") {
  // robust_logreg with loss = nll, divergence = kl and the full-rank family, on age in years and
  // income in dollars (correlated): the posterior's sds are 10^5 apart and the intercept lies on a
  // ridge with the slopes. One adaptive client update from q_s = the prior N(0, 10^2 I) must reach
  // argmin E_q[-log p(y | w, b)] + KL(q : prior) over full-rank q. The reference solves that
  // optimum's conditions independently (Opper and Archambeau 2009): with eta_i = x~_i^T theta
  // normal under q, E_q[d/dtheta] = 0 and Sigma^-1 = P0 + sum_i E[l_i''(eta_i)] x~_i x~_i^T, iterated
  // to a fixed point with each row's expectations by Gauss-Hermite.
  const int n = 300;
  std::mt19937_64 rng(29);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  Eigen::MatrixXd x(n, 2), y(n, 1);
  for (int i = 0; i < n; ++i) {
    const double age = 50 + 10 * normal(rng);
    x(i, 0) = age, x(i, 1) = 52000 + 600 * (age - 50) + 12000 * normal(rng);
    const double eta = 1 - 0.02 * x(i, 0) - 0.00003 * x(i, 1);
    y(i, 0) = uniform(rng) < 1 / (1 + std::exp(-eta)) ? 1 : 0;
  }
  Data data;
  data.add("D", scalar(2));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);

  const int k = 40;  // Gauss-Hermite nodes (Golub-Welsch)
  Eigen::MatrixXd jacobi = Eigen::MatrixXd::Zero(k, k);
  for (int i = 1; i < k; ++i) jacobi(i, i - 1) = jacobi(i - 1, i) = std::sqrt(i / 2.0);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(jacobi);
  const Eigen::VectorXd nodes = eig.eigenvalues();
  const Eigen::VectorXd weights = eig.eigenvectors().row(0).transpose().array().square().matrix();  // sum to 1
  Eigen::MatrixXd xt(n, 3);  // the model's order: w then b
  xt << x, Eigen::VectorXd::Ones(n);
  const Eigen::MatrixXd prior_precision = Eigen::MatrixXd::Identity(3, 3) / 100;
  Eigen::VectorXd m = Eigen::VectorXd::Zero(3);
  Eigen::MatrixXd cov = Eigen::MatrixXd::Identity(3, 3) * 100;
  // First Newton's method for the mode (each eta_i at its mean: from the prior, every eta_i is so
  // wide that E[l''] vanishes and the fixed point does not move), then the fixed point from there.
  for (int it = 0; it < 500; ++it) {
    const bool at_mode = it < 50;
    Eigen::VectorXd gradient = prior_precision * m;
    Eigen::MatrixXd precision = prior_precision;
    for (int i = 0; i < n; ++i) {
      const double mu = xt.row(i).dot(m);
      const double sd = at_mode ? 0 : std::sqrt(xt.row(i) * cov * xt.row(i).transpose());
      const double sign = y(i, 0) > 0 ? 1 : -1;
      double d1 = 0, d2 = 0;  // E[l'], E[l''] of l(eta) = softplus(-sign eta)
      for (int j = 0; j < k; ++j) {
        const double p = 1 / (1 + std::exp(-(mu + std::sqrt(2.0) * sd * nodes[j])));
        d1 += weights[j] * (sign > 0 ? p - 1 : p);
        d2 += weights[j] * p * (1 - p);
      }
      gradient += d1 * xt.row(i).transpose();
      precision += d2 * xt.row(i).transpose() * xt.row(i);
    }
    cov = precision.inverse();
    const Eigen::VectorXd move = cov * gradient;
    m -= move;
    if (!at_mode && (move.array() / cov.diagonal().array().sqrt()).abs().maxCoeff() < 1e-10) break;
  }
  const Eigen::VectorXd ref_sd = cov.diagonal().cwiseSqrt();
  REQUIRE(ref_sd.maxCoeff() / ref_sd.minCoeff() > 1e4);  // the scales the test is about

  using Q = fvi::FullRankGaussian<double>;
  const fvi_model& model = *fvi_model_robust_logreg();
  fvi::engine::PviOptions options;
  options.adaptive_steps = true;
  options.damping = 1;
  fvi::engine::PviServer<Q> server(model, data.abi(), 1);
  fvi::engine::PviClient<Q> client(model, data.abi(), 1, options);
  REQUIRE_FALSE(client.closed_form());
  const auto u = client.update(server.posterior(), 1);
  server.apply(u.delta, 1);
  const Q q = server.distribution();
  const Eigen::VectorXd sd = q.covariance().diagonal().cwiseSqrt();
  const double worst = ((q.mean() - m).array() / ref_sd.array()).abs().maxCoeff();
  const double worst_sd = (sd.array() / ref_sd.array() - 1).abs().maxCoeff();
  INFO(u.steps << " steps; means " << q.mean().transpose() << " vs " << m.transpose() << "; sds " << sd.transpose()
               << " vs " << ref_sd.transpose());
  // As the mean-field case above: the rule's tolerance, 0.05 q sds at two standard errors, thrice.
  CHECK(worst < 0.15);
  CHECK(worst_sd < 0.15);
  CHECK(u.steps < 5000);
}
