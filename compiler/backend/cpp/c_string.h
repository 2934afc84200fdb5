#pragma once
// A string as a C/C++ string literal, for the generated code.
#include <string>

namespace fvic::backend {

inline std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace fvic::backend
