#pragma once
// One party's rows of a joint Gaussian whose Cholesky factor is shared out by rows.
//
// q(x) = N(m, L L^T), L lower-triangular with a positive diagonal, over the parameters of every
// party in one order (the server's globals, then silo 1's block, silo 2's, ...). A party holds
// only its rows: its means m_k (p) and L's rows L_k (p x (offset + p)), offset being the number
// of parameters before its own. Every party draws the same noise eps ~ N(0, I) from a
// counter-based stream keyed by the iteration, so
//     x_k = m_k + L_k eps[0 : offset + p]
// is party k's block of one correlated joint draw, computed without any party's parameters
// leaving it; log det L is the sum of the parties' own diagonals (issue 36: a q that holds the
// posterior's correlations across silos).
//
// Parameters, in this order: [m (p); for r = 0..p-1, row r of L_k: its offset + r entries left of
// the diagonal, then log L_k[r, offset + r]]. Starts at m = 0, L_k = [0 | init_sd I].
#include <cmath>
#include <stdexcept>
#include <string>

#include "fvi/eigen_types.h"
#include "fvi/math/constants.h"

namespace fvi {

class JointGaussianRows {
 public:
  JointGaussianRows() = default;
  JointGaussianRows(Eigen::Index offset, Eigen::Index dim, double init_sd) : offset_(offset), dim_(dim) {
    if (offset < 0 || dim < 0 || !(init_sd > 0))
      throw std::invalid_argument("JointGaussianRows: offset " + std::to_string(offset) + ", dim " + std::to_string(dim));
    params_ = Eigen::VectorXd::Zero(num_params(offset, dim));
    for (Eigen::Index r = 0; r < dim; ++r) params_[diagonal_at(r)] = std::log(init_sd);
    unpack();
  }

  static Eigen::Index num_params(Eigen::Index offset, Eigen::Index dim) { return dim + dim * offset + dim * (dim + 1) / 2; }

  Eigen::Index offset() const { return offset_; }
  Eigen::Index dim() const { return dim_; }
  Eigen::Index width() const { return offset_ + dim_; }  // the noise rows this party reads
  const Eigen::VectorXd& params() const { return params_; }
  void set_params(const Eigen::VectorXd& params) {
    if (params.size() != params_.size())
      throw std::invalid_argument("JointGaussianRows: " + std::to_string(params.size()) + " parameters, expected " +
                                  std::to_string(params_.size()));
    if (!params.allFinite()) throw std::invalid_argument("JointGaussianRows: a parameter is not finite");
    params_ = params;
    unpack();
  }

  const Eigen::VectorXd& mean() const { return mean_; }
  const Eigen::MatrixXd& factor() const { return factor_; }  // L_k, p x width
  // The marginal sds of the party's block: the norms of its rows of L.
  Eigen::VectorXd sd() const { return factor_.rowwise().norm(); }
  // sum of log L_k[r, offset + r]: this party's part of log det L.
  double log_det() const {
    double s = 0;
    for (Eigen::Index r = 0; r < dim_; ++r) s += params_[diagonal_at(r)];
    return s;
  }

  // x_k = m_k + L_k eps[0 : width) for each column of eps (the joint noise, >= width rows).
  Eigen::MatrixXd sample(const Eigen::MatrixXd& eps) const {
    if (eps.rows() < width()) throw std::invalid_argument("JointGaussianRows::sample: too few noise rows");
    return (factor_ * eps.topRows(width())).colwise() + mean_;
  }

  // sum over draws of (dx_s / dparams)^T g_s for x = sample(eps): the reparameterisation path.
  Eigen::VectorXd path_gradient(const Eigen::MatrixXd& g, const Eigen::MatrixXd& eps) const {
    const Eigen::MatrixXd outer = g * eps.topRows(width()).transpose();  // d/dL_k, p x width
    Eigen::VectorXd d(params_.size());
    d.head(dim_) = g.rowwise().sum();
    Eigen::Index at = dim_;
    for (Eigen::Index r = 0; r < dim_; ++r) {
      const Eigen::Index left = offset_ + r;
      d.segment(at, left) = outer.row(r).head(left).transpose();
      d[at + left] = outer(r, left) * factor_(r, left);  // through L_rr = exp(log L_rr)
      at += left + 1;
    }
    return d;
  }
  // The gradient of log_det(): 1 for each log-diagonal parameter.
  Eigen::VectorXd log_det_gradient() const {
    Eigen::VectorXd d = Eigen::VectorXd::Zero(params_.size());
    for (Eigen::Index r = 0; r < dim_; ++r) d[diagonal_at(r)] = 1;
    return d;
  }

  // log N(x_s; m_k, L_k L_k^T) of the block's marginal, for each column of x.
  Eigen::VectorXd marginal_log_density(const Eigen::MatrixXd& x) const {
    const Eigen::LLT<Eigen::MatrixXd> chol(factor_ * factor_.transpose());
    const Eigen::MatrixXd u = chol.matrixL().solve((x.colwise() - mean_));
    const double log_det_cov = 2 * Eigen::MatrixXd(chol.matrixL()).diagonal().array().log().sum();
    return (-0.5 * u.colwise().squaredNorm().array() - 0.5 * (double(dim_) * kLog2Pi + log_det_cov)).matrix().transpose();
  }
  // Where row r's log-diagonal is in params(): m, then rows 0..r-1 (offset + i + 1 entries each),
  // then row r's offset + r off-diagonals.
  Eigen::Index diagonal_at(Eigen::Index r) const { return dim_ + r * offset_ + r * (r + 1) / 2 + offset_ + r; }

 private:
  void unpack() {
    mean_ = params_.head(dim_);
    factor_ = Eigen::MatrixXd::Zero(dim_, width());
    Eigen::Index at = dim_;
    for (Eigen::Index r = 0; r < dim_; ++r) {
      const Eigen::Index left = offset_ + r;
      factor_.row(r).head(left) = params_.segment(at, left).transpose();
      factor_(r, left) = std::exp(params_[at + left]);
      at += left + 1;
    }
  }

  Eigen::Index offset_ = 0, dim_ = 0;
  Eigen::VectorXd params_, mean_;
  Eigen::MatrixXd factor_;
};

}  // namespace fvi
