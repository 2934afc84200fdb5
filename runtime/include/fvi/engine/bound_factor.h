#pragma once
// One factor of a compiled model bound to one party's data (docs/kernel-abi.md): the C ABI calls
// wrapped so that an engine works with Eigen matrices (one column per Monte Carlo draw) and a
// failure is an exception naming the factor.
#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/kernel/abi.h"

namespace fvi::engine {

// A model call that failed: the message names the factor and says what went wrong.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The number of unconstrained values in `group` (FVI_GROUP_GLOBAL, ...), or -1 if the model has
// no such group.
int64_t group_size(const fvi_model& model, fvi_group group, const fvi_data& data);
// The same, 0 when the model has no such group (an engine's block sizes).
inline Eigen::Index group_dim(const fvi_model& model, fvi_group group, const fvi_data& data) {
  return std::max<int64_t>(0, group_size(model, group, data));
}
// Where variable `i` (fvi_model.variables) lies in its group: its offset, its declared dims (rank
// of them) and its number of values (their product, overflow-checked). nullopt where the model
// cannot say them or they do not fit in a group of `group_size` values.
struct VariablePlace {
  int64_t offset = 0, count = 1;
  std::vector<int64_t> dims;
};
std::optional<VariablePlace> variable_place(const fvi_model& model, const fvi_data& data, int i, int64_t group_size);

// The model's index of `group` (fvi_model.group_kinds), or -1.
int group_index(const fvi_model& model, fvi_group group);
// Which group the model's group `g` is (-1 when g is out of range).
inline int group_kind(const fvi_model& model, int g) { return g >= 0 && g < model.group_count ? model.group_kinds[g] : -1; }

enum class Precision { kFloat64, kFloat32 };

// One vector per input group of a factor: a mean-field q's means or sds, or their gradients, in
// double or (precision = float32) float.
template <class T>
using GroupVectors = std::vector<VectorX<T>>;

// The gradient of a mean-field pass with respect to each group's mean and sd.
template <class T>
struct MeanFieldGradient {
  GroupVectors<T> d_means, d_sds;
};

class BoundFactor {
 public:
  // kFloat32 binds the factor through create_float32 (`precision = float32`): the same calls,
  // computed in single precision.
  BoundFactor(const fvi_model& model, int factor, const fvi_data& data, Precision precision = Precision::kFloat64);
  ~BoundFactor();
  BoundFactor(const BoundFactor&) = delete;
  BoundFactor& operator=(const BoundFactor&) = delete;

  const fvi_factor_info& info() const { return model_->factors[factor_]; }
  const std::string& name() const { return name_; }
  // The i-th input group the factor reads (FVI_GROUP_GLOBAL, ...; -1 if the table names none).
  int group(int i) const { return group_kind(*model_, info().groups[i]); }
  // Rows of the factor's observations (1 for a density).
  int64_t rows() const { return rows_; }

  // Evaluates rows [begin, begin + count) (count < 0: all) for the draws in `inputs`: one matrix
  // per group the factor reads (info().groups order), size x draws. Returns rows x draws
  // (categorical arguments aside, every output is one value per row and draw).
  const Eigen::Map<const Eigen::MatrixXd>& forward(int64_t begin, int64_t count, const std::vector<Eigen::MatrixXd>& inputs);

  // After forward(): the gradient of sum(seed0 .* output) + sum_k sum(seed_k .* argument_k) with
  // respect to each input group (same shapes as the inputs). A null seed counts as zero.
  std::vector<Eigen::MatrixXd> backward(const std::vector<const Eigen::MatrixXd*>& seeds);

  // For a mean-field Gaussian family (kernel ABI forward_meanfield): each input group's mean and
  // sd (size x 1; an empty sd for a point-estimated group), S draws made by the kernel from
  // `noise_key`, with local reparameterisation of data products. Returns rows x S. With T = float
  // (an engine keeping q in float for precision = float32) they go through forward_meanfield_f32,
  // unconverted.
  template <class T>
  const Eigen::Map<const Eigen::MatrixXd>& forward_meanfield(int64_t begin, int64_t count, const GroupVectors<T>& means,
                                                             const GroupVectors<T>& sds, int64_t draws,
                                                             uint64_t noise_key);
  // After forward_meanfield(): the gradient of the seeded sum (as backward()) with respect to
  // each group's mean and sd, summed over the draws, in T (float: backward_meanfield_f32).
  template <class T>
  MeanFieldGradient<T> backward_meanfield(const std::vector<const Eigen::MatrixXd*>& seeds);

  // After forward() of a likelihood: the outcome rows and each distribution argument, each as
  // rows x (cols * draws) with its draws count.
  struct Argument {
    Eigen::Map<const Eigen::MatrixXd> values{nullptr, 0, 0};
    int64_t rows = 0, cols = 0, draws = 0;
  };
  std::vector<Argument> arguments();

  // Storage for the seeds of the next backward call, kept across calls: a block's seeds, as
  // large as its output, reuse one allocation instead of faulting in fresh pages every step.
  std::vector<Eigen::MatrixXd>& seed_storage() { return seed_storage_; }

 private:
  void check(int status, const char* what) const;
  std::vector<fvi_tensor> seed_views(const std::vector<const Eigen::MatrixXd*>& seeds, int64_t draws) const;
  void set_output();

  const fvi_model* model_;
  int factor_;
  std::string name_;
  void* state_ = nullptr;
  int64_t rows_ = 1;
  std::vector<fvi_tensor> input_views_;
  std::vector<int64_t> input_sizes_;
  int64_t draws_ = 1;  // of the last forward call
  fvi_tensor output_{};
  Eigen::Map<const Eigen::MatrixXd> output_map_{nullptr, 0, 0};
  mutable fvi_error error_{};
  std::vector<Eigen::MatrixXd> seed_storage_;
};

}  // namespace fvi::engine
