#include "fvi/engine/prior_scale.h"

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

using namespace fvi::engine;

// Named: compiled in one unit with other test files (CMakeLists.txt), whose helpers share names
// (wasserstein_barycenter_test's `objective`).
namespace prior_scale_test {

namespace {

// An arbitrary smooth objective of the optimiser's vector in q's coordinates.
double objective(const Eigen::VectorXd& p) {
  double f = 0;
  for (Eigen::Index i = 0; i < p.size(); ++i) f += std::sin(1.3 * p[i] + 0.2 * double(i)) + 0.1 * p[i] * p[i] * double(i % 3);
  return f + 0.05 * p.sum() * p.sum();
}

Eigen::VectorXd objective_gradient(const Eigen::VectorXd& p) {
  Eigen::VectorXd g(p.size());
  for (Eigen::Index i = 0; i < p.size(); ++i)
    g[i] = 1.3 * std::cos(1.3 * p[i] + 0.2 * double(i)) + 0.2 * p[i] * double(i % 3) + 0.1 * p.sum();
  return g;
}

}  // namespace

TEST_CASE("prior-scale coordinates: the vector maps back exactly and the gradient is the objective's in the new "
          "coordinates (central differences)",
          "[prior_scale]") {
  // [means 0-3, log-sds 4-7, hyperparameters 8-9]: means 0-1 and log-sds 4-5 measured from
  // hyper 8, mean 2 and log-sd 6 from 9.
  const std::vector<PriorScaleBlock> blocks = {{0, 4, 2, 8}, {2, 6, 1, 9}};
  Eigen::VectorXd p(10);
  p << 0.3, -1.2, 0.7, 2.0, -0.5, 0.1, -2.2, 0.4, -1.1, 0.6;
  Eigen::VectorXd w = p, g = objective_gradient(p), limit = Eigen::VectorXd::Constant(10, 0.5);
  const PriorScaleStep step = to_prior_scale_coordinates(blocks, w, g, limit);
  // The means' weights: elements 0-1 have sds exp(-0.5), exp(0.1) above their scale exp(-1.1),
  // the prior's whole share, w = 1; element 2 an sd exp(-2.2) against exp(0.6), w = exp(2 (-2.2 -
  // 0.6)). Every log-sd is measured from its scale's log.
  const double w2 = std::exp(2 * (p[6] - p[9]));
  REQUIRE(step.weights.size() == 2);
  CHECK(step.weights[0][0] == 1);
  CHECK(step.weights[0][1] == 1);
  CHECK(step.weights[1][0] == Approx(w2).epsilon(1e-15));
  CHECK(w[0] == Approx(p[0] / std::exp(p[8])).epsilon(1e-15));
  CHECK(w[2] == Approx(p[2] / std::exp(w2 * p[9])).epsilon(1e-15));
  CHECK(limit[1] == Approx(0.5 / std::exp(p[8])).epsilon(1e-15));  // a mean's bound in the new units
  CHECK(limit[4] == 0.5);
  CHECK(w[4] == Approx(p[4] - p[8]).margin(1e-15));
  CHECK(w[6] == Approx(p[6] - p[9]).margin(1e-15));
  CHECK(w[3] == p[3]);  // not in a block
  CHECK(w[7] == p[7]);
  Eigen::VectorXd back = w;
  from_prior_scale_coordinates(blocks, step, back);
  CHECK((back - p).cwiseAbs().maxCoeff() < 1e-15);

  // d/dw of objective(from(w)), by central differences in each coordinate of w.
  const double h = 1e-6;
  for (Eigen::Index i = 0; i < w.size(); ++i) {
    Eigen::VectorXd up = w, down = w;
    up[i] += h;
    down[i] -= h;
    from_prior_scale_coordinates(blocks, step, up);  // the step's coordinates, its weights held
    from_prior_scale_coordinates(blocks, step, down);
    INFO("coordinate " << i);
    CHECK(g[i] == Approx((objective(up) - objective(down)) / (2 * h)).margin(1e-8));
  }
}

}  // namespace prior_scale_test
