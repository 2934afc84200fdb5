#include "driver/report.h"

#include <filesystem>
#include <iostream>

#include "fvi/report/report_data.h"

namespace fvic::driver {

namespace fs = std::filesystem;

int report_command(const std::string& out, const std::optional<std::string>& output) {
  try {
    const std::string path = fvi::report::write_report(out, output ? *output : "");
    std::cout << "wrote " << path << " (" << (fs::file_size(path) + 1023) / 1024
              << " KiB; opens offline in a browser)\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fvic: " << e.what() << '\n';
    return 1;
  }
}

}  // namespace fvic::driver
