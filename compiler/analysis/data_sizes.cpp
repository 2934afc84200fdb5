#include "analysis/data_sizes.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace fvic {

namespace fs = std::filesystem;

std::optional<long long> DataSizes::lookup(const std::string& name, int silo) const {
  if (silo >= 0 && silo < silo_count()) {
    auto it = silos[silo].find(name);
    if (it != silos[silo].end()) return it->second;
  }
  auto it = common.find(name);
  if (it != common.end()) return it->second;
  return std::nullopt;
}

namespace {

void read_ints(const fs::path& file, std::map<std::string, long long>& out) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot open '" + file.string() + "'");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw std::runtime_error(file.string() + ": expected a JSON object of variables");
  for (auto& [key, value] : j.items())
    if (value.is_number_integer()) out[key] = value.get<long long>();
}

}  // namespace

DataSizes read_data_sizes(const std::string& path) {
  DataSizes sizes;
  fs::path p(path);
  if (!fs::exists(p)) throw std::runtime_error("'" + path + "' does not exist");
  if (!fs::is_directory(p)) {
    read_ints(p, sizes.common);
    return sizes;
  }
  for (const char* name : {"data.json", "server.json"})
    if (fs::exists(p / name)) read_ints(p / name, sizes.common);
  for (int k = 1;; ++k) {
    fs::path silo = p / ("silo-" + std::to_string(k) + ".json");
    if (!fs::exists(silo)) break;
    sizes.silos.emplace_back();
    read_ints(silo, sizes.silos.back());
  }
  return sizes;
}

}  // namespace fvic
