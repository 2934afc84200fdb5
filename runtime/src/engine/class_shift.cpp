#include "fvi/engine/class_shift.h"

#include <limits>

#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

std::vector<ClassShiftBlock> class_shift_blocks(const fvi_model& model, const fvi_data& data, Eigen::Index global_dim) {
  std::vector<ClassShiftBlock> blocks;
  if (model.abi_version < 12) return blocks;
  for (int i = 0; i < model.variable_count; ++i) {
    const fvi_variable_info& v = model.variables[i];
    if ((v.class_shift != 1 && v.class_shift != 2) || group_kind(model, v.group) != FVI_GROUP_GLOBAL) continue;
    const bool each_row = v.class_shift == 1;
    if (v.rank != (each_row ? 2 : 1)) continue;
    int64_t offset = 0, dims[8] = {0};
    fvi_error error{};
    if (model.variable_shape(i, &data, &offset, dims, &error) != 0) continue;
    const int64_t rows = dims[0], cols = each_row ? dims[1] : 1;
    if (offset < 0 || rows <= 0 || cols <= 0 || rows > std::numeric_limits<int64_t>::max() / cols) continue;
    if (offset > global_dim || rows * cols > global_dim - offset) continue;
    blocks.push_back({Eigen::Index(offset), Eigen::Index(rows), Eigen::Index(cols), each_row});
  }
  return blocks;
}

void remove_class_means(const std::vector<ClassShiftBlock>& blocks, Eigen::Ref<Eigen::VectorXd> means) {
  for (const ClassShiftBlock& b : blocks) {
    Eigen::Map<Eigen::MatrixXd> m(means.data() + b.offset, b.rows, b.cols);
    if (b.each_row) m.colwise() -= m.rowwise().mean();
    else m.array() -= m.mean();
  }
}

}  // namespace fvi::engine
