#include "fvi/engine/class_shift.h"


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
    const std::optional<VariablePlace> p = variable_place(model, data, i, global_dim);
    if (!p || p->count == 0) continue;
    const int64_t rows = p->dims[0], cols = each_row ? p->dims[1] : 1;
    blocks.push_back({Eigen::Index(p->offset), Eigen::Index(rows), Eigen::Index(cols), each_row});
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
