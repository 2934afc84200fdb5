// The calibration errors against sums worked by hand, and on rows drawn calibrated (or not) by
// construction, where the value is known up to Monte Carlo error.
#include "fvi/diagnostics/calibration.h"

#include <cmath>
#include <random>

#include <catch2/catch.hpp>

using fvi::diagnostics::expected_calibration_error;
using fvi::diagnostics::expected_normalized_calibration_error;

TEST_CASE("the expected calibration error is Guo et al.'s sum over bins, worked by hand", "[calibration]") {
  // 15 bins: 0.95 in (14/15, 1], 0.9 in (13/15, 14/15], 0.58 and 0.55 in (8/15, 9/15].
  // (|1 - 0.95| + |0 - 0.9| + |2 - (0.58 + 0.55)|) / 4 = (0.05 + 0.9 + 0.87) / 4.
  CHECK(expected_calibration_error({0.95, 0.9, 0.58, 0.55}, {true, false, true, true}).error ==
        Approx(0.455).epsilon(1e-12));
  // One bin: |accuracy - mean confidence|; if calibrated, sqrt(2 / pi) sqrt(0.21 + 0.09) / 2.
  const fvi::diagnostics::Calibration one = expected_calibration_error({0.7, 0.9}, {true, false}, 1);
  CHECK(one.error == Approx(0.3).epsilon(1e-12));
  CHECK(one.if_calibrated == Approx(std::sqrt(2 / M_PI) * std::sqrt(0.3) / 2).epsilon(1e-12));
  CHECK(expected_calibration_error({}, {}).error == 0.0);
  CHECK_THROWS_AS(expected_calibration_error({0.5}, {}), std::invalid_argument);
}

TEST_CASE("a calibrated classifier's ECE is near 0, one 10 points overconfident near 0.1", "[calibration]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int n = 200000;
  std::vector<double> confidence(n);
  std::vector<bool> calibrated(n), over(n);
  for (int i = 0; i < n; ++i) {
    confidence[i] = 0.5 + 0.5 * unit(rng);
    const double u = unit(rng);
    calibrated[i] = u < confidence[i];
    over[i] = u < confidence[i] - 0.1;
  }
  // Each of the 8 bins the confidences reach holds about 27,000 rows: the accuracy's standard
  // error there is at most sqrt(0.25 / 27000) = 0.003, so 0.015 is five of them.
  CHECK(expected_calibration_error(confidence, calibrated).error < 0.015);
  CHECK(std::abs(expected_calibration_error(confidence, over).error - 0.1) < 0.015);
}

TEST_CASE("the expected normalized calibration error is Levi et al.'s, worked by hand", "[calibration]") {
  // Two bins by sd: {1, 1} with errors {1, -1}: RMV 1 = RMSE; {2, 2} with {4, 0}: RMV 2, RMSE
  // sqrt(8). (0 + (sqrt(8) - 2) / 2) / 2.
  const fvi::diagnostics::Calibration two = expected_normalized_calibration_error({2, 1, 2, 1}, {4, 1, 0, -1}, 2);
  CHECK(two.error == Approx((std::sqrt(8.0) - 2) / 4).epsilon(1e-12));
  // If calibrated, each bin sqrt(2 / pi) sqrt(2 sum sd^4) / (2 sum sd^2) = sqrt(2 / pi) / 2 for two
  // equal sds (sqrt(4 sd^4) / (2 * 2 sd^2)).
  CHECK(two.if_calibrated == Approx(std::sqrt(2 / M_PI) / 2).epsilon(1e-12));
  // Five rows in two bins: the first takes three (the smallest sds).
  CHECK(expected_normalized_calibration_error({1, 1, 1, 2, 2}, {1, 1, 1, 2, 2}, 2).error == Approx(0.0).margin(1e-15));
  CHECK(std::isinf(expected_normalized_calibration_error({0, 1}, {1, 1}, 2).error));
  CHECK_THROWS_AS(expected_normalized_calibration_error({1, 2}, {1}), std::invalid_argument);
}

TEST_CASE("errors drawn at the predictive sd give an ENCE near 0, at 1.5 times it near 0.5", "[calibration]") {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> spread(0.5, 2.0);
  std::normal_distribution<double> normal;
  const int n = 150000;
  std::vector<double> sd(n), honest(n), wide(n);
  for (int i = 0; i < n; ++i) {
    sd[i] = spread(rng);
    const double z = normal(rng);
    honest[i] = sd[i] * z;
    wide[i] = 1.5 * sd[i] * z;
  }
  // 10,000 rows a bin: RMSE / RMV has relative standard error about 1 / sqrt(2 * 10000) = 0.007.
  CHECK(expected_normalized_calibration_error(sd, honest).error < 0.035);
  CHECK(std::abs(expected_normalized_calibration_error(sd, wide).error - 0.5) < 0.035);
}

// What a calibrated predictive scores on a small test set, against the average over 400 test sets
// drawn calibrated: 300 rows, 20 a bin.
TEST_CASE("if_calibrated is the errors' mean on test sets drawn calibrated", "[calibration]") {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> unit(0.0, 1.0), spread(0.5, 2.0);
  std::normal_distribution<double> normal;
  const int n = 300, sets = 400;
  double ece = 0, ece_expected = 0, ence = 0, ence_expected = 0, ece_sq = 0, ence_sq = 0;
  for (int t = 0; t < sets; ++t) {
    std::vector<double> confidence(n), sd(n), error(n);
    std::vector<bool> correct(n);
    for (int i = 0; i < n; ++i) {
      confidence[i] = 0.5 + 0.5 * unit(rng);
      correct[i] = unit(rng) < confidence[i];
      sd[i] = spread(rng);
      error[i] = sd[i] * normal(rng);
    }
    const fvi::diagnostics::Calibration c = expected_calibration_error(confidence, correct);
    const fvi::diagnostics::Calibration r = expected_normalized_calibration_error(sd, error);
    ece += c.error / sets, ece_expected += c.if_calibrated / sets, ece_sq += c.error * c.error / sets;
    ence += r.error / sets, ence_expected += r.if_calibrated / sets, ence_sq += r.error * r.error / sets;
  }
  // Monte Carlo: the mean over 400 sets has standard error sd / 20; the normal approximation of a
  // bin's sum of 20 (or fewer, for the ECE's edge bins) terms is good to a few percent.
  const double ece_se = std::sqrt((ece_sq - ece * ece) / sets), ence_se = std::sqrt((ence_sq - ence * ence) / sets);
  INFO("ECE " << ece << " (se " << ece_se << "), if calibrated " << ece_expected);
  INFO("ENCE " << ence << " (se " << ence_se << "), if calibrated " << ence_expected);
  CHECK(std::abs(ece - ece_expected) < 4 * ece_se + 0.05 * ece_expected);
  CHECK(std::abs(ence - ence_expected) < 4 * ence_se + 0.05 * ence_expected);
}
