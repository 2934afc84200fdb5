#pragma once
// How a generated program shares the machine's cores (NAME-sim, NAME-client and the benchmarks).
// A silo's client splits each minibatch's rows between its threads (fvi/engine/row_parallel.h),
// each thread running its own matrix products; the simulation runs its silos side by side.

namespace fvi::program {

// The threads this process may use: FVI_THREADS when set to a positive integer, else the cores.
int machine_threads();

// Threads for each of `silos` silos that run side by side in this process (at least 1).
int threads_per_silo(int silos);

// How many threads OpenBLAS runs each product on. 1 where our own threads already occupy the
// cores: OpenBLAS's workers would compete with them, spinning between products (bench/README.md).
// OPENBLAS_NUM_THREADS, when set, wins. Nothing happens when the BLAS is not OpenBLAS.
void set_blas_threads(int threads);

}  // namespace fvi::program
