#include "fvi/loss/negative_log_likelihood.h"

#include <catch2/catch.hpp>

#include "support/gradient_check.h"

using Catch::Matchers::WithinRel;

TEST_CASE("NLL is minus the log likelihood", "[loss][nll]") {
  const auto l = fvi::nll_loss(-1.75);
  CHECK_THAT(l.value, WithinRel(1.75, 1e-16));
  auto r = fvi::test::check_gradient([](const Eigen::VectorXd& x) { return fvi::nll_loss(x[0]).value; },
                                     Eigen::VectorXd::Constant(1, -1.75), Eigen::VectorXd::Constant(1, l.d_loglik));
  CHECK(r.ok());
}
