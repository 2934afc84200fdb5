#include "fvi/optim/step_size_schedule.h"

#include <cmath>

#include <catch2/catch.hpp>

using Catch::Contains;
using Catch::Matchers::WithinRel;
using fvi::StepSizeSchedule;

TEST_CASE("step-size schedules follow their formulas", "[optim][schedule]") {
  const StepSizeSchedule constant = 0.01;  // implicit from double
  CHECK(constant(0) == 0.01);
  CHECK(constant(1000) == 0.01);
  const auto exp = StepSizeSchedule::exponential(0.1, 0.5, 100);
  CHECK_THAT(exp(100), WithinRel(0.05, 1e-15));
  CHECK_THAT(exp(50), WithinRel(0.1 / std::sqrt(2.0), 1e-15));
  const auto step = StepSizeSchedule::step(0.1, 0.1, 10);
  CHECK_THAT(step(9), WithinRel(0.1, 1e-15));
  CHECK_THAT(step(10), WithinRel(0.01, 1e-15));
  const auto inv = StepSizeSchedule::inverse_time(0.2, 10, 0.75);
  CHECK_THAT(inv(30), WithinRel(0.2 * std::pow(4.0, -0.75), 1e-15));
  const auto cos = StepSizeSchedule::cosine(0.1, 100, 0.001);
  CHECK_THAT(cos(0), WithinRel(0.1, 1e-15));
  CHECK_THAT(cos(50), WithinRel(0.001 + 0.099 * 0.5, 1e-14));
  CHECK_THAT(cos(100), WithinRel(0.001, 1e-12));
  CHECK_THAT(cos(500), WithinRel(0.001, 1e-12));
  for (long t = 1; t < 200; ++t) {
    CHECK(inv(t) < inv(t - 1));
    CHECK(cos(t) <= cos(t - 1));
  }
}

TEST_CASE("step-size schedules reject bad parameters", "[optim][schedule]") {
  CHECK_THROWS_WITH(StepSizeSchedule(-1.0), Contains("learning_rate must be positive"));
  CHECK_THROWS_WITH(StepSizeSchedule::cosine(0.1, 10, 0.5), Contains("min_lr must be in [0, 0.1"));
  CHECK_THROWS_WITH(StepSizeSchedule(0.1)(-1), Contains("non-negative"));
}
