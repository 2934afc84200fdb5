#include "fvi/optim/convergence.h"
#include "fvi/optim/stationarity_watch.h"

#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using fvi::ConvergenceMonitor;
using fvi::ConvergenceOptions;

namespace {

// A stochastic optimiser's trace, simulated: the objective rises to -1000 as 1 - exp(-t / 300)
// with N(0, 5^2) noise; q's two means approach (1, -2) the same way, each iterate jittering by
// 0.3 posterior sds (sd 0.5 and 2) around the path, and the step size scales the jitter.
struct Trace {
  std::mt19937_64 rng{20261125};
  std::normal_distribution<double> normal{0, 1};
  const Eigen::Vector2d target{1, -2}, sd{0.5, 2};
  Eigen::Vector2d mean(long t, double scale) {
    const double approach = 1 - std::exp(-double(t) / 300);
    Eigen::Vector2d m = target * approach + 3 * sd * (1 - approach);
    for (int i = 0; i < 2; ++i) m[i] += 0.3 * std::sqrt(scale) * sd[i] * normal(rng);
    return m;
  }
  double objective(long t) { return -1000 - 400 * std::exp(-double(t) / 300) + 5 * normal(rng); }
};

}  // namespace

TEST_CASE("the stopping rule converges on a noisy trace and its average is the optimum to Monte Carlo error",
          "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 50;
  ConvergenceMonitor monitor(o);
  Trace trace;
  std::vector<Eigen::Vector2d> seen;  // every iterate, to average the same ones independently
  long t = 0;
  while (!monitor.converged() && t < 100000) {
    ++t;
    const Eigen::Vector2d m = trace.mean(t, monitor.step_scale());
    seen.push_back(m);
    monitor.observe(trace.objective(t), m, trace.sd, m);
  }
  REQUIRE(monitor.converged());
  CHECK(t < 20000);
  CHECK(t > 1000);  // not before the approach (time constant 300) has died out
  // The average is over the last averaged_steps() iterates: recompute it from the trace.
  const long n = monitor.averaged_steps();
  REQUIRE(n > 0);
  Eigen::Vector2d expected = Eigen::Vector2d::Zero();
  for (long k = long(seen.size()) - n; k < long(seen.size()); ++k) expected += seen[k];
  expected /= double(n);
  const Eigen::VectorXd average = monitor.average();
  CHECK((average - expected).cwiseAbs().maxCoeff() < 1e-12);
  // Its error: what is left of the approach over the averaged steps (computed here from the
  // trace's formula), which the rule must have waited out to under 0.1 sd, plus the iterates'
  // jitter (at most 0.3 sd each, independent) over n iterates: 4 standard errors.
  for (int i = 0; i < 2; ++i) {
    double transient = 0;
    for (long k = t - n + 1; k <= t; ++k) transient += (3 * trace.sd[i] - trace.target[i]) * std::exp(-double(k) / 300);
    transient /= double(n);
    CHECK(std::abs(transient) / trace.sd[i] < 0.1);
    CHECK(std::abs(average[i] - trace.target[i] - transient) / trace.sd[i] < 4 * 0.3 / std::sqrt(double(n)));
  }
  CHECK(monitor.precision() < o.tol_param);
  CHECK(monitor.verdict(t, "iterations").rfind("converged after", 0) == 0);
}

TEST_CASE("the stopping rule does not converge while the means drift", "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 20;
  ConvergenceMonitor monitor(o);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  const Eigen::VectorXd sd = Eigen::VectorXd::Ones(1);
  for (long t = 1; t <= 40000; ++t) {
    // A flat, noisy objective (it plateaus at once) but a mean walking 0.002 sd a step.
    Eigen::VectorXd m(1);
    m[0] = 0.002 * double(t) + 0.1 * normal(rng);
    monitor.observe(-50 + normal(rng), m, sd, m);
  }
  CHECK(monitor.averaging());
  CHECK_FALSE(monitor.converged());
  CHECK(monitor.verdict(40000, "iterations").rfind("NOT converged", 0) == 0);
  // A trend 0.002 x 20 x 63 = 2.5 sd over the span against a noise of 0.1 / sqrt(20): a ridge.
  CHECK(monitor.verdict(40000, "iterations").find("a ridge") != std::string::npos);
}

TEST_CASE("the stopping rule waits while the objective still climbs", "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 10;
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(1), one = Eigen::VectorXd::Ones(1);
  // No noise, a steady climb of 1% a window: never a plateau.
  for (long t = 1; t <= 5000; ++t) monitor.observe(-1000.0 + 0.001 * 1000.0 * double(t), zero, one, zero);
  CHECK_FALSE(monitor.averaging());
  CHECK(monitor.step_scale() == 1.0);
  CHECK(monitor.verdict(5000, "iterations").find("still changing") != std::string::npos);
}

TEST_CASE("a run of one window says it was too short to judge, not a change it never measured",
          "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 1;
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(1), one = Eigen::VectorXd::Ones(1);
  monitor.observe(-100.0, zero, one, zero);  // `--set rounds=1`: no second window to compare
  const std::string v = monitor.verdict(1, "rounds");
  CHECK(v.rfind("NOT converged after 1 rounds: too few to judge", 0) == 0);
  CHECK(v.find("-1") == std::string::npos);
  monitor.observe(-90.0, zero, one, zero);  // a second window: now a change, 10 / 90
  CHECK(monitor.verdict(2, "rounds").find("still changing (relative change 0.11") != std::string::npos);

  ConvergenceMonitor never_finite(o);  // every step's estimate NaN: windows pass, none to compare
  for (int t = 0; t < 5; ++t) never_finite.observe(std::nan(""), zero, one, zero);
  const std::string none = never_finite.verdict(5, "rounds");
  CHECK(none.find("no two windows of 1 rounds had a finite estimate of the objective") != std::string::npos);
  CHECK(none.find("-1") == std::string::npos);
}

TEST_CASE("the step size decays as 1/sqrt(1 + w/4) over the averaging windows, never below 0.3",
          "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 1;
  o.tol_param = 1e-9;  // never converge: watch the decay (a trend under tol_param is no drift)
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd one = Eigen::VectorXd::Ones(1);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  // Two flat windows start the averaging phase after the third; then each window is one step.
  long averaged = 0;
  for (long t = 1; t <= 1000; ++t) {
    Eigen::VectorXd m(1);
    m[0] = normal(rng);
    monitor.observe(-5.0, m, one, m);
    if (monitor.averaging()) {
      ++averaged;
      CHECK(monitor.step_scale() == Approx(std::max(0.3, 1 / std::sqrt(1 + double(averaged - 1) / 4))));
    }
  }
  CHECK(averaged > 900);
}

TEST_CASE("the stopping rule's state restores to the same decisions", "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 25;
  ConvergenceMonitor a(o), b(o);
  Trace trace;
  std::vector<double> objectives;
  std::vector<Eigen::Vector2d> means;
  for (long t = 1; t <= 6000; ++t) {
    objectives.push_back(trace.objective(t));
    means.push_back(trace.mean(t, 1.0));
  }
  for (long t = 0; t < 3013; ++t) a.observe(objectives[t], means[t], trace.sd, means[t]);
  b.restore(a.state());
  for (long t = 3013; t < 6000; ++t) {
    a.observe(objectives[t], means[t], trace.sd, means[t]);
    b.observe(objectives[t], means[t], trace.sd, means[t]);
    REQUIRE(a.converged() == b.converged());
    REQUIRE(a.step_scale() == b.step_scale());
  }
  CHECK(a.average() == b.average());
  CHECK(a.state() == b.state());
  std::vector<double> damaged = a.state();
  damaged.pop_back();
  CHECK_THROWS_AS(b.restore(damaged), std::invalid_argument);
}

TEST_CASE("the rule doubles the draws per gradient where the steps' noise keeps the average from settling",
          "[optim][convergence]") {
  // A plateaued fit whose iterates wander about the optimum as an Ornstein-Uhlenbeck process
  // (what constant-step SGD does): stationary sd 0.3 q sds times sqrt(step scale / draws),
  // correlation time 200 steps. Averaged over windows of 50 steps, the average's standard error
  // is about 0.3 sd / sqrt(n / 8) after n windows: under tol_param = 0.05 only beyond 288
  // windows with one draw, more than the 64 an average holds, but after about 18 with 16 draws.
  auto run = [](long max_mc_factor, long& steps) {
    ConvergenceOptions o;
    o.window = 50;
    o.max_mc_factor = max_mc_factor;
    ConvergenceMonitor monitor(o);
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    const double rho = std::exp(-1.0 / 200);
    const Eigen::Vector2d sd{0.5, 2};
    Eigen::Vector2d offset = Eigen::Vector2d::Zero();
    long mc_changes = 0, last_factor = 1;
    for (steps = 1; steps <= 60000 && !monitor.converged(); ++steps) {
      const double level = 0.3 * std::sqrt(monitor.step_scale() / double(monitor.mc_factor()));
      for (int i = 0; i < 2; ++i) offset[i] = rho * offset[i] + std::sqrt(1 - rho * rho) * level * normal(rng);
      const Eigen::Vector2d m = Eigen::Vector2d(1, -2) + offset.cwiseProduct(sd);
      monitor.observe(-1000 + normal(rng), m, sd, m);
      if (monitor.mc_factor() != last_factor) {
        CHECK(monitor.mc_factor() == 2 * last_factor);  // doubles, one step at a time
        last_factor = monitor.mc_factor(), ++mc_changes;
      }
    }
    CHECK(monitor.mc_factor() <= max_mc_factor);
    return monitor;
  };
  long steps = 0;
  const ConvergenceMonitor fixed = run(1, steps);
  CHECK_FALSE(fixed.converged());  // one draw: the average cannot settle in 60,000 steps
  CHECK(fixed.mc_factor() == 1);
  const ConvergenceMonitor adaptive = run(16, steps);
  INFO("converged after " << steps << " steps with mc_factor " << adaptive.mc_factor());
  CHECK(adaptive.converged());
  CHECK(adaptive.mc_factor() >= 4);
  CHECK(adaptive.verdict(steps, "iterations").find("mc_samples x") != std::string::npos);
}

TEST_CASE("a silo's watch of its own parameters judges them as the rule judges the server's q",
          "[optim][convergence]") {
  std::mt19937_64 rng(20261127);
  std::normal_distribution<double> normal(0, 1);
  const Eigen::VectorXd sd = Eigen::VectorXd::Constant(3, 2.0);
  fvi::StationarityWatch watch(100);
  // Under 3 windows there is nothing to judge: not settled.
  for (int t = 0; t < 250; ++t) watch.observe(Eigen::VectorXd::Zero(3), sd);
  CHECK(watch.windows() == 2);
  CHECK_FALSE(watch.judge(0.05).stationary);
  // A restart drops the older half of the windows (of 2, 1), as the server's rule does.
  watch.restart();
  CHECK(watch.windows() == 1);
  // Stationary: iterates jitter by 0.1 sd about fixed means, sds fixed. Over 20 windows of 100 the
  // average's standard error is 0.1 / sqrt(2000) = 0.0022 sd; the judge's, from the windows'
  // spread, must agree to its own sampling error (19 degrees of freedom, the largest of 3: within
  // 50%). The drift's bound, 19 (|slope| + 2 se), is about 0.015 + 0.0074 |z| against 0.1.
  watch = fvi::StationarityWatch(100);
  for (int t = 0; t < 2000; ++t) {
    Eigen::VectorXd m(3);
    for (int i = 0; i < 3; ++i) m[i] = 1.0 + 0.1 * sd[i] * normal(rng);
    watch.observe(m, sd);
  }
  REQUIRE(watch.windows() == 20);
  const fvi::WindowJudgement still = watch.judge(0.05);
  CHECK(still.stationary);
  CHECK_FALSE(still.drifting);
  CHECK(still.standard_error > 0.5 * 0.1 / std::sqrt(2000.0));
  CHECK(still.standard_error < 1.5 * 0.1 / std::sqrt(2000.0));
  watch.restart();
  CHECK(watch.windows() == 10);  // the newer half of 20
  // A drift: one mean walks 0.5 sd over the 20 windows, without noise. The window means then lie
  // on a line whose rise from the first window's centre to the last's is 0.5 x 19 / 20 sd.
  watch = fvi::StationarityWatch(100);
  for (int t = 0; t < 2000; ++t) {
    Eigen::VectorXd m = Eigen::VectorXd::Ones(3);
    m[1] += 0.5 * sd[1] * double(t) / 2000.0;
    watch.observe(m, sd);
  }
  const fvi::WindowJudgement moving = watch.judge(0.05);
  CHECK_FALSE(moving.stationary);
  CHECK(moving.drifting);
  CHECK(moving.drift == Approx(0.5 * 19.0 / 20.0).epsilon(1e-9));
  // Only the last max_windows windows are judged: after 30 more stationary windows (max 20) the
  // drift has left the span.
  fvi::StationarityWatch recent(100, 20);
  for (int t = 0; t < 2000; ++t) recent.observe(Eigen::VectorXd::Constant(3, double(t) / 2000.0), sd);
  for (int t = 0; t < 3000; ++t) recent.observe(Eigen::VectorXd::Ones(3), sd);
  CHECK(recent.windows() == 20);
  CHECK(recent.judge(0.05).stationary);
}

TEST_CASE("a converged judgement held for parameters the server does not see is judged again and named",
          "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 10;
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(1), one = Eigen::VectorXd::Ones(1);
  long t = 0;
  while (!monitor.converged() && t < 10000) monitor.observe(-100.0, zero, one, zero), ++t;
  REQUIRE(monitor.converged());
  monitor.hold("silo 2's locals still moved 0.300 (standard error 0.010)");
  CHECK_FALSE(monitor.converged());
  const std::string held = monitor.verdict(t, "iterations");
  CHECK(held.rfind("NOT converged", 0) == 0);
  CHECK(held.find("the server's q settled") != std::string::npos);
  CHECK(held.find("silo 2's locals still moved 0.300") != std::string::npos);
  // The next window is judged again: still settled, so converged, and the hold is forgotten.
  for (int k = 0; k < o.window; ++k) monitor.observe(-100.0, zero, one, zero), ++t;
  CHECK(monitor.converged());
  CHECK(monitor.verdict(t, "iterations").rfind("converged after", 0) == 0);
}

TEST_CASE("a rule given no moments judges the objective alone and speaks only of it", "[optim][convergence]") {
  // A function-space objective (pvi_run.cpp): the silos judge q's function, the server the objective.
  ConvergenceOptions o;
  o.window = 1, o.plateaus = 1, o.min_average_windows = 3;
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd none;
  long t = 0;
  // A falling objective first: no plateau, so no verdict of convergence.
  for (; t < 5; ++t) monitor.observe(-100.0 * double(5 - t), none, none, none);
  CHECK_FALSE(monitor.converged());
  while (!monitor.converged() && t < 100) monitor.observe(-10.0, none, none, none), ++t;
  REQUIRE(monitor.converged());
  // The first round at -10 still changed; the second is flat and ends the optimising phase; three
  // averaged ones judge.
  CHECK(t == 5 + 2 + 3);
  const std::string verdict = monitor.verdict(t, "rounds");
  CHECK(verdict.rfind("converged after 10 rounds (relative objective change 0; the last 3 rounds averaged)", 0) == 0);
  CHECK(verdict.find("q sds") == std::string::npos);
  monitor.hold("silo 1's function at its context points still moving: drift 0.400 (standard error 0.030)");
  const std::string held = monitor.verdict(t, "rounds");
  CHECK(held.rfind("NOT converged after 10 rounds: the objective levelled off (the last 3 rounds averaged), but silo 1's",
                   0) == 0);
  CHECK(held.find("the server's q settled") == std::string::npos);
}

TEST_CASE("a run stopped while averaging had just begun says so, not a drift it never measured",
          "[optim][convergence]") {
  ConvergenceOptions o;
  o.window = 1;
  o.plateaus = 1;
  ConvergenceMonitor monitor(o);
  const Eigen::VectorXd zero = Eigen::VectorXd::Zero(1), one = Eigen::VectorXd::Ones(1);
  for (int t = 0; t < 4; ++t) monitor.observe(-100.0, zero, one, zero);
  REQUIRE(monitor.averaging());
  const std::string v = monitor.verdict(4, "rounds");
  CHECK(v.find("averaging had just begun") != std::string::npos);
  CHECK(v.find("-1.000") == std::string::npos);
  CHECK(v.find("ridge") == std::string::npos);
}

namespace {

// A plateaued fit of a q with many coordinates (a mean-field softmax regression has thousands):
// the iterates wander about the optimum as an Ornstein-Uhlenbeck process, `level` q sds times the
// square root of the step scale, correlation time 10 steps; `drift(t, i)`, in q sds, is added to
// coordinate i's mean. Returns the steps taken (at most `steps`) and the final monitor.
template <class Drift>
ConvergenceMonitor run_many(long d, long steps, double level, Drift drift, long& taken,
                            Eigen::VectorXd* target_out = nullptr) {
  ConvergenceOptions o;
  o.window = 50;
  ConvergenceMonitor monitor(o);
  std::mt19937_64 rng(20261128);
  std::normal_distribution<double> normal;
  Eigen::VectorXd target(d), sd(d), offset = Eigen::VectorXd::Zero(d);
  for (long i = 0; i < d; ++i) target[i] = normal(rng), sd[i] = 0.1 + 0.01 * double(i % 50);
  const double rho = std::exp(-1.0 / 10);
  Eigen::VectorXd m(d);
  for (taken = 1; taken <= steps && !monitor.converged(); ++taken) {
    const double scale = level * std::sqrt(monitor.step_scale());
    for (long i = 0; i < d; ++i) {
      offset[i] = rho * offset[i] + std::sqrt(1 - rho * rho) * scale * normal(rng);
      m[i] = target[i] + (offset[i] + drift(taken, i)) * sd[i];
    }
    monitor.observe(-5000 + normal(rng), m, sd, m);
  }
  --taken;
  if (target_out) *target_out = target;
  return monitor;
}

}  // namespace

TEST_CASE("a stationary q of thousands of coordinates converges: chance alone is not a drift",
          "[optim][convergence]") {
  // 4,000 means and 4,000 log-sds: under stationarity some of 8,000 slopes lie 4 standard errors
  // from zero by chance, and the largest of 8,000 estimated drifts is near 4 of their standard
  // errors. A rule that reads each as a single series' drift drops its average again and again.
  // Window means jitter by about 0.1 x 0.63 x sqrt(step scale) sds: precise enough for the
  // bound (2 se of the slope over 64 windows, about 0.02 sd) long before 64 windows.
  const long d = 4000;
  long taken = 0;
  Eigen::VectorXd target;
  const ConvergenceMonitor monitor = run_many(d, 20000, 0.1, [](long, long) { return 0.0; }, taken, &target);
  INFO(monitor.verdict(taken, "iterations"));
  REQUIRE(monitor.converged());
  // The average is the optimum to Monte Carlo error: the OU average over N steps has standard
  // error level x sqrt(step scale) x sqrt((1 + rho) / (1 - rho) / N) sd, under 0.1 x 4.5 / sqrt(N)
  // (step scale at most 1); 8,000 coordinates, so the largest within 5 of those.
  const Eigen::VectorXd avg = monitor.average();
  const double n = double(monitor.averaged_steps());
  double worst = 0;
  for (long i = 0; i < d; ++i) worst = std::max(worst, std::abs(avg[i] - target[i]) / (0.1 + 0.01 * double(i % 50)));
  CHECK(worst < 5 * 0.1 * 4.5 / std::sqrt(n));
}

TEST_CASE("one drifting coordinate among thousands keeps the rule from converging", "[optim][convergence]") {
  // Coordinate 7's mean walks 1 sd per 2,000 steps (0.2 sd over the rule's shortest span, 8
  // windows of 50); the 3,999 others are still.
  long taken = 0;
  const ConvergenceMonitor monitor =
      run_many(4000, 20000, 0.1, [](long t, long i) { return i == 7 ? double(t) / 2000.0 : 0.0; }, taken);
  CHECK_FALSE(monitor.converged());
  CHECK(monitor.verdict(taken, "iterations").rfind("NOT converged", 0) == 0);
  // The rule says which coordinate moved most, for the run to name it.
  CHECK(monitor.drift_at() == 7);
  CHECK_FALSE(monitor.drift_of_sd());
  CHECK(monitor.verdict(taken, "iterations", "w[8]'s mean").find("still moved") != std::string::npos);
  CHECK(monitor.verdict(taken, "iterations", "w[8]'s mean").find("still moved 0.") != std::string::npos);
  CHECK(monitor.verdict(taken, "iterations", "w[8]'s mean").find("(w[8]'s mean; standard error") != std::string::npos);
}

TEST_CASE("a slow drift shared by every coordinate is caught though no one of them is significant",
          "[optim][convergence]") {
  // Every mean walks 0.05 sd per 1,000 steps (0.16 sd over 64 windows of 50, over twice
  // tol_param), under noise that leaves each slope only a few standard errors from zero, below
  // the level a test of 8,000 slopes at once needs: the bound, which every coordinate must pass
  // on its own, holds the rule.
  long taken = 0;
  const ConvergenceMonitor monitor =
      run_many(4000, 20000, 0.3, [](long t, long) { return 0.05 * double(t) / 1000.0; }, taken);
  CHECK_FALSE(monitor.converged());
}

TEST_CASE("the Bonferroni level's Student t quantile agrees with closed forms and tables", "[optim][convergence]") {
  // nu = 1 is the Cauchy: P(T > t) = 1/2 - atan(t)/pi, so t = tan(pi (1/2 - p)).
  for (double p : {0.1, 0.025, 1e-4, 1e-7})
    CHECK(fvi::student_t_upper_quantile(p, 1) == Approx(std::tan(M_PI * (0.5 - p))).epsilon(1e-8));
  // nu = 2: P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2, so t = (1 - 2p) sqrt(2 / (1 - (1 - 2p)^2)).
  for (double p : {0.1, 0.025, 1e-4, 1e-7}) {
    const double a = 1 - 2 * p;
    CHECK(fvi::student_t_upper_quantile(p, 2) == Approx(a * std::sqrt(2 / (1 - a * a))).epsilon(1e-8));
  }
  // Tables (R's qt): qt(0.975, 6) = 2.446912, qt(0.995, 30) = 2.749996; a large nu is the normal's
  // qnorm(0.975) = 1.959964.
  CHECK(fvi::student_t_upper_quantile(0.025, 6) == Approx(2.446912).epsilon(1e-6));
  CHECK(fvi::student_t_upper_quantile(0.005, 30) == Approx(2.749996).epsilon(1e-6));
  CHECK(fvi::student_t_upper_quantile(0.025, 1e7) == Approx(1.959964).epsilon(1e-6));
}

namespace {

struct Moments {
  Eigen::VectorXd mean, sd;
};

// Windows whose means follow AR(1) with lag-1 correlation rho and unit marginal variance, one
// series per coordinate (sds fixed at 1, so only the means' series carry noise).
std::vector<Moments> ar1_windows(std::mt19937_64& rng, long n, long d, double rho) {
  std::normal_distribution<double> normal(0, 1);
  std::vector<Moments> windows(size_t(n), Moments{Eigen::VectorXd(d), Eigen::VectorXd::Ones(d)});
  for (long i = 0; i < d; ++i) {
    double x = normal(rng);
    for (long w = 0; w < n; ++w) {
      windows[size_t(w)].mean[i] = x;
      x = rho * x + std::sqrt(1 - rho * rho) * normal(rng);
    }
  }
  return windows;
}

// Each series' lag-1 autocorrelation of its residuals about a least-squares line, summed: the
// residuals from Eigen's QR solve, independently of window_judgement.h's sums.
double residual_r1_sum(const std::vector<Moments>& windows) {
  const long n = long(windows.size()), d = windows[0].mean.size();
  Eigen::MatrixXd x(n, 2);
  for (long w = 0; w < n; ++w) x(w, 0) = 1, x(w, 1) = double(w);
  double sum = 0;
  for (long i = 0; i < d; ++i) {
    Eigen::VectorXd y(n);
    for (long w = 0; w < n; ++w) y[w] = windows[size_t(w)].mean[i];
    const Eigen::VectorXd r = y - x * x.colPivHouseholderQr().solve(y);
    sum += r.head(n - 1).dot(r.tail(n - 1)) / r.squaredNorm();
  }
  return sum;
}

}  // namespace

TEST_CASE("independent windows are not read as correlated; AR(1) windows are, net of the line's own bias",
          "[optim][convergence]") {
  std::mt19937_64 rng(20261129);
  // Independent windows: the residuals' r1 averages about -0.3 at n = 8 (fitting the line makes
  // them negatively correlated), which the expectation taken off leaves at zero: nothing allowed.
  for (long n : {5L, 8L, 16L}) {
    const auto windows = ar1_windows(rng, n, 20000, 0.0);
    CHECK(fvi::allowed_autocorrelation(residual_r1_sum(windows), 20000, n) == 0.0);
    CHECK(fvi::judge_windows(windows, 0.05).autocorrelation == 0.0);
  }
  // rho = 0.5 over 64 windows, 4,000 series: the rule's estimate is the residuals' r1 net of
  // independent windows' expectation, E r1 taken as the ratio of expectations of r'Ar and r'r
  // with r = M y (M = I - the line's hat matrix, A the lag-1 shift, Cov y = rho^|i-j|), computed
  // here with dense matrices; it allows that less two of the estimate's standard errors
  // (1 / sqrt(4000 x 62) = 0.002). Within two standard errors and 0.01 for the ratio of
  // expectations; a rule that did not take independent windows' expectation off would be 0.03 lower.
  const long n = 64;
  const double rho = 0.5;
  Eigen::MatrixXd x(n, 2), shift = Eigen::MatrixXd::Zero(n, n), cov(n, n);
  for (long w = 0; w < n; ++w) {
    x(w, 0) = 1, x(w, 1) = double(w);
    if (w + 1 < n) shift(w, w + 1) = 1;
    for (long v = 0; v < n; ++v) cov(w, v) = std::pow(rho, std::abs(double(w - v)));
  }
  const Eigen::MatrixXd m = Eigen::MatrixXd::Identity(n, n) - x * (x.transpose() * x).inverse() * x.transpose();
  const double white = (m * shift * m).trace() / m.trace();
  const double ar = (m * shift * m * cov).trace() / (m * cov).trace();
  const double expected = (ar - white) / (1 - white);
  const auto correlated = ar1_windows(rng, n, 4000, rho);
  const double allowed = fvi::allowed_autocorrelation(residual_r1_sum(correlated), 4000, n);
  INFO("expected " << expected << ", independent windows' r1 " << white);
  const double se = 1 / std::sqrt(4000.0 * double(n - 2));
  CHECK(std::abs(allowed + 2 * se - expected) < 2 * se + 0.01);
  CHECK(allowed < rho);
  CHECK(fvi::judge_windows(correlated, 0.05).autocorrelation == Approx(allowed).epsilon(1e-9));
  // Fewer than 5 windows: no residual degrees of freedom to speak of, nothing allowed.
  CHECK(fvi::allowed_autocorrelation(4000 * 0.9, 4000, 4) == 0.0);
}

TEST_CASE("the average's standard error allows for correlated windows: it covers the average's error",
          "[optim][convergence]") {
  // One coordinate, 400 windows following AR(1) with rho = 0.5, 400 replicates: the average of n
  // windows has variance (1 + rho) / (1 - rho) / n, three times that of independent windows, so
  // the spread alone would put average / standard error at sd sqrt(3) = 1.73. With rho allowed
  // for at its lower bound (0.5 - 2 / sqrt(398) = 0.40 for one series), the ratio's sd is about
  // sqrt(3 x 0.6 / 1.4) = 1.13; its Monte Carlo error over 400 replicates is 0.04.
  std::mt19937_64 rng(1129);
  double sum_z2 = 0;
  const int replicates = 400;
  for (int k = 0; k < replicates; ++k) {
    const auto windows = ar1_windows(rng, 400, 1, 0.5);
    double average = 0;
    for (const Moments& w : windows) average += w.mean[0];
    average /= double(windows.size());
    const fvi::WindowJudgement j = fvi::judge_windows(windows, 0.05);
    sum_z2 += (average / j.standard_error) * (average / j.standard_error);
  }
  const double sd_z = std::sqrt(sum_z2 / replicates);
  INFO("sd of average / standard error: " << sd_z);
  CHECK(sd_z > 0.9);
  CHECK(sd_z < 1.3);
}
