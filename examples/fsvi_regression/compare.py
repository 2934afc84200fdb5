#!/usr/bin/env python3
"""The predictive function of fsvi_regression's fits inside and outside the data's range.

Usage: compare.py OUT_A [OUT_B ...] [--svg FILE]
Each OUT is the output folder of `fvic run examples/fsvi_regression/fsvi_regression.fvi --data
examples/fsvi_regression/data --output OUT` (its draws.csv: the generated f_grid at every draw of
q). For each, prints the predictive sd of f averaged over the grid points inside the training
inputs' range [0.5, 4.1) and over those outside it (an equally wide range either side, spec 001
§3), and their ratio; with --svg, draws each fit's mean and +-2 sd band over the data.
"""
import argparse
import csv
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
LOW, HIGH = 0.5, 4.1


def read_draws(out):
    """The f_grid columns of draws.csv, without its first row (q's mean), as a list of rows."""
    with open(os.path.join(out, "draws.csv")) as f:
        lines = [line for line in f if not line.startswith("#")]
    rows = list(csv.reader(lines))
    header = rows[0]
    columns = [i for i, name in enumerate(header) if name.startswith("f_grid.")]
    if not columns:
        raise SystemExit(f"{out}/draws.csv has no f_grid columns")
    return [[float(r[i]) for i in columns] for r in rows[2:]]


def summarise(draws):
    n = len(draws)
    means = [sum(d[j] for d in draws) / n for j in range(len(draws[0]))]
    sds = [math.sqrt(sum((d[j] - means[j]) ** 2 for d in draws) / (n - 1)) for j in range(len(means))]
    return means, sds


def spread(grid, sds):
    inside = [s for x, s in zip(grid, sds) if LOW <= x < HIGH]
    outside = [s for x, s in zip(grid, sds) if not LOW <= x < HIGH]
    return sum(inside) / len(inside), sum(outside) / len(outside)


def svg(path, grid, fits, points):
    width, height, pad = 720, 420, 40
    ys = [y for _, y in points] + [m + 2 * s for _, (m, sd) in fits for m, s in zip(m, sd)] + \
         [m - 2 * s for _, (m, sd) in fits for m, s in zip(m, sd)]
    y_lo, y_hi = max(min(ys), -12), min(max(ys), 12)
    def px(x):
        return pad + (x - grid[0]) / (grid[-1] - grid[0]) * (width - 2 * pad)
    def py(y):
        return height - pad - (min(max(y, y_lo), y_hi) - y_lo) / (y_hi - y_lo) * (height - 2 * pad)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
             f'<rect x="{px(LOW):.1f}" y="{pad}" width="{px(HIGH) - px(LOW):.1f}" height="{height - 2 * pad}" '
             'fill="#f2f2f2"/>']
    for k, (name, (means, sds)) in enumerate(fits):
        c = colours[k % len(colours)]
        upper = [f"{px(x):.1f},{py(m + 2 * s):.1f}" for x, m, s in zip(grid, means, sds)]
        lower = [f"{px(x):.1f},{py(m - 2 * s):.1f}" for x, m, s in reversed(list(zip(grid, means, sds)))]
        parts.append(f'<polygon points="{" ".join(upper + lower)}" fill="{c}" fill-opacity="0.18"/>')
        line = " ".join(f"{px(x):.1f},{py(m):.1f}" for x, m in zip(grid, means))
        parts.append(f'<polyline points="{line}" fill="none" stroke="{c}" stroke-width="2"/>')
        parts.append(f'<text x="{pad + 10}" y="{pad + 16 * (k + 1)}" fill="{c}" font-size="13">{name}: mean, '
                     f'+-2 sd</text>')
    for x, y in points:
        parts.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="black"/>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outs", nargs="+")
    parser.add_argument("--svg")
    args = parser.parse_args()
    with open(os.path.join(HERE, "data", "data.json")) as f:
        grid = [row[0] for row in json.load(f)["x_grid"]]
    fits = []
    print(f"{'fit':<28} {'sd inside':>10} {'sd outside':>11} {'ratio':>7}")
    for out in args.outs:
        means, sds = summarise(read_draws(out))
        inside, outside = spread(grid, sds)
        name = os.path.basename(os.path.normpath(out))
        print(f"{name:<28} {inside:10.3f} {outside:11.3f} {outside / inside:7.2f}")
        fits.append((name, (means, sds)))
    if args.svg:
        points = []
        for silo in ("silo-1.json", "silo-2.json"):
            with open(os.path.join(HERE, "data", silo)) as f:
                d = json.load(f)
            points += [(x[0], y) for x, y in zip(d["x"], d["y"])]
        svg(args.svg, grid, fits, points)


if __name__ == "__main__":
    main()
