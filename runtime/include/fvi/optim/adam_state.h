#pragma once
// Adam's state in a checkpoint, after the values it steps: [values; t, m, v; tail...]. The
// engines' checkpoints (the SFVI server and silos, the vertical server and silos) all use it.
#include <initializer_list>
#include <stdexcept>

#include "fvi/optim/adam.h"

namespace fvi {

inline Eigen::VectorXd with_adam(const Eigen::VectorXd& values, const Adam<double>& adam,
                                 std::initializer_list<double> tail = {}) {
  const Eigen::Index n = adam.first_moment().size();
  Eigen::VectorXd out(values.size() + 1 + 2 * n + Eigen::Index(tail.size()));
  out.head(values.size()) = values;
  out[values.size()] = double(adam.iteration());
  out.segment(values.size() + 1, n) = adam.first_moment();
  out.segment(values.size() + 1 + n, n) = adam.second_moment();
  Eigen::Index i = values.size() + 1 + 2 * n;
  for (double v : tail) out[i++] = v;
  return out;
}

// Restores `adam` from `state` (`values` values first, `tail` numbers last) and returns the values.
inline Eigen::VectorXd restore_adam(const Eigen::VectorXd& state, Eigen::Index values, Eigen::Index tail,
                                    Adam<double>& adam) {
  const Eigen::Index n = adam.first_moment().size();
  if (state.size() != values + 1 + 2 * n + tail) throw std::invalid_argument("the checkpoint does not match this model");
  const double t = state[values];
  if (!(t >= 0 && t < 1e15)) throw std::invalid_argument("a damaged checkpoint (the optimiser's step count)");
  adam.restore(long(t), state.segment(values + 1, n), state.segment(values + 1 + n, n));
  return state.head(values);
}

}  // namespace fvi
