#pragma once
// The messages between the server and a silo (program/federation.h: a flat vector of doubles),
// written and read field by field in one place. A Reader refuses, naming the message and the
// field: a message too short for a field, a non-finite value, a count or round out of its range,
// and values left over. Sizes are message/sizes.h's, shared with `fvic plan`.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/family/natural_gaussian.h"

namespace fvi::message {

using Message = std::vector<double>;

class Writer {
 public:
  Writer& value(double x) {
    out_.push_back(x);
    return *this;
  }
  // A vector, or a matrix column-major.
  template <class Derived>
  Writer& values(const Eigen::DenseBase<Derived>& v) {
    const Eigen::Index n = v.size();
    out_.reserve(out_.size() + size_t(n));
    for (Eigen::Index j = 0; j < v.cols(); ++j)
      for (Eigen::Index i = 0; i < v.rows(); ++i) out_.push_back(double(v(i, j)));
    return *this;
  }
  // Natural parameters: eta1, then eta2's diagonal (mean-field) or its lower triangle column by
  // column (full-rank; eta2 is symmetric).
  Writer& natural(const DiagGaussianNatural<double>& eta) { return values(eta.eta1).values(eta.eta2); }
  Writer& natural(const GaussianNatural<double>& eta) {
    values(eta.eta1);
    for (Eigen::Index j = 0; j < eta.dim(); ++j)
      for (Eigen::Index i = j; i < eta.dim(); ++i) out_.push_back(eta.eta2(i, j));
    return *this;
  }
  Message done() { return std::move(out_); }

 private:
  Message out_;
};

// A round number sent as a double: a whole number in [0, 2^32). `what` names the message.
inline uint32_t round_number(double r, const std::string& what) {
  if (r < 0 || r != std::floor(r) || r > 4294967295.0) throw std::invalid_argument(what + ": bad round");
  return uint32_t(r);
}

class Reader {
 public:
  // `what` names the message in errors: "SFVI message", "PVI update".
  Reader(const Message& message, std::string what) : in_(message), what_(std::move(what)) {}

  Eigen::VectorXd vector(Eigen::Index n, const char* field) {
    if (n < 0 || size_t(n) > in_.size() - at_) throw std::invalid_argument(what_ + " too short for " + field);
    Eigen::VectorXd v = Eigen::Map<const Eigen::VectorXd>(in_.data() + at_, n);
    if (!v.allFinite()) throw std::invalid_argument(what_ + ": " + field + " is not finite");
    at_ += size_t(n);
    return v;
  }
  // rows x cols, column-major.
  Eigen::MatrixXd matrix(Eigen::Index rows, Eigen::Index cols, const char* field) {
    if (rows < 0 || cols < 0 || (cols > 0 && rows > Eigen::Index(in_.size()) / cols))
      throw std::invalid_argument(what_ + " too short for " + field);
    Eigen::VectorXd v = vector(rows * cols, field);
    return Eigen::Map<const Eigen::MatrixXd>(v.data(), rows, cols);
  }
  double value(const char* field) { return vector(1, field)[0]; }
  void natural(Eigen::Index d, DiagGaussianNatural<double>& eta, const char* field) {
    eta.eta1 = vector(d, field);
    eta.eta2 = vector(d, field);
  }
  void natural(Eigen::Index d, GaussianNatural<double>& eta, const char* field) {
    eta.eta1 = vector(d, field);
    const Eigen::VectorXd lower = vector(d * (d + 1) / 2, field);
    eta.eta2.resize(d, d);
    Eigen::Index k = 0;
    for (Eigen::Index j = 0; j < d; ++j)
      for (Eigen::Index i = j; i < d; ++i, ++k) eta.eta2(i, j) = eta.eta2(j, i) = lower[k];
  }
  // Every value was read.
  void finish() const {
    if (at_ != in_.size()) throw std::invalid_argument(what_ + " has " + std::to_string(in_.size() - at_) + " extra values");
  }

 private:
  const Message& in_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace fvi::message
