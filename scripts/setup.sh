#!/usr/bin/env bash
# Sets up a Debian 12 machine for fvic and builds it (Release) into build/.
# Idempotent: installs only the Debian packages that are missing, then configures and builds.
# Needs root or sudo for the install step. Usage: scripts/setup.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  g++ cmake ninja-build                  # toolchain
  antlr4 default-jre-headless            # the parser generator (runs on Java)
  libantlr4-runtime-dev                  # ANTLR's C++ runtime
  libeigen3-dev libopenblas-dev          # linear algebra for the runtime and generated kernels
  llvm-15-dev                            # the LLVM backend: fused loops compiled by ORC's JIT
  nlohmann-json3-dev                     # data, plan and output files
  libgrpc++-dev libprotobuf-dev          # NAME-server and NAME-client: gRPC over TLS
  protobuf-compiler protobuf-compiler-grpc pkg-config
  openssl                                # test and demo certificates
  catch2                                 # unit tests
  python3                                # the examples' data generators and their tests (stdlib only)
  # datasets for the examples
  dataset-fashion-mnist                  # FashionMNIST idx files for examples/fashion_bnn
)

# npm, for fvic report's charting library: Debian's, unless the machine's Node.js brings its own
# (Debian's npm package conflicts with NodeSource's nodejs, which includes npm).
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
scripts/install-packages.sh "${packages[@]}"

# fvic report inlines Vega, Vega-Lite and vega-embed into its pages: the versions pinned in
# report/package.json and report/package-lock.json, from the npm registry, into report/node_modules.
if ! cmp -s report/package-lock.json report/node_modules/.fvic-installed 2>/dev/null; then
  (cd report && npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.fvic-installed)
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs"
echo "setup: built fvic into build/bin"
