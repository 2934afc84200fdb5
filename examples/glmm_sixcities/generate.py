#!/usr/bin/env python3
"""Splits the Six Cities wheeze data into the two silos of seed 002 section 4.3 (deterministic,
seed 20250603): the 537 children are shuffled and the first 300 go to silo 1, the other 237 to
silo 2, each child with all 4 of its yearly observations.

Source: reference/ohio.csv, Debian r-cran-geepack's `ohio` exported by reference/export_ohio.R
(id = child, age = age - 9 in -2..1, smoke = mother smoked, resp = wheeze). Writes data/data.json
(empty: the model has no public data) and data/silo-K.json with N, C, child (1..C within the
silo, in order of first appearance), smoke, age and wheeze.
"""
import csv
import json
import os
import random

SEED = 20250603
HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    with open(os.path.join(HERE, "reference", "ohio.csv")) as f:
        rows = [{k: int(v) for k, v in r.items()} for r in csv.DictReader(f)]
    children = sorted({r["id"] for r in rows})
    if len(rows) != 2148 or len(children) != 537:
        raise SystemExit(f"glmm_sixcities: expected 2148 rows of 537 children in ohio.csv, "
                         f"got {len(rows)} rows of {len(children)}")
    random.Random(SEED).shuffle(children)
    out = os.path.join(HERE, "data")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "data.json"), "w") as f:
        f.write("{}\n")
    for k, ids in enumerate([children[:300], children[300:]], start=1):
        index = {c: i + 1 for i, c in enumerate(ids)}
        mine = sorted((r for r in rows if r["id"] in index), key=lambda r: (index[r["id"]], r["age"]))
        part = {"N": len(mine), "C": len(ids),
                "child": [index[r["id"]] for r in mine],
                "smoke": [r["smoke"] for r in mine],
                "age": [r["age"] for r in mine],
                "wheeze": [r["resp"] for r in mine]}
        with open(os.path.join(out, f"silo-{k}.json"), "w") as f:
            json.dump(part, f)
            f.write("\n")
        print(f"glmm_sixcities: silo {k}: {len(ids)} children, {len(mine)} observations, "
              f"{sum(part['wheeze'])} wheezing")


if __name__ == "__main__":
    main()
