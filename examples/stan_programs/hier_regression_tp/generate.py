#!/usr/bin/env python3
"""Synthetic grouped regression data for hier_regression_tp: deterministic, seed 20261126.

J = 6 groups (silos) of 25 rows; the true group intercepts are alpha_j ~ N(1.0, 0.7^2)
(mu_alpha = 1.0, sigma_alpha = 0.7), the slope beta = 0.5, the noise sd sigma = 0.8;
x ~ N(0, 1) and y = alpha_j + beta x + N(0, sigma^2). Values are rounded to 6 decimals before y
is computed, so the files hold exactly the numbers used.

Writes OUT/data/{data.json (empty: no public data), silo-1..6.json (N, x, y)} and OUT/truth.json
(the true values, with z_j = (alpha_j - mu_alpha) / sigma_alpha). OUT defaults to this script's
folder.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fvidata  # noqa: E402

SEED = 20261126
J, ROWS = 6, 25
MU_ALPHA, SIGMA_ALPHA, BETA, SIGMA = 1.0, 0.7, 0.5, 0.8


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and truth.json").parse_args()
    rng = random.Random(SEED)
    alpha = [round(rng.gauss(MU_ALPHA, SIGMA_ALPHA), 6) for _ in range(J)]
    silos = []
    for a in alpha:
        x = [round(rng.gauss(0.0, 1.0), 6) for _ in range(ROWS)]
        y = [round(a + BETA * v + rng.gauss(0.0, SIGMA), 6) for v in x]
        silos.append({"N": ROWS, "x": x, "y": y})
    fvidata.write_data_dir(os.path.join(args.output, "data"), {}, silos)
    truth = {"seed": SEED, "mu_alpha": MU_ALPHA, "sigma_alpha": SIGMA_ALPHA, "alpha": alpha,
             "z": [(a - MU_ALPHA) / SIGMA_ALPHA for a in alpha], "beta": BETA, "sigma": SIGMA}
    fvidata.write_json(os.path.join(args.output, "truth.json"), truth)
    print(f"hier_regression_tp: {J} silos of {ROWS} rows; alpha = {[round(a, 3) for a in alpha]}")


if __name__ == "__main__":
    main()
