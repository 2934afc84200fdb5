#include "fvi/engine/element_joint.h"

#include <algorithm>
#include <cmath>

namespace fvi::engine {

namespace {

bool reads(const BoundFactor& f, fvi_group group) {
  for (int g = 0; g < f.info().group_count; ++g)
    if (f.group(g) == group) return true;
  return false;
}

// The values of int data array `name` in `data`, 0-based, each checked against [1, m].
std::vector<Eigen::Index> element_of_rows(const fvi_data& data, const std::string& name, int64_t rows,
                                          Eigen::Index m, const std::string& factor) {
  for (int v = 0; v < data.count; ++v) {
    if (name != data.names[v]) continue;
    const fvi_tensor& t = data.values[v];
    const int64_t n = t.rows * t.cols * t.draws;
    if (n != rows)
      throw ModelError(factor + ": '" + name + "' has " + std::to_string(n) + " values for " + std::to_string(rows) +
                       " rows");
    std::vector<Eigen::Index> out(static_cast<size_t>(n));
    for (int64_t r = 0; r < n; ++r) {
      const double x = t.data[r];
      if (!(x >= 1 && x <= double(m) && x == std::floor(x)))
        throw ModelError(factor + ": " + name + "[" + std::to_string(r + 1) + "] = " + std::to_string(x) +
                         " is not an element of the local vector (1.." + std::to_string(m) + ")");
      out[size_t(r)] = Eigen::Index(x) - 1;
    }
    return out;
  }
  throw ModelError(factor + ": its local index '" + name + "' is not in the silo's data");
}

}  // namespace

ElementJoint::ElementJoint(const fvi_model& model, const fvi_data& data, Eigen::Index local_dim)
    : local_dim_(local_dim) {
  global_dim_ = group_dim(model, FVI_GROUP_GLOBAL, data);
  hyper_dim_ = group_dim(model, FVI_GROUP_HYPER, data);
  for (int f = 0; f < model.factor_count; ++f) {
    const fvi_factor_info& info = model.factors[f];
    if (info.owner != FVI_SILO) continue;
    if (info.kind != FVI_DENSITY && info.kind != FVI_LIKELIHOOD && info.kind != FVI_ELEMENTS) continue;
    Part p;
    p.factor = std::make_unique<BoundFactor>(model, f, data);
    const std::string name = p.factor->name();
    if (info.kind == FVI_LIKELIHOOD) rows_ = std::max(rows_, p.factor->rows());
    if (!reads(*p.factor, FVI_GROUP_LOCAL)) {
      p.role = Part::kShared;
    } else if (info.kind == FVI_ELEMENTS) {
      if (p.factor->rows() != local_dim)
        throw ModelError(name + ": " + std::to_string(p.factor->rows()) + " elements, the local group has " +
                         std::to_string(local_dim));
      p.role = Part::kElements;
    } else if (info.kind == FVI_LIKELIHOOD && info.local_index && info.local_index[0]) {
      p.role = Part::kIndexed;
      p.element = element_of_rows(data, info.local_index, p.factor->rows(), local_dim, name);
    } else {
      throw ModelError(name + " reads the local parameters as a whole, not one element per " +
                       (info.kind == FVI_LIKELIHOOD ? "row" : "term") +
                       ": local_samples > 1 needs every likelihood to read its local vector as b[idx] (idx an int data "
                       "array) and b's prior to be normal, student_t or cauchy with arguments that read no local parameter");
    }
    parts_.push_back(std::move(p));
  }
}

ElementJoint::Value ElementJoint::evaluate(const Eigen::MatrixXd& global, const Eigen::MatrixXd& local,
                                           const Eigen::MatrixXd* hyper) {
  draws_ = long(global.cols());
  Value out{Eigen::MatrixXd::Zero(local_dim_, draws_), Eigen::VectorXd::Zero(draws_)};
  for (Part& p : parts_) {
    std::vector<Eigen::MatrixXd> inputs;
    for (int g = 0; g < p.factor->info().group_count; ++g) {
      const int group = p.factor->group(g);
      if (group == FVI_GROUP_GLOBAL) inputs.push_back(global);
      else if (group == FVI_GROUP_LOCAL) inputs.push_back(local);
      else if (group == FVI_GROUP_HYPER && hyper) inputs.push_back(*hyper);
      else throw ModelError(p.factor->name() + ": reads the " + fvi_group_name(group) + " group, which SFVI does not provide here");
    }
    const auto& lp = p.factor->forward(0, -1, inputs);
    switch (p.role) {
      case Part::kShared: out.shared += lp.colwise().sum().transpose(); break;
      case Part::kElements: out.per_element += lp; break;
      case Part::kIndexed:
        for (Eigen::Index r = 0; r < lp.rows(); ++r) out.per_element.row(p.element[size_t(r)]) += lp.row(r);
        break;
    }
  }
  return out;
}

ElementJoint::Gradient ElementJoint::backward(const Eigen::MatrixXd& weights, const Eigen::VectorXd& shared_weights) {
  Gradient out{Eigen::MatrixXd::Zero(global_dim_, draws_), Eigen::MatrixXd::Zero(local_dim_, draws_),
               Eigen::VectorXd::Zero(hyper_dim_)};
  for (Part& p : parts_) {
    const int64_t rows = p.factor->rows();
    Eigen::MatrixXd seed;
    switch (p.role) {
      case Part::kShared: seed = shared_weights.transpose().replicate(rows, 1); break;
      case Part::kElements: seed = weights; break;
      case Part::kIndexed:
        seed.resize(rows, draws_);
        for (int64_t r = 0; r < rows; ++r) seed.row(r) = weights.row(p.element[size_t(r)]);
        break;
    }
    const std::vector<Eigen::MatrixXd> d = p.factor->backward({&seed});
    for (size_t g = 0; g < d.size(); ++g) {
      const int group = p.factor->group(int(g));
      if (group == FVI_GROUP_GLOBAL) out.d_global += d[g];
      else if (group == FVI_GROUP_LOCAL) out.d_local += d[g];
      else out.d_hyper += d[g].rowwise().sum();
    }
  }
  return out;
}

}  // namespace fvi::engine
