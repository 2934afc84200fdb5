#include "fvi/report/html_page.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "fvi/report/assets.h"

namespace fvi::report {

namespace {

std::string asset(const std::string& name) {
  if (const char* dir = std::getenv("FVIC_REPORT_DIR"); dir && *dir) {
    const std::string path = std::string(dir) + "/" + name;
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + path + " ($FVIC_REPORT_DIR)");
    std::ostringstream text;
    text << f.rdbuf();
    return text.str();
  }
  const char* text = embedded_asset(name.c_str());
  if (!text)
    throw std::runtime_error("report/" + name + " was not there when fvic was built: run scripts/setup.sh, which "
                             "installs the charting library from the npm registry, and rebuild");
  return text;
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

std::string inline_safe(const std::string& text) {
  // JavaScript's strings, template literals and regular expressions read "<\/" as "</"; the
  // libraries' own "</" elsewhere (a regular expression such as /</g) is left alone.
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] != '<' || text.size() - i < 8) continue;
    std::string word = text.substr(i, 8);
    for (char& c : word) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (word == "</script") out += '\\';
  }
  return out;
}

std::string json_safe(const std::string& json) {
  // "<" only ever occurs inside a JSON string, where \u003c reads back as "<".
  std::string out;
  out.reserve(json.size());
  for (char c : json) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

std::string html_page(const std::string& title, const std::string& data_json, const std::string& script) {
  std::ostringstream page;
  page << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       << "<title>" << html_escape(title) << "</title>\n"
       << "<style>\n" << inline_safe(asset("page.css")) << "</style>\n";
  for (const char* library : {"node_modules/vega/build/vega.min.js", "node_modules/vega-lite/build/vega-lite.min.js",
                              "node_modules/vega-embed/build/vega-embed.min.js"})
    page << "<script>\n" << inline_safe(asset(library)) << "\n</script>\n";
  page << "<script type=\"application/json\" id=\"fvic-data\">" << json_safe(data_json) << "</script>\n"
       << "</head>\n<body>\n<main id=\"report\"></main>\n"
       << "<script>\n" << inline_safe(asset("common.js")) << "\n</script>\n"
       << "<script>\n" << inline_safe(asset(script)) << "\n</script>\n</body>\n</html>\n";
  return page.str();
}

}  // namespace fvi::report
