#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (unit, golden, acceptance, fuzz-corpus replay).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"
