#include "fvi/program/predictive.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fvi/data/readers.h"
#include "fvi/data/validate.h"
#include "fvi/diagnostics/calibration.h"
#include "fvi/diagnostics/ood_auroc.h"
#include "fvi/kernel/distributions.h"

namespace fvi::program {

namespace {

// The likelihoods whose held-out rows have a class: accuracy, calibration and entropy.
bool classifier(const std::string& dist) {
  return dist == "bernoulli_logit" || dist == "categorical_logit" || kernel::ordinal_density(dist);
}

// Rows x draws evaluated in one call at most: a network's layers hold every row's activations at
// every draw at once (LeNet-5: about 200 kB a row and draw), so 2,000 test rows at 200 draws in
// one call would need some 80 GB. Blocks of rows, and of draws within them, keep a call's working
// set to this many row-draws (LeNet-5: under 1 GB), with row blocks long enough for efficient
// products (2,000 rows at 2 draws a call).
constexpr int64_t kRowDrawsPerCall = 4096;

// The metrics of `f` with the inputs of rows [begin, begin + count) and draws [first, first +
// draws) given by `inputs`.
template <typename Inputs>
PredictiveMetrics metrics_of(engine::BoundFactor& f, Eigen::Index S, int64_t block, const Inputs& inputs) {
  PredictiveMetrics m;
  const std::string dist = f.info().distribution;
  double log_density = 0, correct = 0, squared = 0;
  const int64_t n = f.rows();
  // Per row, for the calibration error: the top class's predictive probability and whether that
  // class is right; or the predictive mean's error (its sd is m.uncertainty).
  std::vector<double> confidence, error;
  std::vector<bool> right;
  block = std::max<int64_t>(1, std::min(block, kRowDrawsPerCall));
  for (int64_t begin = 0; begin < n; begin += block) {
    const int64_t count = std::min(block, n - begin);
    const Eigen::Index chunk = std::max<Eigen::Index>(1, Eigen::Index(kRowDrawsPerCall / count));
    // Per row, summed over the draws: log p(y_i | theta_s) (all S kept), and the predictive's
    // class probabilities, success probability, or mean, second moment and noise variance.
    Eigen::MatrixXd lp_all(count, S), prob;
    Eigen::VectorXd y, p_sum = Eigen::VectorXd::Zero(count), mean = p_sum, second = p_sum, noise = p_sum;
    for (Eigen::Index first = 0; first < S; first += chunk) {
      const Eigen::Index draws = std::min(chunk, S - first);
      // Kept alive to the end of the chunk: an argument the kernel passes through unchanged (a
      // logit that is the z_sum input itself) is a view of its input.
      const std::vector<Eigen::MatrixXd> in = inputs(begin, count, first, draws);
      lp_all.middleCols(first, draws) = f.forward(begin, count, in);  // count x draws
      auto args = f.arguments();
      if (first == 0) y = args[0].values.col(0);
      if (dist == "bernoulli_logit") {
        const auto& eta = args[1];
        for (int64_t i = 0; i < count; ++i)
          for (Eigen::Index s = 0; s < draws; ++s)
            p_sum[i] += 1 / (1 + std::exp(-eta.values(eta.rows == 1 ? 0 : i, eta.draws == 1 ? 0 : s)));
      } else if (dist == "categorical_logit") {
        const auto& logits = args[1];
        const Eigen::Index K = logits.cols;
        if (first == 0) prob = Eigen::MatrixXd::Zero(K, count);
        for (int64_t i = 0; i < count; ++i)
          for (Eigen::Index s = 0; s < draws; ++s) {
            Eigen::VectorXd a = logits.values.block(i, (logits.draws == 1 ? 0 : s) * K, 1, K).transpose();
            a = (a.array() - a.maxCoeff()).exp();
            prob.col(i) += a / a.sum();
          }
      } else if (kernel::ordinal_density(dist)) {
        // P(y = k) = P(y <= k) - P(y <= k - 1), P(y <= k) = F(c_k - eta).
        const bool probit = dist == "ordered_probit";
        const auto &eta = args[1], &c = args[2];
        const Eigen::Index cuts = c.rows * c.cols;
        if (first == 0) prob = Eigen::MatrixXd::Zero(cuts + 1, count);
        for (int64_t i = 0; i < count; ++i)
          for (Eigen::Index s = 0; s < draws; ++s) {
            const double e = eta.values(eta.rows == 1 ? 0 : i, eta.draws == 1 ? 0 : s);
            double below = 0;
            for (Eigen::Index k = 0; k < cuts; ++k) {
              const double cdf = kernel::ordinal_cdf(probit, c.values(k, c.draws == 1 ? 0 : s) - e);
              prob(k, i) += cdf - below;
              below = cdf;
            }
            prob(cuts, i) += 1 - below;
          }
      } else if (dist == "normal") {
        const auto& mu = args[1];
        const auto& sigma = args[2];
        for (int64_t i = 0; i < count; ++i)
          for (Eigen::Index s = 0; s < draws; ++s) {
            const double m_s = mu.values(mu.rows == 1 ? 0 : i, mu.draws == 1 ? 0 : s);
            const double sd_s = sigma.values(sigma.rows == 1 ? 0 : i, sigma.draws == 1 ? 0 : s);
            mean[i] += m_s, second[i] += m_s * m_s, noise[i] += sd_s * sd_s;
          }
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      const double top = lp_all.row(i).maxCoeff();
      log_density += top + std::log((lp_all.row(i).array() - top).exp().sum() / double(S));
    }
    if (dist == "bernoulli_logit") {
      for (int64_t i = 0; i < count; ++i) {
        const double p = p_sum[i] / double(S);
        const bool hit = (p > 0.5) == (y[i] > 0.5);
        correct += hit;
        confidence.push_back(std::max(p, 1 - p)), right.push_back(hit);
        m.uncertainty.push_back(-(p > 0 ? p * std::log(p) : 0) - (p < 1 ? (1 - p) * std::log(1 - p) : 0));
      }
    } else if (dist == "categorical_logit" || kernel::ordinal_density(dist)) {
      for (int64_t i = 0; i < count; ++i) {
        const Eigen::VectorXd p = prob.col(i) / double(S);
        Eigen::Index best = 0;
        const double top = p.maxCoeff(&best);
        double entropy = 0;
        for (Eigen::Index c = 0; c < p.size(); ++c)
          if (p[c] > 0) entropy -= p[c] * std::log(p[c]);
        m.uncertainty.push_back(entropy);
        const bool hit = double(best + 1) == y[i];
        correct += hit;
        confidence.push_back(top), right.push_back(hit);
      }
    } else if (dist == "normal") {
      for (int64_t i = 0; i < count; ++i) {
        // The predictive's mean and variance: E_s[mu_s] and E_s[sigma_s^2] + Var_s[mu_s].
        const double mu = mean[i] / double(S);
        const double variance = noise[i] / double(S) + std::max(0.0, second[i] / double(S) - mu * mu);
        squared += std::pow(mu - y[i], 2);
        m.uncertainty.push_back(std::sqrt(variance)), error.push_back(y[i] - mu);
      }
    }
  }
  m.observations = n;
  m.mean_log_density = log_density / double(n);
  if (classifier(dist)) {
    m.accuracy = correct / double(n);
    const diagnostics::Calibration c = diagnostics::expected_calibration_error(confidence, right);
    m.calibration_error = c.error, m.calibration_if_calibrated = c.if_calibrated;
  }
  if (dist == "normal") {
    m.rmse = std::sqrt(squared / double(n));
    const diagnostics::Calibration c = diagnostics::expected_normalized_calibration_error(m.uncertainty, error);
    m.calibration_error = c.error, m.calibration_if_calibrated = c.if_calibrated;
  }
  return m;
}

}  // namespace

PredictiveMetrics predictive_metrics(engine::BoundFactor& f, const Eigen::MatrixXd& draws, int64_t block) {
  return metrics_of(f, draws.cols(), block, [&](int64_t, int64_t, Eigen::Index first, Eigen::Index count) {
    return std::vector<Eigen::MatrixXd>{draws.middleCols(first, count)};
  });
}

PredictiveMetrics predictive_metrics(engine::BoundFactor& f, const Eigen::MatrixXd& globals, const Eigen::MatrixXd& z_sum,
                                     int64_t block) {
  return metrics_of(f, z_sum.cols(), block, [&](int64_t begin, int64_t count, Eigen::Index first, Eigen::Index draws) {
    std::vector<Eigen::MatrixXd> inputs;
    for (int g = 0; g < f.info().group_count; ++g) {
      const int group = f.group(g);
      if (group == FVI_GROUP_GLOBAL) inputs.push_back(globals.middleCols(first, draws));
      else if (group == FVI_GROUP_Z_SUM) inputs.push_back(z_sum.block(begin, first, count, draws));
      else throw engine::ModelError(f.name() + ": reads the " + fvi_group_name(group) + " group, which a held-out vertical row does not have");
    }
    return inputs;
  });
}

std::string report_metrics(const PredictiveMetrics& m, std::vector<std::pair<std::string, double>>& columns) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "  test lpd %.4f", m.mean_log_density);
  std::string text = buf;
  columns.push_back({"test_log_density", m.mean_log_density});
  if (m.accuracy >= 0) {
    columns.push_back({"test_accuracy", m.accuracy});
    std::snprintf(buf, sizeof buf, "  accuracy %.4f", m.accuracy);
    text += buf;
  }
  if (m.rmse >= 0) {
    columns.push_back({"test_rmse", m.rmse});
    std::snprintf(buf, sizeof buf, "  rmse %.4f", m.rmse);
    text += buf;
  }
  if (!(m.ood_auroc < 0)) {  // NaN: asked for, but the predictive was not finite
    columns.push_back({"test_ood_auroc", m.ood_auroc});
    std::snprintf(buf, sizeof buf, "  ood auroc %.4f", m.ood_auroc);
    text += buf;
  }
  if (m.calibration_error >= 0) {
    const std::string name = m.accuracy >= 0 ? "ece" : "ence";
    columns.push_back({"test_" + name, m.calibration_error});
    columns.push_back({"test_" + name + "_if_calibrated", m.calibration_if_calibrated});
    std::snprintf(buf, sizeof buf, "  %s %.4f (%.4f if calibrated)", name.c_str(), m.calibration_error,
                  m.calibration_if_calibrated);
    text += buf;
  }
  return text;
}

HeldOut load_held_out(const fvi_model& model, const std::string& path, const data::DataSet& public_data,
                      engine::Precision precision) {
  data::DataSet test = data::load_test_data(path);
  data::Problems problems;
  data::validate_party(*model.data_table, data::Party::Silo, test, public_data, problems);
  if (!problems.empty()) throw data::DataError(problems.text());
  HeldOut out;
  out.data = std::make_unique<data::DataSet>(std::move(test).merged(public_data));
  for (int f = 0; f < model.factor_count && !out.likelihood; ++f)
    if (model.factors[f].kind == FVI_LIKELIHOOD && model.factors[f].owner == FVI_SILO)
      out.likelihood = std::make_unique<engine::BoundFactor>(model, f, out.data->view(), precision);
  return out;
}

HeldOut load_out_of_distribution(const fvi_model& model, const std::string& ood_path, const std::string& test_path,
                                 const data::DataSet& public_data, engine::Precision precision) {
  if (ood_path.empty()) return {};
  if (test_path.empty())
    throw data::DataError("--ood " + ood_path + ": out-of-distribution rows are told from held-out ones: give --test too");
  HeldOut ood = load_held_out(model, ood_path, public_data, precision);
  // Refused before the fit, not at its first report: the likelihoods whose rows have a score.
  const std::string dist = ood.likelihood->info().distribution;
  if (!classifier(dist) && dist != "normal")
    throw engine::ModelError("--ood scores rows by the predictive's entropy (bernoulli_logit, categorical_logit, "
                             "ordered_logistic, ordered_probit) or "
                             "sd (normal); the likelihood " + dist + " has neither");
  return ood;
}

PredictiveMetrics held_out_metrics(HeldOut& test, HeldOut& ood, const Eigen::MatrixXd& draws) {
  PredictiveMetrics m = predictive_metrics(*test.likelihood, draws);
  if (!ood.likelihood) return m;
  const PredictiveMetrics o = predictive_metrics(*ood.likelihood, draws);
  // A predictive that is not finite somewhere (draws whose outputs overflow) has no ranking: the
  // figure is NaN for this report, and the run goes on.
  const auto finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return !std::isnan(x); });
  };
  m.ood_auroc = finite(m.uncertainty) && finite(o.uncertainty) ? diagnostics::ood_auroc(m.uncertainty, o.uncertainty)
                                                               : std::numeric_limits<double>::quiet_NaN();
  return m;
}

}  // namespace fvi::program
