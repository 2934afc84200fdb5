#pragma once
// The files of report/ that `fvic report` and NAME-server's status page inline into their pages:
// page.css, common.js, page.js, status.js, and the charting library installed from the npm registry
// (node_modules/vega/build/vega.min.js, .../vega-lite.min.js, .../vega-embed.min.js). They are
// compiled into libfvi (cmake/embed_assets.cmake), so no program needs them on disk.
namespace fvi::report {

struct Asset {
  const char* name;  // its path under report/
  const char* text;  // null when it was not there at build time
};

// The embedded text of `name`, or null (not embedded, or absent when libfvi was built).
const char* embedded_asset(const char* name);

}  // namespace fvi::report
