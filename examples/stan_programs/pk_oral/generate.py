#!/usr/bin/env python3
"""Writes data/: the shared sampling schedule (data.json) and three hospitals' measurements
(silo-K.json), from the one-compartment model's closed form at k_a = 1.2/h, k_e = 0.25/h
(truth.json), with log-normal assay error. Deterministic: python3 generate.py."""
import json
import math
import os
import random

TRUTH = {"k_a": 1.2, "k_e": 0.25}
TIMES = [0.25, 0.5, 1, 2, 4, 6, 8, 12]
DOSE, VOLUME, SIGMA = 100.0, 10.0, 0.15
ROWS = [14, 18, 10]  # measurements per hospital


def concentration(t, k_a, k_e):
    """C(t) = D k_a / (V (k_a - k_e)) (exp(-k_e t) - exp(-k_a t)), k_a != k_e."""
    return DOSE * k_a / (VOLUME * (k_a - k_e)) * (math.exp(-k_e * t) - math.exp(-k_a * t))


def main():
    rng = random.Random(20261128)
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "data")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({"T": len(TIMES), "times": TIMES, "dose": DOSE, "volume": VOLUME, "sigma": SIGMA}, f)
        f.write("\n")
    for k, n in enumerate(ROWS, start=1):
        sample = [rng.randrange(len(TIMES)) + 1 for _ in range(n)]
        log_conc = [round(math.log(concentration(TIMES[s - 1], **TRUTH)) + rng.gauss(0, SIGMA), 6) for s in sample]
        with open(os.path.join(out, f"silo-{k}.json"), "w") as f:
            json.dump({"N": n, "sample": sample, "log_conc": log_conc}, f)
            f.write("\n")
    with open(os.path.join(here, "truth.json"), "w") as f:
        json.dump(TRUTH, f)
        f.write("\n")


if __name__ == "__main__":
    main()
