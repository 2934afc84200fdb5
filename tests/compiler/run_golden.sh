#!/usr/bin/env bash
# Golden test of one program (stanc3-style): runs fvic on FILE and compares with the expected
# output checked in beside it. Used by CTest, one test per file.
#
#   run_golden.sh FVIC good FILE   fvic check passes silently; FILE.ast / FILE.plan / FILE.ir (if
#                                  present) equal `fvic dump --ast` / `fvic plan` / `fvic dump --ir`.
#                                  A program the language takes but the code generator does not
#                                  yet has FILE.check: fvic check's errors, each "not supported by
#                                  the code generator yet" (delete it when the generator takes it)
#   run_golden.sh FVIC bad FILE    fvic check fails (exit 1); its stderr equals FILE.expected, and
#                                  every `// expect: LINE:COL: TEXT` comment in FILE appears in it
#
# FVIC_UPDATE_GOLDEN=1 rewrites the expected files instead of comparing (review the diff!).
set -u
fvic=$1 mode=$2 file=$3
dir=$(dirname "$file") name=$(basename "$file")
cd "$dir" || exit 2
status=0

compare() {  # compare ACTUAL_TEXT EXPECTED_FILE
  if [ "${FVIC_UPDATE_GOLDEN:-0}" = 1 ]; then printf '%s\n' "$1" > "$2"; return; fi
  if [ ! -f "$2" ]; then echo "missing expected file $dir/$2 (run with FVIC_UPDATE_GOLDEN=1)"; status=1; return; fi
  if ! diff -u "$2" <(printf '%s\n' "$1"); then echo "FAIL: output differs from $dir/$2"; status=1; fi
}

if [ "$mode" = good ]; then
  out=$("$fvic" check "$name" 2>&1); rc=$?
  base=${name%.fvi}
  if [ -f "$base.check" ]; then
    if grep "error:" <<<"$out" | grep -vq "not supported by the code generator yet"; then
      echo "FAIL: fvic check $name reports more than the code generator's limits:"; echo "$out"; exit 1
    fi
    compare "$out" "$base.check"
  elif [ $rc -ne 0 ] || [ -n "$out" ]; then echo "FAIL: fvic check $name (exit $rc):"; echo "$out"; exit 1; fi
  [ -f "$base.ast" ] || [ "${FVIC_UPDATE_GOLDEN:-0}" = 1 ] && compare "$("$fvic" dump --ast "$name" 2>&1)" "$base.ast"
  [ -f "$base.plan" ] || [ "${FVIC_UPDATE_GOLDEN:-0}" = 1 ] && compare "$("$fvic" plan "$name" 2>&1)" "$base.plan"
  # IR dumps only for programs that have one (the code generator does not take every program yet).
  [ -f "$base.ir" ] && compare "$("$fvic" dump --ir "$name" 2>&1)" "$base.ir"
  exit $status
fi

out=$("$fvic" check "$name" 2>&1); rc=$?
if [ $rc -ne 1 ]; then echo "FAIL: expected exit 1 from fvic check $name, got $rc"; echo "$out"; exit 1; fi
case "$out" in *"internal error"*) echo "FAIL: internal error"; echo "$out"; exit 1;; esac
# The expectations written by hand in the program itself.
while IFS= read -r expect; do
  want="$name:${expect}"
  if ! grep -qF -- "$want" <<<"$out"; then echo "FAIL: missing diagnostic '$want'"; status=1; fi
done < <(sed -n 's|^.*// expect: ||p' "$name")
if ! grep -q '// expect: ' "$name"; then echo "FAIL: $name has no '// expect:' line"; status=1; fi
compare "$out" "${name%.fvi}.expected"
exit $status
