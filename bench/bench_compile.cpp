// Benchmark (issue 3): compiling the emitted C++ of a model against the prebuilt runtime, as a
// generated program's build does (target for bnn_classifier.fvi: under 20 s on 2 cores). The
// machine's floor, measured in the same run, is compiling a file that only includes the header
// generated code includes (fvi/kernel/instances.h: Eigen and the kernel declarations).
//
//   bench_compile GENERATED.cpp WORKDIR COMPILER FLAGS...
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"

extern char** environ;

namespace {

double compile_seconds(std::vector<std::string> argv, const std::string& source, const std::string& object) {
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int status = 0;
  double t = bench::seconds([&] {
    pid_t pid;
    if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0 || waitpid(pid, &status, 0) < 0)
      status = -1;
  });
  if (status != 0) {
    std::fprintf(stderr, "compiling %s failed\n", source.c_str());
    std::exit(1);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: bench_compile GENERATED.cpp WORKDIR COMPILER FLAGS...\n");
    return 2;
  }
  std::string generated = argv[1], dir = argv[2];
  std::vector<std::string> command(argv + 3, argv + argc);
  std::string floor_source = dir + "/floor.cpp";
  std::ofstream(floor_source) << "#include \"fvi/kernel/instances.h\"\nint fvi_floor() { return 0; }\n";
  double floor = compile_seconds(command, floor_source, dir + "/floor.o");
  double t = compile_seconds(command, generated, dir + "/generated.o");
  std::printf("compiling %s: %.1f s (target < 20 s); machine floor (the included headers alone) %.1f s\n",
              generated.c_str(), t, floor);
  return 0;
}
