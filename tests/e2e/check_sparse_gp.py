#!/usr/bin/env python3
"""End-to-end checks of seed 003's federated sparse GP through `fvic run`: usage
check_sparse_gp.py FVIC CACHE CASE.

  synthetic   examples/sparse_gp_synthetic (5 silos, each one stretch of the line; the GP's
              hyperparameters fixed at the values the data were drawn with), run with its
              defaults and --test: the stopping rule says converged; every round's objective is a
              lower bound of the exact GP's log evidence log N(y; 0, K + sigma^2 I), computed here
              in Python from the data files (each of the objective's draws of Z is a sparse-GP
              bound, which no Z can lift above the evidence; the Z prior's weighted KL only
              lowers it); the held-out predictive is reported beside the exact GP's.
  fedavg      the same data with Z a hyperparameter (seed 003 Algorithm 1, FedAvg of Z with
              weights N_k / N): the plan says so, the run completes, its objective is a bound too.

Exit 0 on success, 1 with a message on the first failure.
"""
import csv
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_defaults import backward, cholesky, forward  # noqa: E402
from check_pvi import EXAMPLES, require, run_case, run_fvic  # noqa: E402

EXAMPLE = os.path.join(EXAMPLES, "sparse_gp_synthetic")


def exact_gp(data_dir, test_file):
    """log p(y) of the pooled training rows, and the held-out mean log predictive density, of the
    exact GP with the data's hyperparameters."""
    with open(os.path.join(data_dir, "data.json")) as f:
        public = json.load(f)
    alpha, rho, sigma = public["alpha"], public["rho"], public["sigma"]
    xs, ys = [], []
    k = 1
    while os.path.exists(os.path.join(data_dir, f"silo-{k}.json")):
        with open(os.path.join(data_dir, f"silo-{k}.json")) as f:
            s = json.load(f)
        xs += s["x"]
        ys += s["y"]
        k += 1

    def kern(a, b):
        return alpha ** 2 * math.exp(-0.5 * (a - b) ** 2 / rho ** 2)

    n = len(xs)
    low = cholesky([[kern(a, b) + (sigma ** 2 if i == j else 0.0) for j, b in enumerate(xs)] for i, a in enumerate(xs)])
    z = forward(low, ys)
    log_evidence = -0.5 * sum(v * v for v in z) - sum(math.log(low[i][i]) for i in range(n)) - 0.5 * n * math.log(2 * math.pi)
    weights = backward(low, z)  # (K + sigma^2 I)^-1 y
    with open(test_file) as f:
        test = json.load(f)
    lpd = 0.0
    for x, y in zip(test["x"], test["y"]):
        kx = [kern(x, a) for a in xs]
        mean = sum(a * b for a, b in zip(kx, weights))
        v = forward(low, kx)
        var = alpha ** 2 - sum(t * t for t in v) + sigma ** 2
        lpd += -0.5 * math.log(2 * math.pi * var) - 0.5 * (y - mean) ** 2 / var
    return log_evidence, lpd / len(test["y"])


def metrics(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def check_bound(rows, log_evidence, label):
    for r in rows:
        elbo = float(r["elbo"])
        require(math.isfinite(elbo), f"{label}: round {r['round']}'s objective is {r['elbo']}")
        # Float error of the two sums (300 terms of size ~1): far below 1e-6 of |log p(y)|.
        require(elbo <= log_evidence + 1e-6 * abs(log_evidence),
                f"{label}: round {r['round']}'s objective {elbo} exceeds the exact log evidence {log_evidence}")


def case_synthetic(fvic, cache, work):
    log_evidence, exact_lpd = exact_gp(os.path.join(EXAMPLE, "data"), os.path.join(EXAMPLE, "test.json"))
    out = os.path.join(work, "out")
    p = run_fvic(fvic, cache, os.path.join(EXAMPLE, "sparse_gp_synthetic.fvi"), os.path.join(EXAMPLE, "data"), out,
                 test=os.path.join(EXAMPLE, "test.json"))
    with open(os.path.join(out, "posterior.json")) as f:
        post = json.load(f)
    require(post["converged"], f"not converged with the defaults: {p.stdout}")
    rows = metrics(out)
    check_bound(rows, log_evidence, "sparse_gp_synthetic")
    last = rows[-1]
    require("the sparse-GP variational bound" in p.stdout, "the run's end does not name the surrogate it fits")
    print(f"synthetic: converged after {post['iterations']} rounds; objective {float(last['elbo']):.2f} <= exact log "
          f"evidence {log_evidence:.2f}; held-out lpd {float(last['test_lpd']):.4f} per row (exact GP "
          f"{exact_lpd:.4f}), RMSE {float(last['test_rmse']):.4f}; train lpd {float(last['train_lpd']):.4f}")


def case_fedavg(fvic, cache, work):
    model = os.path.join(work, "sparse_gp_fedavg.fvi")
    with open(os.path.join(EXAMPLE, "sparse_gp_synthetic.fvi")) as f:
        text = f.read()
    text = text.replace("parameters {\n  global array[M] real Z;", "hyperparameters {\n  array[M] real Z;")
    text = text.replace("  Z ~ normal(0, 1);\n", "")
    require("hyperparameters {" in text and "Z ~" not in text, "could not rewrite the example's Z as a hyperparameter")
    with open(model, "w") as f:
        f.write(text)
    plan = subprocess.run([fvic, "plan", model], capture_output=True, text=True, timeout=60)
    require(plan.returncode == 0 and "FedAvg, Algorithm 1" in plan.stdout, f"the plan does not name Algorithm 1:\n{plan.stdout}{plan.stderr}")
    log_evidence, exact_lpd = exact_gp(os.path.join(EXAMPLE, "data"), os.path.join(EXAMPLE, "test.json"))
    out = os.path.join(work, "out")
    run_fvic(fvic, cache, model, os.path.join(EXAMPLE, "data"), out, test=os.path.join(EXAMPLE, "test.json"))
    with open(os.path.join(out, "posterior.json")) as f:
        post = json.load(f)
    z = post["variables"].get("Z")
    require(z and len(z["mean"]) == 15 and all(math.isfinite(v) for v in z["mean"]) and all(v == 0 for v in z["sd"]),
            f"posterior.json does not hold the shared Z as a point estimate: {z}")
    rows = metrics(out)
    # Z is one point: every round's objective is a sparse-GP bound at that Z.
    check_bound(rows, log_evidence, "Algorithm 1")
    print(f"fedavg: {len(rows)} rounds, objective {float(rows[-1]['elbo']):.2f} <= exact log evidence "
          f"{log_evidence:.2f}; held-out lpd {float(rows[-1]['test_lpd']):.4f} (exact GP {exact_lpd:.4f})")


CASES = {"synthetic": case_synthetic, "fedavg": case_fedavg}

if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
