#pragma once
// q's means along a softmax's shift, put where the prior wants them (fvi_variable_info.class_shift).
//
// `y ~ categorical_logit(x * W + b)` is unchanged by adding one number to every element of a row
// of W, or to every element of b. With `W ~ normal(0, s)` the ELBO depends on q's means along
// those directions only through the prior's sum of squares: whatever the family, E_q[log lik]
// and the entropy do not move, so the optimum there has zero mean across the classes. Adam finds
// it slowly (the prior's pull is small beside the data's gradient noise that scales each step);
// setting it is exact and never lowers the objective. Points of a fit, not of the model: the
// posterior and q's spread are unchanged.
#include <vector>

#include <Eigen/Dense>

#include "fvi/kernel/abi.h"

namespace fvi::engine {

// A global with a class shift, within the global group's means: `rows` x `cols` column-major
// from `offset`; each_row: each row's mean across the columns is removed, else the mean of all.
struct ClassShiftBlock {
  Eigen::Index offset = 0, rows = 0, cols = 0;
  bool each_row = false;
};

// The blocks of `model` given its data; nothing from a model older than FVI_ABI_VERSION 12, and
// no block whose place or size the model cannot say or that lies outside `global_dim`.
std::vector<ClassShiftBlock> class_shift_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim);

// In place on the global means (the first global_dim values of q's parameters).
void remove_class_means(const std::vector<ClassShiftBlock>& blocks, Eigen::Ref<Eigen::VectorXd> means);

}  // namespace fvi::engine
