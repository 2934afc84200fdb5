#pragma once
// The optimiser's coordinates for a global whose prior scale is an empirical-Bayes
// hyperparameter (`W ~ normal(0, sigma_w)`, sigma_w in `hyperparameters`; the compiler marks it,
// fvi_variable_info.prior_scale).
//
// Adam steps q's parameters and log sigma_w one coordinate at a time. A weight the data barely
// inform has its q sd at sigma_w, so every move of sigma_w must be followed by many log-sds, each
// at Adam's pace, while sigma_w's own optimum is the average of those sds: a slow coupled mode,
// as EM's where information is missing. Measured from log sigma_w (rho_i = log s_i -
// log sigma_w), those sds move with sigma_w in one step, and log sigma_w's gradient becomes its
// own plus the sum of theirs (the chain rule). The means the data barely inform likewise, in
// units of sigma_w: shrunk toward the prior's 0 by sigma_w, they shrink with it (multinomial_eb,
// 5 silos: the means' drift between 12,000 and 24,000 iterations had cosine -0.6 with the means
// themselves, a common shrink, and sigma_w still moved at 24,000; measured so, the shrink is gone,
// sigma_w settles by 12,000, and the averaged means' largest standard error is 0.012-0.016 sds
// where it was 0.017-0.022 at the same iterations). The objective, its optimum and q are unchanged:
// only the coordinates the optimiser walks in. Normal means with 95 of 100 uninformed: at the
// optimum within Monte Carlo error after 1,000 steps, where q's own coordinates leave log tau
// 0.9 off (emitted_kernels_test "SFVI: q's log-sds*").
#include <vector>

#include <Eigen/Dense>

#include "fvi/kernel/abi.h"

namespace fvi::engine {

// A global's means and log-sds measured from one hyperparameter, as indices into the optimiser's vector
// [q's parameters (means, then log-sds, then the Cholesky rows), hyperparameters].
struct PriorScaleBlock {
  Eigen::Index mean_begin = 0, log_sd_begin = 0, count = 0;
  Eigen::Index hyper = 0;
};

// The blocks of `model` given its data: every global marked with a prior scale, whose scale is a
// scalar hyperparameter with lower bound 0 (its unconstrained value is the log of the scale).
// `global_dim` is the global group's size, `q_params` the number of q's parameters (the
// hyperparameters follow them), `hyper_dim` the hyperparameters'. What lies outside these sizes
// is ignored.
std::vector<PriorScaleBlock> prior_scale_blocks(const fvi_model& model, const fvi_data& data,
                                                Eigen::Index global_dim, Eigen::Index q_params,
                                                Eigen::Index hyper_dim);

// The coordinates of one step: a block's log-sds are measured from log scale, and element i's
// mean in units of scale^w_i, w_i = (s_i / scale)^2 at the step's start (at most 1), the prior's
// share of its precision: a mean the data barely inform (s_i = scale) shrinks with the scale, one
// they pin down (s_i << scale, an intercept) does not, where it would follow every noisy step of
// the scale (for a Gaussian likelihood d log m_i / d log scale = 2 w_i). The weights are held
// through the step, so that it is a step in fixed coordinates. (The log-sds' own share, also w_i,
// would start the uninformed sds, at init_sd far below the scale, uncoupled: the slow mode again,
// log tau 0.54 off after 1,000 steps in the test below.)
struct PriorScaleStep {
  std::vector<Eigen::ArrayXd> weights;  // one per block
};

// In place: the optimiser's vector, the gradient of its objective and the means' step limits
// from q's coordinates to the step's (mt_i = m_i / scale^w_i, rho_i = log s_i - theta, theta =
// log scale; d theta += sum_i (w_i m_i dm_i + d log s_i)), and the vector back.
PriorScaleStep to_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, Eigen::VectorXd& params,
                                          Eigen::VectorXd& gradient, Eigen::VectorXd& step_limit);
void from_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, const PriorScaleStep& step,
                                  Eigen::VectorXd& params);

}  // namespace fvi::engine
