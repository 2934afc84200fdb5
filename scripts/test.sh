#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (unit, golden, acceptance, fuzz-corpus replay, e2e).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# The e2e.r.* tests read draws.csv in R (rstan, posterior, loo). Only the tests need R, so it is
# installed here, not by setup.sh; without it those tests are skipped.
scripts/install-packages.sh r-base-core r-cran-rstan r-cran-posterior r-cran-loo

ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
