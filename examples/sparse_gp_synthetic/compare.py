#!/usr/bin/env python3
"""Seed 003 §6.1 (Figs. 1 and 2) on this example's data: PVI with a hierarchical variational model
over Z (sparse_gp_synthetic.fvi, Algorithm 2, its defaults) against FedAvg of Z with J = 1000
local steps (sparse_gp_synthetic_fedavg.fvi, Algorithm 1), 20 rounds each (a round updates each of
the 5 silos once, one after another: 5 communications), seeds 1 to 5 (the methods' `seed`: their
starting Z, Monte Carlo draws and pseudo-inputs; the data are generate.py's).

Writes results.csv (method, seed, round, train_lpd, test_lpd: mean log predictive density per
row), out/METHOD-seed-S-rounds-R/ (each run's outputs, predictive.csv at the held-out grid after
R = 10 and 20 rounds) and prints the mean and standard error over the seeds at rounds 1, 2, 5, 10
and 20. plot.R draws them.
"""
import csv
import math
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
FVIC = os.environ.get("FVIC", os.path.join(HERE, "..", "..", "build", "bin", "fvic"))
METHODS = {"pvi": ("sparse_gp_synthetic.fvi", []),
           "fedavg_j1000": ("sparse_gp_synthetic_fedavg.fvi", ["local_steps=1000"])}


def run(method, seed, rounds):
    model, sets = METHODS[method]
    out = os.path.join(HERE, "out", f"{method}-seed-{seed}-rounds-{rounds}")
    cmd = [FVIC, "run", os.path.join(HERE, model), "--data", os.path.join(HERE, "data"), "--output", out,
           "--quiet", "--test", os.path.join(HERE, "test.json"), "--set", f"rounds={rounds}", "--set", f"seed={seed}"]
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}")
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def main():
    rows = []
    for method in METHODS:
        for seed in range(1, 6):
            run(method, seed, 10)  # its predictive.csv: the picture after 10 rounds
            for r in run(method, seed, 20):
                rows.append({"method": method, "seed": seed, "round": int(r["round"]),
                             "train_lpd": float(r["train_lpd"]), "test_lpd": float(r["test_lpd"])})
    with open(os.path.join(HERE, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["method", "seed", "round", "train_lpd", "test_lpd"])
        w.writeheader()
        w.writerows(rows)
    print(f"{'round':>5}  " + "  ".join(f"{m + ' train lpd':>26}" for m in METHODS))
    for rnd in (1, 2, 5, 10, 20):
        cells = []
        for m in METHODS:
            v = [r["train_lpd"] for r in rows if r["method"] == m and r["round"] == rnd]
            mu = sum(v) / len(v)
            se = math.sqrt(sum((a - mu) ** 2 for a in v) / (len(v) - 1) / len(v))
            cells.append(f"{mu:>17.4f} ± {se:.4f}")
        print(f"{rnd:>5}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
