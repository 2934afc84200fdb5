#!/usr/bin/env python3
"""Writes data/ for the ordinal regression example (Python's standard library, seed 20261130):
data.json (D = 2, K = 4), silo-1.json ... silo-4.json with 150 rows each, x ~ N(0, I), y drawn
from ordered_logistic(x beta, c) with beta = (1.0, -0.5), c = (-1.0, 0.5, 2.0); and test.json,
300 more rows drawn the same way (held out)."""
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
D, K, SILOS, ROWS, TEST_ROWS = 2, 4, 4, 150, 300
BETA, CUTPOINTS = [1.0, -0.5], [-1.0, 0.5, 2.0]


def draw(rng, eta):
    """The first k with u <= P(y <= k) = inv_logit(c_k - eta), else K."""
    u, k = rng.random(), 0
    while k < K - 1 and u > 1 / (1 + math.exp(eta - CUTPOINTS[k])):
        k += 1
    return k + 1


def rows(rng, n):
    x = [[rng.gauss(0, 1) for _ in range(D)] for _ in range(n)]
    y = [draw(rng, sum(a * b for a, b in zip(r, BETA))) for r in x]
    return {"N": n, "x": x, "y": y}


def main():
    rng = random.Random(20261130)
    out = os.path.join(HERE, "data")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({"D": D, "K": K}, f)
    for s in range(1, SILOS + 1):
        with open(os.path.join(out, f"silo-{s}.json"), "w") as f:
            json.dump(rows(rng, ROWS), f)
    with open(os.path.join(out, "test.json"), "w") as f:
        json.dump(rows(rng, TEST_ROWS), f)


if __name__ == "__main__":
    main()
