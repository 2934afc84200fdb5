#!/usr/bin/env bash
# An acceptance model must pass `fvic check` with no output, and `fvic plan --json` must choose
# the method its header comment names (`// method: NAME`, written by the model's author).
set -u
fvic=$1 file=$2
want=$(sed -n 's|^// method: *\([a-z_]*\).*|\1|p' "$file" | head -1)
[ -n "$want" ] || { echo "FAIL: $file has no '// method:' header"; exit 1; }
out=$("$fvic" check "$file" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -z "$out" ] || { echo "FAIL: fvic check $file (exit $rc):"; echo "$out"; exit 1; }
got=$("$fvic" plan --json "$file" | sed -n 's|^  "method": "\([a-z_]*\)".*|\1|p')
[ "$got" = "$want" ] || { echo "FAIL: plan chose '$got', the header says '$want'"; exit 1; }
echo "$file: $got"
