#!/usr/bin/env python3
"""Writes data/ for weibull_frailty (seed 20261202, Python's standard library only).

Five hospitals with 60-100 patients each. Hospital k's log hazard multiplier alpha_k ~
N(-4, 0.3^2); patient i has age ~ N(62, 10^2) (years, uncentred) and treatment ~ Bernoulli(0.5);
the survival time is Weibull with shape 1.4 and scale exp(-(alpha_k + 0.03 age - 0.5 trt) / 1.4)
(proportional hazards), censored at a follow-up time ~ U(1, 10): `t` is the smaller of the two and
`event` 1 where the death was seen.
"""
import json
import math
import os
import random

here = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261202)
rows = [60, 90, 75, 100, 70]
mu, beta, tau, shape = -4.0, [0.03, -0.5], 0.3, 1.4
os.makedirs(os.path.join(here, "data"), exist_ok=True)
for k, n in enumerate(rows, start=1):
    alpha = rng.gauss(mu, tau)
    x, t, event = [], [], []
    for _ in range(n):
        age = rng.gauss(62, 10)
        trt = 1.0 if rng.random() < 0.5 else 0.0
        eta = alpha + beta[0] * age + beta[1] * trt
        death = math.exp(-eta / shape) * (-math.log(rng.random())) ** (1 / shape)
        follow_up = rng.uniform(1, 10)
        x.append([round(age, 1), trt])
        t.append(round(min(death, follow_up), 4))
        event.append(1 if death <= follow_up else 0)
    with open(os.path.join(here, "data", f"silo-{k}.json"), "w") as f:
        json.dump({"N": n, "x": x, "t": t, "event": event}, f)
with open(os.path.join(here, "data", "data.json"), "w") as f:
    json.dump({"D": 2}, f)
