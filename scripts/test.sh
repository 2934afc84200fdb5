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
# with g++, in build-asan (FVIC_SANITIZE in CMakeLists.txt). -O0 -g1: line tables only, so stack
# traces name file:line; -O0 compiles the sanitized compiler in about half -O1's time (lower.cpp
# 16 s against 56 s) and its tests take seconds either way. No NDEBUG, so Eigen's index checks
# are on too. Only the tests labelled exactly "asan" are built and run (ctest -L takes a regular
# expression, hence the anchors: "asan-runtime" must not match): compiler_tests and the fuzz
# corpora of the front end, the data readers and the server's message handling, linked against
# the part of the runtime they use (runtime/CMakeLists.txt: fvi_runtime_subset), not all of
# libfvi. On 2 cores the whole runtime under ASan + UBSan -O1 took over half an hour before
# runtime_tests compiled (44 of its 219 steps in 15 minutes), so runtime_tests is left out;
# tests/CMakeLists.txt says how to run it there by hand.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1" \
      -DFVIC_SANITIZE=ON -DFVIC_BUILD_BENCH=OFF
cmake --build build-asan -j "$jobs" --target asan_tests
ctest --test-dir build-asan -L '^asan$' --output-on-failure -j "$jobs"
