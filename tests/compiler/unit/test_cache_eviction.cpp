// fvic run's program cache keeps each model's most recently used entries (driver/cache_eviction.h).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "driver/cache_eviction.h"

namespace test_cache_eviction {

namespace fs = std::filesystem;

// A fresh directory under the system's temporary one, removed with the object.
struct ScratchDirectory {
  fs::path path = fs::temp_directory_path() / ("fvic-cache-test-" + std::to_string(getpid()));
  ScratchDirectory() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string hash(int i) {
  char text[17];
  std::snprintf(text, sizeof text, "%016x", 0xabc00 + i);
  return text;
}

// An entry whose last use was `age` hours ago.
fs::path make(const fs::path& at, const std::string& name, bool directory, int age) {
  const fs::path p = at / name;
  if (directory) {
    fs::create_directories(p);
    std::ofstream(p / "program") << "x";
  } else {
    std::ofstream(p) << "x";
  }
  fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(age));
  return p;
}

TEST_CASE("The program cache keeps each model's most recently used entries", "[cache]") {
  ScratchDirectory scratch;
  const fs::path& base = scratch.path;
  // 6 program directories and 5 kernels objects of model m, aged 1..6 and 1..5 hours; entries of
  // other models and names that are not entries, all older than any of m's.
  for (int i = 1; i <= 6; ++i) make(base, "m-" + hash(i), true, i);
  for (int i = 1; i <= 5; ++i) make(base, "m-kernels-" + hash(i) + ".o", false, i);
  const fs::path other = make(base, "m2-" + hash(1), true, 100);
  const fs::path other_kernels = make(base, "m2-kernels-" + hash(1) + ".o", false, 100);
  const fs::path short_hash = make(base, "m-abc", true, 100);
  const fs::path building = make(base, "m-" + hash(9) + ".building-12345", true, 100);
  const fs::path file_named_as_directory = make(base, "m-" + hash(8), false, 100);
  // The oldest program directory was just used again.
  fvic::driver::touch_cache_entry((base / ("m-" + hash(6))).string());

  CHECK(fvic::driver::evict_cache_entries(base.string(), "m", 3) == 3 + 2);
  // Kept: the 3 most recently used directories (the touched one, aged 1 and 2 hours) and the 3
  // newest kernels objects.
  for (int i : {6, 1, 2}) CHECK(fs::exists(base / ("m-" + hash(i))));
  for (int i : {3, 4, 5}) CHECK_FALSE(fs::exists(base / ("m-" + hash(i))));
  for (int i : {1, 2, 3}) CHECK(fs::exists(base / ("m-kernels-" + hash(i) + ".o")));
  for (int i : {4, 5}) CHECK_FALSE(fs::exists(base / ("m-kernels-" + hash(i) + ".o")));
  for (const fs::path& p : {other, other_kernels, short_hash, building, file_named_as_directory}) {
    INFO(p.filename().string());
    CHECK(fs::exists(p));
  }
  // Within the limit nothing goes; a missing cache is not an error.
  CHECK(fvic::driver::evict_cache_entries(base.string(), "m", 3) == 0);
  CHECK(fvic::driver::evict_cache_entries((base / "absent").string(), "m", 3) == 0);
  fvic::driver::touch_cache_entry((base / "absent").string());
}

}  // namespace test_cache_eviction
