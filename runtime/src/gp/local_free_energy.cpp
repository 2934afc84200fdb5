#include "fvi/gp/local_free_energy.h"

#include <cmath>
#include <string>

#include "fvi/error.h"
#include "fvi/gp/inducing_posterior.h"

namespace fvi::gp {

GpDrawAdjoint::GpDrawAdjoint(const GpDraw& at, const PseudoObservationFactor& own)
    : z(Eigen::MatrixXd::Zero(at.z.rows(), at.z.cols())),
      kernel(at.kernel.dimensions()),
      factor(Eigen::VectorXd::Zero(own.parameter_count())) {}

FreeEnergy local_free_energy(const GpDraw& draw, const SiloRows& rows,
                             const std::vector<const PseudoObservationFactor*>& cavity,
                             const PseudoObservationFactor& own, double jitter, GpDrawAdjoint* adjoint) {
  const Eigen::MatrixXd& z = draw.z;
  const SeArdKernel& kernel = draw.kernel;
  const Eigen::MatrixXd& x = *rows.x;
  const Eigen::VectorXd& y = *rows.y;
  if (x.rows() != y.size())
    throw InvalidArgument("sparse GP free energy: " + std::to_string(x.rows()) + " inputs but " +
                          std::to_string(y.size()) + " outcomes");
  const Eigen::Index M = z.rows();
  const auto n = static_cast<double>(y.size());

  // Forward.
  const Eigen::MatrixXd k0 = se_ard(z, z, kernel);
  Eigen::MatrixXd k = k0;
  k.diagonal().array() += jitter * kernel.variance();
  const auto k_chol = cholesky_or_throw(k, "K_ZZ");
  std::vector<FactorContribution> cavity_parts;
  Eigen::MatrixXd a_c_matrix = k;  // A_c = K + sum_{j != k} B_j
  Eigen::VectorXd b_c = Eigen::VectorXd::Zero(M);
  for (const PseudoObservationFactor* f : cavity) {
    cavity_parts.push_back(contribution(*f, z, k, kernel));
    a_c_matrix += cavity_parts.back().B;
    b_c += cavity_parts.back().b;
  }
  const FactorContribution own_part = contribution(own, z, k, kernel);
  const Eigen::MatrixXd a_matrix = a_c_matrix + own_part.B;  // A = A_c + B_k
  const auto a_chol = cholesky_or_throw(a_matrix, "K_ZZ + sum_k B_k");
  const auto c_chol = cholesky_or_throw(a_c_matrix, "the cavity's K_ZZ + sum_{j != k} B_j");
  const Eigen::VectorXd a = a_chol.solve(b_c + own_part.b);
  const Eigen::VectorXd a_c = c_chol.solve(b_c);

  const Eigen::MatrixXd kxz = se_ard(x, z, kernel);  // N x M
  const Eigen::VectorXd r = y - kxz * a;
  const Eigen::MatrixXd pk = k_chol.matrixL().solve(Eigen::MatrixXd(kxz.transpose()));
  const Eigen::MatrixXd pa = a_chol.matrixL().solve(Eigen::MatrixXd(kxz.transpose()));
  const double sigma2 = std::exp(2 * draw.log_noise_sd);
  // T = sum_n (y_n - mu_n)^2 + v_n,  v_n = k_xx - Q_nn + R_nn
  const double t = r.squaredNorm() + n * kernel.variance() - pk.squaredNorm() + pa.squaredNorm();
  constexpr double kLogTwoPi = 1.8378770664093454836;
  FreeEnergy out;
  out.expected_log_likelihood = rows.scale * (-0.5 * n * (kLogTwoPi + std::log(sigma2)) - t / (2 * sigma2));

  const Eigen::VectorXd d = a_c - a;
  const Eigen::VectorXd a_c_d = a_c_matrix * d;
  const double log_det_a = 2 * a_chol.matrixLLT().diagonal().array().log().sum();
  const double log_det_c = 2 * c_chol.matrixLLT().diagonal().array().log().sum();
  // tr(A_c A^-1) - M = -tr(A^-1 B_k)
  out.kl = 0.5 * (-a_chol.solve(own_part.B).trace() + d.dot(a_c_d) + log_det_a - log_det_c);
  if (!adjoint) return out;

  // Reverse. c = scale / sigma^2; G = K_zx K_xz.
  const Eigen::MatrixXd identity = Eigen::MatrixXd::Identity(M, M);
  const Eigen::MatrixXd a_inv = a_chol.solve(identity);
  const Eigen::MatrixXd c_inv = c_chol.solve(identity);
  const Eigen::MatrixXd k_inv = k_chol.solve(identity);
  const double c = rows.scale / sigma2;
  const Eigen::MatrixXd g = kxz.transpose() * kxz;
  // ELL: d/da = c K_zx r; d/dA = c/2 A^-1 G A^-1 (through R); d/dK = -c/2 K^-1 G K^-1 (through Q);
  // d/dK_xz = c (r a' - K_xz A^-1 + K_xz K^-1); d/dlog sigma = scale (T / sigma^2 - N);
  // d/dk_xx = -c / 2 per row, k_xx = s^2.
  // -KL: d/da = A_c d, d/da_c = -A_c d, d/dA = -1/2 (A^-1 - A^-1 A_c A^-1),
  //      d/dA_c = -1/2 (A^-1 + d d' - A_c^-1).
  Eigen::VectorXd a_bar = c * (kxz.transpose() * r) + a_c_d;
  const Eigen::VectorXd a_c_bar = -a_c_d;
  Eigen::MatrixXd A_bar = 0.5 * c * a_inv * g * a_inv - 0.5 * (a_inv - a_inv * a_c_matrix * a_inv);
  Eigen::MatrixXd A_c_bar = -0.5 * (a_inv + d * d.transpose() - c_inv);
  Eigen::MatrixXd k_bar = -0.5 * c * k_inv * g * k_inv;
  const Eigen::MatrixXd kxz_bar = c * (r * a.transpose() - kxz * a_inv + kxz * k_inv);
  adjoint->log_noise_sd += rows.scale * (t / sigma2 - n);
  adjoint->kernel.log_scale += -c * n * kernel.variance();
  // a = A^-1 b: b_bar = A^-1 a_bar, A_bar -= b_bar a'.
  const Eigen::VectorXd b_bar = a_chol.solve(a_bar);
  A_bar -= b_bar * a.transpose();
  const Eigen::VectorXd b_c_bar_solve = c_chol.solve(a_c_bar);
  A_c_bar -= b_c_bar_solve * a_c.transpose();
  // A = A_c + B_k, b = b_c + b_k, A_c = K + sum_j B_j.
  A_c_bar += A_bar;
  const Eigen::VectorXd b_c_bar = b_bar + b_c_bar_solve;
  k_bar += A_c_bar;
  for (size_t j = 0; j < cavity.size(); ++j)
    contribution_vjp(*cavity[j], cavity_parts[j], z, k, kernel, A_c_bar, b_c_bar, nullptr, &k_bar, &adjoint->z,
                     &adjoint->kernel);
  contribution_vjp(own, own_part, z, k, kernel, A_bar, b_bar, &adjoint->factor, &k_bar, &adjoint->z,
                   &adjoint->kernel);
  se_ard_vjp(x, z, kernel, kxz, kxz_bar, nullptr, &adjoint->z, &adjoint->kernel);
  // K = K0(Z, Z) + jitter s^2 I
  se_ard_vjp(z, z, kernel, k0, k_bar, &adjoint->z, &adjoint->z, &adjoint->kernel);
  adjoint->kernel.log_scale += 2 * jitter * kernel.variance() * k_bar.trace();
  return out;
}

}  // namespace fvi::gp

namespace fvi::gp {

PseudoObservationFactor conjugate_cpo_factor(const GpDraw& draw, const SiloRows& rows, double jitter) {
  const Eigen::MatrixXd k = inducing_covariance(draw.z, draw.kernel, jitter);
  const auto k_chol = cholesky_or_throw(k, "K_ZZ");
  const Eigen::MatrixXd phi_t = k_chol.solve(se_ard(draw.z, *rows.x, draw.kernel));  // Phi' = K^-1 K_Zx
  const double inverse_sigma2 = std::exp(-2 * draw.log_noise_sd);
  Eigen::MatrixXd p = rows.scale * inverse_sigma2 * phi_t * phi_t.transpose();
  p = 0.5 * (p + p.transpose());
  PseudoObservationFactor f;
  f.form = FactorForm::Cpo;
  f.h = rows.scale * inverse_sigma2 * phi_t * *rows.y;
  Eigen::LLT<Eigen::MatrixXd> llt(p);
  if (llt.info() != Eigen::Success) {
    p.diagonal().array() += 1e-12 * p.trace() / static_cast<double>(p.rows());
    llt.compute(p);
  }
  if (llt.info() != Eigen::Success) throw InvalidArgument("conjugate CPO factor: the precision is not positive semi-definite");
  f.chol = llt.matrixL();
  return f;
}

}  // namespace fvi::gp
