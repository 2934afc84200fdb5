#pragma once
// `fvic run`'s program cache ($FVIC_CACHE or ~/.cache/fvic) gains an entry with every edit of a
// model and every update of fvic or its runtime, since each changes the entry's hash; nothing
// else removes them (some 4-10 MB each). So each model keeps its most recently used entries
// only: the programs' directories (NAME-HASH) and the kept kernels objects (NAME-kernels-HASH.o)
// counted apart. A used entry is touched, so "recently used" is its write time.
#include <cstddef>
#include <string>

namespace fvic::driver {

// How many directories, and how many kernels objects, each model keeps: above what one run of
// the test suite builds of one model name (7 at most, each inference block its own program).
constexpr size_t kCacheEntriesPerModel = 16;

// Marks a cache entry as used now (its write time); a missing entry is not an error.
void touch_cache_entry(const std::string& path);

// Removes all but the `keep` most recently used of `model`'s directories in `base`, and likewise
// its kernels objects; other models' entries, and anything not named as an entry, are left.
// Returns how many were removed. A program already running from a removed directory runs on
// (the file stays until it exits); a run that wants it again compiles it again.
size_t evict_cache_entries(const std::string& base, const std::string& model, size_t keep);

}  // namespace fvic::driver
