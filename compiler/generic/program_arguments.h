#pragma once
// The command line of a generic program: `PROGRAM MODEL.fvi [the runtime program's options]`.
#include <string>
#include <vector>

namespace fvic::generic {

struct ProgramArguments {
  std::string model;               // the .fvi file
  std::vector<std::string> rest;   // argv for the runtime's main: the program's name, then the options
  std::vector<char*> argv() {
    std::vector<char*> out;
    for (std::string& a : rest) out.push_back(a.data());
    out.push_back(nullptr);
    return out;
  }
};

// Splits argv; false (with `error`) when no model file comes first.
inline bool split_arguments(int argc, char** argv, const std::string& program, ProgramArguments& out,
                            std::string& error) {
  if (argc < 2 || argv[1][0] == '-') {
    error = "usage: " + program + " MODEL.fvi [options]   (" + program + " MODEL.fvi --help lists the options)";
    return false;
  }
  out.model = argv[1];
  out.rest = {program};
  for (int i = 2; i < argc; ++i) out.rest.push_back(argv[i]);
  return true;
}

}  // namespace fvic::generic
