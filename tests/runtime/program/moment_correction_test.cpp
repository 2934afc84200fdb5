// The moment correction against a target whose moments are known in closed form: z1 the log of a
// Gamma(3, 3) variable (skewed: its left tail is long), z2 | z1 ~ N(0, exp(z1)) (a funnel). Its
// mean is (digamma(3) - log 3, 0), its variances (trigamma(3), E exp(z1) = 1), its covariance 0.
// q is a Gaussian too narrow (0.6 of each sd) and off centre, as the ELBO's q of a funnel is.
#include "fvi/program/moment_correction.h"

#include <cmath>
#include <optional>
#include <vector>

#include <catch2/catch.hpp>

#include "fvi/program/declared_moments.h"
#include "fvi/program/output.h"
#include "fvi/rng.h"

using Catch::WithinAbs;
using namespace fvi;
using namespace fvi::program;

namespace moment_correction_test {

const double kEulerGamma = 0.57721566490153286;
const double kMean1 = 1.5 - kEulerGamma - std::log(3.0);  // digamma(3) = 1 + 1/2 - gamma
const double kVar1 = M_PI * M_PI / 6 - 1.25;                  // trigamma(3) = pi^2/6 - 1 - 1/4
const double kVar2 = 1.0;                                     // E exp(z1) = shape / rate

double log_target(double z1, double z2) { return 3 * z1 - 3 * std::exp(z1) - 0.5 * z1 - 0.5 * z2 * z2 * std::exp(-z1); }

// The closing exchange of a run whose only party scores the target; records what it adopts.
class TargetCoordinator : public Coordinator {
 public:
  const char* checkpoint_kind() const override { return "test"; }
  void print_header() const override {}
  long steps() const override { return 1; }
  bool reports(long) const override { return false; }
  double step(long) override { return 0; }
  std::string position(long) const override { return ""; }
  void moments(Eigen::VectorXd&, Eigen::VectorXd&) const override {}
  ConvergenceOptions convergence() const override { return {}; }
  const char* unit() const override { return "steps"; }
  std::vector<double> state() const override { return {}; }
  void restore(const std::vector<double>&) override {}
  void finish(long) override {}
  std::optional<ServerDraws> draws() override { return std::nullopt; }
  std::string outputs_note() const override { return ""; }
  bool closing_takes_draws() const override { return true; }
  bool closing(const ServerDraws& d, Closing& out, std::string&) override {
    ++exchanges;
    const Eigen::Index S = d.unconstrained.cols();
    out.log_p.resize(S);
    for (Eigen::Index s = 0; s < S; ++s) out.log_p[s] = target(d.unconstrained(0, s), d.unconstrained(1, s));
    out.log_g = d.log_q;
    out.silo_sums = Eigen::MatrixXd::Zero(0, S);
    return true;
  }
  bool adopt_moments(const ServerDraws&, const std::vector<Eigen::Index>& varying, const Eigen::VectorXd& m,
                     const Eigen::MatrixXd& c) override {
    CHECK(varying == std::vector<Eigen::Index>{0, 1});
    mean = m, covariance = c;
    return true;
  }
  double (*target)(double, double) = log_target;
  int exchanges = 0;
  Eigen::VectorXd mean;
  Eigen::MatrixXd covariance;
};

// S draws of N(mean, diag(sd^2)) as a server's draws of two real parameters.
ServerDraws q_draws(const Eigen::Vector2d& mean, const Eigen::Vector2d& sd, Eigen::Index S) {
  ServerDraws d;
  d.layout = {{"z1", 0, {}, FVI_IDENTITY, 0, 0}, {"z2", 1, {}, FVI_IDENTITY, 0, 0}};
  CounterRng rng(RngKey{7, 0, 0, rng_stream::kUserStream});
  const Eigen::MatrixXd eps = rng.normal(2, S);
  d.unconstrained = (sd.asDiagonal() * eps).colwise() + mean;
  d.constrained = d.unconstrained;
  d.mean = mean, d.sd = sd;
  d.log_q = (-0.5 * eps.colwise().squaredNorm().transpose().array() - std::log(2 * M_PI) -
             std::log(sd[0] * sd[1])).matrix();
  return d;
}

}  // namespace moment_correction_test

using namespace moment_correction_test;

TEST_CASE("the moment correction moves a narrow q to a skewed funnel's mean and covariance", "[program][moments]") {
  TargetCoordinator c;
  const ServerDraws d = q_draws({kMean1 + 0.2, 0.1}, {0.6 * std::sqrt(kVar1), 0.6 * std::sqrt(kVar2)}, 20000);
  const MomentCorrection m = correct_moments(d, c, 11, true);
  REQUIRE(m.adopted);
  CHECK(m.passes >= 1);
  CHECK(c.exchanges == 1 + m.passes);
  INFO("mean " << c.mean.transpose() << ", covariance " << c.covariance);
  // Monte Carlo error: the check's ESS is thousands here, so a mean's error is about 0.02 sd and an
  // sd's about 2% (z2's kurtosis 4); the limits are five times those.
  CHECK_THAT(c.mean[0], WithinAbs(kMean1, 0.1 * std::sqrt(kVar1)));
  CHECK_THAT(c.mean[1], WithinAbs(0.0, 0.1 * std::sqrt(kVar2)));
  CHECK_THAT(std::sqrt(c.covariance(0, 0) / kVar1), WithinAbs(1.0, 0.1));
  CHECK_THAT(std::sqrt(c.covariance(1, 1) / kVar2), WithinAbs(1.0, 0.1));
  CHECK_THAT(c.covariance(0, 1) / std::sqrt(kVar1 * kVar2), WithinAbs(0.0, 0.1));
  // q's sds were 0.6 of the target's: the correction says how much they grew, and whose.
  CHECK(m.largest_change > 0.4);
  CHECK(m.line.find("moments corrected") != std::string::npos);
}

TEST_CASE("the moment correction leaves a q that is the posterior alone", "[program][moments]") {
  TargetCoordinator c;
  c.target = [](double z1, double z2) { return -0.5 * (z1 * z1 / 4 + z2 * z2); };  // N(0, diag(4, 1)) = q
  const ServerDraws d = q_draws({0, 0}, {2, 1}, 4000);
  const MomentCorrection m = correct_moments(d, c, 11, true);
  CHECK(m.check.moments_hold);
  CHECK(m.check.warning.empty());
  CHECK_FALSE(m.adopted);
  CHECK(m.passes == 0);
  CHECK(c.exchanges == 1);
  CHECK(c.mean.size() == 0);
}

TEST_CASE("the moment correction is off when asked", "[program][moments]") {
  TargetCoordinator c;
  const ServerDraws d = q_draws({kMean1 + 0.2, 0.1}, {0.6 * std::sqrt(kVar1), 0.6 * std::sqrt(kVar2)}, 4000);
  const MomentCorrection m = correct_moments(d, c, 11, false);
  CHECK_FALSE(m.adopted);
  CHECK_FALSE(m.check.moments_hold);  // the check still runs, and still finds q off
  CHECK_FALSE(m.check.warning.empty());
  CHECK(c.exchanges == 1);
}

TEST_CASE("the tail check names a mean off the posterior's with every sd right", "[program][moments]") {
  // q has the target's sds but z1's mean 0.6 sd off (q short of the optimum along a ridge): not a
  // tail or a skew q lacks, and the warning says so.
  TargetCoordinator c;
  c.target = [](double z1, double z2) { return -0.5 * (z1 * z1 / 4 + z2 * z2); };  // N(0, diag(4, 1))
  const ServerDraws d = q_draws({1.2, 0}, {2, 1}, 4000);
  const MomentCorrection m = correct_moments(d, c, 11, false);
  CHECK_THAT(m.check.worst_mean, WithinAbs(0.6, 0.1));  // ESS in the thousands: a few hundredths of error
  CHECK(std::abs(m.check.worst_sd) < 0.1);
  CHECK(m.check.warning.find("q's mean is off the posterior's") != std::string::npos);
  CHECK(m.check.warning.find("z1's mean") != std::string::npos);
  CHECK(m.check.warning.find("lighter") == std::string::npos);
}

TEST_CASE("gaussian_draws: N(m, C) in the varying rows, its log density, the other rows as given", "[program][moments]") {
  ServerDraws d = q_draws({0, 0}, {1, 1}, 10);
  d.unconstrained.row(1).setConstant(3.5);  // a point estimate's constant row
  Moments m;
  m.varying = {0};
  m.mean = Eigen::VectorXd::Constant(1, -1.0);
  m.covariance = Eigen::MatrixXd::Constant(1, 1, 0.25);
  const ServerDraws g = gaussian_draws(d, m, 5000, 3);
  REQUIRE(g.unconstrained.cols() == 5000);
  CHECK((g.unconstrained.row(1).array() == 3.5).all());
  for (Eigen::Index s = 0; s < 5; ++s) {
    const double z = g.unconstrained(0, s);
    CHECK_THAT(g.log_q[s], WithinAbs(-0.5 * std::log(2 * M_PI * 0.25) - (z + 1) * (z + 1) / (2 * 0.25), 1e-12));
  }
  const double mean = g.unconstrained.row(0).mean();
  CHECK_THAT(mean, WithinAbs(-1.0, 5 * 0.5 / std::sqrt(5000.0)));
  CHECK_THAT(g.sd[0], WithinAbs(0.5, 1e-15));
}

TEST_CASE("a q narrower than the posterior within the limits is warned of, and corrected", "[program][moments]") {
  // z1's sd 0.85 of the target's: the check reads about +18%, inside issue 26's 20% but over
  // kNarrowerWarning, where a check around a too-narrow q may understate the shortfall.
  TargetCoordinator c;
  c.target = [](double z1, double z2) { return -0.5 * (z1 * z1 / 4 + z2 * z2); };  // N(0, diag(4, 1))
  const ServerDraws d = q_draws({0, 0}, {0.85 * 2, 1}, 4000);
  const MomentCorrection off = correct_moments(d, c, 11, false);
  CHECK(off.check.moments_hold);
  // ESS in the thousands: an sd's relative error about 2%.
  CHECK_THAT(off.check.worst_sd, WithinAbs(1 / 0.85 - 1, 0.05));
  CHECK(off.check.warning.find("z1's sd") != std::string::npos);
  CHECK(off.check.warning.find("at least that much too narrow") != std::string::npos);
  const MomentCorrection on = correct_moments(d, c, 11, true);
  REQUIRE(on.adopted);
  CHECK_THAT(std::sqrt(c.covariance(0, 0)) / 2, WithinAbs(1.0, 0.05));
  CHECK_THAT(std::sqrt(c.covariance(1, 1)), WithinAbs(1.0, 0.05));
  CHECK(on.check.warning.empty());  // the corrected q's own check: nothing left to warn of
}

TEST_CASE("the moment correction matches an interval's element on its declared scale", "[program][moments]") {
  // phi = 2 p - 1 in (-1, 1), p ~ Beta(60, 2): near its upper end, skewed toward it, as an AR(1)'s
  // coefficient near the unit root. On u = logit(p) the target is p^60 (1 - p)^2 (the Jacobian
  // included); z2 ~ N(0, 1) beside it. The Gaussian with u's own mean and variance is too wide on
  // the declared scale; the one kept must have phi's mean and sd there: 2 a / (a + b) - 1 and
  // 2 sqrt(a b / ((a + b)^2 (a + b + 1))).
  const double a = 60, b = 2;
  const double phi_mean = 2 * a / (a + b) - 1, phi_sd = 2 * std::sqrt(a * b / ((a + b) * (a + b) * (a + b + 1)));
  TargetCoordinator c;
  c.target = [](double u, double z2) {
    const double log_p = -std::log1p(std::exp(-u)), log_1mp = -std::log1p(std::exp(u));
    return 60 * log_p + 2 * log_1mp - 0.5 * z2 * z2;
  };
  ServerDraws d = q_draws({3.2, 0.0}, {0.35, 1.0}, 20000);
  d.layout[0] = {"phi", 0, {}, FVI_INTERVAL, -1.0, 1.0};
  d.constrained = constrain(d.layout, d.unconstrained);
  const MomentCorrection m = correct_moments(d, c, 13, true);
  REQUIRE(m.adopted);
  // The adopted Gaussian's phi, by quadrature of its marginal through the transform.
  Eigen::VectorXd x, w;
  normal_quadrature(64, x, w);
  const double s = std::sqrt(c.covariance(0, 0));
  const Eigen::ArrayXd phi = 2 / (1 + (-(c.mean[0] + s * x.array())).exp()) - 1;
  const double mean = (phi * w.array()).sum(), sd = std::sqrt(((phi - mean).square() * w.array()).sum());
  INFO("phi: mean " << mean << " sd " << sd << " against " << phi_mean << " " << phi_sd);
  // Monte Carlo error at an ESS of thousands: about 0.02 sd for the mean, 2% for the sd; five times those.
  CHECK_THAT(mean, WithinAbs(phi_mean, 0.1 * phi_sd));
  CHECK_THAT(sd / phi_sd, WithinAbs(1.0, 0.1));
  // The Gaussian of u's own moments, as the check estimates them (u's sd: trigamma(60) + trigamma(2)
  // = 0.66, so 0.81), would put phi's sd 31% wide: outside the limit above.
  const double su = std::sqrt(m.check.posterior.covariance(0, 0));
  const Eigen::ArrayXd wide = 2 / (1 + (-(m.check.posterior.mean[0] + su * x.array())).exp()) - 1;
  const double wide_mean = (wide * w.array()).sum();
  CHECK(std::sqrt(((wide - wide_mean).square() * w.array()).sum()) / phi_sd > 1.2);
  CHECK(m.line.find("matched on its declared scale") != std::string::npos);
}
