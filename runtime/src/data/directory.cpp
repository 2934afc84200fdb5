// The data directory of DESIGN.md §5: data.json, server.json, silo-1 ... silo-S, each as a .json
// file, a .csv file and/or a directory of .npy files.
#include <filesystem>
#include <map>

#include "fvi/data/readers.h"

namespace fvi::data {

namespace fs = std::filesystem;

namespace {

// K for an entry named silo-K, silo-K.json or silo-K.csv; 0 for any other name. Throws for a
// number spelt with a leading zero, 0 or too many digits.
int silo_number(const std::string& dir, const std::string& name) {
  if (name.rfind("silo-", 0) != 0) return 0;
  std::string rest = name.substr(5);
  for (const char* ext : {".json", ".csv"}) {
    const std::string e = ext;
    if (rest.size() > e.size() && rest.compare(rest.size() - e.size(), e.size(), e) == 0) {
      rest.resize(rest.size() - e.size());
      break;
    }
  }
  if (rest.empty()) return 0;
  for (char c : rest)
    if (c < '0' || c > '9') return 0;
  if (rest[0] == '0' || rest.size() > 6)
    throw DataError((fs::path(dir) / name).string() + ": silos are numbered 1, 2, ..., S (no leading zeros)");
  return std::stoi(rest);
}

std::string path_in(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

}  // namespace

DataSet load_party(const std::string& dir, const std::string& stem) {
  DataSet out;
  for (const char* ext : {".json", ".csv"}) {
    const std::string path = path_in(dir, stem + ext);
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    out.absorb(std::string(ext) == ".json" ? read_json(path) : read_csv(path));
  }
  const std::string npy = path_in(dir, stem);
  std::error_code ec;
  if (fs::exists(npy, ec)) {
    if (!fs::is_directory(npy, ec))
      throw DataError(npy + ": expected a directory of .npy files (or name the file " + stem + ".json or " + stem +
                      ".csv)");
    out.absorb(read_npy_directory(npy + "/"));
  }
  out.expect_file(path_in(dir, stem + ".json"));
  return out;
}

int count_silos(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw DataError(dir + ": no such data directory");
  if (!fs::is_directory(dir, ec)) throw DataError(dir + ": not a directory (--data names the data directory)");
  std::map<int, std::string> silos;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (int k = silo_number(dir, name)) silos.emplace(k, name);
  }
  if (ec) throw DataError(dir + ": cannot be listed (" + ec.message() + ")");
  if (silos.empty())
    throw DataError(path_in(dir, "silo-1.json") +
                    ": not found; a data directory holds each silo's data as silo-1.json, silo-2.json, ... (or .csv "
                    "files, or directories silo-1/ of .npy files)");
  const int last = silos.rbegin()->first;
  for (int k = 1; k <= last; ++k) {
    if (silos.count(k)) continue;
    std::string found;
    for (const auto& [n, name] : silos) found += (found.empty() ? "" : ", ") + name;
    throw DataError(path_in(dir, "silo-" + std::to_string(k)) + " is missing: found " + found +
                    "; silos are numbered 1 to S without a gap");
  }
  return last;
}

DataDirectory load_data_directory(const std::string& dir) {
  DataDirectory d;
  d.dir = dir;
  const int S = count_silos(dir);
  d.public_data = load_party(dir, "data");
  d.server = load_party(dir, "server");
  for (int k = 1; k <= S; ++k) d.silos.push_back(load_party(dir, "silo-" + std::to_string(k)));
  return d;
}

DataDirectory load_pooled_data(const std::string& path) {
  DataDirectory d;
  d.dir = path;
  std::error_code ec;
  const fs::path p(path);
  if (!fs::exists(p, ec)) throw DataError(path + ": no such data file or directory");
  if (fs::is_directory(p, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(p, ec))
      if (silo_number(path, e.path().filename().string()))
        throw DataError(path_in(path, e.path().filename().string()) +
                        ": the model declares no silo data, so it is fitted pooled from data.json; declare the "
                        "silos' rows in a `silo data` block to federate it, or remove the silo files");
    d.public_data = load_party(path, "data");
    d.server = load_party(path, "server");
  } else {
    const std::string ext = p.extension().string();
    if (ext != ".json" && ext != ".csv")
      throw DataError(path + ": a pooled model's data is a data directory, a .json file or a .csv file");
    d.public_data = load_party(p.has_parent_path() ? p.parent_path().string() : ".", p.stem().string());
  }
  d.silos.emplace_back();
  return d;
}

DataSet load_test_data(const std::string& path) {
  std::error_code ec;
  fs::path p(path);
  if (!fs::exists(p, ec)) throw DataError(path + ": no such file or directory (--test)");
  if (fs::is_directory(p, ec)) {
    if (!p.has_filename()) p = p.parent_path();  // "test/" -> "test"
    return load_party(p.parent_path().string(), p.filename().string());
  }
  const std::string ext = p.extension().string();
  if (ext != ".json" && ext != ".csv")
    throw DataError(path + ": held-out data must be a .json or .csv file or a directory of .npy files");
  return load_party(p.parent_path().string(), p.stem().string());
}

}  // namespace fvi::data
