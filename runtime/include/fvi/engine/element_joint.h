#pragma once
// A silo's log p(y_j, Z_L | Z_G) split by local element, for the importance-weighted bound of
// SFVI with `local_samples = K > 1` (fvi/engine/sfvi.h). When each likelihood row reads one
// element b[idx[n]] of the silo's local vector and b's prior is a sum over its elements (the
// compiler marks both: fvi_factor_info.local_index and FVI_ELEMENTS), the joint is
//     sum_i log p(y_i, b_i | Z_G) + (terms that read no local element)
// with y_i the rows whose index is i: each element's term can then be weighted on its own.
#include <memory>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/engine/bound_factor.h"

namespace fvi::engine {

class ElementJoint {
 public:
  // Binds the silo's factors to `data` (which holds every local_index array). Throws ModelError,
  // naming the factor, when one of them reads the local group in any other way.
  ElementJoint(const fvi_model& model, const fvi_data& data, Eigen::Index local_dim);
  int64_t rows() const { return rows_; }  // the likelihoods' rows (0 if none)

  struct Value {
    Eigen::MatrixXd per_element;  // m x D: log p(y_i, b_i | Z_G) for element i at draw d
    Eigen::VectorXd shared;       // D: the terms that read no local element
  };
  // The joint at D draws: global n x D, local m x D, hyper h x 1 (null when the model has none).
  Value evaluate(const Eigen::MatrixXd& global, const Eigen::MatrixXd& local, const Eigen::MatrixXd* hyper);

  struct Gradient {
    Eigen::MatrixXd d_global, d_local;  // n x D, m x D
    Eigen::VectorXd d_hyper;            // h, summed over the draws
  };
  // After evaluate(): the gradient of sum(weights .* per_element) + sum(shared_weights .* shared).
  Gradient backward(const Eigen::MatrixXd& weights, const Eigen::VectorXd& shared_weights);

 private:
  struct Part {
    std::unique_ptr<BoundFactor> factor;
    enum { kShared, kElements, kIndexed } role = kShared;
    std::vector<Eigen::Index> element;  // kIndexed: the element (0-based) of each row
  };
  std::vector<Part> parts_;
  Eigen::Index local_dim_ = 0, global_dim_ = 0, hyper_dim_ = 0;
  int64_t rows_ = 0;
  long draws_ = 0;
};

}  // namespace fvi::engine
