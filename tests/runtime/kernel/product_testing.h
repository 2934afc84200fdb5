#pragma once
// What the product tests share: kernel tensors of standard-normal values, and the tolerance of a
// computed sum against one recomputed in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "fvi/kernel/tensor.h"

namespace product_testing {

template <class T>
fvi::kernel::Tensor<T> random_tensor(Eigen::Index rows, Eigen::Index cols, Eigen::Index draws, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  fvi::kernel::Tensor<T> t(rows, cols, draws);
  for (Eigen::Index i = 0; i < t.m.size(); ++i) t.m.data()[i] = T(normal(rng));
  return t;
}

// |got - want| within the rounding of a sum of `terms` products in T whose magnitudes add up to
// `magnitude` (each product and each addition rounds once: at most 2 x terms x eps x magnitude).
template <class T>
void check_close(double got, double want, double magnitude, Eigen::Index terms) {
  INFO("got " << got << ", want " << want);
  CHECK(std::abs(got - want) <= 2.0 * double(terms) * std::numeric_limits<T>::epsilon() * magnitude);
}

}  // namespace product_testing
