#pragma once
// Posterior predictive evaluation on held-out data (`--test`): the log predictive density of each
// observation, log (1/S) sum_s p(y_i | theta_s), and accuracy (bernoulli_logit,
// categorical_logit: the class with the highest predictive probability) or RMSE (normal: the
// predictive mean).
#include <string>

#include "fvi/engine/bound_factor.h"

namespace fvi::program {

struct PredictiveMetrics {
  double mean_log_density = 0;  // per observation
  double accuracy = -1;         // < 0: not a classification likelihood
  double rmse = -1;             // < 0: not a normal likelihood
  int64_t observations = 0;
};

// `draws`: the global parameters, size x S. Evaluated in blocks of `block` rows.
PredictiveMetrics predictive_metrics(engine::BoundFactor& likelihood, const Eigen::MatrixXd& draws, int64_t block = 2048);

}  // namespace fvi::program
