#pragma once
// Reading a whole data file, with a message naming it when it cannot be read.
#include <string>

namespace fvi::data {

// Throws DataError naming `path` unless it is a regular file (or a link to one): opening a FIFO
// blocks for ever, and /dev/zero never ends (issue 27 item 12).
void require_regular_file(const std::string& path);

// The file's bytes. Throws DataError when `path` is missing, is not a regular file, or cannot be
// read.
std::string read_whole_file(const std::string& path);

}  // namespace fvi::data
