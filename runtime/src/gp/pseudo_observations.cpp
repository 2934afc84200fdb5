#include "fvi/gp/pseudo_observations.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "fvi/error.h"

namespace fvi::gp {

Eigen::Index PseudoObservationFactor::parameter_count() const {
  if (form == FactorForm::Dpo) return inputs.size() + targets.size() + log_noise.size();
  const Eigen::Index m = h.size();
  return m + m * (m + 1) / 2;
}

PseudoObservationFactor initial_dpo(const Eigen::MatrixXd& pseudo_inputs, double precision) {
  PseudoObservationFactor f;
  f.form = FactorForm::Dpo;
  f.inputs = pseudo_inputs;
  f.targets = Eigen::VectorXd::Zero(pseudo_inputs.rows());
  f.log_noise = Eigen::VectorXd::Constant(pseudo_inputs.rows(), -std::log(precision));
  return f;
}

PseudoObservationFactor initial_cpo(Eigen::Index inducing_points, double precision) {
  PseudoObservationFactor f;
  f.form = FactorForm::Cpo;
  f.h = Eigen::VectorXd::Zero(inducing_points);
  f.chol = std::sqrt(precision) * Eigen::MatrixXd::Identity(inducing_points, inducing_points);
  return f;
}

Eigen::VectorXd flatten(const PseudoObservationFactor& f) {
  Eigen::VectorXd out(f.parameter_count());
  Eigen::Index at = 0;
  auto put = [&](const auto& block) {
    out.segment(at, block.size()) = Eigen::Map<const Eigen::VectorXd>(block.data(), block.size());
    at += block.size();
  };
  if (f.form == FactorForm::Dpo) {
    put(f.inputs);
    put(f.targets);
    put(f.log_noise);
    return out;
  }
  put(f.h);
  for (Eigen::Index j = 0; j < f.chol.cols(); ++j)
    for (Eigen::Index i = j; i < f.chol.rows(); ++i) out[at++] = f.chol(i, j);
  return out;
}

void unflatten(const Eigen::VectorXd& values, PseudoObservationFactor* f) {
  if (values.size() != f->parameter_count())
    throw InvalidArgument("pseudo-observation factor: " + std::to_string(values.size()) + " numbers for a factor of " +
                          std::to_string(f->parameter_count()));
  Eigen::Index at = 0;
  auto take = [&](auto& block) {
    Eigen::Map<Eigen::VectorXd>(block.data(), block.size()) = values.segment(at, block.size());
    at += block.size();
  };
  if (f->form == FactorForm::Dpo) {
    take(f->inputs);
    take(f->targets);
    take(f->log_noise);
    return;
  }
  take(f->h);
  for (Eigen::Index j = 0; j < f->chol.cols(); ++j)
    for (Eigen::Index i = j; i < f->chol.rows(); ++i) f->chol(i, j) = values[at++];
}

Eigen::Index pseudo_observation_count(Eigen::Index silo_rows, Eigen::Index cap) {
  const auto by_rule = static_cast<Eigen::Index>(std::floor(0.8 * static_cast<double>(silo_rows)));
  return std::max<Eigen::Index>(1, std::min(by_rule, cap));
}

FactorContribution contribution(const PseudoObservationFactor& f, const Eigen::MatrixXd& z,
                                const Eigen::MatrixXd& k_zz, const SeArdKernel& kernel) {
  FactorContribution c;
  if (f.form == FactorForm::Dpo) {
    c.w = se_ard(f.inputs, z, kernel);
    const Eigen::VectorXd precision = (-f.log_noise).array().exp();
    const Eigen::MatrixXd sw = precision.asDiagonal() * c.w;
    c.B = c.w.transpose() * sw;
    c.b = c.w.transpose() * precision.cwiseProduct(f.targets);
    return c;
  }
  if (f.h.size() != k_zz.rows())
    throw InvalidArgument("CPO factor over " + std::to_string(f.h.size()) + " inducing outputs, but there are " +
                          std::to_string(k_zz.rows()) + " inducing inputs");
  const Eigen::MatrixXd kl = k_zz * f.chol.triangularView<Eigen::Lower>();
  c.B = kl * kl.transpose();
  c.b = k_zz * f.h;
  return c;
}

void contribution_vjp(const PseudoObservationFactor& f, const FactorContribution& c, const Eigen::MatrixXd& z,
                      const Eigen::MatrixXd& k_zz, const SeArdKernel& kernel, const Eigen::MatrixXd& B_bar,
                      const Eigen::VectorXd& b_bar, Eigen::VectorXd* factor_bar, Eigen::MatrixXd* k_zz_bar,
                      Eigen::MatrixXd* z_bar, SeArdKernelAdjoint* kernel_bar) {
  const Eigen::MatrixXd B_sym = B_bar + B_bar.transpose();
  if (f.form == FactorForm::Dpo) {
    // B = sum_i p_i w_i w_i', b = sum_i p_i m_i w_i (w_i row i of W, p_i = 1 / S_ii).
    const Eigen::VectorXd precision = (-f.log_noise).array().exp();
    const Eigen::VectorXd pm = precision.cwiseProduct(f.targets);
    const Eigen::MatrixXd w_bar = precision.asDiagonal() * (c.w * B_sym) + pm * b_bar.transpose();
    Eigen::MatrixXd inputs_bar = Eigen::MatrixXd::Zero(f.inputs.rows(), f.inputs.cols());
    se_ard_vjp(f.inputs, z, kernel, c.w, w_bar, factor_bar ? &inputs_bar : nullptr, z_bar, kernel_bar);
    if (factor_bar) {
      const Eigen::VectorXd wb = c.w * b_bar;
      const Eigen::VectorXd quad = (c.w * B_bar).cwiseProduct(c.w).rowwise().sum();  // w_i' B_bar w_i
      const Eigen::Index n_in = f.inputs.size(), m = f.targets.size();
      factor_bar->segment(0, n_in) += Eigen::Map<const Eigen::VectorXd>(inputs_bar.data(), n_in);
      factor_bar->segment(n_in, m) += precision.cwiseProduct(wb);
      // d/d log S_ii = -p_i (w_i' B_bar w_i + m_i w_i' b_bar)
      factor_bar->segment(n_in + m, m) -= precision.cwiseProduct(quad + f.targets.cwiseProduct(wb));
    }
    return;
  }
  // CPO: B = K P K, b = K h, P = L L' (K and P symmetric).
  const Eigen::MatrixXd L = f.chol.triangularView<Eigen::Lower>();
  const Eigen::MatrixXd P = L * L.transpose();
  if (k_zz_bar) {
    const Eigen::MatrixXd kp = k_zz * P;
    *k_zz_bar += B_bar * kp + kp.transpose() * B_bar + b_bar * f.h.transpose();
  }
  if (factor_bar) {
    const Eigen::MatrixXd P_bar = k_zz * B_bar * k_zz;
    const Eigen::MatrixXd L_bar = (P_bar + P_bar.transpose()) * L;
    const Eigen::Index m = f.h.size();
    factor_bar->segment(0, m) += k_zz * b_bar;
    Eigen::Index at = m;
    for (Eigen::Index j = 0; j < m; ++j)
      for (Eigen::Index i = j; i < m; ++i) (*factor_bar)[at++] += L_bar(i, j);
  }
}

}  // namespace fvi::gp
