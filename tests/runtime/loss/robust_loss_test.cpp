#include "fvi/loss/robust_loss.h"

#include <catch2/catch.hpp>

using Catch::Contains;
using fvi::LossSpec;

TEST_CASE("LossSpec validates, names itself and dispatches", "[loss][robust_loss]") {
  CHECK(LossSpec::nll().name() == "nll");
  CHECK(LossSpec::generalized_cross_entropy(0.8).name() == "gce(0.8)");
  CHECK(LossSpec::density_power(0.7).integral_power() == 1.7);
  CHECK(LossSpec::gamma(1.5).integral_power() == 1.5);
  CHECK_FALSE(LossSpec::generalized_cross_entropy(0.5).needs_integral());
  CHECK(LossSpec::density_power(0.5).needs_integral());
  CHECK_THROWS_WITH(LossSpec::generalized_cross_entropy(-0.1), Contains("delta must be in [0, 1]"));
  CHECK_THROWS_WITH(LossSpec::gamma(0.9), Contains("gamma must be >= 1"));
  CHECK_THROWS_WITH(LossSpec::density_power(std::nan("")), Contains("beta is NaN"));

  const double l = -0.8, li = -0.3;
  CHECK(fvi::evaluate_loss(LossSpec::nll(), l).value == fvi::nll_loss(l).value);
  CHECK(fvi::evaluate_loss(LossSpec::generalized_cross_entropy(0.4), l).value ==
        fvi::generalized_cross_entropy_loss(l, 0.4).value);
  CHECK(fvi::evaluate_loss(LossSpec::density_power(0.7), l, li).d_log_integral ==
        fvi::density_power_loss(l, li, 0.7).d_log_integral);
  CHECK(fvi::evaluate_loss(LossSpec::gamma(1.5), l, li).d_loglik == fvi::gamma_divergence_loss(l, li, 1.5).d_loglik);
  // Each loss at its limiting parameter is the NLL, exactly.
  CHECK(fvi::evaluate_loss(LossSpec::generalized_cross_entropy(0.0), l).value == -l);
  CHECK(fvi::evaluate_loss(LossSpec::density_power(0.0), l, 0.0).value == -l);
  CHECK(fvi::evaluate_loss(LossSpec::gamma(1.0), l, 0.0).value == -l);
}
