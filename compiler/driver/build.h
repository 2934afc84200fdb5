#pragma once
// `fvic build` and `fvic run`: write the generated kernels and the program's main, compile them
// against the prebuilt runtime (libfvi), and run the simulation program.
#include <string>
#include <utility>
#include <vector>

namespace fvic::driver {

struct BuildRequest {
  std::string model;        // the model's name
  std::string method;       // the planned method key: pvi, sfvi, ...
  std::string kernels_cpp;  // fvic's generated kernels (backend/cpp/emit.h)
  std::vector<std::pair<std::string, std::string>> inference;  // the model's inference block
  std::string out_dir;
  // Embedded in the programs (fvi::program::ModelDescription) when not empty: fvic build's
  // server writes them into its OUT for `fvic report`. fvic run leaves them empty (they would
  // change the cache's key with every --set) and writes OUT/model.fvi and OUT/plan.json itself.
  std::string source, plan_json;
  bool verbose = true;
  bool networked = false;   // also NAME-server and NAME-client (fvic build; fvic run needs NAME-sim only)
  // When not empty: the compiled kernels are taken from this file if it is there, and left there
  // when they are compiled, so programs that differ in their main alone (another inference
  // block) compile the kernels once (fvic run: kernels_object_cache()).
  std::string kernels_object;
};

// Writes OUT/NAME_model.cpp and the programs' mains and compiles OUT/NAME-sim (and, when
// `networked`, OUT/NAME-server and OUT/NAME-client). Returns NAME-sim's path, or empty with
// `error` set (the compiler's output included).
std::string build_programs(const BuildRequest& request, std::string& error);

// The directory `fvic run` builds a model in: $FVIC_CACHE (or ~/.cache/fvic) / NAME-HASH, where
// the hash covers everything that goes into the program, so a changed model or runtime rebuilds.
std::string cache_directory(const BuildRequest& request);

// The file `fvic run` keeps a model's compiled kernels in, beside the cache directories: its hash
// covers the generated C++, the compiler and its flags and the runtime, not the inference block.
std::string kernels_object_cache(const BuildRequest& request);

// `fvic run`'s build: NAME-sim in request.out_dir (the cache directory), built unless it is there.
// The programs are built in a private sibling directory renamed into place when complete, so two
// runs of the same model at once (parallel tests, two terminals) neither see a half-written
// program nor overwrite one that is running; the second to finish keeps the first's.
std::string build_cached(const BuildRequest& request, std::string& error);

}  // namespace fvic::driver
