#!/usr/bin/env python3
"""A spatial regression split by region, the stand-in for seed 003 §6.2.2's European weather
stations grouped by country: average annual precipitation at 1720 North American stations
(reference/rainfall.csv, from Debian's r-cran-fields by reference/export_rainfall.R). The inputs
are a station's longitude and latitude, the outcome the log of its precipitation; all three are
standardised by the training stations' means and sds.

A random tenth of the stations (seed 3005) is held out (test.json); the others are grouped by
region, the cells of a grid of 10 degrees of longitude by 8 of latitude: each cell with at least
10 training stations is a silo, and a smaller cell's stations join the nearest such cell (by the
distance between the cells' centres). Regions differ in size and climate, so the silos are not
alike (non-iid), as the paper's countries. Writes data/data.json (M = 100), data/silo-K.json (N,
x, y), data/pooled/ (every training row on one party: global VI) and test.json. Deterministic.
"""
import csv
import json
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
M, MIN_ROWS = 100, 10


def main():
    with open(os.path.join(HERE, "reference", "rainfall.csv")) as f:
        rows = [(float(r["longitude"]), float(r["latitude"]), math.log(float(r["precip"]))) for r in csv.DictReader(f)]
    if len(rows) != 1720:
        raise SystemExit(f"sparse_gp_rainfall: expected 1720 stations in rainfall.csv, got {len(rows)}")
    order = list(range(len(rows)))
    random.Random(3005).shuffle(order)
    n_test = len(rows) // 10
    test, train = [rows[i] for i in order[:n_test]], [rows[i] for i in order[n_test:]]
    cols = list(zip(*train))
    mean = [sum(c) / len(c) for c in cols]
    sd = [math.sqrt(sum((v - m) ** 2 for v in c) / (len(c) - 1)) for c, m in zip(cols, mean)]

    def std(r):
        return [(v - m) / d for v, m, d in zip(r, mean, sd)]

    def cell(r):
        return (math.floor(r[0] / 10), math.floor(r[1] / 8))

    cells = {}
    for r in train:
        cells.setdefault(cell(r), []).append(r)
    big = sorted(c for c, members in cells.items() if len(members) >= MIN_ROWS)
    for c, members in list(cells.items()):
        if c in big:
            continue
        near = min(big, key=lambda b: (b[0] - c[0]) ** 2 + (b[1] - c[1]) ** 2)
        cells[near] += members
        del cells[c]
    out = os.path.join(HERE, "data")
    os.makedirs(os.path.join(out, "pooled"), exist_ok=True)
    for folder in (out, os.path.join(out, "pooled")):
        with open(os.path.join(folder, "data.json"), "w") as f:
            json.dump({"M": M}, f)
            f.write("\n")

    def write(path, part):
        s = [std(r) for r in part]
        with open(path, "w") as f:
            json.dump({"N": len(s), "x": [r[:2] for r in s], "y": [r[2] for r in s]}, f)
            f.write("\n")

    for k, c in enumerate(big, start=1):
        write(os.path.join(out, f"silo-{k}.json"), cells[c])
    write(os.path.join(out, "pooled", "silo-1.json"), train)
    write(os.path.join(HERE, "test.json"), test)
    sizes = [len(cells[c]) for c in big]
    print(f"sparse_gp_rainfall: {len(big)} regions of {min(sizes)} to {max(sizes)} stations ({len(train)} in all), "
          f"{len(test)} held out")


if __name__ == "__main__":
    main()
