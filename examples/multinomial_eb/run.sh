#!/usr/bin/env bash
# Runs seed 002's Table 1 methods on the multinomial regression, every method with the paper's
# budget of 5 x 10^4 gradient steps: SFVI (5 x 10^4 iterations), SFVI-Avg(10^3) x 50 rounds,
# SFVI-Avg(5 x 10^4) x 1 round, and the independent fit (5 x 10^4 steps per silo), each silo
# scoring its rows at the shared draws eps_G as seed 002's Algorithm 1 (local_reparam=off; LRT=on
# for the local reparameterisation, fvic's default) and at the raw pixels, as the paper
# (center=off; CENTER=on for fvic's default, the intercepts fitted at the centred pixels). Prints the train and test accuracy of each
# (the mean over silos for `independent`). Usage:
#   examples/multinomial_eb/run.sh [J n]          (default 25 200; the paper's other row is 5 10000)
# Data: generate.py; results in build/multinomial_eb/runs-J<J>-n<n>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
J=${1:-25}; n=${2:-200}
data=build/multinomial_eb/J$J-n$n
runs=build/multinomial_eb/runs-J$J-n$n
[ -d "$data" ] || python3 examples/multinomial_eb/generate.py --silos "$J" --rows "$n"
model=examples/multinomial_eb/multinomial_eb.fvi
common=(--data "$data" --test "$data/test.json" --set lr=${LR:-0.005} --set mc_samples=1
        --set batch_size=${BATCH:-0} --set local_reparam=${LRT:-off} --set center=${CENTER:-off} --quiet)
run() {  # name, settings...
  local name=$1; shift
  ./build/bin/fvic run "$model" --output "$runs/$name" "${common[@]}" "$@"
  python3 examples/multinomial_eb/accuracy.py "$runs/$name" "$name"
}
run sfvi        --set method=sfvi --set rounds=50000 --set refresh=5000
run avg-50      --set method=sfvi_avg --set rounds=50 --set avg_steps=1000 --set refresh=10
run avg-1       --set method=sfvi_avg --set rounds=1 --set avg_steps=50000
run independent --set method=independent --set rounds=1 --set avg_steps=50000
