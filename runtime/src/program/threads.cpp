#include "fvi/program/threads.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

// OpenBLAS's thread count (weak: absent when another BLAS is linked).
extern "C" __attribute__((weak)) void openblas_set_num_threads(int);

namespace fvi::program {

int machine_threads() {
  if (const char* s = std::getenv("FVI_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(s, &end, 10);
    if (end != s && *end == '\0' && n > 0 && n <= 4096) return int(n);
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

int threads_per_silo(int silos) { return std::max(1, machine_threads() / std::max(1, silos)); }

void set_blas_threads(int threads) {
  if (openblas_set_num_threads && !std::getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(std::max(1, threads));
}

}  // namespace fvi::program
