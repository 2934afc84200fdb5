// draws.csv both ways: write_draws_csv (output.h) writes CmdStan's variational layout, and
// read_draws_csv (draws_csv.h) reads any Stan CSV file back for `fvic summary`.
//
// What rstan::read_stan_csv (2.21) needs, and so what the comment block must carry: every `#`
// line with an `=` is a `key = value` pair (blanks and "(Default)" dropped); `output_samples`
// marks the variational layout, whose first row (q's mean) it drops and whose number of draws it
// must equal; with it present, iter/warmup/thin are set for it — without it rstan looks for
// num_warmup and thin, finds none and stops with "not all are integers".
#include "fvi/program/draws_csv.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <set>
#include <stdexcept>

#include "fvi/program/output.h"
#include "inference_keys.h"

namespace fvi::program {

namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

const std::string* find(const Pairs& pairs, const char* key) {
  for (const auto& [k, v] : pairs)
    if (k == key) return &v;
  return nullptr;
}

// A comment stays one line, or a reader would take the rest for data.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

bool is_number(const char* text) {
  if (!text || !*text) return false;
  char* end = nullptr;
  std::strtod(text, &end);
  return *end == '\0';
}

// A CmdStan argument's value: the first of fvic's `keys` that the run set; else fvic's own
// default where the key table gives one number (what actually ran, e.g. seed 1), else CmdStan's
// default; the last two marked "(Default)", as CmdStan marks an argument nobody gave.
std::string argument(const Pairs& config, std::initializer_list<const char*> keys, const char* cmdstan_default) {
  for (const char* key : keys)
    if (const std::string* value = find(config, key)) return one_line(*value);
  for (const char* key : keys)
    if (const fvic::stdlib::KeySpec* spec = fvic::stdlib::find_key(key); spec && is_number(spec->default_value))
      return std::string(spec->default_value) + " (Default)";
  return std::string(cmdstan_default) + " (Default)";
}

// Values keep 10 significant digits (CmdStan's default is 6); log densities 12, since
// log_p__ - log_g__ is a difference of two large numbers. R reads inf and nan, not -nan.
void put(std::ostream& out, double x, int digits) {
  if (std::isnan(x)) {
    out << "nan";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, x);
  out << buf;
}

std::string trim(const std::string& s, size_t begin = 0, size_t end = std::string::npos) {
  end = std::min(end, s.size());
  while (begin < end && (s[begin] == ' ' || s[begin] == '\t')) ++begin;
  while (end > begin && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
  return s.substr(begin, end - begin);
}

// A name or field from the file, fit for a message: printable, at most 40 characters.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) out += s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  return out + (s.size() > 40 ? "...'" : "'");
}

std::string count(size_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

}  // namespace

void write_draws_csv(const std::string& path, const DrawsFile& f) {
  const Eigen::Index size = f.draws.rows(), draws = f.draws.cols();
  if (f.mean.size() != size)
    throw std::invalid_argument("draws.csv: the mean has " + std::to_string(f.mean.size()) + " values, the draws " +
                                std::to_string(size));
  for (const Eigen::VectorXd* v : {&f.log_p, &f.log_g})
    if (v->size() != 0 && v->size() != draws)
      throw std::invalid_argument("draws.csv: " + std::to_string(v->size()) + " log densities for " +
                                  std::to_string(draws) + " draws");
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);

  const Pairs& c = f.config;
  // CmdStan knows two families; fvic's structured q does not factorise either.
  const std::string* family = find(c, "family");
  if (!family) family = find(f.fvic, "family");
  const std::string algorithm = !family ? "meanfield" : *family == "meanfield" ? "meanfield" : "fullrank";
  const std::string* data = find(f.fvic, "data");
  out << "# model = " << one_line(f.model) << '\n'
      << "# method = variational\n"
      << "#   variational\n"
      << "#     algorithm = " << algorithm << (family ? "" : " (Default)") << '\n'
      << "#       " << algorithm << '\n'
      << "#     iter = " << argument(c, {"rounds", "max_rounds"}, "10000") << '\n'
      << "#     grad_samples = " << argument(c, {"mc_samples"}, "1") << '\n'
      << "#     elbo_samples = 100 (Default)\n"
      << "#     eta = " << argument(c, {"lr"}, "1") << '\n'
      // fvic takes the step size it is given: no adaptation, hence no "Stepsize adaptation
      // complete." and "eta = " lines after the header, as CmdStan with adapt engaged = 0.
      << "#     adapt\n"
      << "#       engaged = 0\n"
      << "#       iter = 50 (Default)\n"
      << "#     tol_rel_obj = " << argument(c, {"tol"}, "0.01") << '\n'
      << "#     eval_elbo = 100 (Default)\n"
      << "#     output_samples = " << draws << (draws == 1000 && !find(c, "output_draws") ? " (Default)" : "") << '\n'
      << "# id = 1 (Default)\n"
      << "# data\n"
      << "#   file = " << (data ? one_line(*data) : " (Default)") << '\n'
      << "# random\n"
      << "#   seed = " << argument(c, {"seed"}, "0") << '\n'
      << "# output\n"
      << "#   file = " << one_line(path) << '\n'
      << "#   diagnostic_file =  (Default)\n"
      << "#   refresh = " << argument(c, {"refresh"}, "100") << '\n';
  // fvic's own figures, then every setting as given, under names no CmdStan key takes.
  for (const auto& [k, v] : f.fvic) out << "# fvic_" << one_line(k) << " = " << one_line(v) << '\n';
  for (const auto& [k, v] : c) out << "# fvic_set_" << one_line(k) << " = " << one_line(v) << '\n';

  out << "lp__,log_p__,log_g__";
  for (const VariableLayout& v : f.layout)
    for (const std::string& name : element_names(v)) out << ',' << name;
  out << '\n';
  auto row = [&](double log_p, double log_g, auto value) {
    out << "0,";
    put(out, log_p, 12);
    out << ',';
    put(out, log_g, 12);
    for (const VariableLayout& v : f.layout)
      for (int64_t e = 0; e < v.elements(); ++e) {
        out << ',';
        put(out, value(v.offset + e), 10);
      }
    out << '\n';
  };
  row(0, 0, [&](int64_t k) { return f.mean[k]; });
  for (Eigen::Index s = 0; s < draws; ++s)
    row(f.log_p.size() ? f.log_p[s] : 0, f.log_g.size() ? f.log_g[s] : 0, [&](int64_t k) { return f.draws(k, s); });
  if (!out) throw std::runtime_error("cannot write " + path);
}

const std::string* DrawsTable::comment(const std::string& key) const {
  for (const auto& [k, v] : comments)
    if (k == key) return &v;
  return nullptr;
}

long DrawsTable::column(const std::string& name) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i] == name) return long(i);
  return -1;
}

DrawsTable read_draws_csv(const std::string& path, size_t max_values) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  DrawsTable t;
  std::string line;
  long number = 0, header_line = 0;
  bool mean_row = false;
  size_t values = 0;
  auto fail = [&](const std::string& what) {
    throw std::runtime_error(path + ":" + std::to_string(number) + ": " + what);
  };
  std::vector<double> row;
  std::string field;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    if (line[0] == '#') {
      size_t begin = line.find_first_not_of("# \t");
      const size_t eq = line.find('=');
      if (begin == std::string::npos || eq == std::string::npos || eq < begin) continue;
      std::string key = trim(line, begin, eq), value = trim(line, eq + 1);
      const std::string mark = "(Default)";
      if (value.size() >= mark.size() && value.compare(value.size() - mark.size(), mark.size(), mark) == 0)
        value = trim(value, 0, value.size() - mark.size());
      if (!key.empty()) t.comments.emplace_back(std::move(key), std::move(value));
      continue;
    }
    if (t.columns.empty()) {
      size_t start = 0;
      std::set<std::string> seen;
      while (true) {
        const size_t comma = line.find(',', start);
        std::string name = trim(line, start, comma);
        if (name.empty()) fail("column " + std::to_string(t.columns.size() + 1) + " of the header has no name");
        if (!seen.insert(name).second) fail("the header names " + quoted(name) + " twice");
        t.columns.push_back(std::move(name));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      t.values.resize(t.columns.size());
      header_line = number;
      // rstan::read_stan_csv's rule: the variational layout's first row is the mean.
      mean_row = t.comment("output_samples") != nullptr;
      continue;
    }
    row.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      if (row.size() == t.columns.size())
        fail("more fields than the " + count(t.columns.size(), "column") + " of the header (line " +
             std::to_string(header_line) + ")");
      field = trim(line, start, comma);
      const std::string& name = t.columns[row.size()];
      if (field.empty()) fail("the field of column " + quoted(name) + " is empty");
      char* end = nullptr;
      const double x = std::strtod(field.c_str(), &end);
      if (*end != '\0') fail("the field of column " + quoted(name) + " is " + quoted(field) + ", not a number");
      row.push_back(x);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (row.size() != t.columns.size())
      fail(count(row.size(), "field") + " where the header (line " + std::to_string(header_line) + ") has " +
           count(t.columns.size(), "column"));
    if (mean_row) {
      t.mean = row;
      mean_row = false;
      continue;
    }
    values += row.size();
    if (values > max_values) fail("more than " + std::to_string(max_values) + " numbers, too many to summarise");
    for (size_t i = 0; i < row.size(); ++i) t.values[i].push_back(row[i]);
  }
  if (in.bad()) throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
  if (t.columns.empty())
    throw std::runtime_error(path + ": no header line (" + (number ? "every line is a comment" : "the file is empty") +
                             ")");
  return t;
}

}  // namespace fvi::program
