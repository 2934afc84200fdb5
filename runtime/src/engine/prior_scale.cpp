#include "fvi/engine/prior_scale.h"

#include <cmath>
#include <string>

#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

std::vector<PriorScaleBlock> prior_scale_blocks(const fvi_model& model, const fvi_data& data,
                                                Eigen::Index global_dim, Eigen::Index q_params,
                                                Eigen::Index hyper_dim) {
  std::vector<PriorScaleBlock> blocks;
  if (model.abi_version < 11) return blocks;
  for (int i = 0; i < model.variable_count; ++i) {
    const fvi_variable_info& v = model.variables[i];
    const int h = v.prior_scale;
    if (h < 0 || h >= model.variable_count || group_kind(model, v.group) != FVI_GROUP_GLOBAL) continue;
    const fvi_variable_info& scale = model.variables[h];
    // log of the scale = the unconstrained value only for a scalar with lower bound 0.
    if (group_kind(model, scale.group) != FVI_GROUP_HYPER || scale.rank != 0 || scale.transform != FVI_LOWER ||
        scale.lower != 0 || (scale.lower_data && scale.lower_data[0] != '\0'))
      continue;
    const std::optional<VariablePlace> x = variable_place(model, data, i, global_dim);
    const std::optional<VariablePlace> scale_place = variable_place(model, data, h, hyper_dim);
    if (!x || !scale_place || x->count == 0 || scale_place->count != 1) continue;
    blocks.push_back({x->offset, global_dim + x->offset, x->count, q_params + scale_place->offset});
  }
  return blocks;
}

PriorScaleStep to_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, Eigen::VectorXd& params,
                                          Eigen::VectorXd& gradient, Eigen::VectorXd& step_limit) {
  PriorScaleStep step;
  step.weights.reserve(blocks.size());
  for (const PriorScaleBlock& b : blocks) {
    const double theta = params[b.hyper];
    auto means = params.segment(b.mean_begin, b.count);
    auto log_sds = params.segment(b.log_sd_begin, b.count);
    // A mean moves with the scale by w_i = (s_i / scale)^2, the prior's share of its precision
    // (at most 1); every log-sd entirely.
    const Eigen::ArrayXd w = (2 * (log_sds.array() - theta)).exp().min(1.0);
    const Eigen::ArrayXd unit = (w * theta).exp();  // scale^w_i
    auto g_means = gradient.segment(b.mean_begin, b.count).array();
    gradient[b.hyper] += (w * g_means * means.array()).sum() + gradient.segment(b.log_sd_begin, b.count).sum();
    g_means *= unit;
    means.array() /= unit;
    if (step_limit.size() != 0) step_limit.segment(b.mean_begin, b.count).array() /= unit;
    log_sds.array() -= theta;
    step.weights.push_back(w);
  }
  return step;
}

void from_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, const PriorScaleStep& step,
                                  Eigen::VectorXd& params) {
  for (size_t k = 0; k < blocks.size(); ++k) {
    const PriorScaleBlock& b = blocks[k];
    const Eigen::ArrayXd& w = step.weights[k];
    const double theta = params[b.hyper];
    params.segment(b.mean_begin, b.count).array() *= (w * theta).exp();
    params.segment(b.log_sd_begin, b.count).array() += theta;
  }
}

}  // namespace fvi::engine
