// GCC 12 reports a false -Wstringop-overflow inside Eigen's packet store when it constant-folds
// the 2 + 2 sizes of params_gradient() in this small test (a known GCC 12 + Eigen 3.4 issue).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include "fvi/divergence/divergence_gradient.h"

#include <catch2/catch.hpp>

#include "fvi/family/mean_field_gaussian.h"

TEST_CASE("divergence gradients lay out like the family's parameters", "[divergence][divergence_gradient]") {
  fvi::DiagDivergenceGradient<> g;
  g.d_mean = Eigen::VectorXd::LinSpaced(2, 1, 2);
  g.d_log_sd = Eigen::VectorXd::LinSpaced(2, 3, 4);
  const fvi::MeanFieldGaussian<> q(Eigen::VectorXd::Constant(2, 10.0), Eigen::VectorXd::Constant(2, 0.3));
  // params() = [mean; log_sd], so d/d params = [d_mean; d_log_sd].
  Eigen::VectorXd expected(4);
  expected << 1, 2, 3, 4;
  CHECK(g.params_gradient() == expected);
  CHECK(q.params().size() == g.params_gradient().size());
  CHECK_THROWS_WITH(fvi::internal::check_same_dim("f", q, fvi::MeanFieldGaussian<>(Eigen::VectorXd::Zero(3), Eigen::VectorXd::Zero(3))),
                    "f: p dimension has size 3 but 2 was expected");
}
