#pragma once
// Reading draws.csv back (the writer is write_draws_csv in output.h): CmdStan's CSV layout, as
// `fvic summary` and the tests need it. Any Stan CSV file reads: comment lines give `key = value`
// pairs, the first other line is the header, and when the comments name output_samples (CmdStan's
// variational layout) the first row is q's mean, not a draw — rstan::read_stan_csv's rule.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace fvi::program {

struct DrawsTable {
  std::vector<std::pair<std::string, std::string>> comments;  // `# key = value`, trimmed, "(Default)" dropped
  std::vector<std::string> columns;                           // the header: lp__, log_p__, log_g__, beta.1, ...
  std::vector<double> mean;                                   // the variational layout's first row, else empty
  std::vector<std::vector<double>> values;                    // values[column][draw]

  size_t draws() const { return values.empty() ? 0 : values[0].size(); }
  // The comment's value, or nullptr when the file has no such key (the first one if repeated).
  const std::string* comment(const std::string& key) const;
  // The column's index, or -1.
  long column(const std::string& name) const;
};

// Throws std::runtime_error naming the file and line ("OUT/draws.csv:14: ...") when the file is
// missing, has no header, a row with the wrong number of fields, or a field that is not a number.
// Files over `max_values` numbers are refused rather than read into memory.
DrawsTable read_draws_csv(const std::string& path, size_t max_values = size_t(100) * 1000 * 1000);

}  // namespace fvi::program
