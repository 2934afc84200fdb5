#include "fvi/family/amortized_gaussian.h"

#include <stdexcept>
#include <string>

namespace fvi {

AmortizedGaussianNet::AmortizedGaussianNet(Eigen::Index inputs, Eigen::Index width, Eigen::Index depth)
    : inputs_(inputs) {
  if (inputs < 1 || width < 1 || depth < 0)
    throw std::invalid_argument("amortised q(z): needs inputs >= 1, width >= 1, depth >= 0 (got " +
                                std::to_string(inputs) + ", " + std::to_string(width) + ", " + std::to_string(depth) + ")");
  Eigen::Index in = inputs;
  for (Eigen::Index l = 0; l <= depth; ++l) {
    const Eigen::Index out = l < depth ? width : 2;
    layers_.push_back({in, out, num_params_});
    num_params_ += in * out + out;
    in = out;
  }
}

Eigen::VectorXd AmortizedGaussianNet::initial_params(const Eigen::VectorXd& normals, double sd0) const {
  Eigen::VectorXd p = Eigen::VectorXd::Zero(num_params_);
  for (size_t l = 0; l + 1 < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    p.segment(L.offset, L.in * L.out) = normals.segment(L.offset, L.in * L.out) / std::sqrt(double(L.in));
  }
  const Layer& last = layers_.back();
  p[last.offset + last.in * last.out + 1] = std::log(sd0);
  return p;
}

const Eigen::MatrixXd& AmortizedGaussianNet::forward(const Eigen::VectorXd& params, const Eigen::MatrixXd& u) {
  if (u.rows() != inputs_) throw std::invalid_argument("amortised q(z): input has the wrong number of rows");
  activations_.assign(1, u);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    Eigen::Map<const Eigen::MatrixXd> W(params.data() + L.offset, L.out, L.in);
    Eigen::Map<const Eigen::VectorXd> b(params.data() + L.offset + L.in * L.out, L.out);
    Eigen::MatrixXd h = (W * activations_.back()).colwise() + b;
    if (l + 1 < layers_.size()) {
      activations_.push_back(h.array().tanh().matrix());
    } else {
      output_ = std::move(h);
    }
  }
  return output_;
}

Eigen::MatrixXd AmortizedGaussianNet::backward(const Eigen::VectorXd& params, const Eigen::MatrixXd& d_out,
                                               Eigen::VectorXd* d_params) const {
  Eigen::MatrixXd delta = d_out;  // adjoint of the current layer's pre-activation
  for (size_t l = layers_.size(); l-- > 0;) {
    const Layer& L = layers_[l];
    Eigen::Map<const Eigen::MatrixXd> W(params.data() + L.offset, L.out, L.in);
    const Eigen::MatrixXd& input = activations_[l];
    if (d_params) {
      Eigen::Map<Eigen::MatrixXd>(d_params->data() + L.offset, L.out, L.in) += delta * input.transpose();
      d_params->segment(L.offset + L.in * L.out, L.out) += delta.rowwise().sum();
    }
    Eigen::MatrixXd d_input = W.transpose() * delta;
    if (l > 0) d_input.array() *= 1.0 - input.array().square();  // tanh' = 1 - tanh^2
    delta = std::move(d_input);
  }
  return delta;
}

}  // namespace fvi
