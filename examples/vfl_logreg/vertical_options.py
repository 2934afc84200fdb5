#!/usr/bin/env python3
"""The vertical options side by side on regressions whose columns are correlated across silos.

usage: vertical_options.py FVIC [WORK]

For each outcome family (Gaussian with known sigma, logistic, Poisson) it writes the data and the
model of tests/e2e/check_defaults.py's vfl_* cases (3 silos of 2 columns, N = 300, every two
columns correlated 0.56, labels on the server, no inference block), computes the written model's
posterior there (exact for the Gaussian; Laplace + importance sampling otherwise), runs `fvic run`
with each option, and prints one Markdown row per run: the worst coefficient's distance from the
posterior mean in posterior sds, the range of sd ratios, k-hat, the iterations the stopping rule
took and the bytes silo 1 exchanged per iteration. docs/user-guide.md's table is its output.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import check_defaults as cd  # noqa: E402

OPTIONS = [
    ("vfl_exact (default: full-rank across the parties)", []),
    ("vfl_exact, family = meanfield", ["family=meanfield"]),
    ("vfl_augmented, rho = 1 (AXDA)", ["method=vfl_augmented", "rho=1"]),
    ("vfl_augmented, rho = 0.25 (AXDA)", ["method=vfl_augmented", "rho=0.25"]),
]


def fitted(out):
    with open(os.path.join(out, "posterior.json")) as f:
        post = json.load(f)
    fit = [(post["variables"]["b"]["mean"][0], post["variables"]["b"]["sd"][0])]
    for k in range(1, cd.VFL_SILOS + 1):
        with open(os.path.join(out, f"silo-{k}", "posterior.json")) as f:
            beta = json.load(f)["variables"]["beta"]
        fit += list(zip(beta["mean"], beta["sd"]))
    with open(os.path.join(out, "metrics.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    return post, fit, float(last["silo1_bytes_per_iteration"])


def main():
    fvic = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="vertical-options-")
    print("| outcome | option | worst mean (posterior sds) | sd ratios | k-hat | iterations | silo 1 bytes/iteration |")
    print("|---|---|---|---|---|---|---|")
    for family in ("gaussian", "logistic", "poisson"):
        folder = os.path.join(work, family)
        model = os.path.join(folder, "model.fvi")
        data = os.path.join(folder, "data")
        if not os.path.isdir(data):
            os.makedirs(folder, exist_ok=True)
            with open(model, "w") as f:
                f.write(cd.vfl_model(family))
            x, y = cd.vfl_generate(family)
            cd.vfl_write(data, family, x, y)
        x, y = cd.vfl_generate(family)
        ref = cd.vfl_reference(family, x, y)
        for i, (label, sets) in enumerate(OPTIONS):
            out = os.path.join(folder, f"out{i}")
            cmd = [fvic, "run", model, "--data", data, "--output", out, "--quiet"]
            for s in sets:
                cmd += ["--set", s]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            post, fit, bytes_per = fitted(out)
            z = max(abs(m - rm) / rs for (m, _), rm, rs in zip(fit, ref["mean"], ref["sd"]))
            ratios = [s / rs for (_, s), rs in zip(fit, ref["sd"])]
            khat = post.get("khat", float("nan"))
            print(f"| {family} | {label} | {z:.2f} | {min(ratios):.2f}-{max(ratios):.2f} | {khat:.2f} | "
                  f"{post['iterations']} | {bytes_per:.0f} |", flush=True)


if __name__ == "__main__":
    main()
