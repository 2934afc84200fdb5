#!/usr/bin/env python3
"""Bayesian linear regression with known noise, for linreg_conjugate.fvi: deterministic, seed
20250506.

D = 3, sigma = 0.5; the true weights are one draw from the model's prior w ~ N(0, I); covariates
x ~ N(0, 1); y = x . w + N(0, sigma^2). Four silos of 30, 50, 20 and 40 rows and 100 held-out
rows (test.json) from the same process. Values are rounded to 6 decimals before y is computed,
so the files hold exactly the numbers used.

Writes OUT/data/{data.json, silo-1..4.json, test.json} and OUT/truth.json: the true weights and
the exact posterior of the pooled training data (precision I + X'X / sigma^2, mean
precision^-1 X'y / sigma^2), against which PVI with damping 1 is checked. OUT defaults to this
script's folder.
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20250506
D, SIGMA = 3, 0.5
SILO_SIZES, TEST_SIZE = [30, 50, 20, 40], 100


def spd_inverse(a):
    """The inverse of a small symmetric positive-definite matrix, through its Cholesky factor."""
    d = len(a)
    chol = fvidata.cholesky(a)
    inv = []
    for col in range(d):  # solve L L' x = e_col
        z = [0.0] * d
        for i in range(d):
            z[i] = ((1.0 if i == col else 0.0)
                    - math.fsum(chol[i][k] * z[k] for k in range(i))) / chol[i][i]
        x = [0.0] * d
        for i in reversed(range(d)):
            x[i] = (z[i] - math.fsum(chol[k][i] * x[k] for k in range(i + 1, d))) / chol[i][i]
        inv.append(x)
    return [[inv[j][i] for j in range(d)] for i in range(d)]


def exact_posterior(rows):
    """Posterior of w under w ~ N(0, I), y ~ N(x . w, SIGMA^2), from (x, y) rows."""
    prec = [[(1.0 if i == j else 0.0) + math.fsum(x[i] * x[j] for x, _ in rows) / SIGMA ** 2
             for j in range(D)] for i in range(D)]
    shift = [math.fsum(x[i] * y for x, y in rows) / SIGMA ** 2 for i in range(D)]
    cov = spd_inverse(prec)
    mean = [math.fsum(cov[i][j] * shift[j] for j in range(D)) for i in range(D)]
    return {"mean": mean, "sd": [math.sqrt(cov[i][i]) for i in range(D)], "cov": cov,
            "precision": prec}


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and truth.json").parse_args()

    rng = random.Random(SEED)
    w = [rng.gauss(0.0, 1.0) for _ in range(D)]

    def draw_rows(n):
        rows = []
        for _ in range(n):
            x = [round(rng.gauss(0.0, 1.0), 6) for _ in range(D)]
            y = round(sum(a * b for a, b in zip(w, x)) + rng.gauss(0.0, SIGMA), 6)
            rows.append((x, y))
        return rows

    silos = [draw_rows(n) for n in SILO_SIZES]
    test = draw_rows(TEST_SIZE)

    def silo(rows):
        return {"N": len(rows), "x": [x for x, _ in rows], "y": [y for _, y in rows]}

    fvidata.write_data_dir(os.path.join(args.output, "data"), {"D": D, "sigma": SIGMA},
                           [silo(s) for s in silos], silo(test))
    post = exact_posterior([r for s in silos for r in s])
    truth = {"seed": SEED, "w": w, "sigma": SIGMA, "prior": {"mean": 0.0, "sd": 1.0},
             "exact_posterior": post}
    fvidata.write_json(os.path.join(args.output, "truth.json"), truth)
    print(f"linreg_conjugate: w = {[round(v, 4) for v in w]}; posterior mean "
          f"{[round(v, 4) for v in post['mean']]}, sd {[round(v, 4) for v in post['sd']]}")


if __name__ == "__main__":
    main()
