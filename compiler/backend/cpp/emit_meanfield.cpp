// The C++ backend (emitter.h) on the mean-field passes: forward_meanfield and backward_meanfield
// of each factor's class, from its mean-field variant (transform/local_reparam.cpp), and the ranges
// of each group's compact theta they sample and take gradients through.
#include "backend/cpp/emitter.h"

#include <algorithm>

namespace fvic::backend::emit_detail {

// ---- mean-field passes ---------------------------------------------------------------------

// forward_meanfield / backward_meanfield from the factor's mean-field variant: each group's
// theta = mean + sd .* eps is sampled for the slices the variant reads as Input (noise stream =
// the group's index, so factors called with one key share theta); Mean / Sd leaves read the
// group's means and sds directly (local reparameterisation).
// The Input nodes of group `group` in a mean-field variant, in node order: the ranges its
// compact theta holds (abi_support.h meanfield_sample).
std::vector<size_t> Emitter::inputs_of(const ir::Factor& mf, fvi_group group) {
  std::vector<size_t> out;
  for (size_t i = 0; i < mf.nodes.size(); ++i)
    if (mf.nodes[i].op == Op::Input && mf.nodes[i].group == group) out.push_back(i);
  return out;
}
std::string Emitter::range_length(const ir::Factor& mf, size_t node, size_t slot) {
  const Node& n = mf.nodes[node];
  return n.group == FVI_GROUP_Z_SUM ? "mean_[" + std::to_string(slot) + "].size()" : sizes_(n.rows) + " * " + sizes_(n.cols);
}
std::string Emitter::ranges_of(const ir::Factor& mf, size_t slot) {
  std::string out;
  for (size_t i : inputs_of(mf, mf.groups[slot]))
    out += std::string(out.empty() ? "" : ", ") + "{" + sizes_(mf.nodes[i].offset) + ", " + range_length(mf, i, slot) + "}";
  return "{" + out + "}";
}
// Where Input node `node` of a mean-field variant starts in its group's compact theta.
std::string Emitter::compact_offset(const ir::Factor& mf, size_t node) {
  const fvi_group group = mf.nodes[node].group;
  size_t slot = std::find(mf.groups.begin(), mf.groups.end(), group) - mf.groups.begin();
  std::string offset = "0";
  for (size_t i : inputs_of(mf, group)) {
    if (i == node) break;
    offset += " + " + range_length(mf, i, slot);
  }
  return offset;
}
void Emitter::meanfield_passes(std::ostringstream& o, const ir::Factor& mf) {
  o << "  void forward_meanfield(int64_t begin, int64_t count, const MeanFieldInputs& q, int64_t draws,\n"
    << "                         uint64_t noise_key) override {\n";
  o << "    meanfield_ = true;\n    full_ = count < 0;\n    begin_ = begin, count_ = count;\n    draws_ = draws;\n    key_ = noise_key;\n";
  for (size_t g = 0; g < mf.groups.size(); ++g) {
    o << "    mean_[" << g << "] = mean_column(q, " << g << ");\n";
    o << "    sd_[" << g << "] = sd_column(q, " << g << ", mean_[" << g << "].rows);\n";
    o << "    has_sd_[" << g << "] = sd_[" << g << "].present();\n";
    o << "    meanfield_sample(mean_[" << g << "], has_sd_[" << g << "] ? &sd_[" << g << "] : nullptr, draws, noise_key, "
      << group_index(mf.groups[g]) << "u, " << ranges_of(mf, g) << ", theta_[" << g << "], eps_[" << g << "]);\n";
  }
  statements(o, mf, 0, mf.forward_end, true);
  o << "  }\n\n";
  o << "  void backward_meanfield(const fvi_tensor* const* seeds, const MeanFieldOutputs& d_q) override {\n";
  o << "    if (!meanfield_) throw std::logic_error(\"backward_meanfield() needs forward_meanfield() first\");\n";
  statements(o, mf, mf.forward_end, static_cast<int>(mf.nodes.size()), true);
  // Per group: the sampled slices' adjoints gathered in the compact d theta and taken through
  // theta = mean + sd eps (meanfield_chain); the locally reparameterised slices' adjoints of
  // their Mean and Sd leaves as they are; each gradient written once (write_gradient).
  for (size_t g = 0; g < mf.groups.size(); ++g) {
    const std::string G = std::to_string(g), dt = "dt" + G, pm = "pm" + G, ps = "ps" + G;
    o << "    Tensor<Real> " << dt << " = Tensor<Real>::zeros_like(theta_[" << G << "]), dmc" << G << ", dsc" << G
      << ";\n";
    std::string mean_pieces, sd_pieces;
    for (const auto& [input, adjoint] : mf.input_adjoints) {
      const Node& n = mf.nodes[input];
      if (n.group != mf.groups[g]) continue;
      if (n.op == Op::Input) {
        o << "    add_to_slice(" << dt << ", " << ref(mf, adjoint, true) << ", " << compact_offset(mf, input) << ");\n";
        continue;
      }
      append_piece(n.op == Op::Mean ? mean_pieces : sd_pieces, ref(mf, adjoint, true), sizes_(n.offset));
    }
    o << "    std::vector<GradientPiece<Real>> " << pm << "{" << mean_pieces << "}, " << ps << "{" << sd_pieces << "};\n";
    o << "    meanfield_chain(" << dt << ", eps_[" << G << "], has_sd_[" << G << "], " << ranges_of(mf, g) << ", dmc" << G
      << ", dsc" << G << ", " << pm << ", " << ps << ");\n";
    o << "    write_meanfield_gradient<Real>(" << pm << ", mean_[" << G << "].size(), d_q, " << G << ", false);\n";
    o << "    write_meanfield_gradient<Real>(" << ps << ", mean_[" << G << "].size(), d_q, " << G << ", true);\n";
  }
  o << "  }\n\n";
}

}  // namespace fvic::backend::emit_detail
