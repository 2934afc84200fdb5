#include "fvi/net/arguments.h"

#include <cmath>
#include <stdexcept>

namespace fvi::net {

std::string Arguments::get(const std::string& name, const std::string& fallback) const {
  const auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

double Arguments::number(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string& text = values.at(name);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(v) || v < 0)
    throw std::invalid_argument("--" + name + " " + text + ": expected a number >= 0");
  return v;
}

bool parse_arguments(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& flag_names,
                     Arguments& out, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      error = "unexpected argument '" + arg + "'";
      return false;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) value = name.substr(eq + 1), name = name.substr(0, eq);
    if (flag_names.count(name) && !inline_value) {
      out.flags.insert(name);
      continue;
    }
    if (!valued.count(name) && name != "set") {
      error = "unknown option '--" + name + "'";
      return false;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        error = "--" + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (name == "set") out.sets.push_back(value);
    else out.values[name] = value;
  }
  return true;
}

}  // namespace fvi::net
