#include "fvi/optim/adam.h"

#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "fvi/rng.h"

using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using fvi::Adam;
using fvi::AdamOptions;

TEST_CASE("Adam with a constant gradient moves lr * g / (|g| + eps) every step (bias correction)", "[optim][adam]") {
  AdamOptions opt;
  opt.learning_rate = 0.05;
  Adam<> adam(3, opt);
  const Eigen::Vector3d g(2.0, -0.5, 1e-3);
  Eigen::VectorXd x = Eigen::Vector3d(1, 1, 1);
  for (int t = 0; t < 20; ++t) {
    const Eigen::VectorXd before = x;
    adam.step(x, g);
    // With m_hat = g and v_hat = g^2 exactly: the step is lr g / (|g| + eps). Rounding of the
    // moment recursions is a few ulps of the step.
    for (int i = 0; i < 3; ++i) CHECK_THAT(before[i] - x[i], WithinRel(0.05 * g[i] / (std::abs(g[i]) + 1e-8), 1e-12));
  }
  CHECK(adam.iteration() == 20);
}

TEST_CASE("Adam's step is bounded by lr (Kingma & Ba §2.1) and invariant to gradient scale", "[optim][adam]") {
  AdamOptions opt;
  opt.learning_rate = 0.01;
  opt.epsilon = 1e-12;
  Adam<> a(4, opt), b(4, opt);
  Eigen::VectorXd xa = Eigen::VectorXd::Ones(4), xb = xa;
  fvi::CounterRng rng(fvi::RngKey{4, 0, 0, 0});
  for (int t = 0; t < 200; ++t) {
    const Eigen::VectorXd g = rng.normal(4, 1);
    const Eigen::VectorXd before = xa;
    a.step(xa, g);
    b.step(xb, 1000 * g);
    // |step| <= lr (1 - beta1) / sqrt(1 - beta2) = 3.16 lr when (1 - beta1) > sqrt(1 - beta2).
    CHECK((xa - before).cwiseAbs().maxCoeff() <= 0.01 * 0.1 / std::sqrt(0.001) * (1 + 1e-12));
  }
  // Scaling the gradient by 1000 changes only the eps term: relative effect <= eps / |g| ~ 1e-9.
  CHECK((xa - xb).cwiseAbs().maxCoeff() <= 1e-8);
}

TEST_CASE("Adam's step limit clips each coordinate's step to scale * limit and leaves the others alone",
          "[optim][adam]") {
  AdamOptions opt;
  opt.learning_rate = 0.1;
  Adam<> limited(3, opt), free(3, opt);
  const double inf = std::numeric_limits<double>::infinity();
  limited.set_step_limit(Eigen::Vector3d(0.01, inf, 0.5));
  limited.set_scale(0.5), free.set_scale(0.5);
  const Eigen::Vector3d g(1.0, -1.0, 1.0);
  Eigen::VectorXd x = Eigen::Vector3d::Zero(), y = x;
  for (int t = 0; t < 5; ++t) {
    const Eigen::VectorXd before = x, before_free = y;
    limited.step(x, g);
    free.step(y, g);
    // A constant gradient: the free step is 0.5 * 0.1 / (1 + eps) per coordinate (bias-corrected).
    CHECK_THAT(before[0] - x[0], WithinRel(0.5 * 0.01, 1e-12));                  // clipped to 0.005
    CHECK_THAT(before[1] - x[1], WithinRel(before_free[1] - y[1], 1e-12));      // no bound
    CHECK_THAT(before[2] - x[2], WithinRel(before_free[2] - y[2], 1e-12));      // 0.05 < 0.25
    CHECK_THAT(before_free[2] - y[2], WithinRel(0.05, 1e-7));  // eps / |g| = 1e-8
  }
  CHECK_THROWS_WITH(limited.set_step_limit(Eigen::Vector3d(0.1, 0, 1)), Contains("limit[1] is not positive"));
  CHECK_THROWS(limited.set_step_limit(Eigen::Vector2d(1, 1)));
  limited.set_step_limit(Eigen::VectorXd());  // no bound again
  const Eigen::VectorXd before = x, before_free = y;
  limited.step(x, g), free.step(y, g);
  CHECK_THAT(before[0] - x[0], WithinRel(before_free[0] - y[0], 1e-12));
}

TEST_CASE("Adam minimises an ill-conditioned quadratic; state restores for checkpoints", "[optim][adam]") {
  const Eigen::Vector2d curvature(1.0, 100.0);
  auto grad = [&](const Eigen::VectorXd& x) { return Eigen::VectorXd(curvature.cwiseProduct(x)); };
  AdamOptions opt;
  opt.learning_rate = fvi::StepSizeSchedule::inverse_time(0.1, 100, 1.0);
  Adam<> adam(2, opt);
  Eigen::VectorXd x = Eigen::Vector2d(3, -2);
  for (int t = 0; t < 3000; ++t) adam.step(x, grad(x));
  // The final step size is 0.1 / 31 = 3e-3; Adam then oscillates within about one step of 0.
  CHECK(x.cwiseAbs().maxCoeff() < 1e-2);

  // Restore: a copy resumed from the saved state follows the same path.
  Adam<> resumed(2, opt);
  resumed.restore(adam.iteration(), adam.first_moment(), adam.second_moment());
  Eigen::VectorXd y = x;
  for (int t = 0; t < 10; ++t) {
    adam.step(x, grad(x));
    resumed.step(y, grad(y));
  }
  CHECK(x == y);
}

TEST_CASE("Adam rejects non-finite gradients without touching the parameters", "[optim][adam]") {
  Adam<> adam(2);
  Eigen::VectorXd x = Eigen::Vector2d(1, 2);
  CHECK_THROWS_WITH(adam.step(x, Eigen::Vector2d(0, std::nan(""))), "Adam::step: gradient[1] is NaN");
  CHECK(x == Eigen::Vector2d(1, 2));
  CHECK(adam.iteration() == 0);
  CHECK_THROWS_WITH(adam.step(x, Eigen::Vector3d(0, 0, 0)), Contains("gradient has size 3 but 2"));
}

TEST_CASE("Adam without moments takes plain gradient steps, lr * g, bounded like Adam's", "[optim][adam]") {
  AdamOptions opt;
  opt.learning_rate = 0.05;
  opt.moments = false;
  Adam<> sgd(3, opt);
  Eigen::VectorXd x = Eigen::Vector3d(1, 1, 1);
  const Eigen::VectorXd g = Eigen::Vector3d(2.0, -0.5, 1e-3);
  for (int t = 0; t < 5; ++t) {
    const Eigen::VectorXd before = x;
    sgd.step(x, g);
    // x is near 1: the difference carries x's rounding, a few 1e-16 absolute.
    for (int i = 0; i < 3; ++i) CHECK_THAT(before[i] - x[i], WithinAbs(0.05 * g[i], 1e-15));
  }
  sgd.set_step_limit(Eigen::Vector3d(0.01, 0.01, 0.01));
  const Eigen::VectorXd before = x;
  sgd.step(x, g);
  CHECK_THAT(before[0] - x[0], WithinAbs(0.01, 1e-15));   // 0.1 bounded to 0.01
  CHECK_THAT(before[1] - x[1], WithinAbs(-0.01, 1e-15));  // -0.025 bounded
  CHECK_THAT(before[2] - x[2], WithinAbs(5e-5, 1e-15));   // within the bound
}
