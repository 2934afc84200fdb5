#pragma once
// A source file held in memory, and a location inside it. Every AST node carries a Loc so a
// diagnostic can print the line and a caret under the offending text.
#include <cstdint>
#include <string>
#include <vector>

namespace fvic {

struct Loc {
  int line = 0;    // 1-based; 0 means "no location"
  int col = 0;     // 1-based column of the first character
  int length = 1;  // characters to underline
};

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);
  // Throws std::runtime_error if unreadable, or larger than kMaxSourceBytes.
  static SourceFile read(const std::string& path);
  static constexpr std::uintmax_t kMaxSourceBytes = std::uintmax_t(16) << 20;

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  // The text of line `line` (1-based) without its newline; empty if out of range.
  std::string line(int line) const;
  // The span of source text covered by [from, to], for locs on one line; else from's line rest.
  Loc span(const Loc& from, const Loc& to) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<size_t> line_starts_;
};

}  // namespace fvic
