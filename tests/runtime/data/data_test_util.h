#pragma once
// Helpers for the data tests: a temporary directory removed at the end of the test, files
// written into it, and .npy files built byte by byte (numpy.lib.format) from the test's values.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "fvi/data/dataset.h"

namespace fvi_test {

// The message of the fvi::data::DataError that `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const fvi::data::DataError& e) {
    return e.what();
  }
  return "";
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("fvi-data-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  // Writes `bytes` to `name` (creating its directory) and returns the path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

// A .npy file: the header numpy writes (padded so the data starts at a multiple of 64), then
// `data` as given. `version` 1, 2 or 3.
inline std::string npy_bytes(const std::string& descr, bool fortran, const std::vector<int64_t>& shape,
                             const std::string& data, int version = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";  // (), (5,), (3, 4)
  const size_t prefix = version == 1 ? 10 : 12;
  size_t total = prefix + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict += std::string(total - prefix - dict.size() - 1, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (version != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  return out + dict + data;
}

// The raw little-endian bytes of `values` as T (the test machine is little-endian, as .npy is).
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace fvi_test
