#!/usr/bin/env python3
"""10-fold cross-validation of the split networks (seed 004 section 5.3, Table 3) on the folds of
generate.py: the deterministic split network and the hierarchical Bayes split network at each
rho, every fold trained on its nine other folds and scored on itself. Prints, per variant, the
mean and sd over the folds of the test accuracy and of the mean test log likelihood (the log
posterior predictive density per row), and writes OUT/cv.json.
Usage: run_cv.py [--iterations T] [--lr LR] [--rho R ...] [--folds F] [--output OUT]"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def run(fvic, model, fold_dir, out, sets):
    cmd = [fvic, "run", model, "--data", os.path.join(fold_dir, "train"), "--test", os.path.join(fold_dir, "test"),
           "--output", out, "--quiet"]
    for kv in sets:
        cmd += ["--set", kv]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "metrics.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    return float(last["test_accuracy"]), float(last["test_log_density"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=10000)
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--rho", type=float, nargs="+", default=[1.0, 5.0, 10.0])
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "split_nn"))
    parser.add_argument("--output", default=os.path.join(ROOT, "build", "split_nn", "cv"))
    parser.add_argument("--fvic", default=os.path.join(ROOT, "build", "bin", "fvic"))
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.data, "fold-1")):
        subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "--output", args.data], check=True)
    common = ["rounds=%d" % args.iterations, "lr=%g" % args.lr, "refresh=%d" % args.iterations]
    variants = [("split NN", "split_nn_deterministic.fvi", [])]
    variants += [("hier. Bayes split NN, rho = %g" % r, "split_nn.fvi", ["rho=%g" % r]) for r in args.rho]
    results = {}
    for name, model, sets in variants:
        acc, lpd = [], []
        for f in range(1, args.folds + 1):
            out = os.path.join(args.output, "%s-fold-%d" % (model[:-4] + "".join(sets), f))
            a, l = run(args.fvic, os.path.join(HERE, model), os.path.join(args.data, "fold-%d" % f), out, common + sets)
            acc.append(100 * a)
            lpd.append(l)
        results[name] = {"accuracy": acc, "log_likelihood": lpd}
        print("%-34s accuracy %.2f%% +- %.2f   mean test log likelihood %.3f +- %.3f" %
              (name, statistics.mean(acc), statistics.stdev(acc), statistics.mean(lpd), statistics.stdev(lpd)), flush=True)
    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "cv.json"), "w") as f:
        json.dump({"iterations": args.iterations, "lr": args.lr, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
