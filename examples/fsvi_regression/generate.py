#!/usr/bin/env python3
"""Seed 001's toy 1-D regression (spec 001 §4.1), two silos split by sorted x: deterministic.

200 points: x' ~ U[0, 1), x = 5 (x' (0.82 - 0.1) + 0.1) (so x in [0.5, 4.1)), noise
eps ~ N(0, 0.03) (0.03 a variance, as the digest reads the paper's N(0, sigma^2 I)), and
y = sin(-3 pi / 5 (x + eps) + 0.5) + cos(-6 pi / 5 (x + eps)) + 8 eps (Eq. 43). 160 random
points train, 40 are held out; the training points sorted by x, the lower half to silo 1 and the
upper half to silo 2 (the non-iid split). The public data hold the network's width H, the noise
sd sigma = 8 sqrt(0.03) (the likelihood's, known) and a grid of T inputs over [-3.1, 7.7): the
data range and, either side of it, an out-of-distribution range as wide (spec 001 §3), at which
the generated quantities give the predictive function.

Writes OUT/data/{data.json, silo-1.json, silo-2.json} and OUT/test.json (the held-out rows).
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20261128
POINTS, TRAIN, H, T = 200, 160, 100, 109
NOISE_VARIANCE = 0.03
LOW, HIGH = 0.5, 4.1  # 5 (0.1) and 5 (0.82)


def target(x, eps):
    return math.sin(-3 * math.pi / 5 * (x + eps) + 0.5) + math.cos(-6 * math.pi / 5 * (x + eps)) + 8 * eps


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and test.json").parse_args()
    rng = random.Random(SEED)
    rows = []
    for _ in range(POINTS):
        x = round(5 * (rng.random() * (0.82 - 0.1) + 0.1), 6)
        eps = rng.gauss(0.0, math.sqrt(NOISE_VARIANCE))
        rows.append((x, round(target(x, eps), 6)))
    rng.shuffle(rows)
    train = sorted(rows[:TRAIN])
    test = rows[TRAIN:]
    width = HIGH - LOW
    grid = [round(LOW - width + (3 * width) * i / (T - 1), 6) for i in range(T)]
    public = {"H": H, "sigma": round(8 * math.sqrt(NOISE_VARIANCE), 6), "T": T, "x_grid": [[g] for g in grid]}
    half = TRAIN // 2
    silos = [{"N": len(part), "x": [[x] for x, _ in part], "y": [y for _, y in part]}
             for part in (train[:half], train[half:])]
    fvidata.write_data_dir(os.path.join(args.output, "data"), public, silos)
    fvidata.write_json(os.path.join(args.output, "test.json"),
                       {"N": len(test), "x": [[x] for x, _ in test], "y": [y for _, y in test]})
    print(f"fsvi_regression: 2 silos of {half} rows (sorted by x), {len(test)} held out, grid of {T} over "
          f"[{grid[0]}, {grid[-1]}]")


if __name__ == "__main__":
    main()
