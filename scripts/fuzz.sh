#!/usr/bin/env bash
# Fuzzes one target with AFL++ for SECONDS (default 600), then keeps, in the target's corpus
# folder (which the test suite replays), the inputs that reach new coverage:
#   scripts/fuzz.sh [frontend|data|server] [SECONDS]
#     frontend  the parser, checker and planner (tests/fuzz/fuzz_frontend.cpp -> corpus/)
#     data      the JSON, CSV and .npy readers and the validator (fuzz_data.cpp -> data_corpus/)
#     server    the server's message handling (fuzz_server.cpp -> server_corpus/)
# Installs afl++ and clang from Debian's archive if they are missing; builds into build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
target=frontend
if [ $# -gt 0 ] && [[ ! "$1" =~ ^[0-9]+$ ]]; then target=$1; shift; fi
seconds=${1:-600}
case "$target" in
  frontend) corpus=tests/fuzz/corpus ;;
  data) corpus=tests/fuzz/data_corpus ;;
  server) corpus=tests/fuzz/server_corpus ;;
  *) echo "usage: scripts/fuzz.sh [frontend|data|server] [SECONDS]" >&2; exit 2 ;;
esac
scripts/install-packages.sh afl++ clang
binary=build-fuzz/bin/fuzz_$target
if [ ! -f build-fuzz/build.ninja ]; then
  CC=afl-clang-fast CXX=afl-clang-fast++ cmake -S . -B build-fuzz -G Ninja -DFVIC_BUILD_FUZZ=ON -DFVIC_BUILD_TESTS=OFF \
    -DFVIC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
ninja -C build-fuzz "fuzz_$target"
seeds=$(mktemp -d)
if [ "$target" = frontend ]; then
  cp examples/acceptance/*.fvi tests/compiler/good/*.fvi tests/compiler/bad/*.fvi "$seeds"/ 2>/dev/null || true
fi
find "$corpus" -type f -exec cp {} "$seeds"/ \;
out=build-fuzz/afl-$target
rm -rf "$out"
AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
  timeout --preserve-status "$seconds" afl-fuzz -i "$seeds" -o "$out" -m none -t 2000 \
  -- "$binary" > "build-fuzz/afl-$target.log" 2>&1 || true
tail -n 20 "build-fuzz/afl-$target.log"
crashes=$(find "$out"/default/crashes "$out"/default/hangs -type f ! -name README.txt 2>/dev/null | wc -l)
new=0
for f in "$out"/default/queue/id:*; do
  [ -f "$f" ] || continue
  case "$f" in *orig:*) continue;; esac
  cp "$f" "$corpus/$(sha1sum "$f" | cut -c1-16)"
  new=$((new + 1))
done
# Keep the corpus small: only inputs that reach new coverage (crash regressions stay by name).
rm -rf build-fuzz/cmin
AFL_SKIP_CPUFREQ=1 afl-cmin -i "$corpus" -o build-fuzz/cmin -m none -t 2000 -- "$binary" > build-fuzz/cmin.log 2>&1
find "$corpus" -type f ! -name 'crash-*' ! -name 'utf8-*' -delete
cp -n build-fuzz/cmin/* "$corpus"/  # -n: the kept crash-* and utf8-* inputs are hard links of their own
echo "fuzz $target: $new new inputs, corpus now $(ls "$corpus" | wc -l) files; $crashes crashes or hangs (in $out/default/{crashes,hangs})"
[ "$crashes" -eq 0 ]
