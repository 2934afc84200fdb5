// find_mode (fvi/engine/mode.h): on log densities whose mode and curvature are known in closed
// form -- a Gaussian on an unstandardised regression's ridge (condition 10^7, far from the
// origin), and a non-Gaussian one (a Student-t location with a log-normal scale) -- it finds the
// mode and returns -Hessian there; where there is no mode it says so.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

#include "fvi/engine/mode.h"

using fvi::engine::find_mode;

TEST_CASE("find_mode: a Gaussian's mean and precision, on an ill-conditioned ridge far from 0", "[mode]") {
  // Precision of an intercept and a slope for x around 2000 (x'x of [1, x] rows), mean far off.
  Eigen::Matrix2d precision;
  precision << 50.0, 50.0 * 2000.0, 50.0 * 2000.0, 50.0 * (2000.0 * 2000.0 + 100.0);
  const Eigen::Vector2d mean(-60.0, 0.0176);
  const auto log_p = [&](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    const Eigen::VectorXd d = z - mean;
    g = -precision * d;
    return -0.5 * d.dot(precision * d);
  };
  const fvi::engine::Mode m = find_mode(log_p, Eigen::VectorXd::Zero(2));
  INFO(m.why);
  REQUIRE(m.found);
  // Within 1e-6 Laplace sds of the mean in each coordinate (the stopping rule's tolerance).
  const Eigen::Vector2d sd = precision.inverse().diagonal().cwiseSqrt();
  CHECK(std::fabs(m.at[0] - mean[0]) <= 1e-6 * sd[0]);
  CHECK(std::fabs(m.at[1] - mean[1]) <= 1e-6 * sd[1]);
  // Central differences of a linear gradient are exact up to rounding.
  CHECK((m.curvature - precision).cwiseAbs().maxCoeff() <= 1e-6 * precision.cwiseAbs().maxCoeff());
}

TEST_CASE("find_mode: a non-Gaussian density's mode and curvature", "[mode]") {
  // log p(a, s) = log t_3(2 - a) - (s - 0.5)^2 / 2 * 4: mode (2, 0.5); -d2/da2 at the mode is
  // (nu + 1) / nu = 4/3, -d2/ds2 = 4, no cross term.
  const double nu = 3;
  const auto log_p = [&](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    const double r = z[0] - 2, s = z[1] - 0.5;
    g.resize(2);
    g[0] = -(nu + 1) * r / (nu + r * r);
    g[1] = -4 * s;
    return -(nu + 1) / 2 * std::log1p(r * r / nu) - 2 * s * s;
  };
  Eigen::VectorXd start(2);
  start << -3.0, 4.0;
  const fvi::engine::Mode m = find_mode(log_p, start);
  INFO(m.why);
  REQUIRE(m.found);
  CHECK(m.at[0] == Approx(2.0).margin(1e-6));
  CHECK(m.at[1] == Approx(0.5).margin(1e-6));
  CHECK(m.curvature(0, 0) == Approx(4.0 / 3.0).epsilon(1e-6));
  CHECK(m.curvature(1, 1) == Approx(4.0).epsilon(1e-6));
  CHECK(std::fabs(m.curvature(0, 1)) <= 1e-6);
}

TEST_CASE("find_mode: at a log density's rounding floor it stops at the mode, not at max_steps", "[mode]") {
  // A standard Gaussian at (1, -2) whose log p is rounded to 1e-8 and whose gradient carries an
  // error of 1e-5 that flips sign at the mode (piecewise constant, as an adaptive ODE solve's
  // error): the Newton step stays near 1e-5 sd, never the 1e-6 of convergence, and a step of that
  // size leaves log p the same. Counting such a step as progress ran out the steps
  // (posteriordb's lotka_volterra); the search must end at the mode.
  const Eigen::Vector2d mean(1.0, -2.0);
  const auto log_p = [&](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    const Eigen::VectorXd d = z - mean;
    g = -d;
    for (Eigen::Index i = 0; i < 2; ++i) g[i] += z[i] < mean[i] ? 1e-5 : -1e-5;  // never 0 near the mode
    return std::round(-0.5 * d.squaredNorm() * 1e8) / 1e8;
  };
  const fvi::engine::Mode m = find_mode(log_p, Eigen::VectorXd::Zero(2), 200);
  INFO(m.why);
  REQUIRE(m.found);
  CHECK((m.at - mean).cwiseAbs().maxCoeff() <= 1e-3);  // 1e-3 sd: the mode for any purpose
  CHECK(m.evaluations < 200 * 5);  // it stopped well before max_steps' (2n + 1) evaluations a step
}

TEST_CASE("find_mode: an unbounded log density has no mode, and says why", "[mode]") {
  const auto log_p = [](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    g = Eigen::VectorXd::Constant(z.size(), 1.0);  // log p = sum(z): increases without bound
    return z.sum();
  };
  const fvi::engine::Mode m = find_mode(log_p, Eigen::VectorXd::Zero(3), 50);
  CHECK_FALSE(m.found);
  CHECK(!m.why.empty());
}

TEST_CASE("find_modes: starts in two basins find both modes and keep the higher", "[mode]") {
  // log p = log(0.3 N(z; -3, 0.5) + 0.7 N(z; 3, 0.5)) in one coordinate, plus -z2^2/2 in a second:
  // modes at z1 = -3 and 3 (the components are 12 sds apart, so each is its component's mean to
  // e^-70), with log p = log(w / (0.5 sqrt(2 pi))) there.
  const auto log_p = [](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    const double a = std::log(0.3) - 0.5 * std::pow((z[0] + 3) / 0.5, 2);
    const double b = std::log(0.7) - 0.5 * std::pow((z[0] - 3) / 0.5, 2);
    const double top = std::max(a, b), lse = top + std::log(std::exp(a - top) + std::exp(b - top));
    const double wa = std::exp(a - lse), wb = std::exp(b - lse);
    g.resize(2);
    g[0] = wa * -(z[0] + 3) / 0.25 + wb * -(z[0] - 3) / 0.25;
    g[1] = -z[1];
    return lse - std::log(0.5 * std::sqrt(2 * M_PI)) - 0.5 * z[1] * z[1];
  };
  std::vector<Eigen::VectorXd> starts = {Eigen::Vector2d(-2.0, 1.0), Eigen::Vector2d(2.5, -1.0), Eigen::Vector2d(-3.5, 0.0)};
  const fvi::engine::Modes modes = fvi::engine::find_modes(log_p, starts);
  REQUIRE(modes.best.found);
  CHECK(modes.starts == 3);
  CHECK(modes.best.at[0] == Approx(3.0).margin(1e-6));
  REQUIRE(modes.separate_log_p.size() == 2);
  const double c = -std::log(0.5 * std::sqrt(2 * M_PI));
  CHECK(modes.separate_log_p[0] == Approx(std::log(0.7) + c).epsilon(1e-9));
  CHECK(modes.separate_log_p[1] == Approx(std::log(0.3) + c).epsilon(1e-9));
  // Starts in one basin: one mode.
  const fvi::engine::Modes one = fvi::engine::find_modes(log_p, {Eigen::Vector2d(2.0, 0.5), Eigen::Vector2d(4.0, -0.5)});
  CHECK(one.separate_log_p.size() == 1);
}

TEST_CASE("find_mode: a batch density (a federated one) gives the point search's mode, a step's curvature in one call",
          "[mode]") {
  // The ridge above, answered a batch of points per call: the search must ask the curvature's 2n
  // points at once, so its calls are about two per Newton step, and land where the point search does.
  Eigen::Matrix2d precision;
  precision << 50.0, 50.0 * 2000.0, 50.0 * 2000.0, 50.0 * (2000.0 * 2000.0 + 100.0);
  const Eigen::Vector2d mean(-60.0, 0.0176);
  long calls = 0, points = 0;
  const fvi::engine::LogDensityBatchFn batch = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
    ++calls;
    points += z.cols();
    const Eigen::MatrixXd d = z.colwise() - mean;
    g = -precision * d;
    lp = -0.5 * (d.array() * (precision * d).array()).colwise().sum().transpose();
  };
  const auto point = [&](const Eigen::VectorXd& z, Eigen::VectorXd& g) {
    const Eigen::VectorXd d = z - mean;
    g = -precision * d;
    return -0.5 * d.dot(precision * d);
  };
  const fvi::engine::Mode b = find_mode(batch, Eigen::VectorXd::Zero(2));
  const fvi::engine::Mode p = find_mode(point, Eigen::VectorXd::Zero(2));
  INFO(b.why);
  REQUIRE(b.found);
  REQUIRE(p.found);
  CHECK(b.at.isApprox(p.at, 1e-12));
  CHECK(b.evaluations == p.evaluations);  // the same points, asked in batches
  CHECK(b.batches == calls);
  CHECK(b.evaluations == points);
  // Calls: the start (1 point), each curvature (2n = 4 points in one call), each trial (1 point).
  // Asked one point per call, points - calls would be 0.
  CHECK(points - calls >= 3);
  CHECK((points - calls) % 3 == 0);
  CHECK(2 * calls <= points);
}

TEST_CASE("find_mode: ModeSearchAborted from the density ends the search; other errors only refuse a point",
          "[mode]") {
  long calls = 0;
  const fvi::engine::LogDensityBatchFn gone = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
    if (++calls > 3) throw fvi::engine::ModeSearchAborted("a silo did not answer");
    g = -z;
    lp = -0.5 * z.array().square().colwise().sum().transpose();
  };
  CHECK_THROWS_AS(find_mode(gone, Eigen::VectorXd::Constant(2, 5.0)), fvi::engine::ModeSearchAborted);
  // log z - z, defined for z > 0 alone (it throws elsewhere), mode 1: from 3 the first Newton step
  // lands at -3, which must be refused as a point, not end the search.
  long refused = 0;
  const fvi::engine::LogDensityBatchFn positive = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
    if ((z.array() <= 0).any()) {
      ++refused;
      throw std::domain_error("outside the support");
    }
    g = (1 / z.array() - 1).matrix();
    lp = (z.array().log() - z.array()).colwise().sum().transpose();
  };
  const fvi::engine::Mode m = find_mode(positive, Eigen::VectorXd::Constant(1, 3.0));
  INFO(m.why);
  REQUIRE(m.found);
  CHECK(refused >= 1);
  CHECK(m.at[0] == Approx(1.0).margin(1e-6));
}

TEST_CASE("find_modes: a hierarchical scale whose log joint grows without limit as it goes to 0 stops at the bound, "
          "and no other start is tried",
          "[mode]") {
  // (mu, u = log tau, a_1..a_J): a_j ~ N(mu, tau), y_j = a_j + N(0, 1) with every y_j = 0.5, mu ~
  // N(0, 1), tau ~ half-normal(0, 5), the log Jacobian u: log p = -(J - 1) u - sum (a_j - mu)^2 /
  // (2 tau^2) - sum (y_j - a_j)^2 / 2 - mu^2 / 2 - tau^2 / 50, which tends to +inf as u -> -inf
  // with every a_j = mu.
  const int J = 4;
  long points = 0;
  const fvi::engine::LogDensityBatchFn funnel = [&](const Eigen::MatrixXd& z, Eigen::VectorXd& lp, Eigen::MatrixXd& g) {
    lp.resize(z.cols());
    g.resize(z.rows(), z.cols());
    for (Eigen::Index c = 0; c < z.cols(); ++c) {
      ++points;
      const double mu = z(0, c), u = z(1, c), tau2 = std::exp(2 * u);
      double value = -(J - 1) * u - 0.5 * mu * mu - tau2 / 50, d_mu = -mu, d_u = -(J - 1) - tau2 / 25;
      for (int j = 0; j < J; ++j) {
        const double a = z(2 + j, c), r = a - mu;
        value += -r * r / (2 * tau2) - 0.5 * (0.5 - a) * (0.5 - a);
        d_mu += r / tau2;
        d_u += r * r / tau2;
        g(2 + j, c) = -r / tau2 + (0.5 - a);
      }
      lp[c] = value;
      g(0, c) = d_mu;
      g(1, c) = d_u;
    }
  };
  const std::vector<Eigen::VectorXd> starts = {Eigen::VectorXd::Zero(2 + J), Eigen::VectorXd::Constant(2 + J, 1.0),
                                               Eigen::VectorXd::Constant(2 + J, -1.0)};
  const fvi::engine::Modes bounded = fvi::engine::find_modes(funnel, starts, 200, {1});
  CHECK_FALSE(bounded.best.found);
  CHECK(bounded.starts == 1);
  CHECK_THAT(bounded.best.why, Catch::Contains("runs past +-20"));
  const long bounded_points = points;
  // Told nothing of the bound, every start runs on, log tau falling all the way: until its 200
  // steps are spent, or until tau^2 = exp(2 log tau) underflows and log p is no longer finite
  // (which comes first depends on the machine's floating-point arithmetic: -march=native).
  points = 0;
  const fvi::engine::Modes blind = fvi::engine::find_modes(funnel, starts, 200);
  CHECK_FALSE(blind.best.found);
  CHECK(blind.starts == 3);
  CHECK_THAT(blind.best.why, Catch::Contains("200 Newton steps") ||
                                 Catch::Contains("no step from the last point increases log p"));
  CHECK(points > 3 * bounded_points);
}
