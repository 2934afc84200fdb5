#!/usr/bin/env python3
"""The synthetic logistic regression of seed 004 section 5.1 (deterministic, seed 20250604):
n = 500 rows, p = 20 covariates x_ik ~ N(0, 1); b and beta drawn from their N(0, 1) priors; and
y_i ~ Bernoulli(logit^-1(b + x_i beta + e_i)), e_i ~ N(0, 1) ("random standard Gaussian noise
added to the linear predictor"). The columns are split into J contiguous blocks (J = 2: 10 + 10;
J = 10: 2 each).

Writes two data directories under OUT (default build/vfl_logreg/J<J>):
  augmented/  data.json {N}, server.json {y} (labels on the server), silo-k.json {P, x}
  power/      data.json {N, y} (labels public), silo-k.json {P, x}
  pooled/     data.json {P}, silo-1.json {N, x, y}: every column in one place (logreg_pooled.fvi)
and OUT/truth.json with b and beta.
"""
import argparse
import json
import math
import os
import random

SEED = 20250604
N, P = 500, 20


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--silos", type=int, default=2, metavar="J", help="number of silos (divides 20)")
    parser.add_argument("--output", help="output folder (default build/vfl_logreg/J<J>)")
    args = parser.parse_args()
    if args.silos < 1 or P % args.silos:
        parser.error("--silos must divide %d" % P)
    out = os.path.normpath(args.output or os.path.join(here, "..", "..", "build", "vfl_logreg", "J%d" % args.silos))
    rng = random.Random(SEED)
    b = rng.gauss(0, 1)
    beta = [rng.gauss(0, 1) for _ in range(P)]
    x = [[round(rng.gauss(0, 1), 6) for _ in range(P)] for _ in range(N)]
    y = []
    for row in x:
        eta = b + sum(c * v for c, v in zip(beta, row)) + rng.gauss(0, 1)
        y.append(1 if rng.random() < 1 / (1 + math.exp(-eta)) else 0)
    width = P // args.silos
    for layout in ("augmented", "power"):
        d = os.path.join(out, layout)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))
        if layout == "augmented":
            write(os.path.join(d, "data.json"), {"N": N})
            write(os.path.join(d, "server.json"), {"y": y})
        else:
            write(os.path.join(d, "data.json"), {"N": N, "y": y})
        for k in range(args.silos):
            cols = range(k * width, (k + 1) * width)
            write(os.path.join(d, "silo-%d.json" % (k + 1)), {"P": width, "x": [[r[c] for c in cols] for r in x]})
    pooled = os.path.join(out, "pooled")
    os.makedirs(pooled, exist_ok=True)
    write(os.path.join(pooled, "data.json"), {"P": P})
    write(os.path.join(pooled, "silo-1.json"), {"N": N, "x": x, "y": y})
    write(os.path.join(out, "truth.json"), {"b": b, "beta": beta})
    print("vfl_logreg: %d rows, %d silos of %d columns, %d positive; wrote %s" % (N, args.silos, width, sum(y), out))


if __name__ == "__main__":
    main()
