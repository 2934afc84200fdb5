#include "driver/cache_eviction.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

namespace fvic::driver {

namespace fs = std::filesystem;

namespace {

bool hex16(const std::string& s, size_t at) {
  if (s.size() < at + 16) return false;
  return std::all_of(s.begin() + long(at), s.begin() + long(at + 16),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

void touch_cache_entry(const std::string& path) {
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);
}

size_t evict_cache_entries(const std::string& base, const std::string& model, size_t keep) {
  using Entry = std::pair<fs::file_time_type, fs::path>;
  std::vector<Entry> programs, kernels;
  const std::string prefix = model + "-", kernels_prefix = model + "-kernels-";
  std::error_code ec;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code ignored;
    const fs::file_time_type time = fs::last_write_time(it->path(), ignored);
    if (ignored) continue;
    // NAME-HASH (a directory) or NAME-kernels-HASH.o (a file), HASH 16 lowercase hex digits.
    if (name.size() == prefix.size() + 16 && name.compare(0, prefix.size(), prefix) == 0 && hex16(name, prefix.size()) &&
        it->is_directory(ignored))
      programs.emplace_back(time, it->path());
    else if (name.size() == kernels_prefix.size() + 18 && name.compare(0, kernels_prefix.size(), kernels_prefix) == 0 &&
             hex16(name, kernels_prefix.size()) && name.compare(name.size() - 2, 2, ".o") == 0 &&
             it->is_regular_file(ignored))
      kernels.emplace_back(time, it->path());
  }
  size_t removed = 0;
  for (std::vector<Entry>* entries : {&programs, &kernels}) {
    if (entries->size() <= keep) continue;
    std::sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) { return a.first > b.first; });
    for (size_t i = keep; i < entries->size(); ++i) {
      std::error_code ignored;
      if (fs::remove_all((*entries)[i].second, ignored) > 0 && !ignored) ++removed;
    }
  }
  return removed;
}

}  // namespace fvic::driver
