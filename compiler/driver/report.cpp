#include "driver/report.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "driver/report_data.h"

namespace fvic::driver {

namespace fs = std::filesystem;

namespace {

// Where report/ is: $FVIC_REPORT_DIR, else the source tree's (set by CMake).
fs::path report_directory() {
  const char* env = std::getenv("FVIC_REPORT_DIR");
  return env && *env ? fs::path(env) : fs::path(FVIC_REPORT_DIR);
}

std::string read_asset(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw std::runtime_error("cannot read " + path.string() +
                             " (the report's scripts; scripts/setup.sh installs the charting library with npm)");
  std::ostringstream text;
  text << f.rdbuf();
  return text.str();
}

// Script or style text placed inside the page: "</script" would end the element early, so it is
// written "<\/script", which JavaScript's strings, template literals and regular expressions read
// unchanged (the libraries' own "</" in a regular expression such as /</g is left alone).
std::string inline_safe(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '<' && text.size() - i >= 8) {
      std::string word = text.substr(i, 8);
      for (char& c : word) c = char(std::tolower(static_cast<unsigned char>(c)));
      if (word == "</script") out += '\\';
    }
  }
  return out;
}

// JSON inside <script type="application/json">: every "<" (only ever inside a string) as \u003c,
// so no text of the model's can close the element or open a comment.
std::string json_safe(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string report_page(const std::string& title, const std::string& data_json) {
  const fs::path dir = report_directory();
  const fs::path modules = dir / "node_modules";
  std::ostringstream page;
  page << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       << "<title>" << html_escape(title) << "</title>\n"
       << "<style>\n" << inline_safe(read_asset(dir / "page.css")) << "</style>\n";
  for (const fs::path& library : {modules / "vega" / "build" / "vega.min.js",
                                  modules / "vega-lite" / "build" / "vega-lite.min.js",
                                  modules / "vega-embed" / "build" / "vega-embed.min.js"})
    page << "<script>\n" << inline_safe(read_asset(library)) << "\n</script>\n";
  page << "<script type=\"application/json\" id=\"fvic-data\">" << json_safe(data_json) << "</script>\n"
       << "</head>\n<body>\n<main id=\"report\"></main>\n"
       << "<script>\n" << inline_safe(read_asset(dir / "page.js")) << "\n</script>\n</body>\n</html>\n";
  return page.str();
}

int report_command(const std::string& out, const std::optional<std::string>& output) {
  try {
    const nlohmann::ordered_json data = collect_report_data(out);
    std::string title = "fvic report";
    if (data.contains("run") && data["run"].contains("model")) title = data["run"]["model"].get<std::string>() + ": " + title;
    const std::string page = report_page(title, data.dump());
    const std::string path = output ? *output : (fs::path(out) / "report.html").string();
    std::ofstream f(path, std::ios::binary);
    f << page;
    if (!f) {
      std::cerr << "fvic: cannot write " << path << '\n';
      return 1;
    }
    std::cout << "wrote " << path << " (" << (page.size() + 1023) / 1024 << " KiB; opens offline in a browser)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fvic: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fvic::driver
