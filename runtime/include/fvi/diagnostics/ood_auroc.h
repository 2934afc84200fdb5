#pragma once
// Out-of-distribution detection from a predictive's uncertainty (spec 001 §4: the predictive
// entropy of a classifier, the predictive sd of a regression): the area under the ROC curve of
// telling OOD rows from held-out in-distribution rows by that score, higher meaning OOD. It is
// the probability that a random OOD row scores above a random in-distribution one, ties counted
// half (the Mann-Whitney U statistic over the product of the counts): 1 separates them, 0.5 does
// not tell them apart.
#include <vector>

namespace fvi::diagnostics {

// Throws on an empty set or a score that is not a number.
double ood_auroc(const std::vector<double>& in_distribution, const std::vector<double>& out_of_distribution);

}  // namespace fvi::diagnostics
