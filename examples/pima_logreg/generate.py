#!/usr/bin/env python3
"""Pima Indians diabetes for a federated logistic regression: deterministic, seed 20250507.

Reads raw/pima.csv (768 rows: 8 features and `diabetes` = pos/neg; see raw/README.md), shuffles
the rows, holds out round(0.2 * 768) = 154 as the test set and keeps 614 for training, deals the
training rows into 3 silos (205, 205, 204), and standardises each feature with the mean and the
sample standard deviation (n - 1) of the *training* rows (the test rows use the same statistics).
y = 1 for `pos`, 0 for `neg`.

Writes OUT/data/{data.json (D = 8), silo-1..3.json, test.json} and OUT/standardisation.json (the
feature names, means and sds, so x * sd + mean gives back the raw values). OUT defaults to this
script's folder.
"""
import csv
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20250507
SILOS, TEST_FRACTION = 3, 0.2
FEATURES = ["pregnant", "glucose", "pressure", "triceps", "insulin", "mass", "pedigree", "age"]


def read_raw(path):
    """Rows (features as floats, y as 0/1) of the exported CSV; exits with a message naming the
    file, line and column on anything unexpected."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        if header != FEATURES + ["diabetes"]:
            sys.exit(f"{path}: header {header} is not {FEATURES + ['diabetes']}")
        rows = []
        for line, rec in enumerate(reader, start=2):
            if len(rec) != 9 or rec[8] not in ("pos", "neg"):
                sys.exit(f"{path}:{line}: expected 8 numbers and pos/neg, got {rec}")
            try:
                rows.append(([float(v) for v in rec[:8]], 1 if rec[8] == "pos" else 0))
            except ValueError as e:
                sys.exit(f"{path}:{line}: {e}")
    return rows


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = fvidata.example_arguments(__file__, __doc__, "data/ and standardisation.json")
    parser.add_argument("--raw", default=os.path.join(here, "raw", "pima.csv"),
                        help="the exported CSV (default: %(default)s)")
    args = parser.parse_args()

    rows = read_raw(args.raw)
    rng = random.Random(SEED)
    rng.shuffle(rows)
    n_test = round(TEST_FRACTION * len(rows))
    test, train = rows[:n_test], rows[n_test:]

    d = len(FEATURES)
    mean = [math.fsum(x[j] for x, _ in train) / len(train) for j in range(d)]
    sd = [math.sqrt(math.fsum((x[j] - mean[j]) ** 2 for x, _ in train) / (len(train) - 1))
          for j in range(d)]

    def part(rs):
        return {"N": len(rs),
                "x": [[(x[j] - mean[j]) / sd[j] for j in range(d)] for x, _ in rs],
                "y": [y for _, y in rs]}

    silos = fvidata.split_round_robin(train, SILOS)
    fvidata.write_data_dir(os.path.join(args.output, "data"), {"D": d},
                           [part(s) for s in silos], part(test))
    fvidata.write_json(os.path.join(args.output, "standardisation.json"),
                       {"seed": SEED, "features": FEATURES, "mean": mean, "sd": sd,
                        "sd_divisor": "n - 1", "train_rows": len(train), "test_rows": n_test})
    print(f"pima_logreg: {len(train)} training rows in silos {[len(s) for s in silos]}, "
          f"{n_test} test rows; positives: train {sum(y for _, y in train)}, "
          f"test {sum(y for _, y in test)}")


if __name__ == "__main__":
    main()
