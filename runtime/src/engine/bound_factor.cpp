#include "fvi/engine/bound_factor.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

namespace fvi::engine {

int group_index(const fvi_model& model, fvi_group group) {
  for (int g = 0; g < model.group_count; ++g)
    if (model.group_kinds[g] == group) return g;
  return -1;
}

int64_t group_size(const fvi_model& model, fvi_group group, const fvi_data& data) {
  const int g = group_index(model, group);
  if (g < 0) return -1;
  int64_t size = 0;
  fvi_error error{};
  if (model.group_size(g, &data, &size, &error) != 0)
    throw ModelError(std::string("the size of the ") + fvi_group_name(group) + " parameters: " + error.message);
  return size;
}

std::optional<VariablePlace> variable_place(const fvi_model& model, const fvi_data& data, int i, int64_t group_size) {
  if (i < 0 || i >= model.variable_count) return std::nullopt;
  const int rank = model.variables[i].rank;
  int64_t dims[8] = {0};
  fvi_error error{};
  VariablePlace p;
  if (rank < 0 || rank > 8 || model.variable_shape(i, &data, &p.offset, dims, &error) != 0) return std::nullopt;
  for (int d = 0; d < rank; ++d) {
    if (dims[d] < 0 || (dims[d] > 0 && p.count > std::numeric_limits<int64_t>::max() / dims[d])) return std::nullopt;
    p.count *= dims[d];
    p.dims.push_back(dims[d]);
  }
  if (p.offset < 0 || p.offset > group_size || p.count > group_size - p.offset) return std::nullopt;
  return p;
}

BoundFactor::BoundFactor(const fvi_model& model, int factor, const fvi_data& data, Precision precision)
    : model_(&model), factor_(factor), name_(model.factors[factor].name) {
  if (precision == Precision::kFloat32 && !model.create_float32)
    throw ModelError(name_ + ": these kernels have no float32 version; use precision = float64");
  state_ = precision == Precision::kFloat32 ? model.create_float32(factor, &data, &error_)
                                            : model.create(factor, &data, &error_);
  if (!state_) throw ModelError(name_ + ": " + error_.message);
  const fvi_factor_info& f = info();
  for (int g = 0; g < f.group_count; ++g) {
    int64_t size = 0;
    check(model.group_size(f.groups[g], &data, &size, &error_), "group size");
    input_sizes_.push_back(size);
  }
  if (f.kind != FVI_DENSITY) {
    // The observation count: one evaluation of all rows at a single draw of zeros.
    std::vector<Eigen::MatrixXd> zeros;
    for (int64_t size : input_sizes_) zeros.push_back(Eigen::MatrixXd::Zero(size, 1));
    rows_ = forward(0, -1, zeros).rows();
  }
}

BoundFactor::~BoundFactor() {
  if (state_) model_->destroy(state_);
}

void BoundFactor::check(int status, const char* what) const {
  if (status != 0) throw ModelError(name_ + " (" + what + "): " + error_.message);
}

const Eigen::Map<const Eigen::MatrixXd>& BoundFactor::forward(int64_t begin, int64_t count,
                                                             const std::vector<Eigen::MatrixXd>& inputs) {
  const fvi_factor_info& f = info();
  if (static_cast<int>(inputs.size()) != f.group_count)
    throw ModelError(name_ + ": " + std::to_string(inputs.size()) + " input groups given, " +
                     std::to_string(f.group_count) + " expected");
  input_views_.clear();
  for (int g = 0; g < f.group_count; ++g) {
    const Eigen::MatrixXd& x = inputs[g];
    if (x.rows() != input_sizes_[g])
      throw ModelError(name_ + ": the " + std::string(fvi_group_name(group_kind(*model_, f.groups[g]))) + " group has " +
                       std::to_string(x.rows()) + " values, " + std::to_string(input_sizes_[g]) + " expected");
    input_views_.push_back(fvi_tensor{const_cast<double*>(x.data()), x.rows(), 1, x.cols()});
  }
  check(model_->forward(state_, begin, count, input_views_.data(), &output_, &error_), "forward");
  // The output's draws broadcast over the groups' (a network body of point estimates, 1 draw,
  // before a random last layer, S): a seed has the most draws any group has.
  draws_ = 1;
  for (const fvi_tensor& in : input_views_) draws_ = std::max<int64_t>(draws_, in.draws);
  set_output();
  return output_map_;
}

void BoundFactor::set_output() {
  new (&output_map_) Eigen::Map<const Eigen::MatrixXd>(output_.data, output_.rows, output_.cols * output_.draws);
}

namespace {

// The ABI's tensor type for a mean-field q kept in T.
template <class T>
using AbiTensor = std::conditional_t<std::is_same_v<T, float>, fvi_tensor_f32, fvi_tensor>;

}  // namespace

template <class T>
const Eigen::Map<const Eigen::MatrixXd>& BoundFactor::forward_meanfield(int64_t begin, int64_t count,
                                                                       const GroupVectors<T>& means,
                                                                       const GroupVectors<T>& sds, int64_t draws,
                                                                       uint64_t noise_key) {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, float>);
  const fvi_factor_info& f = info();
  if (int(means.size()) != f.group_count || int(sds.size()) != f.group_count)
    throw ModelError(name_ + ": " + std::to_string(means.size()) + " input groups given, " +
                     std::to_string(f.group_count) + " expected");
  std::vector<AbiTensor<T>> mean_views, sd_views;
  input_views_.clear();  // backward_meanfield's gradients have the means' shapes
  for (int g = 0; g < f.group_count; ++g) {
    if (means[g].size() != input_sizes_[g] || (sds[g].size() != 0 && sds[g].size() != input_sizes_[g]))
      throw ModelError(name_ + ": the " + std::string(fvi_group_name(group_kind(*model_, f.groups[g]))) + " group has " +
                       std::to_string(means[g].size()) + " values, " + std::to_string(input_sizes_[g]) + " expected");
    mean_views.push_back(AbiTensor<T>{const_cast<T*>(means[g].data()), means[g].size(), 1, 1});
    sd_views.push_back(AbiTensor<T>{sds[g].size() ? const_cast<T*>(sds[g].data()) : nullptr, sds[g].size(), 1, 1});
    input_views_.push_back(fvi_tensor{nullptr, means[g].size(), 1, 1});
  }
  if constexpr (std::is_same_v<T, float>) {
    check(model_->forward_meanfield_f32(state_, begin, count, mean_views.data(), sd_views.data(), draws, noise_key,
                                        &output_, &error_),
          "forward_meanfield_f32");
  } else {
    check(model_->forward_meanfield(state_, begin, count, mean_views.data(), sd_views.data(), draws, noise_key,
                                    &output_, &error_),
          "forward_meanfield");
  }
  draws_ = output_.draws;
  set_output();
  return output_map_;
}

// Seeds are shaped like what they seed: rows x (cols * draws), with the draws of the output.
std::vector<fvi_tensor> BoundFactor::seed_views(const std::vector<const Eigen::MatrixXd*>& seeds, int64_t draws) const {
  std::vector<fvi_tensor> views(info().seed_count, fvi_tensor{});
  for (size_t k = 0; k < seeds.size() && k < views.size(); ++k) {
    if (!seeds[k]) continue;
    const Eigen::MatrixXd& s = *seeds[k];
    const int64_t cols = s.cols() % draws == 0 ? s.cols() / draws : s.cols();
    views[k] = fvi_tensor{const_cast<double*>(s.data()), s.rows(), cols, s.cols() / cols};
  }
  return views;
}

template <class T>
MeanFieldGradient<T> BoundFactor::backward_meanfield(const std::vector<const Eigen::MatrixXd*>& seeds) {
  const std::vector<fvi_tensor> views = seed_views(seeds, draws_);
  std::vector<const fvi_tensor*> seed_ptrs(views.size(), nullptr);
  for (size_t k = 0; k < views.size(); ++k)
    if (views[k].data) seed_ptrs[k] = &views[k];
  MeanFieldGradient<T> out;
  std::vector<AbiTensor<T>> dm, ds;
  // Not zero-filled: the kernel overwrites every element (docs/kernel-abi.md).
  for (const fvi_tensor& in : input_views_) {
    out.d_means.emplace_back(in.rows);
    out.d_sds.emplace_back(in.rows);
  }
  for (size_t g = 0; g < input_views_.size(); ++g) {
    dm.push_back(AbiTensor<T>{out.d_means[g].data(), out.d_means[g].size(), 1, 1});
    ds.push_back(AbiTensor<T>{out.d_sds[g].data(), out.d_sds[g].size(), 1, 1});
  }
  if constexpr (std::is_same_v<T, float>) {
    check(model_->backward_meanfield_f32(state_, seed_ptrs.data(), dm.data(), ds.data(), &error_),
          "backward_meanfield_f32");
  } else {
    check(model_->backward_meanfield(state_, seed_ptrs.data(), dm.data(), ds.data(), &error_), "backward_meanfield");
  }
  return out;
}

template const Eigen::Map<const Eigen::MatrixXd>& BoundFactor::forward_meanfield<double>(
    int64_t, int64_t, const GroupVectors<double>&, const GroupVectors<double>&, int64_t, uint64_t);
template const Eigen::Map<const Eigen::MatrixXd>& BoundFactor::forward_meanfield<float>(
    int64_t, int64_t, const GroupVectors<float>&, const GroupVectors<float>&, int64_t, uint64_t);
template MeanFieldGradient<double> BoundFactor::backward_meanfield<double>(const std::vector<const Eigen::MatrixXd*>&);
template MeanFieldGradient<float> BoundFactor::backward_meanfield<float>(const std::vector<const Eigen::MatrixXd*>&);

std::vector<Eigen::MatrixXd> BoundFactor::backward(const std::vector<const Eigen::MatrixXd*>& seeds) {
  const std::vector<fvi_tensor> views_of_seeds = seed_views(seeds, draws_);
  std::vector<const fvi_tensor*> seed_ptrs(views_of_seeds.size(), nullptr);
  for (size_t k = 0; k < views_of_seeds.size(); ++k)
    if (views_of_seeds[k].data) seed_ptrs[k] = &views_of_seeds[k];
  std::vector<Eigen::MatrixXd> gradients;
  std::vector<fvi_tensor> views;
  gradients.reserve(input_views_.size());
  for (const fvi_tensor& in : input_views_) gradients.emplace_back(Eigen::MatrixXd::Zero(in.rows, in.draws));
  for (Eigen::MatrixXd& g : gradients) views.push_back(fvi_tensor{g.data(), g.rows(), 1, g.cols()});
  check(model_->backward(state_, seed_ptrs.data(), views.data(), &error_), "backward");
  return gradients;
}

std::vector<BoundFactor::Argument> BoundFactor::arguments() {
  const fvi_factor_info& f = info();
  std::vector<fvi_tensor> values(f.seed_count, fvi_tensor{});
  check(model_->arguments(state_, values.data(), &error_), "arguments");
  std::vector<Argument> out(f.seed_count);
  for (int k = 0; k < f.seed_count; ++k) {
    const fvi_tensor& t = values[k];
    new (&out[k].values) Eigen::Map<const Eigen::MatrixXd>(t.data, t.rows, t.cols * t.draws);
    out[k].rows = t.rows;
    out[k].cols = t.cols;
    out[k].draws = t.draws;
  }
  return out;
}

}  // namespace fvi::engine
