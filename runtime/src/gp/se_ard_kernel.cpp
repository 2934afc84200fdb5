#include "fvi/gp/se_ard_kernel.h"

#include <cmath>
#include <string>

#include "fvi/error.h"

namespace fvi::gp {

double SeArdKernel::variance() const { return std::exp(2 * log_scale); }

namespace {

void check_dimensions(const Eigen::MatrixXd& points, const SeArdKernel& kernel, const char* which) {
  if (points.cols() != kernel.dimensions())
    throw InvalidArgument(std::string("se_ard: the points ") + which + " have " + std::to_string(points.cols()) +
                          " dimensions but the kernel has " + std::to_string(kernel.dimensions()) +
                          " lengthscales");
}

}  // namespace

Eigen::MatrixXd se_ard(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const SeArdKernel& kernel) {
  check_dimensions(a, kernel, "a");
  check_dimensions(b, kernel, "b");
  // Scale each dimension by 1 / l_d, then |a_i - b_j|^2 = |a_i|^2 + |b_j|^2 - 2 a_i . b_j (one GEMM).
  const Eigen::RowVectorXd inverse_l = (-kernel.log_lengthscales).array().exp().transpose();
  const Eigen::MatrixXd as = a.array().rowwise() * inverse_l.array();
  const Eigen::MatrixXd bs = b.array().rowwise() * inverse_l.array();
  Eigen::MatrixXd d2 = -2 * as * bs.transpose();
  d2.colwise() += as.rowwise().squaredNorm();
  d2.rowwise() += bs.rowwise().squaredNorm().transpose();
  // Rounding can leave a tiny negative distance where two points coincide.
  return kernel.variance() * (-0.5 * d2.cwiseMax(0.0)).array().exp().matrix();
}

void se_ard_vjp(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, const SeArdKernel& kernel,
                const Eigen::MatrixXd& k, const Eigen::MatrixXd& k_bar, Eigen::MatrixXd* a_bar,
                Eigen::MatrixXd* b_bar, SeArdKernelAdjoint* kernel_bar) {
  const Eigen::MatrixXd e = k_bar.cwiseProduct(k);
  const Eigen::VectorXd row_sums = e.rowwise().sum();
  const Eigen::VectorXd col_sums = e.colwise().sum().transpose();
  kernel_bar->log_scale += 2 * e.sum();
  for (Eigen::Index d = 0; d < kernel.dimensions(); ++d) {
    const double inverse_l2 = std::exp(-2 * kernel.log_lengthscales[d]);
    const Eigen::VectorXd eb = e * b.col(d);             // sum_j E_ij b_jd
    const Eigen::VectorXd ea = e.transpose() * a.col(d);  // sum_i E_ij a_id
    if (a_bar) a_bar->col(d) += inverse_l2 * (eb - row_sums.cwiseProduct(a.col(d)));
    if (b_bar) b_bar->col(d) += inverse_l2 * (ea - col_sums.cwiseProduct(b.col(d)));
    // sum_ij E_ij (a_id - b_jd)^2 = sum_i rows_i a_id^2 + sum_j cols_j b_jd^2 - 2 a_d' E b_d.
    const double squares = row_sums.dot(a.col(d).cwiseAbs2()) + col_sums.dot(b.col(d).cwiseAbs2()) -
                           2 * a.col(d).dot(eb);
    kernel_bar->log_lengthscales[d] += inverse_l2 * squares;
  }
}

}  // namespace fvi::gp
