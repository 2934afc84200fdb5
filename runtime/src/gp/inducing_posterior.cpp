#include "fvi/gp/inducing_posterior.h"

#include <string>

#include "fvi/error.h"

namespace fvi::gp {

Eigen::MatrixXd inducing_covariance(const Eigen::MatrixXd& z, const SeArdKernel& kernel, double jitter) {
  Eigen::MatrixXd k = se_ard(z, z, kernel);
  k.diagonal().array() += jitter * kernel.variance();
  return k;
}

Eigen::LLT<Eigen::MatrixXd> cholesky_or_throw(const Eigen::MatrixXd& m, const char* what) {
  if (!m.allFinite()) throw InvalidArgument(std::string("sparse GP: ") + what + " holds a NaN or an infinity");
  Eigen::LLT<Eigen::MatrixXd> llt(m);
  if (llt.info() != Eigen::Success)
    throw InvalidArgument(std::string("sparse GP: ") + what + " (" + std::to_string(m.rows()) + " x " +
                         std::to_string(m.cols()) + ") is not positive definite; a larger jitter or " +
                         "inducing inputs further apart would help");
  return llt;
}

Eigen::VectorXd InducingPosterior::mean() const { return k_zz * a; }

Eigen::MatrixXd InducingPosterior::covariance() const { return k_zz * a_chol.solve(k_zz); }

Eigen::VectorXd InducingPosterior::natural_location() const { return k_chol.solve(b); }

Eigen::MatrixXd InducingPosterior::natural_precision() const {
  const Eigen::MatrixXd kia = k_chol.solve(A);
  return k_chol.solve(Eigen::MatrixXd(kia.transpose()));
}

InducingPosterior inducing_posterior(const Eigen::MatrixXd& z, const SeArdKernel& kernel, double jitter,
                                     const std::vector<const PseudoObservationFactor*>& factors) {
  InducingPosterior q;
  q.k_zz = inducing_covariance(z, kernel, jitter);
  q.k_chol = cholesky_or_throw(q.k_zz, "K_ZZ");
  q.A = q.k_zz;
  q.b = Eigen::VectorXd::Zero(z.rows());
  for (const PseudoObservationFactor* f : factors) {
    const FactorContribution c = contribution(*f, z, q.k_zz, kernel);
    q.A += c.B;
    q.b += c.b;
  }
  q.a_chol = cholesky_or_throw(q.A, "K_ZZ + sum_k B_k");
  q.a = q.a_chol.solve(q.b);
  return q;
}

LatentPredictive predict_latent(const InducingPosterior& q, const Eigen::MatrixXd& z, const SeArdKernel& kernel,
                                const Eigen::MatrixXd& x) {
  const Eigen::MatrixXd kzx = se_ard(z, x, kernel);
  LatentPredictive p;
  p.mean = kzx.transpose() * q.a;
  const Eigen::MatrixXd pk = q.k_chol.matrixL().solve(kzx);
  const Eigen::MatrixXd pa = q.a_chol.matrixL().solve(kzx);
  p.variance = (kernel.variance() - pk.colwise().squaredNorm().array() + pa.colwise().squaredNorm().array())
                   .matrix()
                   .transpose();
  p.variance = p.variance.cwiseMax(0.0);  // rounding where v(x) is ~0 (x at an inducing input)
  return p;
}

}  // namespace fvi::gp
