// Intercepts fitted at the silos' centred data (compiler: analysis/centring.h; engine:
// fvi/engine/centring.h), on the compiled multinomial_eb: a silo's log likelihood at the centred
// x and the fit's draws equals the written model's at the raw x and the written draws, and the
// server's term at the written globals has the gradient its estimate has in the fit's coordinates.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>

#include "abi_data.h"
#include "test_models.h"
#include "fvi/engine/centring.h"
#include "fvi/engine/sfvi.h"
#include "fvi/program/federation.h"
#include "fvi/program/roles.h"
#include "fvi/program/sfvi_run.h"
#include "fvi/program/silo_settling.h"

extern "C" const fvi_model* fvi_model_multinomial_eb(void);
extern "C" const fvi_model* fvi_model_hier_intercepts(void);
extern "C" const fvi_model* fvi_model_intercept_products(void);
extern "C" const fvi_model* fvi_model_local_slopes(void);
extern "C" const fvi_model* fvi_model_group_slopes(void);
extern "C" const fvi_model* fvi_model_censored_companions(void);

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names.
extern "C" const fvi_model* fvi_model_robust_logreg(void);

namespace centring_test {

using fvi::engine::CentringBlock;
using fvi::engine::SfviOptions;
using fvi::engine::SfviServer;
using fvi::engine::SfviSilo;
using fvic::test::Data;
using fvic::test::scalar;
using Global = fvi::StructuredGlobalGaussian<double>;

// An intercept's two marked products: the first (x, W's index) and the one further pair.
void check_two_products(const fvi_variable_info& b, const std::string& x, int w, const std::string& more_x, int more_w) {
  CHECK(std::string(b.centring_data) == x);
  CHECK(b.centring_coefficient == w);
  REQUIRE(b.centring_more == 1);
  CHECK(std::string(b.centring_more_data[0]) == more_x);
  CHECK(b.centring_more_coefficients[0] == more_w);
}

// A mean-field q over P globals, means N(0, 0.1^2) and log-sds alike, and S draws of it: the fit's
// coordinates at which a silo is scored.
struct FitDraws {
  Global q;
  Eigen::MatrixXd z;
};
FitDraws fit_draws(Eigen::Index P, Eigen::Index S, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::VectorXd params(2 * P);
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.1 * normal(rng);
  Global q = Global::from_params(params, P, false);
  Eigen::MatrixXd eps(P, S);
  for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
  Eigen::MatrixXd z = q.sample(eps);
  return {std::move(q), std::move(z)};
}

// The pooled centring's map and score: to_written(blocks) takes the fit's draws to z_written (the
// caller's, from the definition), and the silo over the centred data scores the fit's draws as
// the silo over the raw data scores the written ones. Returns those scores.
Eigen::VectorXd check_pooled_scores_written(const std::vector<CentringBlock>& blocks, SfviSilo& centred, SfviSilo& raw,
                                     const Global& q, const Eigen::MatrixXd& z_fit, const Eigen::MatrixXd& z_written) {
  Eigen::MatrixXd mapped = z_fit;
  fvi::engine::to_written(blocks, mapped);
  CHECK((mapped - z_written).cwiseAbs().maxCoeff() < 1e-12);
  const Eigen::MatrixXd none(0, z_fit.cols());
  const Eigen::VectorXd at_fit = centred.log_joint(q, Eigen::VectorXd(), z_fit, none, none).log_p;
  const Eigen::VectorXd at_written = raw.log_joint(q, Eigen::VectorXd(), z_written, none, none).log_p;
  for (Eigen::Index s = 0; s < z_fit.cols(); ++s)
    CHECK(std::abs(at_fit[s] - at_written[s]) < 1e-10 * std::abs(at_written[s]));
  return at_written;
}

TEST_CASE("centring: multinomial_eb's silo scores the centred data at the fit's draws as the raw data at the "
          "written draws; the server's gradient is its estimate's",
          "[centring]") {
  const fvi_model& model = *fvi_model_multinomial_eb();
  REQUIRE(model.variable_count >= 2);
  REQUIRE(std::string(model.variables[1].name) == "b");
  CHECK(std::string(model.variables[1].centring_data) == "x");
  CHECK(model.variables[1].centring_coefficient == 0);  // W
  CHECK(std::string(model.variables[0].centring_data).empty());

  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal;
  const int D = 3, K = 4, N = 15, S = 5, P = D * K + K;
  Data raw, centred, public_data;
  Eigen::MatrixXd x(N, D), y(N, 1);
  for (int i = 0; i < N; ++i)
    for (int d = 0; d < D; ++d) x(i, d) = 30 * (d + 1) + 5 * normal(rng);  // far from 0, as raw pixels are not
  for (int i = 0; i < N; ++i) y(i, 0) = 1 + i % K;
  for (Data* d : {&raw, &centred, &public_data}) {
    d->add("D", scalar(D));
    d->add("K", scalar(K));
  }
  std::vector<CentringBlock> blocks = fvi::engine::centring_blocks(model, public_data.abi(), P);
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].intercept == D * K);
  CHECK(blocks[0].coefficient == 0);
  CHECK(blocks[0].columns == D);
  CHECK(blocks[0].classes == K);
  blocks[0].means = x.colwise().mean().transpose();  // this one silo's rows are the pool
  Eigen::MatrixXd xc = x.rowwise() - blocks[0].means.transpose();
  raw.add("N", scalar(N));
  raw.add("x", x);
  raw.add("y", y);
  centred.add("N", scalar(N));
  centred.add("x", xc);
  centred.add("y", y);

  SfviOptions options;
  options.stl = false;  // the standard estimator: its gradient is the fixed-noise estimate's derivative
  SfviSilo silo_raw(model, raw.abi(), 1, options, false), silo_centred(model, centred.abi(), 1, options, false);
  Eigen::VectorXd params(2 * P), hyper(2);
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.3 * normal(rng);
  hyper << -0.5, 0.3;
  const Global q = Global::from_params(params, P, false);
  Eigen::MatrixXd eps(P, S);
  for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
  const Eigen::MatrixXd z_fit = q.sample(eps);
  Eigen::MatrixXd z_written = z_fit;
  fvi::engine::to_written(blocks, z_written);
  const Eigen::MatrixXd none(0, S);
  const Eigen::VectorXd at_fit = silo_centred.log_joint(q, hyper, z_fit, none, none).log_p;
  const Eigen::VectorXd at_written = silo_raw.log_joint(q, hyper, z_written, none, none).log_p;
  for (Eigen::Index s = 0; s < S; ++s) CHECK(std::abs(at_fit[s] - at_written[s]) < 1e-10 * std::abs(at_written[s]));
  // Not by accident: the raw data at the fit's draws scores otherwise.
  CHECK((silo_raw.log_joint(q, hyper, z_fit, none, none).log_p - at_written).cwiseAbs().maxCoeff() > 1.0);

  // The server's term (priors at the written globals, entropy) against central differences of
  // its estimate at fixed noise, in the fit's coordinates.
  SfviServer server(model, public_data.abi(), options);
  server.set_centring(blocks);
  auto term = [&](const Eigen::VectorXd& p) {
    server.set(p, hyper);
    return server.server_term(eps);
  };
  const Eigen::VectorXd gradient = term(params).d_global;
  const double h = 1e-5;
  for (Eigen::Index i = 0; i < params.size(); ++i) {
    Eigen::VectorXd up = params, down = params;
    up[i] += h;
    down[i] -= h;
    const double fd = (term(up).elbo_term - term(down).elbo_term) / (2 * h);
    INFO("parameter " << i);
    CHECK(std::abs(gradient[i] - fd) < 1e-6 * std::max(1.0, std::abs(fd)));
  }
  // The prior really is read at the written b: without the centring the term differs.
  server.set_centring({});
  CHECK(std::abs(term(params).elbo_term - [&] {
          server.set_centring(blocks);
          return term(params).elbo_term;
        }()) > 1e-3);
}

TEST_CASE("centring: an intercept of two products, each covariate at its own pooled mean, scores the written "
          "model; its written sd adds both coefficients' shares",
          "[centring]") {
  const fvi_model& model = *fvi_model_intercept_products();
  REQUIRE(model.variable_count == 3);  // alpha, b_age, b_income
  check_two_products(model.variables[0], "age", 1, "income", 2);
  for (int i : {1, 2}) CHECK(model.variables[i].centring_more == 0);

  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal;
  const int N = 12, S = 5, P = 3;
  Eigen::MatrixXd age(N, 1), income(N, 1), y(N, 1);
  for (int i = 0; i < N; ++i) {
    age(i, 0) = 50 + 10 * normal(rng);
    income(i, 0) = 30 + 8 * normal(rng);
    y(i, 0) = i % 2;
  }
  Data public_data, raw, centred;
  std::vector<CentringBlock> blocks = fvi::engine::centring_blocks(model, public_data.abi(), P);
  REQUIRE(blocks.size() == 2);
  for (const CentringBlock& b : blocks) CHECK(b.intercept == 0);
  CHECK(blocks[0].data == "age");
  CHECK(blocks[0].coefficient == 1);
  CHECK(blocks[1].data == "income");
  CHECK(blocks[1].coefficient == 2);
  // The pool's means, not this silo's alone.
  fvi::engine::set_data_means(blocks, "age", Eigen::VectorXd::Constant(1, 48.0));
  fvi::engine::set_data_means(blocks, "income", Eigen::VectorXd::Constant(1, 31.5));
  raw.add("N", scalar(N));
  raw.add("age", age);
  raw.add("income", income);
  raw.add("y", y);
  centred.add("N", scalar(N));
  centred.add("age", Eigen::MatrixXd(age.array() - 48.0));
  centred.add("income", Eigen::MatrixXd(income.array() - 31.5));
  centred.add("y", y);

  SfviOptions options;
  SfviSilo silo_raw(model, raw.abi(), 1, options, false), silo_centred(model, centred.abi(), 1, options, false);
  const auto [q, z_fit] = fit_draws(P, S, rng);
  // The written alpha, computed here: alpha_c less both means times their coefficients.
  Eigen::MatrixXd z_written = z_fit;
  z_written.row(0) -= 48.0 * z_fit.row(1) + 31.5 * z_fit.row(2);
  const Eigen::VectorXd at_written = check_pooled_scores_written(blocks, silo_centred, silo_raw, q, z_fit, z_written);
  const Eigen::MatrixXd none(0, S);
  // Not by accident: either shift alone scores otherwise.
  for (size_t one = 0; one < 2; ++one) {
    Eigen::MatrixXd partial = z_fit;
    fvi::engine::to_written({blocks[one]}, partial);
    CHECK((silo_raw.log_joint(q, Eigen::VectorXd(), partial, none, none).log_p - at_written).cwiseAbs().maxCoeff() > 1e-3);
  }
  // Mean-field q over (alpha_c, b_age, b_income): var alpha = var alpha_c + 48^2 var b_age + 31.5^2 var b_income.
  const Eigen::VectorXd sd = fvi::engine::written_sd(blocks, q);
  const Eigen::VectorXd var = q.sd().cwiseAbs2();
  CHECK(sd[0] == Approx(std::sqrt(var[0] + 48.0 * 48.0 * var[1] + 31.5 * 31.5 * var[2])).epsilon(1e-12));
  CHECK(sd[1] == Approx(q.sd()[1]).epsilon(1e-15));
}

TEST_CASE("centring: one slope read with two x in two sums (observed and censored rows): one block, both x "
          "centred at their pooled mean, scores the written model",
          "[centring]") {
  const fvi_model& model = *fvi_model_censored_companions();
  REQUIRE(model.variable_count == 3);  // alpha, beta, sigma
  check_two_products(model.variables[0], "x_obs", 1, "x_cen", 1);  // the companion: beta again

  std::mt19937_64 rng(23);
  std::normal_distribution<double> normal;
  const int N = 9, M = 5, S = 4, P = 3;
  Eigen::MatrixXd x_obs(N, 1), t_obs(N, 1), x_cen(M, 1), t_cen(M, 1);
  for (int i = 0; i < N; ++i) x_obs(i, 0) = 60 + 10 * normal(rng), t_obs(i, 0) = 3 + normal(rng);
  for (int i = 0; i < M; ++i) x_cen(i, 0) = 40 + 10 * normal(rng), t_cen(i, 0) = 4 + normal(rng);
  Data public_data, raw;
  raw.add("N", scalar(N));
  raw.add("M", scalar(M));
  raw.add("x_obs", x_obs);
  raw.add("t_obs", t_obs);
  raw.add("x_cen", x_cen);
  raw.add("t_cen", t_cen);
  std::vector<CentringBlock> blocks = fvi::engine::centring_blocks(model, public_data.abi(), P);
  REQUIRE(blocks.size() == 1);  // one shift of alpha, not two
  CHECK(blocks[0].data == "x_obs");
  CHECK(blocks[0].companions == std::vector<std::string>{"x_cen"});
  CHECK(blocks[0].centres("x_cen"));
  // A table from before companions (FVI_ABI_VERSION 15) is not centred at all: x_obs alone would
  // shift the censored rows' sum with nothing to undo it.
  fvi_model older = model;
  older.abi_version = 15;
  CHECK(fvi::engine::centring_blocks(older, public_data.abi(), P).empty());
  // The silo's part of the pooled mean: both vectors' sums and rows, computed here.
  int64_t rows = 0;
  const Eigen::VectorXd sums = fvi::engine::column_sums(blocks[0], raw.abi(), rows);
  CHECK(rows == N + M);
  CHECK(sums[0] == Approx(x_obs.sum() + x_cen.sum()).epsilon(1e-14));
  const double xbar = sums[0] / double(rows);
  fvi::engine::set_data_means(blocks, "x_obs", Eigen::VectorXd::Constant(1, xbar));
  const Eigen::VectorXd squares = fvi::engine::column_sums_of_squares(blocks[0], raw.abi());
  CHECK(squares[0] == Approx(x_obs.squaredNorm() + x_cen.squaredNorm()).epsilon(1e-14));

  // Both x centred at the one mean score the fit's draws as the raw x the written ones.
  const auto silo_at = [&](double obs_shift, double cen_shift) {
    Data d;
    d.add("N", scalar(N));
    d.add("M", scalar(M));
    d.add("x_obs", Eigen::MatrixXd(x_obs.array() - obs_shift));
    d.add("t_obs", t_obs);
    d.add("x_cen", Eigen::MatrixXd(x_cen.array() - cen_shift));
    d.add("t_cen", t_cen);
    return d;
  };
  Data centred = silo_at(xbar, xbar);
  SfviOptions options;
  SfviSilo silo_raw(model, raw.abi(), 1, options, false), silo_centred(model, centred.abi(), 1, options, false);
  const auto [q, z_fit] = fit_draws(P, S, rng);
  Eigen::MatrixXd z_written = z_fit;
  z_written.row(0) -= xbar * z_fit.row(1);  // alpha = alpha_c - xbar beta, computed here
  const Eigen::VectorXd at_written = check_pooled_scores_written(blocks, silo_centred, silo_raw, q, z_fit, z_written);
  const Eigen::MatrixXd none(0, S);
  // Not by accident: each x at its own mean would give the two sums different shifts.
  Data own = silo_at(x_obs.mean(), x_cen.mean());
  SfviSilo silo_own(model, own.abi(), 1, options, false);
  CHECK((silo_own.log_joint(q, Eigen::VectorXd(), z_fit, none, none).log_p - at_written).cwiseAbs().maxCoeff() > 1e-3);
}

TEST_CASE("centring: a column wider than 1 has its coefficient's Adam steps and starting sd divided by its sd",
          "[centring]") {
  const fvi_model& model = *fvi_model_multinomial_eb();
  const int D = 3, K = 4, P = D * K + K;
  Data public_data;
  public_data.add("D", scalar(D));
  public_data.add("K", scalar(K));
  std::vector<CentringBlock> blocks = fvi::engine::centring_blocks(model, public_data.abi(), P);
  REQUIRE(blocks.size() == 1);
  blocks[0].means = Eigen::VectorXd::Zero(D);  // no shift: W's prior gradient is -W / sigma_w^2 alone
  // Pooled sds 10, 0.5 and 3 from 20 rows' sums of squares: a scale where the sd exceeds 1.
  const Eigen::VectorXd scales = fvi::engine::pooled_scales(Eigen::Vector3d(20 * 100.0, 20 * 0.25, 20 * 9.0), 20);
  CHECK(scales[0] == Approx(10).epsilon(1e-14));
  CHECK(scales[1] == 1);
  CHECK(scales[2] == Approx(3).epsilon(1e-14));
  CHECK(fvi::engine::pooled_scales(Eigen::Vector2d(0.0, 5.0), 0) == Eigen::Vector2d::Ones());  // no rows
  std::vector<CentringBlock> scaled = blocks;
  scaled[0].scales = scales;

  SfviOptions options;
  options.stl = false;  // the means' gradient is E[d log p / dz], whose sign does not depend on q's sd
  SfviServer plain(model, public_data.abi(), options), steps(model, public_data.abi(), options);
  plain.set_centring(blocks);
  steps.set_centring(scaled);
  // q starts with W_jk's sd init_sd / s_j, every other at init_sd.
  for (int k = 0; k < K; ++k)
    for (int d = 0; d < D; ++d)
      CHECK(steps.q().sd()[k * D + d] == Approx(options.init_sd / scales[d]).epsilon(1e-14));
  for (int k = 0; k < K; ++k) CHECK(steps.q().sd()[D * K + k] == Approx(options.init_sd).epsilon(1e-14));
  CHECK(plain.q().sd().isApprox(Eigen::VectorXd::Constant(P, options.init_sd), 1e-14));
  // Set, not shifted: a second call leaves q's starting sds as the first did.
  const Eigen::VectorXd once = steps.q().sd();
  steps.set_centring(scaled);
  CHECK(steps.q().sd().isApprox(once, 1e-14));
  // Adam's first step from the means' gradient g (of the ELBO, at the step's noise): its bias-
  // corrected moments are g and g^2, so the step is lr g / (|g| + 1e-8). In step coordinates the
  // gradient is g / s_j and the step lr / s_j of that in W_jk's own. Then a softmax's shift is
  // removed (class_shift.h): each row of W and b less its mean over the classes. To 1e-6: the
  // ratio of Adam's epsilon to gradients of 1e-2, which its arithmetic (PyTorch's) applies a
  // little differently.
  const Eigen::MatrixXd noise = fvi::engine::global_noise(options.seed, 1, P, options.mc_samples);
  const Eigen::VectorXd g_plain = plain.server_term(noise).d_global, g_steps = steps.server_term(noise).d_global;
  auto adam_first = [&](double g) { return options.lr * g / (std::abs(g) + 1e-8); };
  Eigen::MatrixXd w_plain(D, K), w_steps(D, K);
  Eigen::VectorXd b_expected(K);
  for (int k = 0; k < K; ++k) {
    for (int d = 0; d < D; ++d) {
      w_plain(d, k) = adam_first(g_plain[k * D + d]);
      w_steps(d, k) = adam_first(g_steps[k * D + d] / scales[d]) / scales[d];
    }
    b_expected[k] = adam_first(g_plain[D * K + k]);
  }
  w_plain.colwise() -= w_plain.rowwise().mean();
  w_steps.colwise() -= w_steps.rowwise().mean();
  b_expected.array() -= b_expected.mean();
  plain.step({}, 1);
  steps.step({}, 1);
  for (int k = 0; k < K; ++k) {
    for (int d = 0; d < D; ++d) {
      const Eigen::Index i = k * D + d;
      INFO("W[" << d + 1 << ", " << k + 1 << "]");
      CHECK(plain.q().mean()[i] == Approx(w_plain(d, k)).epsilon(1e-6));
      CHECK(steps.q().mean()[i] == Approx(w_steps(d, k)).epsilon(1e-6));
    }
    CHECK(plain.q().mean()[D * K + k] == Approx(b_expected[k]).epsilon(1e-6));
    CHECK(steps.q().mean()[D * K + k] == Approx(b_expected[k]).epsilon(1e-6));
  }
  // Not by accident: the widest column's coefficient moved a tenth of the plain step.
  CHECK(w_steps.row(0).cwiseAbs().maxCoeff() < 0.21 * options.lr);
  CHECK(w_plain.row(0).cwiseAbs().maxCoeff() > 0.5 * options.lr);
}

TEST_CASE("centring: a silo sends its column sums, takes the means, and is centred again when restarted from its "
          "checkpoint",
          "[centring]") {
  using fvi::program::Message;
  using fvi::program::Phase;
  const fvi_model& model = *fvi_model_multinomial_eb();
  const int D = 3, K = 4, N = 10;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  std::vector<double> x(N * D), y(N);
  for (int i = 0; i < N * D; ++i) x[size_t(i)] = 20 * (1 + i / N) + normal(rng);  // column-major: column d near 20(d + 1)
  for (int i = 0; i < N; ++i) y[size_t(i)] = 1 + i % K;
  fvi::data::DataSet data;
  data.add(fvic::test::data_variable("D", {}, {double(D)}));
  data.add(fvic::test::data_variable("K", {}, {double(K)}));
  data.add(fvic::test::data_variable("N", {}, {double(N)}));
  data.add(fvic::test::data_variable("x", {N, D}, x));
  data.add(fvic::test::data_variable("y", {N}, y));
  const fvi::engine::Settings settings({}, {"family=meanfield"});  // q's parameters: 2 per global
  auto host = [&](const fvi::engine::Settings& s) { return fvi::program::sfvi_silo_host(model, s, "sfvi", data, 1, 2); };

  auto centred = host(settings);
  const Message sums = centred->endpoint().handle(0, Phase::kSfviCentring, {});
  REQUIRE(sums.size() == size_t(D + 1));
  for (int d = 0; d < D; ++d) {
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += x[size_t(d * N + i)];
    CHECK(sums[size_t(d)] == Approx(sum).epsilon(1e-14));
  }
  CHECK(sums[size_t(D)] == N);
  const Message means = {21.0, 39.5, 61.0};  // the pool's, which this silo's rows alone do not give
  // The reply: the column sums of squares about those means, summed here from x directly.
  const Message squares = centred->endpoint().handle(1, Phase::kSfviCentring, means);
  REQUIRE(squares.size() == size_t(D));
  for (int d = 0; d < D; ++d) {
    double sum = 0;
    for (int i = 0; i < N; ++i) sum += (x[size_t(d * N + i)] - means[size_t(d)]) * (x[size_t(d * N + i)] - means[size_t(d)]);
    CHECK(squares[size_t(d)] == Approx(sum).epsilon(1e-12));
  }
  const Message checkpoint = centred->endpoint().state();

  Eigen::VectorXd params(2 * (D * K + K)), hyper(2);
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.2 * normal(rng);
  hyper << -1.0, 0.5;
  Message request = fvi::program::silo_schedule_message(1, 0, 2);
  const Message broadcast = fvi::engine::pack(fvi::engine::SfviBroadcast{params, hyper, 3});
  request.insert(request.end(), broadcast.begin(), broadcast.end());
  const Message gradient = centred->endpoint().handle(3, Phase::kSfviContribute, request);

  auto restarted = host(settings);
  restarted->endpoint().restore(checkpoint);
  CHECK(restarted->endpoint().handle(3, Phase::kSfviContribute, request) == gradient);
  // Means a second time (a resumed server asks again): nothing changes, the same sums of squares.
  CHECK(restarted->endpoint().handle(1, Phase::kSfviCentring, means) == squares);
  CHECK(restarted->endpoint().handle(3, Phase::kSfviContribute, request) == gradient);
  // Not by accident: at the raw data the silo's gradient is another.
  auto raw = host(settings);
  CHECK(raw->endpoint().handle(3, Phase::kSfviContribute, request) != gradient);
  // A bad message is named; a silo whose settings turn centring off keeps its sums.
  CHECK_THROWS_WITH(raw->endpoint().handle(1, Phase::kSfviCentring, {1.0, 2.0}), Catch::Contains("2 means"));
  CHECK_THROWS_WITH(host(fvi::engine::Settings({}, {"family=meanfield", "center=off"}))->endpoint().handle(0, Phase::kSfviCentring, {}),
                    Catch::Contains("column sums stay here"));
}

TEST_CASE("centring: a hierarchy's silo scores the centred data at mu_c and a_c as the raw data at the written "
          "mu and a, and reports the written a",
          "[centring]") {
  const fvi_model& model = *fvi_model_hier_intercepts();
  REQUIRE(model.variable_count == 5);
  const int beta = 1;
  REQUIRE(std::string(model.variables[beta].name) == "beta");
  for (int i : {0, 4}) {  // mu, alpha
    INFO(model.variables[i].name);
    CHECK(std::string(model.variables[i].centring_data) == "x");
    CHECK(model.variables[i].centring_coefficient == beta);
  }
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal;
  const int D = 2, N = 9, S = 6, P = 1 + D + 2;  // globals: mu, beta[D], tau, sigma
  Eigen::MatrixXd x(N, D), y(N, 1);
  for (int i = 0; i < N; ++i) {
    for (int d = 0; d < D; ++d) x(i, d) = 25 * (d + 1) + 3 * normal(rng);
    y(i, 0) = 2 + normal(rng);
  }
  Data public_data, raw, centred;
  for (Data* d : {&public_data, &raw, &centred}) d->add("D", scalar(D));
  std::vector<CentringBlock> blocks = fvi::engine::centring_blocks(model, public_data.abi(), P);
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].intercept == 0);
  const Eigen::Vector2d pooled(24.0, 51.5);  // the pool's means, not this silo's alone
  blocks[0].means = pooled;
  raw.add("N", scalar(N));
  raw.add("x", x);
  raw.add("y", y);
  centred.add("N", scalar(N));
  centred.add("x", Eigen::MatrixXd(x.rowwise() - pooled.transpose()));
  centred.add("y", y);

  SfviOptions options;
  options.correlated_global = options.coupled = true;  // structured: q(alpha | Z_G) has its C
  SfviSilo silo_raw(model, raw.abi(), 1, options, false), silo_centred(model, centred.abi(), 1, options, false);
  const std::vector<CentringBlock> locals = fvi::engine::local_centring_blocks(model, raw.abi(), P, 1, blocks);
  REQUIRE(locals.size() == 1);
  CHECK(locals[0].intercept == 0);
  CHECK(locals[0].coefficient == 1);
  CHECK(locals[0].means == pooled);
  silo_centred.set_local_centring(locals);

  Eigen::VectorXd params(Global::num_params_for(P, true));
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.3 * normal(rng);
  const Global q = Global::from_params(params, P, true);
  Eigen::MatrixXd eps(P, S);
  for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
  const Eigen::MatrixXd z_fit = q.sample(eps);
  Eigen::MatrixXd z_written = z_fit;
  fvi::engine::to_written(blocks, z_written);
  // The centred silo's q(a_c | Z_G) = N(m + C u, s^2), u = Z_G - E Z_G in the fit's coordinates;
  // the raw silo's is over u' = T u (written), u_mu = u'_mu + xbar' u'_beta: N(m - xbar' E beta +
  // C' u', s^2) with C' = C except at beta, C_beta + (C_mu - 1) xbar'. At the same noise it draws
  // the written a = a_c - xbar' beta.
  const Eigen::VectorXd mean = Eigen::VectorXd::Constant(1, 3.0), log_sd = Eigen::VectorXd::Constant(1, -0.5);
  Eigen::MatrixXd coupling(1, P);
  for (Eigen::Index j = 0; j < P; ++j) coupling(0, j) = 0.2 * normal(rng);
  Eigen::MatrixXd raw_coupling = coupling;
  raw_coupling.block(0, 1, 1, D) += (coupling(0, 0) - 1) * pooled.transpose();
  const Eigen::VectorXd raw_mean = mean - pooled.transpose() * q.mean().segment(1, D);
  const Eigen::MatrixXd one = Eigen::MatrixXd::Identity(1, 1);
  silo_centred.set_local_params(fvi::StructuredLocalGaussian<double>(mean, coupling, log_sd, one, P).params());
  silo_raw.set_local_params(fvi::StructuredLocalGaussian<double>(raw_mean, raw_coupling, log_sd, one, P).params());
  Eigen::MatrixXd eps_local(1, S);
  for (Eigen::Index i = 0; i < eps_local.size(); ++i) eps_local.data()[i] = normal(rng);
  const Eigen::MatrixXd uniforms = Eigen::MatrixXd::Constant(1, S, 0.5);
  const Global q_written = [&] {
    Eigen::MatrixXd written_mean = q.mean();
    fvi::engine::to_written(blocks, written_mean);
    return Global(written_mean.col(0), q.log_sd(), q.unit_lower());
  }();
  const SfviSilo::LogJoint fit = silo_centred.log_joint(q, Eigen::VectorXd(), z_fit, eps_local, uniforms);
  const SfviSilo::LogJoint written = silo_raw.log_joint(q_written, Eigen::VectorXd(), z_written, eps_local, uniforms);
  for (Eigen::Index s = 0; s < S; ++s) {
    CHECK(std::abs(fit.log_p[s] - written.log_p[s]) < 1e-10 * std::abs(written.log_p[s]));
    CHECK(fit.log_q[s] == Approx(written.log_q[s]).epsilon(1e-12));
    CHECK(fit.local(0, s) == Approx(written.local(0, s)).epsilon(1e-12));
  }
  // Not by accident: without the local map the silo reports a_c = a + xbar' beta.
  silo_centred.set_local_centring({});
  const SfviSilo::LogJoint unmapped = silo_centred.log_joint(q, Eigen::VectorXd(), z_fit, eps_local, uniforms);
  for (Eigen::Index s = 0; s < S; ++s) {
    const double shift = pooled.dot(z_fit.col(s).segment(1, D));
    CHECK(std::abs(shift) > 0.1);
    CHECK(unmapped.local(0, s) - written.local(0, s) == Approx(shift).epsilon(1e-10));
  }
}

// A silo fitting its locals' intercepts at data means (local_slope_blocks) against one fitting the
// written locals (center = off), at q over the fit's locals (mean, coupling, log_sd; independent
// given the globals) and the same q read in the written coordinates: T the map from the fit's
// locals to the written, unit lower triangular (a = a_c - xbar b), so the raw silo's q is full
// rank with mean T m, coupling T C and factor T D = D L', L' = D^-1 T D. At the same noise both
// draw the same written locals, so every term agrees; the fit's gradient in its own locals is
// checked against central differences, and without the map the fit's silo scores differently.
void check_scores_written(const fvi_model& model, Data& data, Eigen::Index P, const Eigen::VectorXd& mean,
                          const Eigen::VectorXd& log_sd, const Eigen::MatrixXd& shear, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  const Eigen::Index M = mean.size();
  const int S = 6;
  SfviOptions fit_options, raw_options;
  for (SfviOptions* o : {&fit_options, &raw_options}) {
    o->correlated_global = o->coupled = true;
    o->local_samples = 1;
    o->local_samples_given = true;
    o->stl = false;  // the gradient of the sampled ELBO itself: finite differences can check it
  }
  raw_options.correlated_local = true;
  raw_options.centre_local_slopes = false;
  SfviSilo fit(model, data.abi(), 1, fit_options, false), raw(model, data.abi(), 1, raw_options, false);
  CHECK(fit.local_slopes().size() == 1);
  CHECK(raw.local_slopes().empty());
  Eigen::VectorXd params(Global::num_params_for(P, true));
  for (Eigen::Index i = 0; i < params.size(); ++i) params[i] = 0.2 * normal(rng);
  params[2] = 0.5, params[3] = 0.7;  // tau, sigma (log scale) near their posterior
  const Global q = Global::from_params(params, P, true);
  Eigen::MatrixXd coupling(M, P);
  for (Eigen::Index i = 0; i < coupling.size(); ++i) coupling.data()[i] = 0.1 * normal(rng);
  const Eigen::VectorXd sd = log_sd.array().exp();
  Eigen::MatrixXd unit_lower = sd.cwiseInverse().asDiagonal() * shear * sd.asDiagonal();
  unit_lower.diagonal().setOnes();  // exactly: d_i / d_i may round
  const Eigen::VectorXd local = fvi::StructuredLocalGaussian<double>(mean, coupling, log_sd, Eigen::MatrixXd(), P).params();
  fit.set_local_params(local);
  raw.set_local_params(fvi::StructuredLocalGaussian<double>(shear * mean, shear * coupling, log_sd, unit_lower, P).params());
  Eigen::MatrixXd eps(P, S), eps_local(M, S);
  for (Eigen::Index i = 0; i < eps.size(); ++i) eps.data()[i] = normal(rng);
  for (Eigen::Index i = 0; i < eps_local.size(); ++i) eps_local.data()[i] = normal(rng);
  const Eigen::MatrixXd z = q.sample(eps), uniforms = Eigen::MatrixXd::Constant(M, S, 0.5);
  const SfviSilo::LogJoint at_fit = fit.log_joint(q, Eigen::VectorXd(), z, eps_local, uniforms);
  const SfviSilo::LogJoint at_raw = raw.log_joint(q, Eigen::VectorXd(), z, eps_local, uniforms);
  for (Eigen::Index s = 0; s < S; ++s) {
    CHECK(std::abs(at_fit.log_p[s] - at_raw.log_p[s]) < 1e-10 * std::abs(at_raw.log_p[s]));
    CHECK(at_fit.log_q[s] == Approx(at_raw.log_q[s]).epsilon(1e-12));
    for (Eigen::Index i = 0; i < M; ++i) CHECK(at_fit.local(i, s) == Approx(at_raw.local(i, s)).epsilon(1e-12).margin(1e-12));
  }
  // The server's gradient: the same function of q(Z_G) either way.
  Eigen::VectorXd d_fit, d_raw;
  const fvi::engine::SfviContribution g_fit = fit.gradient(q, Eigen::VectorXd(), eps, eps_local, 1.0, &d_fit);
  const fvi::engine::SfviContribution g_raw = raw.gradient(q, Eigen::VectorXd(), eps, eps_local, 1.0, &d_raw);
  CHECK(g_fit.elbo_term == Approx(g_raw.elbo_term).epsilon(1e-12));
  for (Eigen::Index i = 0; i < g_fit.d_global.size(); ++i)
    CHECK(std::abs(g_fit.d_global[i] - g_raw.d_global[i]) < 1e-9 * (1 + std::abs(g_raw.d_global[i])));
  // The locals' gradient, pulled back to the fit's: central differences of the sampled ELBO.
  for (Eigen::Index i = 0; i < local.size(); ++i) {
    const double h = 1e-6 * (1 + std::abs(local[i]));
    Eigen::VectorXd up = local, down = local;
    up[i] += h, down[i] -= h;
    fit.set_local_params(up);
    const double f_up = fit.gradient(q, Eigen::VectorXd(), eps, eps_local, 1.0, nullptr).elbo_term;
    fit.set_local_params(down);
    const double f_down = fit.gradient(q, Eigen::VectorXd(), eps, eps_local, 1.0, nullptr).elbo_term;
    INFO("local parameter " << i);
    CHECK(d_fit[i] == Approx((f_up - f_down) / (2 * h)).epsilon(1e-5).margin(1e-6));
  }
  // Not by accident: without the map the fit's silo scores a_c as if it were a.
  SfviOptions unmapped_options = fit_options;
  unmapped_options.centre_local_slopes = false;
  SfviSilo unmapped(model, data.abi(), 1, unmapped_options, false);
  unmapped.set_local_params(local);
  const SfviSilo::LogJoint at_unmapped = unmapped.log_joint(q, Eigen::VectorXd(), z, eps_local, uniforms);
  CHECK((at_unmapped.log_p - at_raw.log_p).cwiseAbs().minCoeff() > 1.0);
}

TEST_CASE("centring: a silo's intercept of its own slope, fitted at the silo's own mean of x, scores and "
          "differentiates the written model",
          "[centring]") {
  const fvi_model& model = *fvi_model_local_slopes();
  REQUIRE(model.variable_count == 6);  // mu_a, mu_b, tau, sigma, b, a
  const fvi_variable_info& a = model.variables[5];
  REQUIRE(std::string(a.name) == "a");
  CHECK(std::string(a.centring_data) == "x");
  CHECK(a.centring_coefficient == 4);  // b, a local
  CHECK(std::string(a.centring_group).empty());
  for (int i = 0; i < 5; ++i) CHECK((!model.variables[i].centring_data || !*model.variables[i].centring_data));
  std::mt19937_64 rng(31);
  std::normal_distribution<double> normal;
  const int N = 11, P = 4, M = 2;  // globals mu_a, mu_b, tau, sigma; locals b, a
  Eigen::MatrixXd x(N, 1), y(N, 1);
  double total = 0;
  for (int i = 0; i < N; ++i) {
    x(i, 0) = 40 + 6 * normal(rng);
    y(i, 0) = 1 + 0.5 * x(i, 0) + normal(rng);
    total += x(i, 0);
  }
  const double xbar = total / N;  // the silo's own mean
  Data data;
  data.add("N", scalar(N));
  data.add("x", x);
  data.add("y", y);
  const std::vector<CentringBlock> blocks = fvi::engine::local_slope_blocks(model, data.abi(), M);
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].intercept == 1);
  CHECK(blocks[0].coefficient == 0);
  REQUIRE(blocks[0].means.size() == 1);
  CHECK(blocks[0].means[0] == Approx(xbar).epsilon(1e-14));
  CHECK(fvi::engine::local_slope_sums(model) == std::vector<std::string>{"a + x * b at the silo's own column means"});
  // q over (b, a_c), a_c = a + xbar b: the written (b, a) = T (b, a_c), T = [[1, 0], [-xbar, 1]].
  const Eigen::Vector2d mean(0.5, 21.0), log_sd(-3.0, -0.5);
  Eigen::MatrixXd shear = Eigen::MatrixXd::Identity(M, M);
  shear(1, 0) = -xbar;
  check_scores_written(model, data, P, mean, log_sd, shear, rng);
}

TEST_CASE("centring: a silo's groups' intercepts of their own slopes, each group at its own mean of x, score and "
          "differentiate the written model",
          "[centring]") {
  const fvi_model& model = *fvi_model_group_slopes();
  REQUIRE(model.variable_count == 6);  // mu_a, mu_b, tau, sigma, b, a
  const fvi_variable_info& a = model.variables[5];
  REQUIRE(std::string(a.name) == "a");
  CHECK(std::string(a.centring_data) == "x");
  CHECK(a.centring_coefficient == 4);  // b, a local vector
  CHECK(std::string(a.centring_group) == "g");
  for (int i = 0; i < 5; ++i) CHECK(std::string(model.variables[i].centring_group).empty());
  std::mt19937_64 rng(37);
  std::normal_distribution<double> normal;
  const int C = 3, N = 13, P = 4, M = 2 * C;  // locals b[1..3], a[1..3]
  // Rows of groups 1 and 3 only: group 2 has no rows, its mean 0 (no shift).
  Eigen::MatrixXd x(N, 1), y(N, 1), g(N, 1);
  Eigen::Vector3d total = Eigen::Vector3d::Zero(), count = Eigen::Vector3d::Zero();
  for (int i = 0; i < N; ++i) {
    g(i, 0) = i % 3 == 1 ? 3 : 1;
    x(i, 0) = 40 + 10 * g(i, 0) + 6 * normal(rng);
    y(i, 0) = 1 + 0.5 * x(i, 0) + normal(rng);
    total[int(g(i, 0)) - 1] += x(i, 0);
    count[int(g(i, 0)) - 1] += 1;
  }
  const Eigen::Vector3d xbar(total[0] / count[0], 0.0, total[2] / count[2]);  // each group's own mean
  Data data;
  data.add("N", scalar(N));
  data.add("C", scalar(C));
  data.add("g", g);
  data.add("x", x);
  data.add("y", y);
  const std::vector<CentringBlock> blocks = fvi::engine::local_slope_blocks(model, data.abi(), M);
  REQUIRE(blocks.size() == 1);
  CHECK(blocks[0].intercept == C);
  CHECK(blocks[0].coefficient == 0);
  CHECK(blocks[0].slope_per_group);
  REQUIRE(blocks[0].means.size() == C);
  for (int c = 0; c < C; ++c) CHECK(blocks[0].means[c] == Approx(xbar[c]).epsilon(1e-14).margin(1e-300));
  CHECK(fvi::engine::local_slope_sums(model) == std::vector<std::string>{"a[g] + x * b[g] at each group's own mean"});
  // q over (b, a_c), a_c[c] = a[c] + xbar_c b[c]: T = [[I, 0], [-diag(xbar), I]].
  Eigen::VectorXd mean(M), log_sd(M);
  Eigen::MatrixXd shear = Eigen::MatrixXd::Identity(M, M);
  for (int c = 0; c < C; ++c) {
    mean[c] = 0.5 + 0.05 * normal(rng), log_sd[c] = -3.0 + 0.2 * normal(rng);           // b[c]
    mean[C + c] = 1 + xbar[c] * mean[c], log_sd[C + c] = -0.5 + 0.2 * normal(rng);  // a_c[c]
    shear(C + c, c) = -xbar[c];
  }
  check_scores_written(model, data, P, mean, log_sd, shear, rng);

  // A group index outside 1..C is refused, naming it and its row.
  Data bad = data;
  Eigen::MatrixXd g_bad = g;
  g_bad(4, 0) = 4;
  for (size_t i = 0; i < bad.names.size(); ++i)
    if (bad.names[i] == "g") bad.values[i] = g_bad;
  try {
    fvi::engine::local_slope_blocks(model, bad.abi(), M);
    FAIL("a group index of 4 with C = 3 was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("'g[5]' is 4") != std::string::npos);
  }
}

TEST_CASE("mode search: a silo answers its log likelihood and gradient at each point asked, and refuses what its "
          "settings or the request's size do not allow",
          "[centring]") {
  using fvi::program::Message;
  using fvi::program::Phase;
  // robust_logreg run by SFVI: globals (w[1..D], b), y ~ bernoulli_logit(x * w + b), no locals.
  const fvi_model& model = *fvi_model_robust_logreg();
  const int D = 2, N = 15, P = 3, n = D + 1;
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal;
  std::vector<double> x(N * D), y(N);
  for (double& v : x) v = normal(rng);
  for (int i = 0; i < N; ++i) y[size_t(i)] = double(i % 3 == 0);
  fvi::data::DataSet data;
  data.add(fvic::test::data_variable("D", {}, {double(D)}));
  data.add(fvic::test::data_variable("N", {}, {double(N)}));
  data.add(fvic::test::data_variable("x", {N, D}, x));
  data.add(fvic::test::data_variable("y", {N}, y));
  auto host = [&](std::vector<std::string> keys) {
    keys.push_back("method=sfvi");
    return fvi::program::sfvi_silo_host(model, fvi::engine::Settings({}, keys), "sfvi", data, 1, 2);
  };
  Eigen::MatrixXd z(n, P);
  for (Eigen::Index i = 0; i < z.size(); ++i) z.data()[i] = normal(rng);
  z(0, 2) = 40;  // a point far out: log p still finite
  const Message request(z.data(), z.data() + z.size());
  const Message reply = host({})->endpoint().handle(0, Phase::kSfviMode, request);
  REQUIRE(reply.size() == size_t(P * (n + 2)));
  for (int p = 0; p < P; ++p) {
    // log p = sum_i y_i eta_i - log(1 + e^eta_i); d/dw = x' (y - sigmoid(eta)), d/db = sum (y - sigmoid(eta)).
    double lp = 0;
    Eigen::VectorXd g = Eigen::VectorXd::Zero(n);
    for (int i = 0; i < N; ++i) {
      double eta = z(D, p);
      for (int d = 0; d < D; ++d) eta += x[size_t(d * N + i)] * z(d, p);
      const double log1p_exp = eta > 0 ? eta + std::log1p(std::exp(-eta)) : std::log1p(std::exp(eta));
      lp += y[size_t(i)] * eta - log1p_exp;
      const double r = y[size_t(i)] - 1 / (1 + std::exp(-eta));
      for (int d = 0; d < D; ++d) g[d] += x[size_t(d * N + i)] * r;
      g[D] += r;
    }
    CHECK(reply[size_t(p)] == 1);
    CHECK(reply[size_t(P + p)] == Approx(lp).epsilon(1e-10));
    for (int i = 0; i < n; ++i) CHECK(reply[size_t(2 * P + p * n + i)] == Approx(g[i]).epsilon(1e-10).margin(1e-12));
  }
  // More points than a Newton step's curvature asks (2n), a non-finite point, a silo whose
  // settings keep its likelihood: each refused, named.
  CHECK_THROWS_WITH(host({})->endpoint().handle(1, Phase::kSfviMode, Message(size_t(n * (2 * n + 2)), 0.0)),
                    Catch::Contains("mode-search request of 8 points"));
  Message bad = request;
  bad[1] = NAN;
  CHECK_THROWS_WITH(host({})->endpoint().handle(2, Phase::kSfviMode, bad), Catch::Contains("non-finite"));
  CHECK_THROWS_WITH(host({"mode_start=off"})->endpoint().handle(0, Phase::kSfviMode, request),
                    Catch::Contains("its likelihood stays here"));
}

}  // namespace centring_test
