#pragma once
// The posterior table a run prints at its end and `fvic summary OUT` prints from draws.csv: the
// columns of R's posterior::summarise_draws() (mean, median, sd, mad, q5, q95), each computed as
// R computes it (quantiles of type 7, mad scaled by 1.4826, R's two-pass mean) and printed as
// posterior prints a draws_summary — a tibble, whose numbers pillar rounds to 3 significant digits
// with the decimal points of a column aligned. R-hat and ESS are left out: the draws are
// independent draws from q, not Markov chains (the footnote says so).
#include <string>
#include <vector>

#include "fvi/eigen_types.h"
#include "fvi/program/output.h"

namespace fvi::program {

// R's NA_real_ (a NaN whose payload is 1954): what R returns where a statistic is missing, printed
// "NA", where an ordinary NaN prints "NaN" (the mean of draws holding a NaN).
double r_na();
bool is_r_na(double x);

struct SummaryRow {
  std::string variable;  // as posterior names it: beta[1], W[2,3]
  double mean = 0, median = 0, sd = 0, mad = 0, q5 = 0, q95 = 0;
};

// The statistics of one variable's draws, as summarise_draws() computes them.
SummaryRow summarise(const std::string& variable, std::vector<double> draws);
// One row per element of `layout` (storage order, as draws.csv's columns); draws is size x S.
// At most `per_variable` elements of each variable when it is >= 0.
std::vector<SummaryRow> summarise(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws,
                                  long per_variable = -1);

// The sd of each row of `draws` (size x S, S >= 2; divisor S - 1): the moments the closing checks
// set against their reweighted ones.
Eigen::VectorXd row_sds(const Eigen::MatrixXd& draws);

// The statistics one at a time, for the tests: R's mean, sd, median, mad, quantile(type = 7).
double r_mean(const std::vector<double>& x);
double r_sd(const std::vector<double>& x);
double r_median(std::vector<double> x);
double r_mad(const std::vector<double>& x);
double r_quantile7(const std::vector<double>& sorted, double p);

// posterior's name of a draws.csv column: beta.1 -> beta[1], W.2.3 -> W[2,3], tau -> tau.
std::string posterior_name(const std::string& csv_name);

// One column of numbers as pillar prints it (sigfig significant digits, decimal points aligned,
// scientific notation when the decimal column would be wider than 13), each string padded to
// the column's width.
std::vector<std::string> format_pillar(const std::vector<double>& column, int sigfig = 3);

// The table: a header line, then one line per row. The footnote is a separate line.
std::string format_summary(const std::vector<SummaryRow>& rows);
extern const char* const kSummaryFootnote;

// Prints "`title`, S draws from q:", the table of `draws` (size x S, constrained) and the
// footnote; models with more than 40 elements show the first 8 of each variable (`fvic summary
// OUT` shows them all).
void print_summary(const std::string& title, const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws);

}  // namespace fvi::program
