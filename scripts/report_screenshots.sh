#!/usr/bin/env bash
# The screenshot each example's README shows (examples/*/report.jpeg): the example run as its
# README runs it, with its defaults, then the top of its report.html in headless Chromium
# (Debian's chromium; scripts/test.sh installs it). Runs and pages go to build/screenshots/.
# Usage: scripts/report_screenshots.sh [NAME...]   (after scripts/setup.sh; default: every example)
set -euo pipefail
cd "$(dirname "$0")/.."
work=build/screenshots
mkdir -p "$work"
fvic=build/bin/fvic

run() {  # name, folder of the example, model, data, fvic run options...
  local name=$1 dir=$2 model=$3 data=$4; shift 4
  echo "report_screenshots: $name"
  "$fvic" run "$dir/$model" --data "$data" --output "$work/$name" --quiet "$@" > "$work/$name.log" 2>&1 ||
    { echo "report_screenshots: $name failed; see $work/$name.log"; return 1; }
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --virtual-time-budget=20000 \
    --hide-scrollbars --window-size=1100,1500 --screenshot="$dir/report.jpeg" "file://$PWD/$work/$name/report.html" \
    > /dev/null 2>&1
  echo "report_screenshots: wrote $dir/report.jpeg"
}

wanted() { [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; }
all=("$@")
e=examples
for name in pima_logreg hier_logreg glmm_sixcities linreg_conjugate clutter robust_logreg_2d; do
  wanted "${all[@]}" && run $name $e/$name $name.fvi $e/$name/data
done
for name in capture_recapture eight_schools_noncentered hier_regression_tp regression_ppc; do
  wanted "${all[@]}" && run $name $e/stan_programs/$name $name.fvi $e/stan_programs/$name/data
done
name=vfl_logreg
if wanted "${all[@]}"; then
  python3 $e/vfl_logreg/generate.py --silos 2 --output "$work/data-vfl_logreg" > /dev/null
  run vfl_logreg $e/vfl_logreg vfl_logreg.fvi "$work/data-vfl_logreg/augmented"
fi
name=vfl_poisson_multilevel
if wanted "${all[@]}"; then
  python3 $e/vfl_poisson_multilevel/generate.py --output "$work/data-vfl_poisson" > /dev/null
  run vfl_poisson_multilevel $e/vfl_poisson_multilevel vfl_poisson_multilevel.fvi "$work/data-vfl_poisson/augmented"
fi
name=split_nn
if wanted "${all[@]}"; then
  python3 $e/split_nn/generate.py --output "$work/data-split_nn" > /dev/null
  run split_nn $e/split_nn split_nn.fvi "$work/data-split_nn/fold-1/train"
fi
name=multinomial_eb
if wanted "${all[@]}"; then
  python3 $e/multinomial_eb/generate.py --silos 25 --rows 200 --output "$work/data-multinomial_eb" > /dev/null
  run multinomial_eb $e/multinomial_eb multinomial_eb.fvi "$work/data-multinomial_eb" \
    --test "$work/data-multinomial_eb/test.json"
fi
name=fashion_bnn
if wanted "${all[@]}"; then
  # The full data take minutes a round here: the README's settings on its test slice (600 rows
  # per silo, 20% wrong labels), 5 rounds, stand in.
  python3 $e/fashion_bnn/generate.py --contamination 20 --slice 600 --output "$work/data-fashion_bnn" > /dev/null
  run fashion_bnn $e/fashion_bnn fashion_bnn.fvi "$work/data-fashion_bnn" --test "$work/data-fashion_bnn/test.json" \
    --set rounds=5 --set epochs=5 --set batch_size=256 --set mc_samples=10 --set lr=0.002 --set precision=float32 \
    --set init_sd=0.0316 --set output_draws=10 --set schedule=synchronous --set server_damping=off
fi
