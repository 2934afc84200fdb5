#include "fvi/engine/function_space.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fvi::engine {

Eigen::MatrixXd LinearisedGaussian::covariance() const {
  // seed 001 Eqs. 15, 17: J diag(sigma^2) J'.
  return jacobian * variance.asDiagonal() * jacobian.transpose();
}

FunctionSpaceKl linearised_kl(const LinearisedGaussian& q, const LinearisedGaussian& prior, double jitter) {
  const Eigen::Index C = q.mean.size();
  if (prior.mean.size() != C || q.jacobian.rows() != C || prior.jacobian.rows() != C ||
      q.jacobian.cols() != q.variance.size() || prior.jacobian.cols() != prior.variance.size())
    throw std::invalid_argument("linearised_kl: the two Gaussians' shapes differ");
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(C, C);
  const Eigen::MatrixXd A = q.covariance() + jitter * identity;
  const Eigen::MatrixXd B = prior.covariance() + jitter * identity;
  const Eigen::LLT<Eigen::MatrixXd> a(A), b(B);
  if (a.info() != Eigen::Success || b.info() != Eigen::Success)
    throw ModelError("the linearised function-space covariance is not positive definite at a context point");
  auto log_det = [](const Eigen::LLT<Eigen::MatrixXd>& l) {
    return 2 * l.matrixL().toDenseMatrix().diagonal().array().log().sum();
  };
  const Eigen::MatrixXd B_inv = b.solve(identity);
  const Eigen::VectorXd delta = prior.mean - q.mean;
  const Eigen::VectorXd B_inv_delta = b.solve(delta);
  // The Gaussian KL (seed 001 §2, "Gaussian KL, needed by the runtime").
  FunctionSpaceKl kl;
  kl.value = 0.5 * ((B_inv * A).trace() + delta.dot(B_inv_delta) - double(C) + log_det(b) - log_det(a));
  kl.d_mean = -B_inv_delta;
  // dKL/dA = (B^-1 - A^-1) / 2, and dA/dsigma_p^2 = J_p J_p' (column p of J).
  const Eigen::MatrixXd G = 0.5 * (B_inv - a.solve(identity));
  kl.d_variance = (q.jacobian.array() * (G * q.jacobian).array()).colwise().sum().transpose();
  return kl;
}

LinearisedGaussian linearise(BoundFactor& likelihood, int64_t row, const Eigen::VectorXd& mean,
                             const Eigen::VectorXd& variance) {
  const fvi_factor_info& info = likelihood.info();
  if (info.group_count != 1 || likelihood.group(0) != FVI_GROUP_GLOBAL || info.seed_count < 2)
    throw ModelError(likelihood.name() + ": a function-space prior needs a likelihood of the global weights alone");
  if (mean.size() != variance.size()) throw std::invalid_argument("linearise: mean and variance differ in length");
  // One draw for the outputs' count, then C draws at m, draw c seeded with output c.
  likelihood.forward(row, 1, {mean});
  const BoundFactor::Argument f = likelihood.arguments()[1];
  const Eigen::Index C = Eigen::Index(f.rows * f.cols);
  LinearisedGaussian g;
  g.mean = Eigen::Map<const Eigen::VectorXd>(f.values.data(), C);
  g.variance = variance;
  likelihood.forward(row, 1, {mean.replicate(1, C)});
  Eigen::MatrixXd seed = Eigen::MatrixXd::Zero(f.rows, f.cols * C);
  for (Eigen::Index c = 0; c < C; ++c) seed.data()[c * C + c] = 1;  // draw c's block, output c
  std::vector<const Eigen::MatrixXd*> seeds(size_t(info.seed_count), nullptr);
  seeds[1] = &seed;
  const std::vector<Eigen::MatrixXd> gradients = likelihood.backward(seeds);
  if (gradients.size() != 1 || gradients[0].rows() != mean.size() || gradients[0].cols() != C)
    throw ModelError(likelihood.name() + ": the kernel's Jacobian has the wrong shape");
  g.jacobian = gradients[0].transpose();
  return g;
}

WeightSpaceGradient function_space_kl(BoundFactor& context, const Eigen::VectorXd& mean,
                                      const Eigen::VectorXd& variance, const Eigen::VectorXd& prior_mean,
                                      const Eigen::VectorXd& prior_variance, double jitter) {
  WeightSpaceGradient out;
  out.d_mean = Eigen::VectorXd::Zero(mean.size());
  out.d_variance = Eigen::VectorXd::Zero(mean.size());
  for (int64_t row = 0; row < context.rows(); ++row) {  // seed 001 Eq. 26: a sum over the points
    const LinearisedGaussian q = linearise(context, row, mean, variance);
    const LinearisedGaussian prior = linearise(context, row, prior_mean, prior_variance);
    const FunctionSpaceKl kl = linearised_kl(q, prior, jitter);
    out.value += kl.value;
    out.d_mean.noalias() += q.jacobian.transpose() * kl.d_mean;  // f(x; m)'s chain rule, J_m' dKL/df
    out.d_variance += kl.d_variance;
  }
  return out;
}

namespace {

// The name a declared dimension is, when it is a bare identifier ("N"; not "N + 1" or "3").
bool is_name(const char* dim) {
  if (!dim || !(std::isalpha(static_cast<unsigned char>(dim[0])) || dim[0] == '_')) return false;
  for (const char* c = dim; *c; ++c)
    if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '_') return false;
  return true;
}

int data_index(const fvi_data& data, const char* name) {
  for (int v = 0; v < data.count; ++v)
    if (std::strcmp(data.names[v], name) == 0) return v;
  return -1;
}

}  // namespace

ContextPoints::ContextPoints(const fvi_model& model, int factor, const fvi_data& data, int64_t rows, long count,
                             double noise)
    : model_(&model), factor_(factor), count_(count), noise_(noise), rows_(rows) {
  const std::string likelihood = model.factors[factor].name;
  const fvi_data_table* table = model.data_table;
  // The silo's sizes whose value is the likelihood's row count: the one whose rows are drawn.
  std::string size_name;
  for (int d = 0; table && d < table->declaration_count; ++d) {
    const fvi_data_declaration& decl = table->declarations[d];
    if (decl.party != FVI_DATA_SILO || decl.rank < 1 || (decl.row_vector && decl.rank == 1) || !is_name(decl.dims[0]))
      continue;
    const int size = data_index(data, decl.dims[0]);
    if (size < 0 || data.values[size].rows * data.values[size].cols != 1 || data.values[size].data[0] != double(rows_))
      continue;
    if (!size_name.empty() && size_name != decl.dims[0])
      throw ModelError(likelihood + ": its " + std::to_string(rows_) + " rows are both " + size_name + " and " +
                       decl.dims[0] + " rows of silo data, so the context points' rows are ambiguous");
    size_name = decl.dims[0];
  }
  if (size_name.empty())
    throw ModelError(likelihood + ": a function-space prior draws its context points from the rows of silo data, " +
                     "and no silo data has the likelihood's " + std::to_string(rows_) + " rows as its first dimension");
  size_index_ = data_index(data, size_name.c_str());
  for (int d = 0; d < table->declaration_count; ++d) {
    const fvi_data_declaration& decl = table->declarations[d];
    if (decl.party != FVI_DATA_SILO || decl.rank < 1 || (decl.row_vector && decl.rank == 1) ||
        std::strcmp(decl.dims[0], size_name.c_str()) != 0)
      continue;
    const int v = data_index(data, decl.name);
    if (v < 0) continue;
    const fvi_tensor& t = data.values[v];
    if (t.rows != rows_) continue;
    row_variables_.push_back({v, decl.is_int != 0, t.data, t.cols});
    row_names_.push_back(decl.name);
  }
  names_.assign(data.names, data.names + data.count);
  tensors_.assign(data.values, data.values + data.count);
  drawn_.resize(row_variables_.size() + 1);
}

BoundFactor& ContextPoints::draw(CounterRng& rng) {
  std::vector<int64_t> rows(static_cast<size_t>(count_));
  for (int64_t& r : rows) r = int64_t(rng.uniform_int(uint64_t(rows_)));
  for (size_t k = 0; k < row_variables_.size(); ++k) {
    const RowVariable& v = row_variables_[k];
    Eigen::MatrixXd& cut = drawn_[k];
    cut.resize(count_, v.cols);
    const Eigen::Map<const Eigen::MatrixXd> values(v.values, rows_, v.cols);
    for (long i = 0; i < count_; ++i) cut.row(i) = values.row(rows[size_t(i)]);
    // seed 001 App. E.1: U[-noise, noise] on every real value, independently.
    if (!v.integer && noise_ > 0) cut.array() += noise_ * (2 * rng.uniform(cut.rows(), cut.cols()).array() - 1);
    tensors_[size_t(v.index)] = fvi_tensor{cut.data(), cut.rows(), cut.cols(), 1};
  }
  Eigen::MatrixXd& size = drawn_.back();
  size = Eigen::MatrixXd::Constant(1, 1, double(count_));
  tensors_[size_t(size_index_)] = fvi_tensor{size.data(), 1, 1, 1};
  const fvi_data view{int(tensors_.size()), names_.data(), tensors_.data()};
  bound_.reset();
  bound_ = std::make_unique<BoundFactor>(*model_, factor_, view);
  return *bound_;
}

}  // namespace fvi::engine
