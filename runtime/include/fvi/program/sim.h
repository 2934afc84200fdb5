#pragma once
// NAME-sim: the server and every silo of a model in one process (silos on threads, messages over
// an in-process transport that counts their bytes), as `fvic run` and `fvic build` produce it.
//   NAME-sim --data DIR --output OUT [--set key=value]... [--test FILE] [--quiet]
#include <string>
#include <utility>
#include <vector>

#include "fvi/data/readers.h"
#include "fvi/kernel/abi.h"

namespace fvi::program {

// What fvic knows of the model beyond its kernels: the planned method and the inference block.
struct ModelDescription {
  const char* name;
  const char* method;  // pvi, sfvi, ...
  std::vector<std::pair<std::string, std::string>> inference;
  // The model's text and its plan as `fvic plan --json` prints it, embedded by `fvic build` so a
  // deployed server's OUT has them for `fvic report`; null in the programs `fvic run` caches (it
  // writes both into OUT itself, the plan with the data's sizes).
  const char* source = nullptr;
  const char* plan_json = nullptr;
};

struct SimArguments {
  std::string data, output, test, ood;
  std::vector<std::string> overrides;
  bool quiet = false;
};

// Parses argv; on a usage error returns false with `error` set.
bool parse_sim_arguments(int argc, char** argv, SimArguments& args, std::string& error);

int run_sim(const fvi_model& model, const ModelDescription& description, int argc, char** argv);

// A data directory (--data, or a vertical model's --test) read and checked against the model's
// declarations before any inference; throws DataError naming the file and variable, or that
// there is no silo.
data::DataDirectory load_run_data(const fvi_model& model, const std::string& dir);

}  // namespace fvi::program
