#!/usr/bin/env python3
"""The synthetic data of seed 003 §6.1 (its generator is not in the paper; this one is ours):
f ~ GP(0, k) with the squared-exponential kernel (alpha = 1, rho = 0.5) drawn exactly, jointly
at 300 training inputs and 100 held-out ones, and y = f(x) + N(0, 0.2^2). The training inputs
lie in five stretches of the line [-2.5, 2.5] (width 0.8, gaps of 0.2 between them), one per
silo, 60 rows each: a silo sees its own stretch only. The held-out inputs cover the whole line.

Writes data/data.json (M, alpha, rho, sigma), data/silo-1.json .. silo-5.json (N, x, y) and
test.json (N, x, y). Deterministic (seed 3003); pure Python (a 400 x 400 Cholesky).
"""
import json
import math
import os
import random

SEED = 3003
ALPHA, RHO, SIGMA = 1.0, 0.5, 0.2
M, SILOS, PER_SILO, HELD_OUT = 15, 5, 60, 100
HERE = os.path.dirname(os.path.abspath(__file__))


def cholesky(a):
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    for j in range(n):
        s = a[j][j] - sum(low[j][k] ** 2 for k in range(j))
        low[j][j] = math.sqrt(s)
        for i in range(j + 1, n):
            low[i][j] = (a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))) / low[j][j]
    return low


def main():
    rng = random.Random(SEED)
    train = []
    for k in range(SILOS):
        lo = -2.5 + k * 1.0 + 0.1
        train.append(sorted(rng.uniform(lo, lo + 0.8) for _ in range(PER_SILO)))
    held_out = [-2.6 + 5.2 * i / (HELD_OUT - 1) for i in range(HELD_OUT)]
    xs = [x for part in train for x in part] + held_out
    n = len(xs)
    k = [[ALPHA ** 2 * math.exp(-0.5 * (a - b) ** 2 / RHO ** 2) + (1e-8 if i == j else 0.0)
          for j, b in enumerate(xs)] for i, a in enumerate(xs)]
    low = cholesky(k)
    z = [rng.gauss(0, 1) for _ in range(n)]
    f = [sum(low[i][j] * z[j] for j in range(i + 1)) for i in range(n)]
    y = [fi + rng.gauss(0, SIGMA) for fi in f]
    out = os.path.join(HERE, "data")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "data.json"), "w") as fh:
        json.dump({"M": M, "alpha": ALPHA, "rho": RHO, "sigma": SIGMA}, fh)
        fh.write("\n")
    at = 0
    for s, part in enumerate(train, start=1):
        with open(os.path.join(out, f"silo-{s}.json"), "w") as fh:
            json.dump({"N": len(part), "x": part, "y": y[at:at + len(part)]}, fh)
            fh.write("\n")
        at += len(part)
    with open(os.path.join(HERE, "test.json"), "w") as fh:
        json.dump({"N": HELD_OUT, "x": held_out, "y": y[at:]}, fh)
        fh.write("\n")
    print(f"sparse_gp_synthetic: {SILOS} silos of {PER_SILO} rows, {HELD_OUT} held-out rows")


if __name__ == "__main__":
    main()
