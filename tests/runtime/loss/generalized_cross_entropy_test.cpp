#include "fvi/loss/generalized_cross_entropy.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "support/gradient_check.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("GCE equals (1 - p^delta)/delta (seed 000 Eq. 8)", "[loss][gce]") {
  for (double p : {0.9, 0.5, 0.01}) {
    for (double delta : {0.2, 0.5, 0.8, 1.0}) {
      CHECK_THAT(fvi::generalized_cross_entropy_loss(std::log(p), delta).value,
                 WithinRel((1 - std::pow(p, delta)) / delta, 1e-14));
    }
  }
}

TEST_CASE("GCE tends to the NLL as delta -> 0", "[loss][gce]") {
  for (double l : {-0.1, -2.3, -9.0}) {
    CHECK(fvi::generalized_cross_entropy_loss(l, 0.0).value == -l);  // delta = 0 is the NLL exactly
    for (double delta : {1e-3, 1e-6, 1e-9}) {
      const double gce = fvi::generalized_cross_entropy_loss(l, delta).value;
      // Taylor: GCE = -l - delta l^2 / 2 + R, |R| <= delta^2 |l|^3 / 6 e^{delta |l|}.
      const double first_order = -l - delta * l * l / 2;
      CHECK_THAT(gce, WithinAbs(first_order, delta * delta * std::pow(std::abs(l), 3) / 6 * std::exp(delta * std::abs(l)) +
                                                 4e-16 * std::abs(l)));
      CHECK_THAT(fvi::generalized_cross_entropy_loss(l, delta).d_loglik, WithinAbs(-1.0, 2 * delta * std::abs(l)));
    }
  }
}

TEST_CASE("GCE derivative and domain", "[loss][gce]") {
  for (double delta : {0.0, 0.3, 1.0}) {
    const double l = -1.3;
    auto r = fvi::test::check_gradient(
        [&](const Eigen::VectorXd& x) { return fvi::generalized_cross_entropy_loss(x[0], delta).value; },
        Eigen::VectorXd::Constant(1, l), Eigen::VectorXd::Constant(1, fvi::generalized_cross_entropy_loss(l, delta).d_loglik));
    INFO(r.report());
    CHECK(r.ok());
  }
  CHECK_THROWS_WITH(fvi::generalized_cross_entropy_loss(-1.0, 1.5), Contains("delta must be in [0, 1] but is 1.5"));
  CHECK_THROWS_WITH(fvi::generalized_cross_entropy_loss(std::nan(""), 0.5), Contains("loglik is NaN"));
}
