#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (unit, golden, acceptance, fuzz-corpus replay, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# The e2e.r.* tests read draws.csv in R (rstan, posterior, loo). Only the tests need R, so it is
# installed here, not by setup.sh; without it those tests are skipped.
scripts/install-packages.sh r-base-core r-cran-rstan r-cran-posterior r-cran-loo
# e2e.report.* open fvic report's pages in headless Chromium (tests/e2e/check_report.py).
scripts/install-packages.sh chromium

jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j "$jobs"

# The sanitizer build (issue 27): AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer)
# with g++, in build-asan (FVIC_SANITIZE in CMakeLists.txt). -O1 -g1 (line tables only: stack
# traces name file:line) and no NDEBUG, so Eigen's index checks are on too. Only the tests
# labelled "asan" are built and run (tests/CMakeLists.txt: compiler_tests, runtime_tests and the
# fuzz corpora through fuzz_replay, fuzz_data_replay and fuzz_server_replay; not the gRPC
# programs or the e2e tests). Measured on 2 idle cores, `time ninja -C build-asan TARGET` one
# after the other: fuzz_data_replay 290 s (libfvi with it), fuzz_replay 81 s (the parser and
# front end), compiler_tests 40 s, runtime_tests 510 s, fuzz_server_replay 28 s (libfvi_net):
# about 16 min; running them 5-10 s. With the Release build and ctest (about 27 min) CI's whole
# run is about 43 min.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DFVIC_SANITIZE=ON -DFVIC_BUILD_BENCH=OFF
cmake --build build-asan -j "$jobs" --target asan_tests
ctest --test-dir build-asan -L asan --output-on-failure -j "$jobs"
