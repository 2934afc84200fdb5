#include "frontend/source.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fvic {

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

SourceFile SourceFile::read(const std::string& path) {
  // A directory opens as an empty stream, a FIFO blocks and /dev/zero never ends: say which.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st))
    throw std::runtime_error("'" + path + "' is a directory, not a .fvi file");
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    throw std::runtime_error("'" + path + "' is not a regular file (a FIFO, a device or a socket)");
  // Lines, columns and the code generator's tables count in int: a model is held far below 2^31
  // bytes. Stan's largest programs are some hundred kilobytes.
  if (!ec && std::filesystem::is_regular_file(st)) {
    const std::uintmax_t bytes = std::filesystem::file_size(path, ec);
    if (!ec && bytes > kMaxSourceBytes)
      throw std::runtime_error("'" + path + "' holds " + std::to_string(bytes >> 20) + " MiB; a model file is at most " +
                               std::to_string(kMaxSourceBytes >> 20) + " MiB (is it a data file?)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return SourceFile(path, buffer.str());
}

std::string SourceFile::line(int line) const {
  if (line < 1 || static_cast<size_t>(line) > line_starts_.size()) return "";
  size_t begin = line_starts_[line - 1];
  size_t end = text_.find('\n', begin);
  if (end == std::string::npos) end = text_.size();
  std::string s = text_.substr(begin, end - begin);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

Loc SourceFile::span(const Loc& from, const Loc& to) const {
  Loc out = from;
  if (to.line == from.line && to.col + to.length > from.col)
    out.length = to.col + to.length - from.col;
  else if (to.line != from.line)
    out.length = std::max<int>(1, static_cast<int>(line(from.line).size()) - from.col + 1);
  return out;
}

}  // namespace fvic
