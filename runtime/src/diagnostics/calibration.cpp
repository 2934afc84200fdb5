#include "fvi/diagnostics/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace fvi::diagnostics {

namespace {
const double kMeanAbsNormal = std::sqrt(2 / 3.14159265358979323846);  // E|Z| of a standard normal
}  // namespace

Calibration expected_calibration_error(const std::vector<double>& confidence, const std::vector<bool>& correct,
                                       int bins) {
  if (confidence.size() != correct.size() || bins < 1)
    throw std::invalid_argument("calibration: one confidence per row and at least one bin");
  if (confidence.empty()) return {};
  std::vector<double> hits(size_t(bins), 0.0), total(size_t(bins), 0.0), bernoulli_variance(size_t(bins), 0.0);
  std::vector<long> count(size_t(bins), 0);
  for (size_t i = 0; i < confidence.size(); ++i) {
    const double c = std::clamp(confidence[i], 0.0, 1.0);
    // Bin m (from 1) holds ((m - 1) / M, m / M]; a confidence of 0 goes with the first.
    const int m = std::clamp(int(std::ceil(c * bins)) - 1, 0, bins - 1);
    hits[size_t(m)] += correct[i] ? 1.0 : 0.0;
    total[size_t(m)] += c;
    bernoulli_variance[size_t(m)] += c * (1 - c);
    ++count[size_t(m)];
  }
  Calibration out;
  for (int m = 0; m < bins; ++m) {
    if (count[size_t(m)] == 0) continue;
    out.error += std::abs(hits[size_t(m)] - total[size_t(m)]);  // |B_m| |acc - conf|
    out.if_calibrated += kMeanAbsNormal * std::sqrt(bernoulli_variance[size_t(m)]);
  }
  out.error /= double(confidence.size());
  out.if_calibrated /= double(confidence.size());
  return out;
}

Calibration expected_normalized_calibration_error(const std::vector<double>& predictive_sd,
                                                  const std::vector<double>& error, int bins) {
  if (predictive_sd.size() != error.size() || bins < 1)
    throw std::invalid_argument("calibration: one predictive sd per row and at least one bin");
  const size_t n = predictive_sd.size();
  if (n == 0) return {};
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return predictive_sd[a] < predictive_sd[b]; });
  const size_t B = std::min(size_t(bins), n), base = n / B, larger = n % B;
  Calibration out;
  size_t at = 0;
  for (size_t j = 0; j < B; ++j) {
    const size_t size = base + (j < larger ? 1 : 0);
    double variance = 0, squared = 0, fourth = 0;
    for (size_t r = at; r < at + size; ++r) {
      const double v = predictive_sd[order[r]] * predictive_sd[order[r]];
      variance += v, fourth += v * v;
      squared += error[order[r]] * error[order[r]];
    }
    at += size;
    const double rmv = std::sqrt(variance / double(size)), rmse = std::sqrt(squared / double(size));
    if (rmv > 0) {
      out.error += std::abs(rmv - rmse) / rmv;
      // sum e^2 has mean sum sd^2 and variance 2 sum sd^4; RMSE / RMV - 1 is half its relative change.
      out.if_calibrated += kMeanAbsNormal * 0.5 * std::sqrt(2 * fourth) / variance;
    } else if (rmse > 0) {
      out.error = std::numeric_limits<double>::infinity();  // a certain prediction that is wrong
    }
  }
  out.error /= double(B);
  out.if_calibrated /= double(B);
  return out;
}

}  // namespace fvi::diagnostics
