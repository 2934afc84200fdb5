#!/usr/bin/env python3
"""Writes data/ for the negative-binomial example (Python's standard library, seed 20261130):
data.json (empty: no public data), silo-1.json ... silo-4.json with 60 rows each, age ~ U(20, 70)
years (not centred), exposure ~ U(0.5, 2) years, and counts y ~ NegBinomial2(mu, phi) with
log mu = a + b age + log(exposure), a = -3, b = 0.04, phi = 3 (a gamma-Poisson mixture)."""
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
SILOS, ROWS = 4, 60
A, B, PHI = -3.0, 0.04, 3.0


def poisson(rng, lam):
    """Knuth's multiplication method (lam stays far below exp's underflow here)."""
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        p *= rng.random()
        k += 1
    return k


def rows(rng, n):
    age = [round(rng.uniform(20, 70), 1) for _ in range(n)]
    exposure = [round(rng.uniform(0.5, 2.0), 3) for _ in range(n)]
    # NegBinomial2(mu, phi) = Poisson(lambda), lambda ~ Gamma(shape phi, scale mu / phi).
    y = [poisson(rng, rng.gammavariate(PHI, math.exp(A + B * a) * e / PHI)) for a, e in zip(age, exposure)]
    return {"N": n, "age": age, "expo": exposure, "y": y}


def main():
    rng = random.Random(20261130)
    folder = os.path.join(HERE, "data")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    for k in range(1, SILOS + 1):
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump(rows(rng, ROWS), f)


if __name__ == "__main__":
    main()
