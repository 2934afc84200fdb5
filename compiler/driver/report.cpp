#include "driver/report.h"

#include <filesystem>
#include <fstream>
#include <iostream>

#include "driver/report_data.h"
#include "fvi/report/html_page.h"

namespace fvic::driver {

namespace fs = std::filesystem;

int report_command(const std::string& out, const std::optional<std::string>& output) {
  try {
    const nlohmann::ordered_json data = collect_report_data(out);
    std::string title = "fvic report";
    if (data.contains("run") && data["run"].contains("model")) title = data["run"]["model"].get<std::string>() + ": " + title;
    const std::string page = fvi::report::html_page(title, data.dump(), "page.js");
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
