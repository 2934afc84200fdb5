#pragma once
// Reading a whole data file, with a message naming it when it cannot be read.
#include <string>

namespace fvi::data {

// The file's bytes. Throws DataError when `path` is missing, is a directory, or cannot be read.
std::string read_whole_file(const std::string& path);

}  // namespace fvi::data
