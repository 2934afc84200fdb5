#include "fvi/loss/loss_term.h"

#include <catch2/catch.hpp>

TEST_CASE("ExpectedLoss lays out its gradient like MeanFieldGaussian::params", "[loss][loss_term]") {
  fvi::ExpectedLoss<> e;
  e.d_mean = Eigen::Vector2d(1, 2);
  e.d_log_sd = Eigen::Vector2d(3, 4);
  CHECK(e.params_gradient() == Eigen::Vector4d(1, 2, 3, 4));
  const fvi::LossTerm<> t{};
  CHECK(t.d_log_integral == 0);
}
