#!/usr/bin/env python3
"""Synthetic capture histories for capture_recapture: deterministic, seed 20261127.

3 sites, each with M = 120 augmented individuals and T = 4 occasions. At each site the number
truly present is Binomial(M, omega = 0.4); each present individual is caught on each occasion
with probability p = 0.35; the rest of the M rows are zeros (never caught, perhaps absent).

Writes OUT/data/{data.json (T), silo-1..3.json (M, y)} and OUT/truth.json (the true values and
each site's count present). OUT defaults to this script's folder.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fvidata  # noqa: E402

SEED = 20261127
SITES, M, T = 3, 120, 4
OMEGA, P = 0.4, 0.35


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and truth.json").parse_args()
    rng = random.Random(SEED)
    silos, present = [], []
    for _ in range(SITES):
        n = sum(rng.random() < OMEGA for _ in range(M))
        y = [[int(rng.random() < P) for _ in range(T)] for _ in range(n)] + [[0] * T for _ in range(M - n)]
        silos.append({"M": M, "y": y})
        present.append(n)
    fvidata.write_data_dir(os.path.join(args.output, "data"), {"T": T}, silos)
    fvidata.write_json(os.path.join(args.output, "truth.json"),
                       {"seed": SEED, "omega": OMEGA, "p": P, "present": present})
    print(f"capture_recapture: {SITES} sites of {M} augmented individuals, T = {T}; present {present}")


if __name__ == "__main__":
    main()
