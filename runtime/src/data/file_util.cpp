#include "file_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "fvi/data/dataset.h"

namespace fvi::data {

void require_regular_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw DataError(path + ": no such file");
  if (fs::is_directory(st)) throw DataError(path + ": is a directory, not a file");
  if (!fs::is_regular_file(st))
    throw DataError(path + ": is not a regular file (a FIFO, a device or a socket); copy the data into a file");
}

std::string read_whole_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require_regular_file(path);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw DataError(path + ": cannot be opened (" + std::strerror(errno) + ")");
  std::string out;
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec) out.reserve(static_cast<size_t>(size));
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) out.append(buf, n);
  if (std::ferror(f.get())) throw DataError(path + ": cannot be read (" + std::strerror(errno) + ")");
  return out;
}

}  // namespace fvi::data
