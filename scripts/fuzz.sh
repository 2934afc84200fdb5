#!/usr/bin/env bash
# Fuzzes the front end (parser, checker, planner) with AFL++ for SECONDS (default 600), then
# copies the queue's new inputs into tests/fuzz/corpus, where the test suite replays them.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
if [ ! -x build-fuzz/bin/fuzz_frontend ]; then
  CC=afl-clang-fast CXX=afl-clang-fast++ cmake -S . -B build-fuzz -G Ninja -DFVIC_BUILD_FUZZ=ON -DFVIC_BUILD_TESTS=OFF \
    -DFVIC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
  ninja -C build-fuzz fuzz_frontend
fi
seeds=$(mktemp -d)
cp examples/acceptance/*.fvi tests/compiler/good/*.fvi tests/compiler/bad/*.fvi "$seeds"/ 2>/dev/null || true
find tests/fuzz/corpus -type f -exec cp {} "$seeds"/ \;
out=build-fuzz/afl-out
rm -rf "$out"
AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
  timeout --preserve-status "$seconds" afl-fuzz -i "$seeds" -o "$out" -m none -t 2000 \
  -- build-fuzz/bin/fuzz_frontend > build-fuzz/afl.log 2>&1 || true
tail -n 20 build-fuzz/afl.log
crashes=$(find "$out"/default/crashes "$out"/default/hangs -type f ! -name README.txt 2>/dev/null | wc -l)
new=0
for f in "$out"/default/queue/id:*; do
  [ -f "$f" ] || continue
  case "$f" in *orig:*) continue;; esac
  cp "$f" "tests/fuzz/corpus/$(sha1sum "$f" | cut -c1-16)"
  new=$((new + 1))
done
# Keep the corpus small: only inputs that reach new coverage (crash regressions stay by name).
rm -rf build-fuzz/cmin
AFL_SKIP_CPUFREQ=1 afl-cmin -i tests/fuzz/corpus -o build-fuzz/cmin -m none -t 2000 -- build-fuzz/bin/fuzz_frontend > build-fuzz/cmin.log 2>&1
find tests/fuzz/corpus -type f ! -name 'crash-*' ! -name 'utf8-*' -delete
cp build-fuzz/cmin/* tests/fuzz/corpus/
echo "fuzz: $new new inputs, corpus now $(ls tests/fuzz/corpus | wc -l) files; $crashes crashes or hangs (in $out/default/{crashes,hangs})"
[ "$crashes" -eq 0 ]
