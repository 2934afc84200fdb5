#pragma once
// `fvic report OUT [-o FILE]`: one self-contained HTML page of a run (docs/user-guide.md, "The
// report"), the page every run also writes at its end: fvi/report/report_data.h's data drawn by
// report/page.js, with the charting library (Vega, Vega-Lite, vega-embed from the npm registry,
// pinned in report/package.json, installed by scripts/setup.sh, compiled into libfvi) inlined,
// so that the file opens offline and can be sent as is.
#include <optional>
#include <string>

namespace fvic::driver {

// Writes the page (default OUT/report.html) and prints its path; returns the exit status.
int report_command(const std::string& out, const std::optional<std::string>& output);

}  // namespace fvic::driver
