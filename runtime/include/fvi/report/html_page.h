#pragma once
// One self-contained HTML page: the style, the charting library (Vega, Vega-Lite, vega-embed),
// the data as JSON and the page's own script, all inlined, so the file opens offline. `fvic
// report` makes a run's page with report/page.js; NAME-server's status page uses
// report/status.js, which also polls status.json for new data.
#include <string>

namespace fvi::report {

// Throws std::runtime_error naming the file when an asset is missing (the charting library not
// installed when libfvi was built: scripts/setup.sh installs it). $FVIC_REPORT_DIR, when set,
// names a report/ directory to read the assets from instead (for working on the page).
std::string html_page(const std::string& title, const std::string& data_json, const std::string& script);

// Script or style text made safe to place inside <script>: "</script" as "<\/script".
std::string inline_safe(const std::string& text);
// JSON made safe to place inside <script type="application/json">: every "<" as \u003c.
std::string json_safe(const std::string& json);

}  // namespace fvi::report
