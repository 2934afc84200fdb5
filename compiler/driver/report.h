#pragma once
// `fvic report OUT [-o FILE]`: one self-contained HTML page of a run (docs/user-guide.md, "The
// report"): the data of report_data.h, the page's script and style (report/), and the charting
// library (Vega, Vega-Lite, vega-embed from the npm registry, pinned in report/package.json and
// installed by scripts/setup.sh) inlined, so that the file opens offline and can be sent as is.
#include <optional>
#include <string>

namespace fvic::driver {

// Writes the page (default OUT/report.html) and prints its path; returns the exit status.
int report_command(const std::string& out, const std::optional<std::string>& output);

// The page for `data_json`, with every script and style inlined. Throws std::runtime_error naming
// the file of report/ or of the charting library that cannot be read.
std::string report_page(const std::string& title, const std::string& data_json);

}  // namespace fvic::driver
