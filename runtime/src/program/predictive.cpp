#include "fvi/program/predictive.h"

#include <cmath>

namespace fvi::program {

PredictiveMetrics predictive_metrics(engine::BoundFactor& f, const Eigen::MatrixXd& draws, int64_t block) {
  PredictiveMetrics m;
  const std::string dist = f.info().distribution;
  const Eigen::Index S = draws.cols();
  double log_density = 0, correct = 0, squared = 0;
  const int64_t n = f.rows();
  for (int64_t begin = 0; begin < n; begin += block) {
    const int64_t count = std::min(block, n - begin);
    const auto& lp = f.forward(begin, count, {draws});  // count x S
    for (int64_t i = 0; i < count; ++i) {
      const double top = lp.row(i).maxCoeff();
      log_density += top + std::log((lp.row(i).array() - top).exp().sum() / double(S));
    }
    auto args = f.arguments();
    const Eigen::VectorXd y = args[0].values.col(0);
    if (dist == "bernoulli_logit") {
      const auto& eta = args[1];
      for (int64_t i = 0; i < count; ++i) {
        double p = 0;
        for (Eigen::Index s = 0; s < S; ++s) {
          const double e = eta.values(eta.rows == 1 ? 0 : i, eta.draws == 1 ? 0 : s);
          p += 1 / (1 + std::exp(-e));
        }
        correct += ((p / double(S) > 0.5) == (y[i] > 0.5));
      }
    } else if (dist == "categorical_logit") {
      const auto& logits = args[1];
      const Eigen::Index K = logits.cols;
      for (int64_t i = 0; i < count; ++i) {
        Eigen::VectorXd prob = Eigen::VectorXd::Zero(K);
        for (Eigen::Index s = 0; s < S; ++s) {
          Eigen::VectorXd a = logits.values.block(i, (logits.draws == 1 ? 0 : s) * K, 1, K).transpose();
          a = (a.array() - a.maxCoeff()).exp();
          prob += a / a.sum();
        }
        Eigen::Index best = 0;
        prob.maxCoeff(&best);
        correct += (double(best + 1) == y[i]);
      }
    } else if (dist == "normal") {
      const auto& mu = args[1];
      for (int64_t i = 0; i < count; ++i) {
        double mean = 0;
        for (Eigen::Index s = 0; s < S; ++s) mean += mu.values(mu.rows == 1 ? 0 : i, mu.draws == 1 ? 0 : s);
        squared += std::pow(mean / double(S) - y[i], 2);
      }
    }
  }
  m.observations = n;
  m.mean_log_density = log_density / double(n);
  if (dist == "bernoulli_logit" || dist == "categorical_logit") m.accuracy = correct / double(n);
  if (dist == "normal") m.rmse = std::sqrt(squared / double(n));
  return m;
}

}  // namespace fvi::program
