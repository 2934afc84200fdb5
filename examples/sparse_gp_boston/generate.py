#!/usr/bin/env python3
"""Boston housing (reference/boston.csv, from Debian's r-cran-mass by reference/export_boston.R)
in seed 003 §6.2.1's setting: 10 random train/test splits (90% / 10%, seed 30031 + split), each
split's training rows shuffled into 10 homogeneous silos. Inputs and the outcome are standardised
by the training rows' means and sds (the paper standardises every dataset); the test rows use the
same transformation.

Writes split-S/data.json (D, M), split-S/silo-1.json .. silo-10.json (N, x, y), split-S/test.json
split-S/pooled/ (data.json and one silo-1.json holding every training row: global VI on the
pooled data, the paper's gold standard), split-S/fixed-z/ (the silos' files, and data.json with
inducing inputs Z drawn from a standard normal, seed 30131 + split: the paper's fixed-Z baseline,
sparse_gp_boston_fixed_z.fvi) and split-S/scale.json (the outcome's training mean and sd,
to report metrics in the data's units), for S = 1 .. 10.
"""
import csv
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
SPLITS, SILOS, M = 10, 10, 100


def main():
    with open(os.path.join(HERE, "reference", "boston.csv")) as f:
        rows = [[float(v) for v in r] for r in list(csv.reader(f))[1:]]
    if len(rows) != 506 or any(len(r) != 14 for r in rows):
        raise SystemExit(f"sparse_gp_boston: expected 506 rows of 14 columns in boston.csv, got {len(rows)}")
    for s in range(1, SPLITS + 1):
        order = list(range(len(rows)))
        random.Random(30031 + s).shuffle(order)
        n_test = len(rows) // 10
        test, train = [rows[i] for i in order[:n_test]], [rows[i] for i in order[n_test:]]
        cols = list(zip(*train))
        mean = [sum(c) / len(c) for c in cols]
        sd = [math.sqrt(sum((v - m) ** 2 for v in c) / (len(c) - 1)) or 1.0 for c, m in zip(cols, mean)]

        def standardise(r):
            return [(v - m) / d for v, m, d in zip(r, mean, sd)]

        train_s, test_s = [standardise(r) for r in train], [standardise(r) for r in test]
        out = os.path.join(HERE, f"split-{s}")
        os.makedirs(os.path.join(out, "pooled"), exist_ok=True)
        os.makedirs(os.path.join(out, "fixed-z"), exist_ok=True)
        z_rng = random.Random(30131 + s)
        with open(os.path.join(out, "fixed-z", "data.json"), "w") as f:
            json.dump({"D": 13, "M": M, "Z": [[z_rng.gauss(0, 1) for _ in range(13)] for _ in range(M)]}, f)
            f.write("\n")
        public = {"D": 13, "M": M}
        for folder in (out, os.path.join(out, "pooled")):
            with open(os.path.join(folder, "data.json"), "w") as f:
                json.dump(public, f)
                f.write("\n")

        def write(path, part):
            with open(path, "w") as f:
                json.dump({"N": len(part), "x": [r[:13] for r in part], "y": [r[13] for r in part]}, f)
                f.write("\n")

        for k in range(SILOS):
            write(os.path.join(out, f"silo-{k + 1}.json"), train_s[k::SILOS])
            write(os.path.join(out, "fixed-z", f"silo-{k + 1}.json"), train_s[k::SILOS])
        write(os.path.join(out, "pooled", "silo-1.json"), train_s)
        write(os.path.join(out, "test.json"), test_s)
        with open(os.path.join(out, "scale.json"), "w") as f:
            json.dump({"y_mean": mean[13], "y_sd": sd[13]}, f)
            f.write("\n")
    print(f"sparse_gp_boston: {SPLITS} splits of {len(rows) - len(rows) // 10} training rows in {SILOS} silos, "
          f"{len(rows) // 10} test rows")


if __name__ == "__main__":
    main()
