#pragma once
// Command-line options of NAME-server and NAME-client: `--name value` pairs and flags, checked
// against the options the program knows (an unknown one is an error naming it).
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fvi::net {

struct Arguments {
  std::map<std::string, std::string> values;  // --name value (the last one given)
  std::vector<std::string> sets;              // every --set key=value, in order
  std::set<std::string> flags;                // --insecure, --resume, --quiet

  bool has(const std::string& name) const { return values.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // A number option; throws std::invalid_argument naming the option when it is not one.
  double number(const std::string& name, double fallback) const;
  bool flag(const std::string& name) const { return flags.count(name) > 0; }
};

// Parses argv[1..]; `valued` and `flag_names` are the known options (without "--"). Returns false
// with `error` set on an unknown option or a missing value.
bool parse_arguments(int argc, char** argv, const std::set<std::string>& valued, const std::set<std::string>& flag_names,
                     Arguments& out, std::string& error);

}  // namespace fvi::net
