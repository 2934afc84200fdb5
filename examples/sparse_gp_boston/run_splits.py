#!/usr/bin/env python3
"""Seed 003 §6.2.1 on Boston housing: for each split (generate.py's split-S folders), the four
methods of the paper's Fig. 4, each run by `fvic run` with its defaults and the split's test rows:

  dpo     sparse_gp_boston.fvi, 10 silos, decoupled pseudo-observations, random Z (Algorithm 2)
  cpo     the same with factors = cpo (coupled pseudo-observations), at most 10 rounds (its rounds
          cost 2.4 times DPO's, and on split 1 it sat at the noise-only fit from round 2 to 20)
  fixed   sparse_gp_boston_fixed_z.fvi: Z drawn from N(0, I), fixed (the fixed-Z baseline)
  global  sparse_gp_boston.fvi on the pooled training rows, one party (global VI, the gold standard)

Appends one row per run to results.csv (split, method, converged, rounds, test log-likelihood and
RMSE in the data's units: $1000s) and prints the table of means and standard errors over the
splits done so far. Usage: run_splits.py [FIRST LAST] [METHOD...] (default 1 10, all four).
"""
import csv
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FVIC = os.environ.get("FVIC", os.path.join(HERE, "..", "..", "build", "bin", "fvic"))
METHODS = ("dpo", "cpo", "fixed", "global")


def run(split, method):
    folder = os.path.join(HERE, f"split-{split}")
    model, data, sets = "sparse_gp_boston.fvi", folder, []
    if method == "cpo":
        sets = ["factors=cpo", "max_rounds=10"]
    elif method == "fixed":
        model, data = "sparse_gp_boston_fixed_z.fvi", os.path.join(folder, "fixed-z")
    elif method == "global":
        data = os.path.join(folder, "pooled")
    out = os.path.join(HERE, "out", f"split-{split}-{method}")
    cmd = [FVIC, "run", os.path.join(HERE, model), "--data", data, "--output", out, "--quiet",
           "--test", os.path.join(folder, "test.json")]
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    with open(os.path.join(out, "metrics.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    with open(os.path.join(out, "posterior.json")) as f:
        post = json.load(f)
    with open(os.path.join(folder, "scale.json")) as f:
        scale = json.load(f)
    # Standardised units back to the data's: y = mean + sd * y_s.
    return {"split": split, "method": method, "converged": post["converged"], "rounds": post["iterations"],
            "test_ll": float(last["test_lpd"]) - math.log(scale["y_sd"]),
            "test_rmse": float(last["test_rmse"]) * scale["y_sd"]}


def table(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    print(f"{'method':8} {'splits':>6} {'test log-likelihood':>22} {'RMSE':>16} {'converged':>10}")
    for m in METHODS:
        r = [x for x in rows if x["method"] == m]
        if not r:
            continue
        n = len(r)

        def mean_se(key):
            v = [float(x[key]) for x in r]
            mu = sum(v) / n
            se = math.sqrt(sum((a - mu) ** 2 for a in v) / (n - 1) / n) if n > 1 else float("nan")
            return f"{mu:.3f} ± {se:.3f}"

        conv = sum(x["converged"] == "True" for x in r)
        print(f"{m:8} {n:>6} {mean_se('test_ll'):>22} {mean_se('test_rmse'):>16} {conv:>6}/{n}")


def main():
    args = sys.argv[1:]
    first, last = (int(args[0]), int(args[1])) if len(args) >= 2 and args[0].isdigit() else (1, 10)
    methods = [a for a in args if a in METHODS] or list(METHODS)
    path = os.path.join(HERE, os.environ.get("RESULTS", "results.csv"))
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["split", "method", "converged", "rounds", "test_ll", "test_rmse"])
        if new:
            w.writeheader()
        for split in range(first, last + 1):
            for method in methods:
                row = run(split, method)
                w.writerow(row)
                f.flush()
                print(f"split {split} {method}: {row}", flush=True)
    table(path)


if __name__ == "__main__":
    main()
