#pragma once
// The integer values a plan needs to turn symbolic sizes into bytes: read from a data
// directory (data.json, server.json, silo-1.json ...) or from one JSON file of public sizes.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fvic {

struct DataSizes {
  std::map<std::string, long long> common;             // data.json and server.json ints
  std::vector<std::map<std::string, long long>> silos;  // silo-K.json ints, K = 1..S

  int silo_count() const { return static_cast<int>(silos.size()); }
  // The value of `name` as silo `silo` (0-based) sees it; common values when silo < 0.
  std::optional<long long> lookup(const std::string& name, int silo) const;
};

// Reads sizes from `path` (a directory or a .json file). Throws std::runtime_error with a
// message naming the file and what is wrong.
DataSizes read_data_sizes(const std::string& path);

}  // namespace fvic
