#!/usr/bin/env bash
# Runs PVI and FedGVI (gce(0.8), alpha_renyi(2.5), loss_weight 10: the reference code's objective,
# which sums the GCE over its 10 draws, see the README) on FashionMNIST at the contamination levels
# given (default: 0 10 20 40), 3 silos, and prints clean test accuracy, best over server rounds
# (as the paper's Table 2 reports it). Data: generate.py (README). Usage:
#   examples/fashion_bnn/run.sh [LEVEL...]        results in build/fashion_bnn/runs/
# The settings are the model's inference block's (fewer epochs per round than the paper's up-to-2500:
# see the README).
set -euo pipefail
cd "$(dirname "$0")/../.."
levels=("$@")
[ ${#levels[@]} -gt 0 ] || levels=(0 10 20 40)
# FedGVI is the model's own inference block; PVI the same with the paper's nll, kl and no tempering.
for p in "${levels[@]}"; do
  data=build/fashion_bnn/data-$p
  [ -d "$data" ] || python3 examples/fashion_bnn/generate.py --contamination "$p"
  for method in pvi fedgvi; do
    extra=()
    [ "$method" = pvi ] && extra=(--set loss=nll --set divergence=kl --set loss_weight=1)
    out=build/fashion_bnn/runs/$method-$p
    ./build/bin/fvic run examples/fashion_bnn/fashion_bnn.fvi --data "$data" --output "$out" \
      --test "$data/test.json" "${extra[@]}" | grep -E '^(round|fashion)'
    python3 - "$out/metrics.csv" "$method" "$p" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
best = max(rows, key=lambda r: float(r["test_accuracy"]))
print(f"{sys.argv[2]} at {sys.argv[3]}%: best clean test accuracy {100 * float(best['test_accuracy']):.2f} "
      f"(round {best['round']} of {len(rows)}), last {100 * float(rows[-1]['test_accuracy']):.2f}")
PY
  done
done
