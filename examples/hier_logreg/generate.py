#!/usr/bin/env python3
"""Writes the synthetic hospital data of this example (deterministic: seed 20261122).

Three hospitals with 40, 55 and 70 patients, D = 3 covariates ~ N(0, 1); the true values are
beta = (1.0, -0.5, 0.25), tau = 0.8, and each hospital's intercept alpha_k ~ N(0, tau).
"""
import json
import math
import os
import random

rng = random.Random(20261122)
D = 3
beta = [1.0, -0.5, 0.25]
tau = 0.8
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(here, exist_ok=True)
with open(os.path.join(here, "data.json"), "w") as f:
    json.dump({"D": D}, f)
    f.write("\n")
for k, n in enumerate([40, 55, 70], start=1):
    alpha = rng.gauss(0.0, tau)
    x = [[round(rng.gauss(0.0, 1.0), 4) for _ in range(D)] for _ in range(n)]
    y = []
    for row in x:
        eta = alpha + sum(b * v for b, v in zip(beta, row))
        y.append(1 if rng.random() < 1.0 / (1.0 + math.exp(-eta)) else 0)
    with open(os.path.join(here, f"silo-{k}.json"), "w") as f:
        json.dump({"N": n, "x": x, "y": y}, f)
        f.write("\n")
