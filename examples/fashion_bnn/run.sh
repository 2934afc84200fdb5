#!/usr/bin/env bash
# Runs PVI and FedGVI (gce(0.8), alpha_renyi(2.5), loss_weight 10: the reference code's objective,
# which sums the GCE over its 10 draws, see the README) on FashionMNIST at the contamination levels
# given (default: 0 10 20 40), 3 silos, and prints clean test accuracy, best over server rounds
# (as the paper's Table 2 reports it). Data: generate.py (README). Usage:
#   examples/fashion_bnn/run.sh [LEVEL...]        results in build/fashion_bnn/runs/
# The settings are this README's (fewer epochs per round than the paper's up-to-2500: see there).
set -euo pipefail
cd "$(dirname "$0")/../.."
levels=("$@")
[ ${#levels[@]} -gt 0 ] || levels=(0 10 20 40)
settings=(--set rounds=15 --set epochs=5 --set batch_size=256 --set mc_samples=10 --set lr=0.002
          --set precision=float32 --set init_sd=0.0316 --set output_draws=10
          --set schedule=synchronous --set server_damping=off)
for p in "${levels[@]}"; do
  data=build/fashion_bnn/data-$p
  [ -d "$data" ] || python3 examples/fashion_bnn/generate.py --contamination "$p"
  for method in pvi fedgvi; do
    extra=(--set loss_weight=10)
    [ "$method" = pvi ] && extra=(--set loss=nll --set divergence=kl)
    out=build/fashion_bnn/runs/$method-$p
    ./build/bin/fvic run examples/fashion_bnn/fashion_bnn.fvi --data "$data" --output "$out" \
      --test "$data/test.json" "${settings[@]}" "${extra[@]}" | grep -E '^(round|fashion)'
    python3 - "$out/metrics.csv" "$method" "$p" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
best = max(rows, key=lambda r: float(r["test_accuracy"]))
print(f"{sys.argv[2]} at {sys.argv[3]}%: best clean test accuracy {100 * float(best['test_accuracy']):.2f} "
      f"(round {best['round']} of {len(rows)}), last {100 * float(rows[-1]['test_accuracy']):.2f}")
PY
  done
done
