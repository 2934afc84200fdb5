#pragma once
// Calibration of a posterior predictive on held-out rows (`--test`), as the seed-001 experiments
// report it (spec 001 §4): for classification the expected calibration error of Guo et al. (2017,
// Eq. 3) over equal-width bins of the top class's predictive probability, for a normal likelihood
// the expected normalized calibration error of Levi et al. (2020) over equal-count bins of the
// predictive sd. 0 is perfectly calibrated; both are in [0, 1] for classification, >= 0 otherwise.
#include <vector>

namespace fvi::diagnostics {

// Guo et al.'s experiments use 15 bins; Levi et al. do not fix a number, and the same is used.
inline constexpr int kCalibrationBins = 15;

// Both errors are biased up by the rows' own noise: a calibrated predictive scores about
// `if_calibrated` on rows like these (each bin's sum in a normal approximation: for the ECE,
// sqrt(2 / pi) sqrt(sum c (1 - c)) / n; for the ENCE, sqrt(2 / pi) sqrt(sum sd^4 / 2) / sum sd^2),
// so that an error is read against what the test set's size allows.
struct Calibration {
  double error = 0;
  double if_calibrated = 0;
};

// sum_m |B_m| / n |accuracy(B_m) - confidence(B_m)|, B_m the rows whose top-class probability
// lies in ((m - 1) / M, m / M]. `confidence` in [0, 1], one per row with `correct`.
Calibration expected_calibration_error(const std::vector<double>& confidence, const std::vector<bool>& correct,
                                       int bins = kCalibrationBins);

// (1 / B) sum_j |RMV(B_j) - RMSE(B_j)| / RMV(B_j), the rows sorted by predictive sd and dealt into
// B = min(bins, n) bins of equal count (the first n mod B one row larger); RMV the root mean
// predictive variance, RMSE of the predictive mean. `error`: y - predictive mean.
Calibration expected_normalized_calibration_error(const std::vector<double>& predictive_sd,
                                                  const std::vector<double>& error, int bins = kCalibrationBins);

}  // namespace fvi::diagnostics
