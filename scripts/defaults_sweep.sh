#!/usr/bin/env bash
# Every example run as a new user runs it: `fvic run MODEL --data DIR --output OUT` with nothing
# set (the model's own inference block and the built-in defaults). Prints one line per example:
# the exit status, the wall time, the stopping rule's verdict and Pareto k-hat. Generates the data
# of the examples that ship a generator instead of data. Outputs and logs in build/defaults/.
# Usage: scripts/defaults_sweep.sh [EXAMPLE...]   (after scripts/setup.sh; default: all below)
#   examples: robust_logreg_2d clutter pima_logreg linreg_conjugate logreg_pooled hier_logreg
#             glmm_sixcities poisson_pooled vfl_logreg vfl_logreg_power split_nn
#             vfl_poisson_multilevel multinomial_eb
# multinomial_eb takes over 10 minutes; fashion_bnn is not included (hours on 2 cores).
set -uo pipefail
cd "$(dirname "$0")/.."
fvic=./build/bin/fvic
out=build/defaults
mkdir -p "$out"

run() {  # name model data
  local name=$1 model=$2 data=$3 start end rc verdict khat
  start=$(date +%s)
  timeout 3600 "$fvic" run "$model" --data "$data" --output "$out/$name" > "$out/$name.log" 2>&1
  rc=$?
  end=$(date +%s)
  verdict=$(grep -E '^(converged|NOT converged)' "$out/$name.log" | head -1 | cut -c1-120)
  khat=$(grep -E '^Pareto k-hat' "$out/$name.log" | head -1 | cut -c1-22)
  printf '%-24s exit %d  %5d s  %s | %s\n' "$name" "$rc" "$((end - start))" "${verdict:-no verdict}" "$khat"
}

needs() {  # directory generator...
  local dir=$1
  shift
  [ -d "$dir" ] || "$@" > /dev/null
}

examples=("$@")
[ ${#examples[@]} -gt 0 ] || examples=(robust_logreg_2d clutter pima_logreg linreg_conjugate logreg_pooled
                                       hier_logreg glmm_sixcities poisson_pooled vfl_logreg vfl_logreg_power
                                       split_nn vfl_poisson_multilevel multinomial_eb)
for name in "${examples[@]}"; do
  case $name in
    robust_logreg_2d | clutter | pima_logreg | linreg_conjugate | hier_logreg | glmm_sixcities)
      run "$name" "examples/$name/$name.fvi" "examples/$name/data" ;;
    logreg_pooled | vfl_logreg | vfl_logreg_power)
      needs build/vfl_logreg/J2 python3 examples/vfl_logreg/generate.py --silos 2
      case $name in
        logreg_pooled) data=pooled ;;
        vfl_logreg) data=augmented ;;
        *) data=power ;;
      esac
      run "$name" "examples/vfl_logreg/$name.fvi" "build/vfl_logreg/J2/$data" ;;
    poisson_pooled | vfl_poisson_multilevel)
      needs build/vfl_poisson_multilevel python3 examples/vfl_poisson_multilevel/generate.py
      if [ "$name" = poisson_pooled ]; then data=pooled; else data=augmented; fi
      run "$name" "examples/vfl_poisson_multilevel/$name.fvi" "build/vfl_poisson_multilevel/$data" ;;
    split_nn)
      needs build/split_nn python3 examples/split_nn/generate.py
      run "$name" examples/split_nn/split_nn.fvi build/split_nn/fold-1/train ;;
    multinomial_eb)
      needs build/multinomial_eb/J25-n200 python3 examples/multinomial_eb/generate.py --silos 25 --rows 200
      run "$name" examples/multinomial_eb/multinomial_eb.fvi build/multinomial_eb/J25-n200 ;;
    *) echo "unknown example: $name" >&2; exit 2 ;;
  esac
done
