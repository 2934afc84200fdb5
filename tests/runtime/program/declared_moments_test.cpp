// q's moments on the declared scale against closed forms (the lognormal's, a shifted one for an
// upper bound) and, for an interval, a fine trapezoid rule over q's marginal: independent of the
// Gauss-Hermite rule under test.
#include "fvi/program/declared_moments.h"

#include <cmath>

#include <catch2/catch.hpp>

#include "fvi/rng.h"

using namespace fvi;
using namespace fvi::program;

namespace declared_moments_test {

// S draws of independent N(mean_i, sd_i), with q's exact mean and sd beside them.
ServerDraws draws_of(std::vector<VariableLayout> layout, const Eigen::VectorXd& mean, const Eigen::VectorXd& sd,
                     Eigen::Index S) {
  ServerDraws d;
  d.layout = std::move(layout);
  CounterRng rng(RngKey{11, 0, 0, rng_stream::kUserStream});
  d.unconstrained = (sd.asDiagonal() * rng.normal(mean.size(), S)).colwise() + mean;
  d.constrained = constrain(d.layout, d.unconstrained);
  d.mean = mean, d.sd = sd;
  return d;
}

double sample_sd(const Eigen::RowVectorXd& x) {
  return std::sqrt((x.array() - x.mean()).square().sum() / double(x.size() - 1));
}

}  // namespace declared_moments_test

using namespace declared_moments_test;

TEST_CASE("normal_quadrature: the standard normal's moments", "[declared_moments]") {
  Eigen::VectorXd x, w;
  normal_quadrature(64, x, w);
  CHECK(w.sum() == Approx(1).epsilon(1e-13));
  double double_factorial = 1;  // E Z^(2k) = (2k - 1)!!
  for (int k = 1; k <= 10; ++k) {
    double_factorial *= 2 * k - 1;
    CHECK(w.dot(x.array().pow(2 * k).matrix()) == Approx(double_factorial).epsilon(1e-10));
    CHECK(std::abs(w.dot(x.array().pow(2 * k - 1).matrix())) < 1e-10 * double_factorial);
  }
  CHECK(w.dot(x.array().unaryExpr([](double z) { return std::exp(2 * z); }).matrix()) ==
        Approx(std::exp(2.0)).epsilon(1e-12));
}

TEST_CASE("declared_moments: q's own moments, not its draws'", "[declared_moments]") {
  const Eigen::Index S = 1000;
  const Eigen::Vector4d mean(0.7, 0.3, -0.4, 0.2), sd(1.3, 0.8, 2.0, 0.9);
  ServerDraws d = draws_of({{"beta", 0, {}, FVI_IDENTITY, 0, 0},
                            {"sigma", 1, {}, FVI_LOWER, 1.5, 0},
                            {"tau", 2, {}, FVI_UPPER, 0, 4.0},
                            {"p", 3, {}, FVI_INTERVAL, -1.0, 3.0}},
                           mean, sd, S);
  const DeclaredMoments m = declared_moments(d);
  // Unbounded: q's mean and sd as they are (the draws' differ by Monte Carlo error).
  CHECK(m.mean[0] == mean[0]);
  CHECK(m.sd[0] == sd[0]);
  CHECK(std::abs(sample_sd(d.constrained.row(0)) - sd[0]) > 1e-6);
  // Lower bound: 1.5 + a lognormal, mean 1.5 + e^(mu + s^2/2), sd e^(mu + s^2/2) sqrt(e^(s^2) - 1).
  const double e1 = std::exp(mean[1] + 0.5 * sd[1] * sd[1]);
  CHECK(m.mean[1] == Approx(1.5 + e1).epsilon(1e-12));
  CHECK(m.sd[1] == Approx(e1 * std::sqrt(std::expm1(sd[1] * sd[1]))).epsilon(1e-10));
  // Upper bound: 4 less a lognormal of q's sd 2 (a heavy right tail: the quadrature's hardest case).
  const double e2 = std::exp(mean[2] + 0.5 * sd[2] * sd[2]);
  CHECK(m.mean[2] == Approx(4.0 - e2).epsilon(1e-10));
  CHECK(m.sd[2] == Approx(e2 * std::sqrt(std::expm1(sd[2] * sd[2]))).epsilon(1e-8));
  // Interval (-1, 3): -1 + 4 inv_logit(u), by the trapezoid rule over u within 12 sds of q's mean.
  const int K = 200000;
  const double h = 24 * sd[3] / K;
  double mass = 0, first = 0, second = 0;
  for (int k = 0; k <= K; ++k) {
    const double u = mean[3] - 12 * sd[3] + k * h, z = (u - mean[3]) / sd[3];
    const double weight = (k == 0 || k == K ? 0.5 : 1.0) * h * std::exp(-0.5 * z * z) / (sd[3] * std::sqrt(2 * M_PI));
    const double value = -1 + 4 / (1 + std::exp(-u));
    mass += weight, first += weight * value, second += weight * value * value;
  }
  CHECK(mass == Approx(1).epsilon(1e-12));
  CHECK(m.mean[3] == Approx(first).epsilon(1e-10));
  CHECK(m.sd[3] == Approx(std::sqrt(second - first * first)).epsilon(1e-9));
}

TEST_CASE("declared_moments: the draws' moments where an element is not its own coordinate's", "[declared_moments]") {
  // A simplex (each element depends on every coordinate) and a quantity past q's rows.
  const Eigen::Vector3d mean(0.1, -0.2, 0.0), sd(0.5, 0.4, 0.3);
  ServerDraws d = draws_of({{"theta", 0, {3}, FVI_SOFTMAX_SIMPLEX, 0, 0}}, mean, sd, 500);
  d.layout.push_back({"y_rep", 3, {}, FVI_IDENTITY, 0, 0});
  d.constrained.conservativeResize(4, Eigen::NoChange);
  d.constrained.row(3) = d.constrained.row(0) * 2;
  const DeclaredMoments m = declared_moments(d);
  for (Eigen::Index i = 0; i < 4; ++i) {
    CHECK(m.mean[i] == Approx(d.constrained.row(i).mean()).epsilon(1e-14));
    CHECK(m.sd[i] == Approx(sample_sd(d.constrained.row(i))).epsilon(1e-14));
  }
}

TEST_CASE("interval_gaussian: the logit-normal with a given mean and sd", "[declared_moments]") {
  // The Gaussian found, carried through lower + (upper - lower) inv_logit(u) by the trapezoid rule
  // (independent of the Gauss-Hermite rule inside), has the mean and sd asked for: an AR(1)'s phi
  // near 1 in (-1, 1), a probability near its middle, and one near 0 with a wide spread.
  struct Case {
    double lower, upper, mean, sd;
  };
  for (const Case c : {Case{-1, 1, 0.9627, 0.0265}, Case{0, 1, 0.45, 0.1}, Case{0, 1, 0.05, 0.12}}) {
    double m = 0, s = 0;
    REQUIRE(interval_gaussian(c.mean, c.sd, c.lower, c.upper, m, s));
    REQUIRE(s > 0);
    REQUIRE(s <= kMaxIntervalScale);
    const int K = 400000;
    const double h = 24 * s / K;
    double first = 0, second = 0;
    for (int k = 0; k <= K; ++k) {
      const double u = m - 12 * s + k * h, z = (u - m) / s;
      const double weight = (k == 0 || k == K ? 0.5 : 1.0) * h * std::exp(-0.5 * z * z) / (s * std::sqrt(2 * M_PI));
      const double value = c.lower + (c.upper - c.lower) / (1 + std::exp(-u));
      first += weight * value, second += weight * value * value;
    }
    CHECK(first == Approx(c.mean).epsilon(1e-9));
    CHECK(std::sqrt(second - first * first) == Approx(c.sd).epsilon(1e-8));
  }
  double m = 0, s = 0;
  // No logit-normal reaches a two-point law's sd, sqrt(p (1 - p)) = 0.3 at p = 0.1 in (0, 1).
  CHECK_FALSE(interval_gaussian(0.1, 0.3, 0, 1, m, s));
  CHECK_FALSE(interval_gaussian(1.2, 0.1, 0, 1, m, s));  // a mean outside the interval
  // Close to that bound the Gaussian would need a scale past kMaxIntervalScale.
  CHECK_FALSE(interval_gaussian(0.5, 0.499, 0, 1, m, s));
}
