// Benchmark: how long `fvic check` takes on each acceptance model (issue 2: under 50 ms).
//
// Runs the real binary as a user would, N times per model, and reports the median and the
// worst wall time. The machine's own floor is measured in the same run: `fvic --version`
// (process start, dynamic loading, no parsing), so what the front end itself costs is the
// difference.
//
//   check_latency FVIC MODEL.fvi... [--runs N]
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace {

double run_ms(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", 0x1 /*O_WRONLY*/, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", 0x1, 0);
  auto start = std::chrono::steady_clock::now();
  pid_t pid;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    std::exit(2);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  auto end = std::chrono::steady_clock::now();
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s %s failed (status %d)\n", argv[0].c_str(), argv.back().c_str(), status);
    std::exit(2);
  }
  return std::chrono::duration<double, std::milli>(end - start).count();
}

struct Stats {
  double median, worst;
};

Stats measure(const std::vector<std::string>& argv, int runs) {
  std::vector<double> t;
  run_ms(argv);  // warm the page cache
  for (int i = 0; i < runs; ++i) t.push_back(run_ms(argv));
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.back()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: check_latency FVIC MODEL.fvi... [--runs N]\n");
    return 2;
  }
  std::string fvic = argv[1];
  int runs = 21;
  std::vector<std::string> models;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::atoi(argv[++i]);
    else models.push_back(a);
  }
  Stats floor = measure({fvic, "--version"}, runs);
  std::printf("fvic check latency, %d runs each (target: under 50 ms per model)\n", runs);
  std::printf("machine floor (fvic --version, no parsing): median %.1f ms, worst %.1f ms\n\n",
              floor.median, floor.worst);
  std::printf("%-28s %10s %10s %12s  %s\n", "model", "median ms", "worst ms", "above floor", "target");
  bool all_ok = true;
  for (const std::string& m : models) {
    Stats s = measure({fvic, "check", m}, runs);
    bool ok = s.worst < 50.0;
    all_ok &= ok;
    std::string name = m.substr(m.find_last_of('/') + 1);
    std::printf("%-28s %10.1f %10.1f %12.1f  %s\n", name.c_str(), s.median, s.worst,
                s.median - floor.median, ok ? "met" : "MISSED");
  }
  std::printf("\n%s\n", all_ok ? "all models under 50 ms" : "some models over 50 ms");
  return 0;
}
