#!/usr/bin/env python3
"""10-fold cross-validation splits of the Pima Indians diabetes data for the split networks of
seed 004 section 5.3 (deterministic, seed 20250605). The paper's Kaggle heart-failure data is not
packaged in Debian; Pima (768 rows, 8 features, binary outcome; examples/pima_logreg/raw/, from
r-cran-mlbench) stands in for it.

The rows are shuffled and dealt into 10 folds (77 or 76 rows). For fold F the other nine folds
are the training rows; each feature is standardised with the training rows' mean and sample sd
(the test rows use the same statistics). Silo 1 holds the first four features (pregnant,
glucose, pressure, triceps), silo 2 the other four (insulin, mass, pedigree, age): the paper
gives its first client the first five of eleven covariates.

Writes OUT/fold-F/{train,test}/ (F = 1..10), each with data.json {N, H = 8}, server.json {y}
(the labels stay on the server) and silo-K.json {P = 4, x}. OUT defaults to build/split_nn.
"""
import argparse
import importlib.util
import json
import os
import random
import statistics

SEED = 20250605
HERE = os.path.dirname(os.path.abspath(__file__))
FOLDS, H = 10, 8


def pima_rows():
    path = os.path.join(HERE, "..", "pima_logreg", "generate.py")
    spec = importlib.util.spec_from_file_location("pima_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read_raw(os.path.join(HERE, "..", "pima_logreg", "raw", "pima.csv"))


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def write_part(out, rows, stats):
    os.makedirs(out, exist_ok=True)
    x = [[round((v - m) / s, 6) for v, (m, s) in zip(features, stats)] for features, _ in rows]
    write(os.path.join(out, "data.json"), {"N": len(rows), "H": H})
    write(os.path.join(out, "server.json"), {"y": [label for _, label in rows]})
    for k, cols in enumerate([range(0, 4), range(4, 8)], start=1):
        write(os.path.join(out, "silo-%d.json" % k), {"P": len(cols), "x": [[r[c] for c in cols] for r in x]})


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default=os.path.join(HERE, "..", "..", "build", "split_nn"))
    args = parser.parse_args()
    rows = pima_rows()
    order = list(range(len(rows)))
    random.Random(SEED).shuffle(order)
    folds = [order[f::FOLDS] for f in range(FOLDS)]
    for f, test in enumerate(folds, start=1):
        held = set(test)
        train = [rows[i] for i in order if i not in held]
        stats = [(statistics.mean(c), statistics.stdev(c)) for c in zip(*[features for features, _ in train])]
        base = os.path.join(os.path.normpath(args.output), "fold-%d" % f)
        write_part(os.path.join(base, "train"), train, stats)
        write_part(os.path.join(base, "test"), [rows[i] for i in test], stats)
    print("split_nn: %d rows in %d folds; wrote %s" % (len(rows), FOLDS, os.path.normpath(args.output)))


if __name__ == "__main__":
    main()
