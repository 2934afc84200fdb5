#pragma once
// Posterior predictive evaluation on held-out data (`--test`): the log predictive density of each
// observation, log (1/S) sum_s p(y_i | theta_s), and accuracy (bernoulli_logit,
// categorical_logit: the class with the highest predictive probability) or RMSE (normal: the
// predictive mean), each with its calibration error (fvi/diagnostics/calibration.h: ECE for
// classes, ENCE of the predictive sd for a normal likelihood).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fvi/data/dataset.h"
#include "fvi/engine/bound_factor.h"

namespace fvi::program {

struct PredictiveMetrics {
  double mean_log_density = 0;  // per observation
  double accuracy = -1;         // < 0: not a classification likelihood
  double rmse = -1;             // < 0: not a normal likelihood
  double calibration_error = -1;  // ECE (classification) or ENCE (normal); < 0: neither
  double calibration_if_calibrated = -1;  // what a calibrated predictive scores on these rows
  // Each row's predictive uncertainty, the OOD score (fvi/diagnostics/ood_auroc.h): the entropy of
  // the predictive's classes, or the predictive sd; empty for other likelihoods.
  std::vector<double> uncertainty;
  // with --ood: telling its rows from --test's by `uncertainty`; < 0: none; NaN: a row's predictive not finite
  double ood_auroc = -1;
  int64_t observations = 0;
};

// `draws`: the global parameters, size x S. Evaluated in blocks of `block` rows.
PredictiveMetrics predictive_metrics(engine::BoundFactor& likelihood, const Eigen::MatrixXd& draws, int64_t block = 2048);
// A vertical model's coupling likelihood: the globals' draws (n_G x S) and the summed silo
// contributions of every held-out row (N x S).
PredictiveMetrics predictive_metrics(engine::BoundFactor& likelihood, const Eigen::MatrixXd& globals,
                                     const Eigen::MatrixXd& z_sum, int64_t block = 2048);

// Appends the metrics' columns (test_log_density, test_accuracy, test_rmse, test_ece or
// test_ence and its _if_calibrated) to `columns` and returns their text for a progress line
// ("  test lpd -0.5825  accuracy 0.7400  ece 0.1045 (0.0512 if calibrated)").
std::string report_metrics(const PredictiveMetrics& m, std::vector<std::pair<std::string, double>>& columns);



// Held-out data (`--test FILE`): one silo's variables, checked like a silo's against the model's
// declarations, with the model's silo likelihood bound to them. The data must outlive `likelihood`.
struct HeldOut {
  std::unique_ptr<data::DataSet> data;
  std::unique_ptr<engine::BoundFactor> likelihood;
};
HeldOut load_held_out(const fvi_model& model, const std::string& path, const data::DataSet& public_data,
                      engine::Precision precision = engine::Precision::kFloat64);

// Out-of-distribution rows (`--ood FILE`, beside `--test`): laid out as held-out data (their
// outcomes are read, to bind the likelihood, and never scored). Empty without `--ood`; throws
// when `--ood` comes without `--test`, which its rows are told from.
HeldOut load_out_of_distribution(const fvi_model& model, const std::string& ood_path, const std::string& test_path,
                                 const data::DataSet& public_data,
                                 engine::Precision precision = engine::Precision::kFloat64);

// The held-out metrics at the global draws (size x S), with the OOD AUROC of `ood`'s rows against
// `test`'s where `ood` has rows (a ModelError where the likelihood gives no uncertainty score).
PredictiveMetrics held_out_metrics(HeldOut& test, HeldOut& ood, const Eigen::MatrixXd& draws);

}  // namespace fvi::program
