#pragma once
// One party's data for the engines' tests: owned matrices with the kernel ABI's view of them.
#include <random>
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/kernel/abi.h"

namespace fvic::test {

// Owned data with its ABI view.
struct Data {
  std::vector<std::string> names;
  std::vector<Eigen::MatrixXd> values;
  std::vector<const char*> ptrs;
  std::vector<fvi_tensor> tensors;
  fvi_data view;
  void add(const std::string& n, Eigen::MatrixXd v) {
    names.push_back(n);
    values.push_back(std::move(v));
  }
  const fvi_data& abi() {
    ptrs.clear();
    tensors.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      ptrs.push_back(names[i].c_str());
      tensors.push_back(fvi_tensor{values[i].data(), values[i].rows(), values[i].cols(), 1});
    }
    view = fvi_data{int(names.size()), ptrs.data(), tensors.data()};
    return view;
  }
};

inline Eigen::MatrixXd scalar(double v) { return Eigen::MatrixXd::Constant(1, 1, v); }

// Logistic regression data (robust_logreg's declarations): x standard normal, y a fair coin.
inline Data logreg_data(int n, int d, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Data data;
  Eigen::MatrixXd x(n, d), y(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) y(i, 0) = normal(rng) > 0 ? 1 : 0;
  data.add("D", scalar(d));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);
  return data;
}

// Linear regression data (linreg_conjugate's declarations, known noise sd `sigma`): x and y
// standard normal.
inline Data linreg_data(int n, int d, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Data data;
  Eigen::MatrixXd x(n, d), y(n, 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  for (int i = 0; i < n; ++i) y(i, 0) = normal(rng);
  data.add("D", scalar(d));
  data.add("sigma", scalar(sigma));
  data.add("N", scalar(n));
  data.add("x", x);
  data.add("y", y);
  return data;
}

inline int factor_named(const fvi_model& m, const std::string& name) {
  for (int f = 0; f < m.factor_count; ++f)
    if (name == m.factors[f].name) return f;
  return -1;
}

}  // namespace fvic::test
