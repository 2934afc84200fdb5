#include "fvi/engine/prior_scale.h"

#include <limits>
#include <string>

#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

namespace {

// Variable `i`'s offset in its group and its number of values; false where the model cannot say.
bool extent(const fvi_model& model, const fvi_data& data, int i, int64_t& offset, int64_t& count) {
  int64_t dims[8] = {0};
  fvi_error error{};
  if (model.variable_shape(i, &data, &offset, dims, &error) != 0) return false;
  const int rank = model.variables[i].rank;
  if (rank < 0 || rank > 8) return false;
  count = 1;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 0 || (dims[d] > 0 && count > std::numeric_limits<int64_t>::max() / dims[d])) return false;
    count *= dims[d];
  }
  return offset >= 0;
}

}  // namespace

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
    int64_t offset = 0, count = 0, hyper_offset = 0, hyper_count = 0;
    if (!extent(model, data, i, offset, count) || !extent(model, data, h, hyper_offset, hyper_count)) continue;
    if (count == 0 || offset > global_dim || count > global_dim - offset || hyper_count != 1 ||
        hyper_offset >= hyper_dim)
      continue;
    blocks.push_back({global_dim + offset, count, q_params + hyper_offset});
  }
  return blocks;
}

void to_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, Eigen::VectorXd& params,
                                Eigen::VectorXd& gradient) {
  for (const PriorScaleBlock& b : blocks) {
    params.segment(b.log_sd_begin, b.count).array() -= params[b.hyper];
    gradient[b.hyper] += gradient.segment(b.log_sd_begin, b.count).sum();
  }
}

void from_prior_scale_coordinates(const std::vector<PriorScaleBlock>& blocks, Eigen::VectorXd& params) {
  for (const PriorScaleBlock& b : blocks) params.segment(b.log_sd_begin, b.count).array() += params[b.hyper];
}

}  // namespace fvi::engine
