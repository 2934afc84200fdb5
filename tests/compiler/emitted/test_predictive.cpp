// Held-out predictive metrics (fvi/program/predictive.h) through generated kernels: the log
// predictive density, accuracy or RMSE and the OOD score of each row (logistic, softmax, ordinal
// and normal regressions) equal a direct computation from the draws, however the rows and draws
// are cut into calls (a call holds at most 4,096 row-draws, so 2,500 draws of 100 rows take 63
// calls of 40 draws or fewer).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fvi/program/predictive.h"
#include "abi_data.h"

extern "C" const fvi_model* fvi_model_robust_logreg(void);
extern "C" const fvi_model* fvi_model_multinomial_eb(void);
extern "C" const fvi_model* fvi_model_linreg_conjugate(void);
extern "C" const fvi_model* fvi_model_ordinal_regression(void);

namespace predictive_test {

using fvi::engine::BoundFactor;
using fvi::program::PredictiveMetrics;
using fvi::program::predictive_metrics;
using fvic::test::Data;
using fvic::test::factor_named;
using fvic::test::scalar;

// log (1/S) sum_s exp(a_s), stably.
double log_mean_exp(const Eigen::VectorXd& a) {
  const double top = a.maxCoeff();
  return top + std::log((a.array() - top).exp().mean());
}

// What a direct computation gives: the mean log predictive density, the fraction right (or the
// RMSE) and each row's uncertainty.
struct Direct {
  double lpd = 0, score = 0;
  std::vector<double> uncertainty;
};

// Every metric agrees to float error (sums of up to 2,500 terms in another order).
void check_metrics(const PredictiveMetrics& m, const Direct& d, bool classification) {
  CHECK(m.mean_log_density == Approx(d.lpd).epsilon(1e-12));
  if (classification) CHECK(m.accuracy == Approx(d.score).epsilon(1e-12));
  else CHECK(m.rmse == Approx(d.score).epsilon(1e-12));
  REQUIRE(m.uncertainty.size() == d.uncertainty.size());
  for (size_t i = 0; i < d.uncertainty.size(); ++i) CHECK(m.uncertainty[i] == Approx(d.uncertainty[i]).epsilon(1e-10));
}

// The logistic regression's metrics at draws theta = (w, b) of x's rows, directly.
Direct direct_logistic(const Eigen::MatrixXd& x, const Eigen::MatrixXd& y, const Eigen::MatrixXd& theta) {
  const Eigen::Index n = x.rows(), d = x.cols(), S = theta.cols();
  Direct direct;
  double right = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    Eigen::VectorXd log_p(S);
    double p = 0;
    for (Eigen::Index s = 0; s < S; ++s) {
      const double eta = x.row(i).dot(theta.col(s).head(d)) + theta(d, s);
      log_p[s] = y(i, 0) > 0.5 ? -std::log1p(std::exp(-eta)) : -std::log1p(std::exp(eta));
      p += 1 / (1 + std::exp(-eta)) / double(S);
    }
    direct.lpd += log_mean_exp(log_p) / double(n);
    right += (p > 0.5) == (y(i, 0) > 0.5);
    direct.uncertainty.push_back(-p * std::log(p) - (1 - p) * std::log(1 - p));
  }
  direct.score = right / double(n);
  return direct;
}

// n rows of d standard normal covariates and a class in 1..K, as the models' data (D, K, N, x, y).
Data class_data(int n, int d, int K, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::MatrixXd x(n, d), y(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) y(i, 0) = 1 + int(rng() % K);
  Data data;
  data.add("D", scalar(d));
  data.add("K", scalar(K));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);
  return data;
}

// One row of a classifier into `direct`: its log densities at the draws, its predictive class
// probabilities p and its class y (1-based); `right` counts the rows whose top class is y.
void add_class_row(Direct& direct, const Eigen::VectorXd& log_p, const Eigen::VectorXd& p, double y, int n,
                   double& right) {
  direct.lpd += log_mean_exp(log_p) / n;
  Eigen::Index best = 0;
  p.maxCoeff(&best);
  right += double(best + 1) == y;
  direct.uncertainty.push_back(-(p.array() * p.array().log()).sum());
}

}  // namespace predictive_test

TEST_CASE("held-out metrics of a logistic regression equal the direct computation, in any cut of rows and draws",
          "[predictive]") {
  using namespace predictive_test;
  std::mt19937_64 rng(71);
  const int n = 100, d = 3;
  const long S = 2500;
  Data data = fvic::test::logreg_data(n, d, rng);
  const fvi_model& model = *fvi_model_robust_logreg();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  std::normal_distribution<double> normal;
  Eigen::MatrixXd theta(d + 1, S);  // w (D), then b
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = normal(rng);
  const Eigen::MatrixXd& x = data.values[2];
  const Eigen::MatrixXd& y = data.values[3];
  const Direct direct = direct_logistic(x, y, theta);
  check_metrics(predictive_metrics(f, theta), direct, true);     // one block of rows, draws in calls of 40
  check_metrics(predictive_metrics(f, theta, 7), direct, true);  // blocks of 7 rows, draws in calls of 585
  check_metrics(predictive_metrics(f, theta.leftCols(5), 1), direct_logistic(x, y, theta.leftCols(5)), true);  // uncut
}

TEST_CASE("held-out metrics of a softmax regression equal the direct computation when draws are cut into calls",
          "[predictive]") {
  using namespace predictive_test;
  std::mt19937_64 rng(72);
  const int n = 60, d = 4, K = 3;
  const long S = 700;  // 60 x 700 = 42,000 row-draws: calls of 68 draws (11 rows: 372)
  std::normal_distribution<double> normal;
  Data data = class_data(n, d, K, rng);
  const Eigen::MatrixXd& x = data.values[3];
  const Eigen::MatrixXd& y = data.values[4];
  const fvi_model& model = *fvi_model_multinomial_eb();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  Eigen::MatrixXd theta(d * K + K, S);  // W (D x K, column-major), then b (K)
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = normal(rng);
  Direct direct;
  double right = 0;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd log_p(S), p = Eigen::VectorXd::Zero(K);
    for (long s = 0; s < S; ++s) {
      const Eigen::Map<const Eigen::MatrixXd> W(theta.col(s).data(), d, K);
      const Eigen::VectorXd logits = W.transpose() * x.row(i).transpose() + theta.col(s).tail(K);
      const double top = logits.maxCoeff();
      const double log_z = top + std::log((logits.array() - top).exp().sum());
      log_p[s] = logits[int(y(i, 0)) - 1] - log_z;
      p += (logits.array() - log_z).exp().matrix() / double(S);
    }
    add_class_row(direct, log_p, p, y(i, 0), n, right);
  }
  direct.score = right / n;
  check_metrics(predictive_metrics(f, theta), direct, true);
  check_metrics(predictive_metrics(f, theta, 11), direct, true);
}

TEST_CASE("held-out metrics of a normal regression equal the direct computation when draws are cut into calls",
          "[predictive]") {
  using namespace predictive_test;
  std::mt19937_64 rng(73);
  const int n = 50, d = 2;
  const double sigma = 0.7;
  const long S = 1000;  // calls of 81 draws (3 rows: 1,365)
  Data data = fvic::test::linreg_data(n, d, sigma, rng);
  const Eigen::MatrixXd& x = data.values[3];
  const Eigen::MatrixXd& y = data.values[4];
  std::normal_distribution<double> normal;
  const fvi_model& model = *fvi_model_linreg_conjugate();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  Eigen::MatrixXd theta(d, S);
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = normal(rng);
  Direct direct;
  double squared = 0;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd log_p(S);
    double mean = 0, second = 0;
    for (long s = 0; s < S; ++s) {
      const double mu = x.row(i).dot(theta.col(s));
      const double z = (y(i, 0) - mu) / sigma;
      log_p[s] = -0.5 * z * z - std::log(sigma) - 0.5 * std::log(2 * M_PI);
      mean += mu / double(S), second += mu * mu / double(S);
    }
    direct.lpd += log_mean_exp(log_p) / n;
    squared += (mean - y(i, 0)) * (mean - y(i, 0));
    direct.uncertainty.push_back(std::sqrt(sigma * sigma + second - mean * mean));  // noise + spread of the means
  }
  direct.score = std::sqrt(squared / n);
  check_metrics(predictive_metrics(f, theta), direct, false);
  check_metrics(predictive_metrics(f, theta, 3), direct, false);
}

TEST_CASE("held-out metrics of an ordinal regression equal the direct computation when draws are cut into calls",
          "[predictive]") {
  // tests/compiler/emitted/models/ordinal_regression.fvi: the draws are unconstrained, c = (u_1,
  // u_1 + exp(u_2), ...); P(y = k) = P(y <= k) - P(y <= k - 1), P(y <= k) = inv_logit(c_k - eta).
  using namespace predictive_test;
  std::mt19937_64 rng(74);
  const int n = 40, d = 2, K = 4;
  const long S = 900;  // 40 x 900 = 36,000 row-draws: calls of 102 draws (6 rows: 682)
  std::normal_distribution<double> normal;
  Data data = class_data(n, d, K, rng);
  const Eigen::MatrixXd& x = data.values[3];
  const Eigen::MatrixXd& y = data.values[4];
  const fvi_model& model = *fvi_model_ordinal_regression();
  BoundFactor f(model, factor_named(model, "likelihood_y"), data.abi());
  Eigen::MatrixXd theta(d + K - 1, S);  // beta (D), then c unconstrained (K - 1)
  for (Eigen::Index i = 0; i < theta.size(); ++i) theta.data()[i] = 0.7 * normal(rng);
  Direct direct;
  double right = 0;
  for (int i = 0; i < n; ++i) {
    Eigen::VectorXd log_p(S), p = Eigen::VectorXd::Zero(K);
    for (long s = 0; s < S; ++s) {
      const double eta = x.row(i).dot(theta.col(s).head(d));
      Eigen::VectorXd cdf(K + 1);
      double c = 0;
      cdf[0] = 0, cdf[K] = 1;
      for (int k = 1; k < K; ++k) {
        const double u = theta(d + k - 1, s);
        c = k == 1 ? u : c + std::exp(u);
        cdf[k] = 1 / (1 + std::exp(eta - c));
      }
      for (int k = 0; k < K; ++k) p[k] += (cdf[k + 1] - cdf[k]) / double(S);
      const int outcome = int(y(i, 0));
      log_p[s] = std::log(cdf[outcome] - cdf[outcome - 1]);
    }
    add_class_row(direct, log_p, p, y(i, 0), n, right);
  }
  direct.score = right / n;
  check_metrics(predictive_metrics(f, theta), direct, true);
  check_metrics(predictive_metrics(f, theta, 6), direct, true);
}
