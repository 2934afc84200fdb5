// The posterior table (summary.h): R's statistics and pillar's rounding, written from what R 4.2,
// posterior 1.4 and pillar 1.8 do, so that `fvic summary` and summarise_draws() print the same
// digits for the same draws.csv (tests/e2e/check_draws.R compares them).
#include "fvi/program/summary.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace fvi::program {

double r_na() {
  // R's NA_real_: the NaN whose low word is 1954.
  const uint64_t bits = 0x7FF00000000007A2ULL;
  double x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

bool is_r_na(double x) {
  if (!std::isnan(x)) return false;
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0xFFFFFFFFULL) == 1954;
}

// ---------------------------------------------------------------------------------------------
// Statistics (R's src/main/summary.c, src/library/stats: mean, var, median, mad, quantile)

double r_mean(const std::vector<double>& x) {
  // Sum in long double, then one correction pass (R's real_mean).
  const double n = double(x.size());
  long double s = 0;
  for (double v : x) s += v;
  if (std::isfinite(double(s))) {
    s /= n;
  } else {
    long double t = 0;  // maybe just an overflow: try smaller terms
    for (double v : x) t += v / n;
    s = t;
  }
  if (std::isfinite(double(s))) {
    long double t = 0;
    for (double v : x) t += v - s;
    s += t / n;
  }
  return double(s);
}

Eigen::VectorXd row_sds(const Eigen::MatrixXd& draws) {
  const Eigen::VectorXd mean = draws.rowwise().mean();
  return ((draws.colwise() - mean).array().square().rowwise().sum() / double(draws.cols() - 1)).sqrt();
}

double r_sd(const std::vector<double>& x) {
  if (x.size() < 2) return r_na();
  // stats::var's mean (the same two passes), then the squared deviations summed in long double.
  const long double n = x.size();
  long double sum = 0;
  for (double v : x) sum += v;
  long double mean = sum / n;
  if (std::isfinite(double(mean))) {
    sum = 0;
    for (double v : x) sum += v - mean;
    mean += sum / n;
  }
  const double m = double(mean);
  long double squares = 0;
  for (double v : x) squares += (v - m) * (v - m);
  return std::sqrt(double(squares / (n - 1)));
}

double r_median(std::vector<double> x) {
  const size_t n = x.size();
  if (n == 0) return r_na();
  for (double v : x)
    if (std::isnan(v)) return r_na();
  const size_t half = (n + 1) / 2;  // 1-based, as in median.default
  std::nth_element(x.begin(), x.begin() + (half - 1), x.end());
  const double lo = x[half - 1];
  if (n % 2 == 1) return lo;
  const double hi = *std::min_element(x.begin() + half, x.end());
  return r_mean({lo, hi});
}

double r_mad(const std::vector<double>& x) {
  const double center = r_median(x);
  if (is_r_na(center)) return r_na();
  std::vector<double> deviation(x.size());
  for (size_t i = 0; i < x.size(); ++i) deviation[i] = std::fabs(x[i] - center);
  return 1.4826 * r_median(std::move(deviation));
}

double r_quantile7(const std::vector<double>& x, double p) {
  const size_t n = x.size();
  if (n == 0) return r_na();
  const double index = 1 + double(n - 1) * p;  // 1-based
  const double lo = std::floor(index), hi = std::ceil(index);
  const double q = x[size_t(lo) - 1];
  const double h = index - lo;
  if (index > lo && x[size_t(hi) - 1] != q) return (1 - h) * q + h * x[size_t(hi) - 1];
  return q;
}

SummaryRow summarise(const std::string& variable, std::vector<double> draws) {
  SummaryRow row;
  row.variable = variable;
  row.mean = draws.empty() ? std::nan("") : r_mean(draws);
  const bool missing = draws.empty() || std::any_of(draws.begin(), draws.end(), [](double v) { return std::isnan(v); });
  if (missing) {
    // R's statistics refuse or return NA for NaN draws; only the mean is NaN.
    row.median = row.sd = row.mad = row.q5 = row.q95 = r_na();
    return row;
  }
  row.sd = r_sd(draws);
  row.mad = r_mad(draws);
  std::sort(draws.begin(), draws.end());
  const size_t n = draws.size();
  row.median = n % 2 ? draws[n / 2] : r_mean({draws[n / 2 - 1], draws[n / 2]});
  row.q5 = r_quantile7(draws, 0.05);
  row.q95 = r_quantile7(draws, 0.95);
  return row;
}

std::vector<SummaryRow> summarise(const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws,
                                  long per_variable) {
  std::vector<SummaryRow> rows;
  std::vector<double> values(size_t(draws.cols()));
  for (const VariableLayout& v : layout) {
    const std::vector<std::string> names = element_names(v);
    const int64_t shown = per_variable >= 0 ? std::min<int64_t>(per_variable, v.elements()) : v.elements();
    for (int64_t e = 0; e < shown; ++e) {
      for (Eigen::Index s = 0; s < draws.cols(); ++s) values[size_t(s)] = draws(v.offset + e, s);
      rows.push_back(summarise(posterior_name(names[size_t(e)]), values));
    }
  }
  return rows;
}

std::string posterior_name(const std::string& csv_name) {
  const size_t dot = csv_name.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == csv_name.size()) return csv_name;
  std::string indices = csv_name.substr(dot + 1);
  for (char& c : indices) {
    if (c == '.') c = ',';
    else if (c < '0' || c > '9') return csv_name;
  }
  if (indices.find(",,") != std::string::npos || indices.back() == ',') return csv_name;
  return csv_name.substr(0, dot) + "[" + indices + "]";
}

// ---------------------------------------------------------------------------------------------
// pillar's numbers (pillar 1.8: split_decimal, compute_rhs_digits, format_lhs/rhs, supernum)

namespace {

// R's signif(x, digits) (fprec in src/nmath/fprec.c): round half to even at the digit.
double r_signif(double x, int digits) {
  if (std::isnan(x) || !std::isfinite(x) || x == 0) return x;
  if (digits > 22) return x;
  if (digits < 1) digits = 1;
  const double sgn = x < 0 ? -1 : 1;
  x = std::fabs(x);
  const int max10e = DBL_MAX_10_EXP;
  const double l10 = std::log10(x);
  int e10 = digits - 1 - int(std::floor(l10));
  if (std::fabs(l10) < max10e - 2) {
    double p10 = 1.0;
    if (e10 > max10e) {
      p10 = std::pow(10.0, e10 - max10e);
      e10 = max10e;
    }
    if (e10 > 0) {
      const double pow10 = std::pow(10.0, e10);
      return sgn * (std::nearbyint((x * pow10) * p10) / pow10) / p10;
    }
    const double pow10 = std::pow(10.0, -e10);
    return sgn * (std::nearbyint(x / pow10) * pow10);
  }
  // Near the ends of the double range.
  const bool do_round = max10e - l10 >= std::pow(10.0, -digits);
  const int e2 = digits + (e10 > 0 ? 1 : 6);
  const double p10 = std::pow(10.0, e2);
  x *= p10;
  const double P10 = std::pow(10.0, e10 - e2);
  x *= P10;
  if (do_round) x += 0.5;
  x = std::floor(x) / p10;
  return sgn * x / P10;
}

// pillar's within_tolerance: equal to the last two bits at the scale of x.
bool within_tolerance(double x, double y) {
  const double l2x = std::nearbyint(std::log2(x)), l2y = std::nearbyint(std::log2(y));
  if (std::isnan(l2x) || std::isnan(l2y) || l2x != l2y) return false;
  if (x == y) return true;
  return std::fabs((x - y) * std::pow(2.0, -l2x)) <= 2 * DBL_EPSILON;
}

// The decimal exponent of x once rounded to sigfig digits (9.996 -> 1 at 3 digits); INT_MAX for
// 0 and non-finite x (R's NA).
int compute_exp(double x, int sigfig) {
  if (x == 0 || !std::isfinite(x)) return INT32_MAX;
  const double offset = std::log1p(-5 * std::pow(10.0, -sigfig - 1)) / std::log(10.0);
  return int(std::floor(std::log10(x) - offset));
}

// Digits after the point: sigfig significant ones, less the trailing zeros x really has; none
// when every value is a whole number.
std::vector<int> compute_rhs_digits(const std::vector<double>& x, int sigfig) {
  std::vector<int> digits(x.size(), 0);
  bool whole = true;
  for (double v : x)
    if (!std::isnan(v) && v != std::trunc(v)) whole = false;
  if (whole) return digits;
  for (size_t i = 0; i < x.size(); ++i) {
    const int exp = compute_exp(x[i], sigfig);
    if (exp == INT32_MAX || exp > sigfig) continue;
    int d = sigfig - 1 - exp;
    while (d > 0) {
      const double val = x[i] * std::pow(10.0, d - 1);
      if (!within_tolerance(val, std::nearbyint(val))) break;
      --d;
    }
    digits[i] = d;
  }
  return digits;
}

struct Split {
  std::vector<std::string> lhs;
  std::vector<double> rhs;
  std::vector<int> rhs_digits, exp;  // exp: INT32_MAX where none is shown
  std::vector<bool> neg, dec;
  int width = 0;
};

Split split_decimal(const std::vector<double>& x, int sigfig, bool scientific) {
  const size_t n = x.size();
  Split s;
  std::vector<double> mnt(n);
  s.exp.assign(n, INT32_MAX);
  for (size_t i = 0; i < n; ++i) {
    mnt[i] = std::fabs(x[i]);
    if (scientific && std::isfinite(x[i]) && x[i] != 0) {
      s.exp[i] = compute_exp(mnt[i], sigfig);
      mnt[i] /= std::pow(10.0, s.exp[i]);
    }
  }
  s.rhs_digits = compute_rhs_digits(mnt, sigfig);
  bool any_dec = false;
  int lhs_width = 0, rhs_width = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool num = std::isfinite(x[i]);
    const int min_sigfig = num && mnt[i] != 0 ? int(std::floor(std::log10(mnt[i]))) + 1 : 0;
    const double rounded = r_signif(mnt[i], std::max(sigfig, min_sigfig));
    const double lhs = std::trunc(rounded);
    s.rhs.push_back(rounded - lhs);
    s.neg.push_back(!std::isnan(x[i]) && x[i] < 0);
    // No point where the rounded value is x itself (a whole number, or zero).
    const double shown = s.exp[i] == INT32_MAX ? lhs : lhs * std::pow(10.0, s.exp[i]);
    const bool dec = num && !(mnt[i] == 0 || (s.rhs.back() == 0 && within_tolerance(shown, std::fabs(x[i]))));
    s.dec.push_back(dec);
    any_dec = any_dec || dec;
    if (std::isnan(x[i])) {
      s.lhs.push_back(is_r_na(x[i]) ? "NA" : "NaN");
    } else if (!num) {
      s.lhs.push_back("Inf");
    } else {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.0f", lhs);
      s.lhs.push_back(buf);
    }
    lhs_width = std::max(lhs_width, int(s.neg.back()) + int(s.lhs.back().size()));
    rhs_width = std::max(rhs_width, s.rhs_digits[i]);
  }
  s.width = lhs_width + int(any_dec) + rhs_width;
  return s;
}

std::vector<std::string> assemble(const Split& s) {
  const size_t n = s.lhs.size();
  const bool any_dec = std::find(s.dec.begin(), s.dec.end(), true) != s.dec.end();
  int rhs_width = 0;
  for (int d : s.rhs_digits) rhs_width = std::max(rhs_width, d);
  // The exponents (scientific notation only): "e-10", "e- 9", "e 0"; signs when one is negative.
  bool any_exp = false, any_negative_exp = false;
  size_t exp_digits = 0;
  for (int e : s.exp)
    if (e != INT32_MAX) {
      any_exp = true;
      any_negative_exp = any_negative_exp || e < 0;
      exp_digits = std::max(exp_digits, std::to_string(std::abs(e)).size());
    }
  std::vector<std::string> out(n);
  size_t width = 0;
  for (size_t i = 0; i < n; ++i) {
    std::string cell = (s.neg[i] ? "-" : "") + s.lhs[i];
    if (any_dec) cell += s.dec[i] ? "." : " ";
    std::string rhs;
    if (s.dec[i]) {
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.0f", std::fabs(std::nearbyint(s.rhs[i] * std::pow(10.0, s.rhs_digits[i]))));
      std::string digits = std::strcmp(buf, "0") == 0 ? "" : buf;
      rhs = std::string(size_t(std::max(0, s.rhs_digits[i] - int(digits.size()))), '0') + digits;
    }
    rhs.resize(std::max(rhs.size(), size_t(rhs_width)), ' ');
    cell += rhs;
    if (any_exp) {
      const bool has = s.exp[i] != INT32_MAX;
      const std::string digits = has ? std::to_string(std::abs(s.exp[i])) : "";
      cell += has ? "e" : " ";
      if (any_negative_exp) cell += !has ? " " : s.exp[i] < 0 ? "-" : "+";
      cell += std::string(exp_digits - digits.size(), ' ') + digits;
    }
    width = std::max(width, cell.size());
    out[i] = std::move(cell);
  }
  for (std::string& cell : out) cell.insert(0, width - cell.size(), ' ');
  return out;
}

}  // namespace

std::vector<std::string> format_pillar(const std::vector<double>& column, int sigfig) {
  const Split decimal = split_decimal(column, sigfig, false);
  // pillar.max_dec_width: wider decimal columns go scientific.
  if (decimal.width <= 13) return assemble(decimal);
  return assemble(split_decimal(column, sigfig, true));
}

const char* const kSummaryFootnote =
    "R-hat and ESS are not shown: these are independent draws from q, not Markov chains, so they would say\n"
    "nothing about the fit (k\xCC\x82 does).";

std::string format_summary(const std::vector<SummaryRow>& rows) {
  const char* titles[] = {"variable", "mean", "median", "sd", "mad", "q5", "q95"};
  std::vector<std::vector<std::string>> cells(7);
  for (const SummaryRow& r : rows) cells[0].push_back(r.variable);
  double SummaryRow::*fields[] = {&SummaryRow::mean, &SummaryRow::median, &SummaryRow::sd,
                                  &SummaryRow::mad,  &SummaryRow::q5,     &SummaryRow::q95};
  for (int c = 0; c < 6; ++c) {
    std::vector<double> column;
    for (const SummaryRow& r : rows) column.push_back(r.*fields[c]);
    cells[size_t(c) + 1] = format_pillar(column);
  }
  std::vector<size_t> width(7);
  for (size_t c = 0; c < 7; ++c) {
    width[c] = std::strlen(titles[c]);
    for (const std::string& cell : cells[c]) width[c] = std::max(width[c], cell.size());
  }
  // As a tibble prints: the names left-aligned, the numbers right-aligned under their titles.
  auto line = [&](auto cell) {
    std::string out = "  ";
    for (size_t c = 0; c < 7; ++c) {
      const std::string text = cell(c);
      const std::string pad(width[c] - text.size(), ' ');
      out += c == 0 ? text + pad : " " + pad + text;
    }
    return out + "\n";
  };
  std::string out = line([&](size_t c) { return std::string(titles[c]); });
  for (size_t r = 0; r < rows.size(); ++r) out += line([&](size_t c) { return cells[c][r]; });
  return out;
}

void print_summary(const std::string& title, const std::vector<VariableLayout>& layout, const Eigen::MatrixXd& draws) {
  int64_t elements = 0;
  for (const VariableLayout& v : layout) elements += v.elements();
  const long per_variable = elements > 40 ? 8 : -1;
  const std::vector<SummaryRow> rows = summarise(layout, draws, per_variable);
  std::printf("%s, %lld draws from q:\n%s", title.c_str(), (long long)draws.cols(),
              format_summary(rows).c_str());
  if (int64_t(rows.size()) < elements)
    std::printf("  (%lld more elements are in draws.csv: `fvic summary OUT` prints them all)\n",
                (long long)(elements - int64_t(rows.size())));
  std::printf("%s\n", kSummaryFootnote);
}

}  // namespace fvi::program
