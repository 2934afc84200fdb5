// The posterior table: R's statistics on samples whose values are worked out by hand here, and
// pillar's rounding against strings R 4.2 / pillar 1.8 print for the same columns.
#include "fvi/program/summary.h"

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

using Catch::Contains;
using Catch::WithinAbs;
using Catch::WithinRel;
using namespace fvi::program;

namespace {

std::vector<std::string> left_trimmed(const std::vector<std::string>& cells) {
  std::vector<std::string> out;
  for (const std::string& c : cells) out.push_back(c.substr(c.find_first_not_of(' ')));
  return out;
}

}  // namespace

TEST_CASE("summary statistics are R's: type-7 quantiles, mad scaled by 1.4826", "[program][summary]") {
  // 1..10: index 1 + 9p; q5 at 1.45 -> 1.45, q95 at 9.55 -> 9.55; median 5.5; |x - 5.5| has
  // median 2.5; var = 55/6.
  std::vector<double> x;
  for (int i = 10; i >= 1; --i) x.push_back(i);  // unsorted on purpose
  const SummaryRow a = summarise("x", x);
  CHECK_THAT(a.mean, WithinRel(5.5, 1e-15));
  CHECK_THAT(a.median, WithinRel(5.5, 1e-15));
  CHECK_THAT(a.sd, WithinRel(std::sqrt(55.0 / 6), 1e-15));
  CHECK_THAT(a.mad, WithinRel(1.4826 * 2.5, 1e-15));
  CHECK_THAT(a.q5, WithinRel(1.45, 1e-14));
  CHECK_THAT(a.q95, WithinRel(9.55, 1e-14));

  // {3, -1, 7, 2, 10}: sorted -1 2 3 7 10; q5 at 1.2 -> -1 + 0.2 * 3 = -0.4; q95 at 4.8 -> 7 + 0.8 * 3
  // = 9.4; |x - 3| = 0 4 4 1 7 has median 4; squared deviations from 4.2 sum to 74.8.
  const SummaryRow b = summarise("y", {3, -1, 7, 2, 10});
  CHECK_THAT(b.mean, WithinRel(4.2, 1e-15));
  CHECK(b.median == 3);
  CHECK_THAT(b.sd, WithinRel(std::sqrt(74.8 / 4), 1e-15));
  CHECK_THAT(b.mad, WithinRel(1.4826 * 4, 1e-15));
  CHECK_THAT(b.q5, WithinAbs(-0.4, 1e-15));
  CHECK_THAT(b.q95, WithinRel(9.4, 1e-15));

  // One draw: no sd (R's NA); a NaN draw: the mean is NaN and the rest NA, as in R.
  const SummaryRow one = summarise("z", {2.5});
  CHECK(is_r_na(one.sd));
  CHECK(one.q5 == 2.5);
  CHECK(one.mad == 0);
  const SummaryRow nan = summarise("w", {1, std::nan(""), 3});
  CHECK(std::isnan(nan.mean));
  CHECK_FALSE(is_r_na(nan.mean));
  CHECK(is_r_na(nan.median));
  CHECK(is_r_na(nan.q95));

  CHECK(r_quantile7({1, 2}, 0.5) == 1.5);
  CHECK(r_median({4, 1, 3, 2}) == 2.5);
  CHECK(r_mean({1e308, 1e308}) == 1e308);  // R's overflow guard: the mean of large values exists
}

TEST_CASE("numbers are rounded as posterior's tibble prints them", "[program][summary]") {
  // Expected strings: format(pillar::pillar_shaft(x)) in R 4.2.2 with pillar 1.8.1.
  CHECK(left_trimmed(format_pillar({1.5, -2.25, r_na(), INFINITY, 1234.5, 0, -0.0001})) ==
        std::vector<std::string>{"1.5   ", "-2.25  ", "NA     ", "Inf     ", "1234.    ", "0     ", "-0.0001"});
  CHECK(left_trimmed(format_pillar({3.4012, 11.01, 9.996, 0.229})) ==
        std::vector<std::string>{"3.40 ", "11.0  ", "10.0  ", "0.229"});
  CHECK(left_trimmed(format_pillar({558.3, 322.1, 1.02})) == std::vector<std::string>{"558.  ", "322.  ", "1.02"});
  CHECK(left_trimmed(format_pillar({1, 2, 3})) == std::vector<std::string>{"1", "2", "3"});
  CHECK(left_trimmed(format_pillar({std::nan(""), -INFINITY, 0.5})) ==
        std::vector<std::string>{"NaN  ", "-Inf  ", "0.5"});
  CHECK(left_trimmed(format_pillar({-0.854, 0.309, -10.3})) == std::vector<std::string>{"-0.854", "0.309", "-10.3  "});
  // Wider than 13 characters as decimals: scientific.
  CHECK(format_pillar({1.23e-10, 4.5e-9}) == std::vector<std::string>{"1.23e-10", "4.5 e- 9"});
  CHECK(format_pillar({1e15, 2}) == std::vector<std::string>{"1e15", "2e 0"});
  // Cells of a column share one width, so the decimal points line up.
  const std::vector<std::string> column = format_pillar({-0.854, 0.309, -10.3});
  CHECK(column[0].size() == column[2].size());
}

TEST_CASE("the table: posterior's names, one row per element, the footnote", "[program][summary]") {
  CHECK(posterior_name("beta.1") == "beta[1]");
  CHECK(posterior_name("W.2.3") == "W[2,3]");
  CHECK(posterior_name("tau") == "tau");
  CHECK(posterior_name("lp__") == "lp__");
  CHECK(posterior_name("a.b") == "a.b");

  VariableLayout beta{"beta", 0, {2}};
  VariableLayout w{"W", 2, {2, 2}};
  Eigen::MatrixXd draws(6, 3);
  draws << 1, 2, 3,  //
      4, 5, 6,       //
      7, 8, 9,       //
      0.5, 0.25, 1,  //
      -1, -2, -3,    //
      10, 20, 30;
  const std::vector<SummaryRow> rows = summarise({beta, w}, draws);
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].variable == "beta[1]");
  CHECK(rows[3].variable == "W[2,1]");  // column-major, as draws.csv
  CHECK(rows[3].median == 0.5);
  CHECK(summarise({beta, w}, draws, 1).size() == 2);

  const std::string table = format_summary(rows);
  CHECK(table.rfind("  variable ", 0) == 0);
  const std::string header = table.substr(0, table.find('\n'));
  for (const char* title : {" mean", " median", " sd", " mad", " q5", " q95"}) CHECK_THAT(header, Contains(title));
  CHECK_THAT(table, Contains("\n  W[2,2]  "));
  CHECK_THAT(std::string(kSummaryFootnote), Contains("independent draws from q"));
}
