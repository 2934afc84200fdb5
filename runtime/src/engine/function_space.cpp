#include "fvi/engine/function_space.h"

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

}  // namespace fvi::engine
