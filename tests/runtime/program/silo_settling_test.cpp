#include "fvi/program/silo_settling.h"

#include "fvi/optim/parameter_average.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <catch2/catch.hpp>

using fvi::program::Message;
using fvi::program::read_silo_schedule;
using fvi::program::settled_reply;

TEST_CASE("a silo reads the rule's schedule and refuses one it could not have been sent", "[program][rule]") {
  const fvi::program::SiloSchedule s = read_silo_schedule(fvi::program::silo_schedule_message(0.5, 3, 8), 2);
  CHECK(s.scale == 0.5);
  CHECK(s.epoch == 3);
  CHECK(s.draws == 8);
  // The schedule opens a longer request (an SFVI broadcast follows it).
  CHECK(read_silo_schedule(Message{1.0, 0.0, 2.0, 7.0, 7.0}, 2).epoch == 0);
  CHECK(read_silo_schedule(Message{1.0, 0.0, 32.0}, 2).draws == 32);  // 16 x the silo's own 2: the most
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Message& bad : {Message{}, Message{0.5, 1.0}, Message{0.0, 0.0, 2.0}, Message{1.5, 0.0, 2.0},
                             Message{nan, 0.0, 2.0}, Message{0.5, -1.0, 2.0}, Message{0.5, 1.5, 2.0},
                             Message{0.5, nan, 2.0}, Message{0.5, 1e300, 2.0}, Message{0.5, 0.0, 0.0},
                             Message{0.5, 0.0, 2.5}, Message{0.5, 0.0, 33.0}, Message{0.5, 0.0, nan},
                             Message{0.5, 0.0, 1e300}})
    CHECK_THROWS_AS(read_silo_schedule(bad, 2), std::invalid_argument);
}

TEST_CASE("a silo's average restarts at each new epoch, however many requests it missed", "[program][rule]") {
  fvi::ParameterAverage average;
  const Eigen::Index n = 2;
  average.set_schedule(1.0, 0, n);
  average.add(Eigen::VectorXd::Constant(n, 5.0));  // before averaging: not counted
  CHECK_FALSE(average.has_average());
  average.set_schedule(0.5, 1, n);
  average.add(Eigen::VectorXd::Constant(n, 1.0));
  average.set_schedule(0.5, 1, n);  // the same epoch stated again: the average goes on
  average.add(Eigen::VectorXd::Constant(n, 3.0));
  CHECK(average.average()[0] == 2.0);
  average.set_schedule(0.3, 4, n);  // epochs 2 and 3 missed: one restart
  average.add(Eigen::VectorXd::Constant(n, 7.0));
  CHECK(average.average()[1] == 7.0);
  CHECK(average.step_scale() == 0.3);
  fvi::ParameterAverage restored;
  restored.restore(average.state(n));
  CHECK(restored.epoch() == 4);
  restored.set_schedule(0.3, 4, n);  // the restored silo's epoch: no restart
  restored.add(Eigen::VectorXd::Constant(n, 9.0));
  CHECK(restored.average()[0] == 8.0);
  CHECK_THROWS_AS(average.set_schedule(0.5, -1, n), std::invalid_argument);
  Eigen::VectorXd damaged = average.state(n);
  damaged[1] = 1.5;
  CHECK_THROWS_AS(restored.restore(damaged), std::invalid_argument);
}

TEST_CASE("a silo's settled reply carries its verdict and two figures only", "[program][rule]") {
  fvi::WindowJudgement still;
  still.drift = 0.01, still.standard_error = 0.02;
  CHECK(settled_reply(Message{0.05}, still) == Message{1.0, 0.01, 0.02});
  fvi::WindowJudgement moving = still;
  moving.drifting = true;
  CHECK(settled_reply(Message{0.05}, moving)[0] == 0.0);
  fvi::WindowJudgement imprecise = still;
  imprecise.standard_error = 0.06;  // over tol_param
  CHECK(settled_reply(Message{0.05}, imprecise)[0] == 0.0);
  CHECK(settled_reply(Message{0.05}, std::nullopt) == Message{2.0, 0.0, 0.0});
  CHECK_THROWS_AS(settled_reply(Message{}, still), std::invalid_argument);
  CHECK_THROWS_AS(settled_reply(Message{1.5}, still), std::invalid_argument);
}

TEST_CASE("a silo still moving at the end names the coordinate that drifted most, on the silo", "[program][rule]") {
  using fvi::program::VariableLayout;
  VariableLayout mu{"mu", 0, {}}, beta{"beta", 1, {2, 2}}, sigma{"sigma", 5, {}};
  sigma.transform = FVI_LOWER;
  const std::vector<VariableLayout> layout{mu, beta, sigma};
  fvi::WindowJudgement moving;
  moving.drifting = true, moving.drift = 2.74, moving.standard_error = 0.5;
  moving.drift_at = 3;  // column-major: offsets 1..4 are beta.1.1, beta.2.1, beta.1.2, beta.2.2
  CHECK(fvi::program::still_moving_line(1, "split block", moving, 0.05, layout) ==
        "silo 1: its split block still moved when the run ended: most beta.1.2's mean (2.74 q sds)");
  moving.drift_at = 5, moving.drift_of_sd = true, moving.drift = 0.3;
  CHECK(fvi::program::still_moving_line(2, "locals", moving, 0.05, layout) ==
        "silo 2: its locals still moved when the run ended: most sigma's sd (0.3 relative)");
  // Nothing to say: settled, never judged, or a coordinate no variable holds.
  fvi::WindowJudgement settled;
  settled.drift = 0.01, settled.standard_error = 0.02, settled.drift_at = 3;
  CHECK(fvi::program::still_moving_line(1, "locals", settled, 0.05, layout).empty());
  CHECK(fvi::program::still_moving_line(1, "locals", std::nullopt, 0.05, layout).empty());
  moving.drift_at = 6;
  CHECK(fvi::program::still_moving_line(1, "locals", moving, 0.05, layout).empty());
}
