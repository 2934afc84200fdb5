#pragma once
// How a generated program's process allocates memory (NAME-sim, NAME-server, NAME-client, `fvic
// run` and the benchmarks call this first thing in main). Linking it also replaces the process's
// `new`: every block on 32 bytes, so that a run repeats bit for bit (allocator.cpp says why).

namespace fvi::program {

// Serve blocks up to 32 MB from the heap and keep freed memory for reuse. glibc's default maps
// every block above 128 kB afresh and unmaps it when freed, so each optimiser step of a network
// paid page faults and the kernel's zeroing of every temporary the size of its parameters (a
// third of a FashionMNIST client's time in `perf`, 2026-11-22/23). The cost: the process keeps
// its peak heap instead of returning it to the system between steps.
void keep_freed_memory();

}  // namespace fvi::program
