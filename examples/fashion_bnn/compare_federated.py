#!/usr/bin/env python3
"""Seed 001's FashionMNIST comparison on this machine: its federated methods against PVI.

100 silos with Dirichlet(1.0) label skew (generate.py --silos 100 --partition dirichlet), the
784-200-10 ReLU network of fashion_bnn.fvi with its N(0, 1) priors, nll and a mean-field q;
10 silos asked per round (clients_per_round), each one epoch of minibatches of 64 with Adam
(lr 0.001, 2 draws a step, float32), the first q N(prior mean + N(0, 0.1^2), 0.0316^2) (the
paper's sigma^2_init 1e-3). Methods: pvi (damping 1/10, its default with 10 silos asked a
round), fedavg and fedvem (server sgd, lr 1:
plain averaging and the exact M-step), fedavg_fsvi and fedvem_hsvi (the same servers, a
function-space prior at one context point per step, beta 0.005 as the paper tuned). After the last round: clean test accuracy, NLL (minus
the test log predictive density per row), ECE (15 bins) and OOD-AUROC by the predictive entropy
against ood-noise (half uniform, half normal pixels: the mean of the two sets' AUROCs), each as
mean +- standard error over the seeds. `--model lenet5` runs lenet5.fvi (seed 001's LeNet-5) in the
same setting instead of the MLP. The held-out sets are scored after the last round only (refresh =
rounds): for LeNet-5 that evaluation (4,000 rows at 200 draws) takes longer than 10 rounds of training.

usage: compare_federated.py [--model mlp|lenet5] [--rounds R] [--seeds 1 2 3] [--methods ...] [--data DIR] [--out DIR]
"""
import argparse
import csv
import math
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
METHODS = {
    "pvi": ["method=pvi", "divergence=kl", "server_damping=on"],
    "fedavg": ["method=fedavg"],
    "fedvem": ["method=fedvem"],
    # seed 001 App. E.1: one context point per step, a silo's image plus U[-1/255, 1/255] per
    # pixel, and the paper's beta
    "fedavg_fsvi": ["method=fedavg_fsvi", "function_kl_weight=0.005"],
    "fedvem_hsvi": ["method=fedvem_hsvi", "function_kl_weight=0.005"],
}
# fashion_bnn.fvi's inference block is FedGVI's 3-silo budget (README): every key it sets that these
# runs read is set here.
COMMON = ["loss=nll", "loss_weight=1", "clients_per_round=10", "epochs=1", "batch_size=64", "precision=float32", "init_sd=0.0316",
          "init_mean_sd=0.1", "mc_samples=2", "output_draws=10"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "lenet5"], default="mlp")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.001, help="the silos' Adam step (lenet5.fvi's own: 0.005)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--data", default=os.path.join(ROOT, "build", "fashion_bnn", "data-dirichlet100"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    model = os.path.join(ROOT, "examples", "fashion_bnn", "fashion_bnn.fvi" if args.model == "mlp" else "lenet5.fvi")
    if args.out is None:
        args.out = os.path.join(ROOT, "build", "fashion_bnn", "federated" if args.model == "mlp" else "federated-lenet5")
    if not os.path.exists(os.path.join(args.data, "ood-noise.json")):
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "fashion_bnn", "generate.py"), "--contamination",
                        "0", "--silos", "100", "--partition", "dirichlet", "--alpha", "1", "--ood", "--test-rows",
                        "2000", "--output", args.data], check=True)
    fvic = os.path.join(ROOT, "build", "bin", "fvic")
    results = {}
    for method in args.methods:
        for seed in args.seeds:
            out = os.path.join(args.out, f"{method}-{seed}")
            cmd = [fvic, "run", model, "--data", args.data,
                   "--output", out, "--quiet", "--test", os.path.join(args.data, "test.json"), "--ood",
                   os.path.join(args.data, "ood-noise.json")]
            for kv in COMMON + METHODS[method] + [f"rounds={args.rounds}", f"refresh={args.rounds}", f"lr={args.lr}", f"seed={seed}"]:
                cmd += ["--set", kv]
            subprocess.run(cmd, check=True)
            with open(os.path.join(out, "metrics.csv")) as f:
                last = list(csv.DictReader(f))[-1]
            row = (float(last["test_accuracy"]), -float(last["test_log_density"]), float(last["test_ece"]),
                   float(last["test_ood_auroc"]), float(last["seconds"]))
            results.setdefault(method, []).append(row)
            print(f"{method} seed {seed}: accuracy {row[0]:.4f}  nll {row[1]:.4f}  ece {row[2]:.4f}  "
                  f"ood-auroc {row[3]:.4f}  ({row[4]:.0f} s)", flush=True)
    print(f"\n{args.model}, {args.rounds} rounds, lr {args.lr}, seeds {args.seeds}: mean +- standard error")
    print("| method | accuracy (%) | NLL | ECE (%) | OOD-AUROC (%) | seconds |")
    print("|---|---|---|---|---|---|")
    for method, rows in results.items():
        def cell(i, scale, digits):
            xs = [r[i] * scale for r in rows]
            m = sum(xs) / len(xs)
            se = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) if len(xs) > 1 else float("nan")
            return f"{m:.{digits}f} ± {se:.{digits}f}"
        print(f"| {method} | {cell(0, 100, 2)} | {cell(1, 1, 4)} | {cell(2, 100, 2)} | {cell(3, 100, 2)} | "
              f"{cell(4, 1, 0)} |")


if __name__ == "__main__":
    main()
