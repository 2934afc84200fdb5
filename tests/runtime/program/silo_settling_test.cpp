#include "fvi/program/silo_settling.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <catch2/catch.hpp>

using fvi::program::Message;
using fvi::program::read_silo_schedule;
using fvi::program::settled_reply;

TEST_CASE("a silo reads the rule's schedule and refuses one it could not have been sent", "[program][rule]") {
  const fvi::program::SiloSchedule s = read_silo_schedule(Message{0.5, 1.0, 8.0}, 2);
  CHECK(s.scale == 0.5);
  CHECK(s.restart);
  CHECK(s.draws == 8);
  CHECK_FALSE(read_silo_schedule(Message{1.0, 0.0, 2.0}, 2).restart);
  CHECK(read_silo_schedule(Message{1.0, 0.0, 32.0}, 2).draws == 32);  // 16 x the silo's own 2: the most
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Message& bad : {Message{0.5, 1.0}, Message{0.5, 1.0, 8.0, 1.0}, Message{0.0, 0.0, 2.0},
                             Message{1.5, 0.0, 2.0}, Message{nan, 0.0, 2.0}, Message{0.5, 0.0, 0.0},
                             Message{0.5, 0.0, 2.5}, Message{0.5, 0.0, 33.0}, Message{0.5, 0.0, nan},
                             Message{0.5, 0.0, 1e300}})
    CHECK_THROWS_AS(read_silo_schedule(bad, 2), std::invalid_argument);
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
