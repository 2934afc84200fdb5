#!/usr/bin/env python3
"""Every decomposition with its defaults: usage  check_defaults.py FVIC CACHE CASE.

Each case runs `fvic run MODEL --data DIR --output OUT` with no --set (the model's inference
block, if any, and the built-in defaults: the stopping rule decides when to stop) and checks the
result against an independent reference with the issue's tolerances, not against what the
program prints about itself:

  pvi        examples/linreg_conjugate (PVI, 4 silos, closed-form updates): the run converged
             (the verdict line and posterior.json's "converged"), the means and sds are
             truth.json's exact_posterior (computed by generate.py) to 1e-6 relative, and k-hat
             < 0.5 (q is the exact posterior: log p - log q is constant, k-hat -inf).
  sfvi       examples/hier_logreg (SFVI, 3 silos, a local intercept each): converged; every
             beta (server) and each silo's alpha (OUT/silo-K/posterior.json) within 0.25 sd of
             long-run NUTS on the pooled data (reference/nuts_summary.json).
  sfvi_glmm  examples/glmm_sixcities (structured SFVI, the importance-weighted bound by
             default): converged; every beta within 0.25 NUTS sd of reference/nuts_summary.json.
  ridge      a case written here, not tuned for: an unstandardised linear regression (raw
             predictor of mean 50 and sd 10, so the intercept and the slope are correlated
             -0.98 a posteriori), a, b ~ normal(0, 100), sigma ~ cauchy(0, 2.5), 3 silos of 30
             rows generated with a fixed seed. Issue 26: either every mean is within 0.25
             reference sd of the posterior's and every sd within 20% of it, or the run carries
             k-hat > 0.7 and prints a warning on stderr naming the problem and what to try --
             never a silent wrong answer. The reference is computed here: given sigma the
             posterior of (a, b) is Gaussian, so a 1-D grid over log sigma with (a, b)
             integrated analytically gives the posterior's means and sds to quadrature error.

Each case prints its figures and the run's wall time. Exit 0 on success, 1 with a message on
the first failure, 77 (skipped) when a NUTS reference file is absent.
"""
import json
import math
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, posterior, require, run_case  # noqa: E402


def run_defaults(fvic, cache, model, data, out):
    """`fvic run MODEL --data DIR --output OUT`, nothing set; the finished process and its
    wall time (a cold cache includes compiling the program)."""
    cmd = [fvic, "run", model, "--data", data, "--output", out]
    start = time.monotonic()
    p = subprocess.run(cmd, env=dict(os.environ, FVIC_CACHE=cache), capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - start
    require(p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    last = [line for line in p.stdout.splitlines() if line.strip()][-2:]
    print(f"{os.path.basename(model)}: {seconds:.1f} s wall; " + " | ".join(last))
    return p, seconds


def khat(out):
    """The run's Pareto k-hat: posterior.json's "khat", which is absent when k-hat is not finite;
    then draws.csv's `# fvic_khat = ` comment says which (-Inf: constant log ratios, Inf, NaN:
    not computed)."""
    post = posterior(out)
    if "khat" in post:
        return float(post["khat"])
    with open(os.path.join(out, "draws.csv")) as f:
        for line in f:
            if not line.startswith("#"):
                break
            key, _, value = line[1:].partition("=")
            if key.strip() == "fvic_khat":
                return float(value.strip())  # float() reads -Inf, Inf and NaN
    require(False, "neither posterior.json nor draws.csv records k-hat")


def require_converged(p, out):
    post = posterior(out)
    verdict = [line for line in p.stdout.splitlines() if line.startswith(("converged after", "NOT converged"))]
    require(verdict and verdict[-1].startswith("converged after"),
            f"the run did not converge with its defaults: {verdict[-1] if verdict else 'no verdict line'}")
    require(post.get("converged") is True, f'posterior.json: "converged" is {post.get("converged")!r}')
    require("NOT converged" not in p.stderr, "a NOT converged warning on stderr:\n" + p.stderr)
    return post["iterations"]


def nuts_reference(example):
    path = os.path.join(EXAMPLES, example, "reference", "nuts_summary.json")
    if not os.path.exists(path):
        print(f"skipped: {path} is absent")
        sys.exit(77)
    with open(path) as f:
        return json.load(f)["parameters"]


def within_nuts(name, mean, sd, ref, limit=0.25):
    r = ref[name]
    z = abs(mean - r["mean"]) / r["sd"]
    print(f"  {name}: {mean:.4f} (sd {sd:.4f}), NUTS {r['mean']:.4f} (sd {r['sd']:.4f}): {z:.3f} NUTS sd apart")
    return z < limit, f"{name} is {z:.3f} NUTS sd from NUTS's mean (limit {limit})"


# ---------------------------------------------------------------------------------------------

def case_pvi(fvic, cache, work):
    ex = os.path.join(EXAMPLES, "linreg_conjugate")
    with open(os.path.join(ex, "truth.json")) as f:
        exact = json.load(f)["exact_posterior"]
    out = os.path.join(work, "linreg")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "linreg_conjugate.fvi"), os.path.join(ex, "data"), out)
    iterations = require_converged(p, out)
    post = posterior(out)
    require(post["method"] == "pvi", f"planned as {post['method']}, not pvi")
    w = post["variables"]["w"]
    err_mean = max(abs(g - m) / abs(m) for g, m in zip(w["mean"], exact["mean"]))
    err_sd = max(abs(g - s) / s for g, s in zip(w["sd"], exact["sd"]))
    k = khat(out)
    print(f"  {iterations} rounds; relative errors {err_mean:.2e} (means), {err_sd:.2e} (sds); k-hat {k}")
    require(len(w["mean"]) == len(exact["mean"]) and len(w["sd"]) == len(exact["sd"]), "w has the wrong size")
    require(err_mean <= 1e-6 and err_sd <= 1e-6,
            f"not the exact posterior: means {w['mean']} vs {exact['mean']}, sds {w['sd']} vs {exact['sd']}")
    require(k < 0.5, f"k-hat {k} on the exact posterior (expected < 0.5)")


def case_sfvi(fvic, cache, work):
    ex = os.path.join(EXAMPLES, "hier_logreg")
    ref = nuts_reference("hier_logreg")
    out = os.path.join(work, "hier")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "hier_logreg.fvi"), os.path.join(ex, "data"), out)
    iterations = require_converged(p, out)
    post = posterior(out)
    print(f"  {iterations} iterations; k-hat {khat(out):.3f}")
    checks = []
    beta = post["variables"]["beta"]
    for i in range(len(beta["mean"])):
        checks.append(within_nuts(f"beta[{i + 1}]", beta["mean"][i], beta["sd"][i], ref))
    tau = post["variables"]["tau"]
    within_nuts("tau", tau["mean"][0], tau["sd"][0], ref)  # printed, not checked (the issue is about beta and alpha)
    silos = sorted(int(d[len("silo-"):-len(".json")]) for d in os.listdir(os.path.join(ex, "data")) if d.startswith("silo-"))
    for k in silos:
        alpha = posterior(os.path.join(out, f"silo-{k}"))["variables"]["alpha"]
        checks.append(within_nuts(f"alpha[{k}]", alpha["mean"][0], alpha["sd"][0], ref))
    for ok, message in checks:
        require(ok, message)


def case_sfvi_glmm(fvic, cache, work):
    ex = os.path.join(EXAMPLES, "glmm_sixcities")
    ref = nuts_reference("glmm_sixcities")
    out = os.path.join(work, "glmm")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "glmm_sixcities.fvi"), os.path.join(ex, "data"), out)
    iterations = require_converged(p, out)
    post = posterior(out)
    print(f"  {iterations} iterations; k-hat {khat(out):.3f}")
    beta = post["variables"]["beta"]
    checks = [within_nuts(f"beta[{i + 1}]", beta["mean"][i], beta["sd"][i], ref) for i in range(4)]
    omega = post["variables"]["omega"]
    within_nuts("omega", omega["mean"][0], omega["sd"][0], ref)  # printed, not checked
    for ok, message in checks:
        require(ok, message)


RIDGE_MODEL = """\
// An unstandardised regression: x has mean 50 and sd 10, so a and b are strongly correlated.
silo data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real a;
  global real b;
  global real<lower=0> sigma;
}
model {
  a ~ normal(0, 100);
  b ~ normal(0, 100);
  sigma ~ cauchy(0, 2.5);
  y ~ normal(a + b * x, sigma);
}
"""


def ridge_data(folder, silos=3, rows=30, seed=20261125):
    """3 silos of 30 rows: x ~ N(50, 10^2), y = 3 + 0.5 x + N(0, 2^2)."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    every = []
    for k in range(1, silos + 1):
        x = [round(rng.gauss(50, 10), 4) for _ in range(rows)]
        y = [round(3.0 + 0.5 * xi + rng.gauss(0, 2.0), 4) for xi in x]
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"N": rows, "x": x, "y": y}, f)
        every += zip(x, y)
    return every


def ridge_reference(rows, prior_sd=100.0, cauchy_scale=2.5, points=4001):
    """The posterior's means and sds of a, b and sigma (sigma on its own scale). Given sigma,
    (a, b) has a Gaussian prior and likelihood: its conditional posterior N(m, P^-1) and the
    marginal likelihood p(y | sigma) are closed-form; log sigma is integrated on a uniform grid
    of +-2 around the least-squares fit's (the posterior sd of log sigma is about 0.075)."""
    n = len(rows)
    sx = sum(x for x, _ in rows)
    sxx = sum(x * x for x, _ in rows)
    sy = sum(y for _, y in rows)
    sxy = sum(x * y for x, y in rows)
    syy = sum(y * y for _, y in rows)
    t2 = prior_sd ** 2
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    centre = 0.5 * math.log(sum((y - intercept - slope * x) ** 2 for x, y in rows) / n)
    grid = []
    for i in range(points):
        s = centre - 2 + 4 * i / (points - 1)
        s2 = math.exp(2 * s)
        p00, p01, p11 = n / s2 + 1 / t2, sx / s2, sxx / s2 + 1 / t2  # P = X'X / s2 + I / t2
        det = p00 * p11 - p01 * p01
        r0, r1 = sy / s2, sxy / s2  # X'y / s2
        m0, m1 = (p11 * r0 - p01 * r1) / det, (p00 * r1 - p01 * r0) / det
        # log p(y | sigma) = log N(y | 0, s2 I + t2 X X'), written with P and m.
        log_ml = (-0.5 * n * math.log(2 * math.pi * s2) - math.log(t2) - 0.5 * math.log(det)
                  - 0.5 * (syy / s2 - (m0 * r0 + m1 * r1)))
        sigma = math.exp(s)
        log_prior = math.log(2 / (math.pi * cauchy_scale * (1 + (sigma / cauchy_scale) ** 2))) + s  # + log Jacobian
        grid.append((log_ml + log_prior, sigma, m0, m1, p11 / det, p00 / det))
    top = max(g[0] for g in grid)
    weights = [math.exp(g[0] - top) for g in grid]
    total = sum(weights)
    weights = [w / total for w in weights]
    require(weights[0] < 1e-12 and weights[-1] < 1e-12, "the reference grid cuts off posterior mass")

    def moments(value, variance):
        mean = sum(w * value(g) for w, g in zip(weights, grid))
        second = sum(w * (variance(g) + value(g) ** 2) for w, g in zip(weights, grid))
        return mean, math.sqrt(second - mean * mean)

    return {"a": moments(lambda g: g[2], lambda g: g[4]),
            "b": moments(lambda g: g[3], lambda g: g[5]),
            "sigma": moments(lambda g: g[1], lambda g: 0.0)}


def case_ridge(fvic, cache, work):
    model = os.path.join(work, "ridge.fvi")
    with open(model, "w") as f:
        f.write(RIDGE_MODEL)
    data = os.path.join(work, "data")
    ref = ridge_reference(ridge_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post = posterior(out)
    k = khat(out)
    print(f"  {post['method']}, {post['iterations']} iterations, converged {post['converged']}, k-hat {k:.3f}")
    accurate = True
    for name in ("a", "b", "sigma"):
        mean, sd = post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]
        ref_mean, ref_sd = ref[name]
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        print(f"  {name}: {mean:.5g} (sd {sd:.4g}), reference {ref_mean:.5g} (sd {ref_sd:.4g}): "
              f"{z:.3f} sd apart, sd ratio {ratio:.3f}")
        accurate = accurate and z < 0.25 and abs(ratio - 1) < 0.2
    # The warning: on stderr, naming k-hat and the poor fit, and saying what to try.
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    named = [w for w in warnings if ("k-hat" in w or "k\u0302" in w) and "poor" in w and "try" in w.lower()]
    flagged = k > 0.7 and bool(named)
    print(f"  accurate: {accurate}; flagged (k-hat > 0.7 and a warning naming it): {flagged}")
    for w in warnings:
        print("  stderr: " + w)
    require(accurate or flagged,
            "a silent wrong answer: the posterior is off the reference (0.25 sd / 20%) and the run "
            f"does not flag it (k-hat {k}, warnings: {warnings})")


CASES = {"pvi": case_pvi, "sfvi": case_sfvi, "sfvi_glmm": case_sfvi_glmm, "ridge": case_ridge}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
