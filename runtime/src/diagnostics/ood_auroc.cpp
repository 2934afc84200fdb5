#include "fvi/diagnostics/ood_auroc.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace fvi::diagnostics {

double ood_auroc(const std::vector<double>& in_distribution, const std::vector<double>& out_of_distribution) {
  const size_t n_in = in_distribution.size(), n_out = out_of_distribution.size();
  if (n_in == 0 || n_out == 0) throw std::invalid_argument("OOD AUROC: both sets need rows");
  // Ranks of the pooled scores (ties the mean of their ranks); U = the OOD ranks' sum minus its least.
  std::vector<std::pair<double, bool>> pooled;
  pooled.reserve(n_in + n_out);
  for (double s : in_distribution) pooled.push_back({s, false});
  for (double s : out_of_distribution) pooled.push_back({s, true});
  for (const auto& p : pooled)
    if (std::isnan(p.first)) throw std::invalid_argument("OOD AUROC: a score that is not a number");
  std::sort(pooled.begin(), pooled.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double rank_sum = 0;
  for (size_t i = 0; i < pooled.size();) {
    size_t j = i;
    while (j < pooled.size() && pooled[j].first == pooled[i].first) ++j;
    const double rank = 0.5 * double(i + 1 + j);  // mean of ranks i + 1 .. j
    for (size_t r = i; r < j; ++r)
      if (pooled[r].second) rank_sum += rank;
    i = j;
  }
  const double u = rank_sum - 0.5 * double(n_out) * double(n_out + 1);
  return u / (double(n_in) * double(n_out));
}

}  // namespace fvi::diagnostics
