#!/usr/bin/env python3
"""Synthetic linear regression data for regression_ppc: deterministic, seed 20261127.

3 silos of 40 rows, D = 2 covariates x ~ N(0, 1) per entry; the true values are the intercept
alpha = 1.0, beta = (0.8, -0.4) and the noise sd sigma = 1.2: y = alpha + x beta + N(0, sigma^2).
Values are rounded to 6 decimals before y is computed, so the files hold exactly the numbers
used.

Writes OUT/data/{data.json (D), silo-1..3.json (N, x, y)} and OUT/truth.json (the true values).
OUT defaults to this script's folder.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fvidata  # noqa: E402

SEED = 20261127
SILOS, ROWS, D = 3, 40, 2
ALPHA, BETA, SIGMA = 1.0, [0.8, -0.4], 1.2


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and truth.json").parse_args()
    rng = random.Random(SEED)
    silos = []
    for _ in range(SILOS):
        x = [[round(rng.gauss(0.0, 1.0), 6) for _ in range(D)] for _ in range(ROWS)]
        y = [round(ALPHA + sum(b * v for b, v in zip(BETA, row)) + rng.gauss(0.0, SIGMA), 6)
             for row in x]
        silos.append({"N": ROWS, "x": x, "y": y})
    fvidata.write_data_dir(os.path.join(args.output, "data"), {"D": D}, silos)
    truth = {"seed": SEED, "alpha": ALPHA, "beta": BETA, "sigma": SIGMA, "sigma_sq": SIGMA ** 2}
    fvidata.write_json(os.path.join(args.output, "truth.json"), truth)
    print(f"regression_ppc: {SILOS} silos of {ROWS} rows, D = {D}")


if __name__ == "__main__":
    main()
