#pragma once
// The command line of a generic program: `PROGRAM MODEL.fvi [the runtime program's options]`.
#include <string>
#include <vector>

namespace fvic::generic {

struct ProgramArguments {
  std::string model;               // the .fvi file
  bool jit = true;                 // --backend llvm (the default) or graph: chains compiled or interpreted
  std::vector<std::string> rest;   // argv for the runtime's main: the program's name, then the options
  std::vector<char*> argv() {
    std::vector<char*> out;
    for (std::string& a : rest) out.push_back(a.data());
    out.push_back(nullptr);
    return out;
  }
};

// Splits argv, taking `--backend llvm|graph` for itself; false (with `error`) when no model file
// comes first or the backend is another.
inline bool split_arguments(int argc, char** argv, const std::string& program, ProgramArguments& out,
                            std::string& error) {
  if (argc < 2 || argv[1][0] == '-') {
    error = "usage: " + program + " MODEL.fvi [options]   (" + program + " MODEL.fvi --help lists the options)";
    return false;
  }
  out.model = argv[1];
  out.rest = {program};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "--backend") {
      out.rest.push_back(a);
      continue;
    }
    const std::string value = i + 1 < argc ? argv[++i] : "";
    if (value != "llvm" && value != "graph") {
      error = program + ": --backend is llvm or graph, not '" + value + "'";
      return false;
    }
    out.jit = value == "llvm";
  }
  return true;
}

}  // namespace fvic::generic
