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
  sfvi       examples/hier_logreg (SFVI, 3 silos, a local intercept each, read as a whole, so
             weighed whole by the importance-weighted bound by default): converged, the verdict
             saying the locals are the bound's (not judged); every beta (server) and each silo's
             alpha (OUT/silo-K/posterior.json) within 0.25 sd of long-run NUTS on the pooled data
             (reference/nuts_summary.json). Then with local_samples = 1 (the ELBO): converged,
             and every silo judged its own locals settled (the rule's question to the silos).
  sfvi_glmm  examples/glmm_sixcities (structured SFVI, the importance-weighted bound by
             default): converged; every beta within 0.25 NUTS sd of reference/nuts_summary.json;
             silo-1/draws.csv holds the locals drawn by importance resampling, their means those
             of its posterior.json within 4 standard errors.
  ridge      a case written here, not tuned for: an unstandardised linear regression (raw
             predictor of mean 50 and sd 10, so the intercept and the slope are correlated
             -0.98 a posteriori), a, b ~ normal(0, 100), sigma ~ cauchy(0, 2.5), 3 silos of 30
             rows generated with a fixed seed. Issue 26: either every mean is within 0.25
             reference sd of the posterior's and every sd within 20% of it, or the run carries
             k-hat > 0.7 and prints a warning on stderr naming the problem and what to try --
             never a silent wrong answer. The reference is computed here: given sigma the
             posterior of (a, b) is Gaussian, so a 1-D grid over log sigma with (a, b)
             integrated analytically gives the posterior's means and sds to quadrature error.
  hier_linreg  a hierarchical linear regression written here: 6 silos of 8-30 rows, a local
             intercept each (alpha ~ normal(mu, tau)), a slope of an uncentred predictor, sigma
             and tau with half-normal priors. Converged, and mu, beta, sigma and every silo's
             alpha within 0.25 posterior sd with sds within 20% (tau printed: a scale of 6
             groups is skewed). Reference: given (tau, sigma) the model is linear-Gaussian in
             (mu, beta, alpha), so a 2-D grid over (log tau, log sigma) with the rest integrated
             exactly gives the posterior to quadrature error.
  ar1        an AR(1) near the unit root written here (four short series, phi in (-1, 1) at 0.96):
             converged, and c, phi and sigma within 0.25 sd and 20% of a quadrature reference
             (c integrated exactly given phi and sigma, a grid over those two).
  group_slopes_few
             three hospitals' own intercepts and slopes on raw age, Cauchy scales
             (references/group_slopes_few, as below): every silo's a and b within 0.25 sd and
             20% of long-run NUTS, weighed by the closing's importance weights; the globals
             within those limits or named in a warning.
  same_seed  CmdStan's convention, same model, data and seed, same draws: group_slopes_few run
             four times for 60 iterations (the LLVM backend's chains, `fvic run`'s default);
             posterior.json and draws.csv, the server's and each silo's, identical but
             draws.csv's `file =` line. (Before the runtime's `new` kept blocks on 32 bytes, about half such runs took
             another path from the first iteration.)
  ordinal_raw, lkj_slopes, simplex_hier, student_t_raw, binomial_labs, zip_counts
             models written outside the examples (references/NAME, with their data and long-run
             NUTS on the pooled data): an ordinal regression on raw covariates; eight sites'
             correlated intercepts and slopes under an LKJ prior; clinics' own simplexes about a
             shared one; a Student-t regression on a raw predictor with its degrees of freedom
             unknown; five labs' own baselines of a binomial dose-response (few groups, a scale
             near zero); zero-inflated counts written as Stan writes a mixture (a loop, a branch,
             log_sum_exp). Converged, every parameter within 0.25 sd and 20% of NUTS.
  statements_parties
             a model whose statements the vectorised forms refuse in both parties (the server's
             prior scale from a function with a branch; each silo's likelihood a user density
             with a loop): converged, mu within 0.1 sd of its exact posterior, k-hat < 0.5.
  silent_silos
             silos whose log density is not finite anywhere (every reply refused): NOT converged,
             each silo named with how few of its requests it answered, "converged": false.
  funnel     eight schools (Rubin 1981), centred, one school a silo: few groups and a scale with
             much of its mass near zero (a funnel). Either every mean within 0.25 reference sd and
             every sd within 20%, or k-hat > 0.7 and a warning naming the problem and what to try.
             The reference is computed here: given tau the model is linear-Gaussian in mu and
             theta, so a 1-D grid over log tau gives the posterior to quadrature error (mu 4.40,
             sd 3.32; tau 3.60, sd 3.22: the published figures).
  vfl_power_block
             the acceptance model vfl_logreg_power.fvi (examples/vfl_logreg, generate.py
             --silos 2) with its own inference block (vfl_power, mean-field q(z), rho 0.5), no
             --set, seeds 1 and 2: each converges with both silos' blocks settled; the two
             fits' means of b and every beta agree within 0.5 q sd. Its target is the
             power-likelihood surrogate (k-hat 1.70 against the written model, warned), so no
             reference of the written model is asserted.
  vfl_gaussian, vfl_logistic, vfl_poisson
             vertical regressions written here, not tuned for (issue "Vertical models fit the
             model the user wrote"): N = 300 rows, 3 silos of 2 columns each, the outcome on
             the server (server.json), no inference block. The columns are correlated across
             silos (one shared factor per row: every two columns correlate 0.56) and half of
             them are off-centre, so the intercept and the betas are correlated a posteriori;
             b ~ normal(0, 2), beta ~ normal(0, 1), y ~ normal(..., sigma = 1 known),
             bernoulli_logit or poisson_log of b + silo_sum(x * beta), data generated with a
             fixed seed. Planned as vfl_exact; converged; b (server) and each silo's beta
             block (OUT/silo-K/posterior.json) against the written model's posterior: means
             within 0.15 sd (Gaussian) or 0.25 sd (logistic, Poisson), sds within 20%. The
             reference is computed here: the Gaussian case's posterior exactly (closed form);
             the others by Newton's method to the mode, then self-normalised importance
             sampling from a multivariate t_5 around it (1.2^2 times the Laplace covariance),
             ESS >= 2000 required. vfl_gaussian also checks that importance sampler against
             its closed form.

Each case prints its figures and the run's wall time. Exit 0 on success, 1 with a message on
the first failure, 77 (skipped) when a NUTS reference file is absent.
"""
import csv
import itertools
import json
import math
import operator
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, gvi_location_optimum, posterior, read_all_x, require, run_case, solve  # noqa: E402


def run_defaults(fvic, cache, model, data, out, sets=(), extra=()):
    """`fvic run MODEL --data DIR --output OUT`, nothing set (or `sets`, each `--set KEY=VALUE`,
    and `extra` arguments); the finished process and its wall time (a cold cache includes
    compiling the program)."""
    cmd = [fvic, "run", model, "--data", data, "--output", out] + [a for kv in sets for a in ("--set", kv)] + list(extra)
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


def require_converged(p, out, silos_judged=None):
    """The run's verdict is converged; `silos_judged` ("locals", "split block"): the verdict also
    says the silos judged their own parameters settled (the rule asks them, issue 26)."""
    post = posterior(out)
    verdict = [line for line in p.stdout.splitlines() if line.startswith(("converged after", "NOT converged"))]
    require(verdict and verdict[-1].startswith("converged after"),
            f"the run did not converge with its defaults: {verdict[-1] if verdict else 'no verdict line'}")
    if silos_judged:
        require(f"every silo's {silos_judged} settled too" in verdict[-1],
                f"the verdict does not say the silos' {silos_judged} settled: {verdict[-1]}")
    require(post.get("converged") is True, f'posterior.json: "converged" is {post.get("converged")!r}')
    require("NOT converged" not in p.stderr, "a NOT converged warning on stderr:\n" + p.stderr)
    return post["iterations"]


def off_reference(fit, ref, unchecked=()):
    """Prints each fitted (mean, sd) beside the reference's; returns the checked names whose mean
    is 0.25 reference sd or more away, or whose sd is off by 20% or more (issue 26's limits)."""
    off = []
    for name, (mean, sd) in fit.items():
        ref_mean, ref_sd = ref[name]
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        checked = name not in unchecked
        print(f"  {name}: {mean:.5g} (sd {sd:.4g}), reference {ref_mean:.5g} (sd {ref_sd:.4g}): "
              f"{z:.3f} sd apart, sd ratio {ratio:.3f}{'' if checked else ' (not checked)'}")
        if checked and (z >= 0.25 or abs(ratio - 1) >= 0.2):
            off.append(f"{name}: {z:.3f} sd apart, sd ratio {ratio:.3f}")
    return off


def require_near_reference(fit, ref, unchecked=()):
    """Every fitted {name: (mean, sd)} not in unchecked within 0.1 reference sd of the reference's
    mean, its sd within 10%: the fits whose q is the posterior's family up to a scale's tail
    (the stopping rule's own precision is 0.05 sd)."""
    for name, (mean, sd) in fit.items():
        if name in unchecked:
            continue
        ref_mean, ref_sd = ref[name]
        require(abs(mean - ref_mean) < 0.1 * ref_sd and abs(sd / ref_sd - 1) < 0.1, f"{name} is off the posterior")


def flagged_poor(p, k):
    """Whether the run flagged its fit: k-hat > 0.7 and a warning on stderr naming k-hat and the
    poor fit and saying what to try. Prints the warnings; returns (flagged, warnings)."""
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    named = [w for w in warnings if ("k-hat" in w or "k\u0302" in w) and "poor" in w and "try" in w.lower()]
    for w in warnings:
        print("  stderr: " + w)
    return k > 0.7 and bool(named), warnings


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


PVI_RAW_MODEL = """\
// Default on a loan at 5 banks: age in years and income in dollars on their raw scales, as a user
// writes them. No inference block: planned as PVI with the full-rank family.
data {
  int<lower=1> D;
}
silo data {
  int<lower=0> N;
  matrix[N, D] x;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  global real alpha;
  global vector[D] beta;
}
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 1);
  y ~ bernoulli_logit(alpha + x * beta);
}
"""


def pvi_raw_data(folder, seed=20261204, silos=5):
    """Silo k's rows: age ~ N(45 + 2k, 12^2), income = 52,000 + 600 (age - 45) + N(0, 12,000^2),
    y ~ Bernoulli(logit^-1(1 - 0.02 age - 0.00003 income)). Returns every row as (x, y)."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({"D": 2}, f)
    rows = []
    for k in range(1, silos + 1):
        x, y = [], []
        for _ in range(rng.randint(100, 250)):
            age = round(rng.gauss(43 + 2 * k, 12), 1)
            income = round(52000 + 600 * (age - 45) + rng.gauss(0, 12000))
            eta = 1.0 - 0.02 * age - 0.00003 * income
            x.append([age, income])
            y.append(1 if rng.random() < 1 / (1 + math.exp(-eta)) else 0)
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(y), "x": x, "y": y}, f)
        rows += list(zip(x, y))
    return rows


def logistic_posterior(rows, prior_sds, points=21, half_width=5.0):
    """The exact posterior's means and sds of (alpha, beta) for y ~ bernoulli_logit(alpha + x beta)
    with independent normal(0, s) priors: Newton's method for the mode, then the midpoint rule on a
    points^p grid over +-half_width Laplace sds in the coordinates theta = mode + L z (L L^T the
    inverse curvature), where the posterior is near N(0, I): the rule's error for so smooth and
    fast-decaying an integrand is far below the test's limits."""
    p = 1 + len(rows[0][0])
    design = [([1.0] + list(x), y) for x, y in rows]

    def log_post(t):
        total = -0.5 * sum((v / s) ** 2 for v, s in zip(t, prior_sds))
        for z, y in design:
            eta = sum(a * b for a, b in zip(z, t))
            total += (y * eta) - (eta + math.log1p(math.exp(-eta)) if eta > 0 else math.log1p(math.exp(eta)))
        return total

    t = [0.0] * p
    for _ in range(100):
        g = [-v / s ** 2 for v, s in zip(t, prior_sds)]
        h = [[(1 / s ** 2 if i == j else 0.0) for j, s in enumerate(prior_sds)] for i in range(p)]
        for z, y in design:
            mu = 1 / (1 + math.exp(-sum(a * b for a, b in zip(z, t))))
            for i in range(p):
                g[i] += (y - mu) * z[i]
                for j in range(p):
                    h[i][j] += mu * (1 - mu) * z[i] * z[j]
        step = solve(h, g)
        t = [a + b for a, b in zip(t, step)]
        if max(abs(b) * math.sqrt(h[i][i]) for i, b in enumerate(step)) < 1e-12:
            break
    # L = chol(H^-1): the columns of H^-1 by solves, then Cholesky.
    inv = [solve(h, [1.0 if j == i else 0.0 for j in range(p)]) for i in range(p)]
    chol = [[0.0] * p for _ in range(p)]
    for i in range(p):
        for j in range(i + 1):
            v = inv[i][j] - sum(chol[i][k] * chol[j][k] for k in range(j))
            chol[i][j] = math.sqrt(v) if i == j else v / chol[j][j]
    top = log_post(t)
    grid = [-half_width + 2 * half_width * (a + 0.5) / points for a in range(points)]
    weight_sum, first, second = 0.0, [0.0] * p, [0.0] * p
    for z in itertools.product(grid, repeat=p):
        theta = [t[i] + sum(chol[i][k] * z[k] for k in range(i + 1)) for i in range(p)]
        w = math.exp(log_post(theta) - top)
        weight_sum += w
        for i in range(p):
            first[i] += w * theta[i]
            second[i] += w * theta[i] ** 2
    means = [f / weight_sum for f in first]
    return [(m, math.sqrt(s / weight_sum - m * m)) for m, s in zip(means, second)]


def case_pvi_raw_x(fvic, cache, work):
    """PVI with its defaults on a logistic regression at raw predictors (age in years, income in
    dollars: the posterior's sds 10^5 apart, the intercept on a ridge with the slopes). Each silo's
    full-rank update is whitened by its own Laplace approximation (the run's header says so); the
    run converges and every mean is within 0.1 sd of the exact posterior (quadrature), every sd
    within 10%: the stopping rule's 0.05 sd, and the Gaussian q's own small distance from a
    logistic posterior of 900 rows."""
    model = os.path.join(work, "loans.fvi")
    with open(model, "w") as f:
        f.write(PVI_RAW_MODEL)
    data = os.path.join(work, "data")
    rows = pvi_raw_data(data)
    ref = dict(zip(["alpha", "beta[1]", "beta[2]"], logistic_posterior(rows, [10.0, 1.0, 1.0])))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("whitened by its Laplace approximation" in p.stdout,
            "the run's header does not say the silos' updates are whitened:\n" + p.stdout)
    iterations = require_converged(p, out)
    post = posterior(out)
    require(post["method"] == "pvi", f"planned as {post['method']}, not pvi")
    v = post["variables"]
    fit = {"alpha": (v["alpha"]["mean"][0], v["alpha"]["sd"][0])}
    for d in range(2):
        fit[f"beta[{d + 1}]"] = (v["beta"]["mean"][d], v["beta"]["sd"][d])
    print(f"  {iterations} rounds; k-hat {khat(out):.3f}")
    for name, (mean, sd) in fit.items():
        ref_mean, ref_sd = ref[name]
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        print(f"  {name}: {mean:.5g} (sd {sd:.4g}), exact {ref_mean:.5g} (sd {ref_sd:.4g}): {z:.3f} sd apart, "
              f"sd ratio {ratio:.4f}")
        require(z < 0.1 and abs(ratio - 1) < 0.1, f"{name} is off the exact posterior")


def case_fedgvi(fvic, cache, work):
    """FedGVI on the clutter example with the model's own inference block (density_power(0.5),
    KL, rounds = 10 as a maximum) and nothing set: five silos updating one after another (the
    default schedule for a loss other than nll), undamped. It must converge within its 10 rounds onto the global GVI optimum, which
    check_pvi computes independently from the closed-form expected loss (seed 000 Prop 4.4)."""
    ex = os.path.join(EXAMPLES, "clutter")
    out = os.path.join(work, "clutter")
    data = os.path.join(ex, "data")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "clutter.fvi"), data, out)
    iterations = require_converged(p, out)
    theta = posterior(out)["variables"]["theta"]
    m, s = theta["mean"][0], theta["sd"][0]
    m_opt, s_opt = gvi_location_optimum(read_all_x(data), beta=0.5)
    print(f"  {iterations} rounds; theta {m:.4f} (sd {s:.4f}); GVI optimum {m_opt:.4f} (sd {s_opt:.4f})")
    # The rule stops when the averaged mean is within tol_param = 0.05 sd of stationary, with its
    # standard error below 0.05 sd; 0.1 sd is twice that.
    require(abs(m - m_opt) < 0.1 * s_opt, f"theta's mean {m} is not the GVI optimum {m_opt} (sd {s_opt})")
    require(abs(s - s_opt) < 0.1 * s_opt, f"theta's sd {s} is not the GVI optimum's {s_opt}")
    # server_damping = off: each silo's change as it damped it, by the paper's 1/silos.
    cmd = [fvic, "run", os.path.join(ex, "clutter.fvi"), "--data", data, "--output", out + "-off", "--set",
           "server_damping=off", "--set", "schedule=synchronous", "--set", "rounds=2"]
    p = subprocess.run(cmd, env=dict(os.environ, FVIC_CACHE=cache), capture_output=True, text=True, timeout=600)
    require(p.returncode == 0 and "damping = 0.2 " in p.stdout and "the server scales" not in p.stdout,
            f"server_damping = off did not turn the server's scaling off:\n{p.stdout}\n{p.stderr}")
    print("  server_damping = off: damping 1/silos = 0.2, no server scaling")


def case_sfvi(fvic, cache, work):
    ex = os.path.join(EXAMPLES, "hier_logreg")
    ref = nuts_reference("hier_logreg")
    out = os.path.join(work, "hier")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "hier_logreg.fvi"), os.path.join(ex, "data"), out)
    iterations = require_converged(p, out)
    require("locals not judged (q of them is the importance-weighted bound's proposal" in p.stdout,
            "the verdict does not say the locals are the importance-weighted bound's")
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
    elbo = os.path.join(work, "hier_elbo")
    p, _ = run_defaults(fvic, cache, os.path.join(ex, "hier_logreg.fvi"), os.path.join(ex, "data"), elbo,
                        ["local_samples=1"])
    require_converged(p, elbo, "locals")


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
    # With local_samples > 1 each silo still writes its draws.csv: the globals it was sent, and its
    # locals drawn by importance resampling, whose means agree with its posterior.json (1000 draws:
    # within 4 standard errors of the importance-sampling mean, sd / sqrt(1000) each).
    silo = os.path.join(out, "silo-1")
    with open(os.path.join(silo, "draws.csv")) as f:
        text = f.read()
    require("log_g = 0: the locals are drawn by importance resampling" in text,
            "silo-1/draws.csv does not say why log_g__ is 0")
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]
    header, draws = rows[0], [list(map(float, r)) for r in rows[2:]]
    local = posterior(silo)["variables"]
    b = [c for c in header if c.startswith("b.")]
    require(b and "beta.1" in header and len(draws) == 1000,
            "silo-1/draws.csv: columns %s, %d draws" % (header[:8], len(draws)))
    for i, column in enumerate(b[:3]):
        values = [r[header.index(column)] for r in draws]
        mean, sd = sum(values) / len(values), local["b"]["sd"][i]
        require(abs(mean - local["b"]["mean"][i]) < 4 * sd / math.sqrt(len(values)),
                "silo-1 %s: draws.csv mean %.4f, posterior.json %.4f (sd %.4f)"
                % (column, mean, local["b"]["mean"][i], sd))
    print("  silo-1/draws.csv: %d draws of the globals and %d locals, local means as in posterior.json"
          % (len(draws), len(b)))


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


def ridge_data(folder, silos=3, rows=30, seed=20261125, x_mean=50.0, x_sd=10.0, y_scale=1.0):
    """3 silos of 30 rows: x ~ N(50, 10^2), y = y_scale (3 + 0.5 x + N(0, 2^2))."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    every = []
    for k in range(1, silos + 1):
        x = [round(rng.gauss(x_mean, x_sd), 4) for _ in range(rows)]
        y = [round(y_scale * (3.0 + 0.5 * xi + rng.gauss(0, 2.0)), 4) for xi in x]
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"N": rows, "x": x, "y": y}, f)
        every += zip(x, y)
    return every


def ridge_reference(rows, prior_sd=100.0, cauchy_scale=2.5, points=4001, width=2.0):
    """The posterior's means and sds of a, b and sigma (sigma on its own scale); cauchy_scale
    None: sigma's prior is flat (Stan's implicit uniform on sigma > 0). Given sigma,
    (a, b) has a Gaussian prior and likelihood: its conditional posterior N(m, P^-1) and the
    marginal likelihood p(y | sigma) are closed-form; log sigma is integrated on a uniform grid
    of +-width around the least-squares fit's (the posterior sd of log sigma is about 0.075)."""
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
        s = centre - width + 2 * width * i / (points - 1)
        s2 = math.exp(2 * s)
        p00, p01, p11 = n / s2 + 1 / t2, sx / s2, sxx / s2 + 1 / t2  # P = X'X / s2 + I / t2
        det = p00 * p11 - p01 * p01
        r0, r1 = sy / s2, sxy / s2  # X'y / s2
        m0, m1 = (p11 * r0 - p01 * r1) / det, (p00 * r1 - p01 * r0) / det
        # log p(y | sigma) = log N(y | 0, s2 I + t2 X X'), written with P and m.
        log_ml = (-0.5 * n * math.log(2 * math.pi * s2) - math.log(t2) - 0.5 * math.log(det)
                  - 0.5 * (syy / s2 - (m0 * r0 + m1 * r1)))
        sigma = math.exp(s)
        log_prior = s  # the log Jacobian of sigma = exp(s): a flat prior on sigma is this alone
        if cauchy_scale is not None:
            log_prior += math.log(2 / (math.pi * cauchy_scale * (1 + (sigma / cauchy_scale) ** 2)))
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


def regression_accurate_or_flagged(fvic, cache, work, model, data, ref, reweighting_flags=False):
    """Runs the regression with its defaults and requires its a, b and sigma within the limits
    of off_reference, or the fit flagged: k-hat > 0.7 with a warning, or (reweighting_flags) at
    a usable k-hat the warning that the PSIS-reweighted moments move a mean over 0.25 q sd or an
    sd over 20%."""
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post = posterior(out)
    k = khat(out)
    print(f"  {post['method']}, {post['iterations']} iterations, converged {post['converged']}, k-hat {k:.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]) for name in ("a", "b", "sigma")}
    accurate = not off_reference(fit, ref)
    flagged, warnings = flagged_poor(p, k)
    reweighted = reweighting_flags and k <= 0.7 and any(
        w.startswith("warning: reweighting") and "try" in w for w in warnings)
    print(f"  accurate: {accurate}; flagged (k-hat > 0.7 and a warning naming it): {flagged}; "
          f"flagged by the reweighted moments: {reweighted}")
    require(accurate or flagged or reweighted,
            "a silent wrong answer: the posterior is off the reference (0.25 sd / 20%) and the run "
            f"does not flag it (k-hat {k}, warnings: {warnings})")


def case_ridge(fvic, cache, work):
    model = os.path.join(work, "ridge.fvi")
    with open(model, "w") as f:
        f.write(RIDGE_MODEL)
    data = os.path.join(work, "data")
    regression_accurate_or_flagged(fvic, cache, work, model, data, ridge_reference(ridge_data(data)))


AR1_MODEL = """\
// AR(1) per silo with shared dynamics near the unit root; short series.
silo data {
  int<lower=2> T;
  vector[T] y;
}
parameters {
  global real c;
  global real<lower=-1, upper=1> phi;
  global real<lower=0> sigma;
}
model {
  c ~ normal(0, 5);
  sigma ~ normal(0, 2);
  y[2:T] ~ normal(c + phi * y[1:(T - 1)], sigma);
}
"""


def ar1_data(folder, seed=606, lengths=(12, 20, 25, 40)):
    """One series per silo from y_1 ~ N(10, 2^2), y_t = 0.3 + 0.97 y_(t-1) + N(0, 1); returns the
    series."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    series = []
    for k, length in enumerate(lengths, 1):
        y = [10 + rng.gauss(0, 2)]
        for _ in range(1, length):
            y.append(0.3 + 0.97 * y[-1] + rng.gauss(0, 1))
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"T": length, "y": y}, f)
        series.append(y)
    return series


def ar1_reference(series, phi_grid=1500, sigma_grid=300):
    """The posterior's means and sds of c, phi and sigma. Given (phi, sigma) the model is
    linear-Gaussian in c (the residuals y_t - phi y_(t-1) are N(c, sigma^2)), so c is integrated
    exactly and a midpoint grid over phi in (0.5, 1) and log sigma in (log 0.4, log 2.5) (the
    density at their edges is checked negligible; phi's prior is uniform on (-1, 1), sigma's
    half-normal(0, 2)) gives the rest to quadrature error."""
    pairs = [(y[t], y[t - 1]) for y in series for t in range(1, len(y))]
    n = len(pairs)
    sy = sum(a for a, _ in pairs)
    sx = sum(b for _, b in pairs)
    syy = sum(a * a for a, _ in pairs)
    sxy = sum(a * b for a, b in pairs)
    sxx = sum(b * b for _, b in pairs)
    cells = []
    lo, hi = math.log(0.4), math.log(2.5)
    for i in range(phi_grid):
        phi = 0.5 + 0.5 * (i + 0.5) / phi_grid
        s_r = sy - phi * sx
        s_rr = syy - 2 * phi * sxy + phi * phi * sxx
        for j in range(sigma_grid):
            log_sigma = lo + (hi - lo) * (j + 0.5) / sigma_grid
            v = math.exp(2 * log_sigma)
            precision = 1 / 25 + n / v
            c_mean = s_r / v / precision
            # log p(y | phi, sigma) with c integrated out, the priors, and d sigma = sigma d log sigma
            lp = (-n * log_sigma - s_rr / (2 * v) + precision * c_mean * c_mean / 2 - 0.5 * math.log(precision)
                  - v / 8 + log_sigma)
            cells.append((lp, phi, math.exp(log_sigma), c_mean, 1 / precision, i, j))
    top = max(cell[0] for cell in cells)
    weights = [math.exp(cell[0] - top) for cell in cells]
    total = sum(weights)
    edge = sum(w for w, cell in zip(weights, cells)
               if cell[5] == 0 or cell[6] in (0, sigma_grid - 1)) / total
    assert edge < 1e-6, f"the grid's edges hold {edge:.2g} of the mass"

    def moments(first, second):
        m = sum(w * first(cell) for w, cell in zip(weights, cells)) / total
        return m, math.sqrt(sum(w * second(cell) for w, cell in zip(weights, cells)) / total - m * m)
    return {"c": moments(lambda cell: cell[3], lambda cell: cell[4] + cell[3] ** 2),
            "phi": moments(lambda cell: cell[1], lambda cell: cell[1] ** 2),
            "sigma": moments(lambda cell: cell[2], lambda cell: cell[2] ** 2)}


def case_ar1(fvic, cache, work):
    """An AR(1) near the unit root from four short series (the posterior of phi, in (-1, 1), sits
    at 0.96, 1.4 sds below its bound and skewed toward it). The run's moment correction matches
    phi's mean and sd on its declared scale: with the logit's own moments its Gaussian was 33% too
    wide there (warned, but wrong). Within the limits of the quadrature reference, not merely
    flagged."""
    model = os.path.join(work, "ar1.fvi")
    with open(model, "w") as f:
        f.write(AR1_MODEL)
    data = os.path.join(work, "data")
    ref = ar1_reference(ar1_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require_converged(p, out)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]) for name in ("c", "phi", "sigma")}
    off = off_reference(fit, ref)
    require(not off, "off the quadrature reference: " + "; ".join(off))


OUTCOME_SCALE_MODEL = RIDGE_MODEL.replace("normal(0, 100)", "normal(0, 10000)").replace(
    "cauchy(0, 2.5)", "cauchy(0, 250)").replace("// An unstandardised regression", "// y near 2,800, sd 540; x")


def case_outcome_scale(fvic, cache, work):
    """The ridge regression with y 100 times larger (mean 2,800, sd 540, residual sd 200): SFVI
    without locals starts at the log joint's mode, found with the silos' likelihoods, so an
    intercept 2,800 from 0 and a sigma of 200 need no travel (before, Adam walked them in steps of
    0.01: NOT converged after 20,000 iterations, k-hat 8). Converged and within the limits of the
    closed-form reference, not merely flagged."""
    model = os.path.join(work, "outcome_scale.fvi")
    with open(model, "w") as f:
        f.write(OUTCOME_SCALE_MODEL)
    data = os.path.join(work, "data")
    ref = ridge_reference(ridge_data(data, y_scale=100.0), prior_sd=10000.0, cauchy_scale=250.0)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("started at the mode's Laplace approximation" in p.stdout and "exchanges with the silos" in p.stdout,
            "the run did not start at the mode found with the silos:\n" + p.stdout)
    iterations = require_converged(p, out)
    post = posterior(out)
    print(f"  converged after {iterations} iterations, k-hat {khat(out):.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]) for name in ("a", "b", "sigma")}
    off = off_reference(fit, ref)
    require(not off, "off the closed-form posterior: " + "; ".join(off))


CENTRING_MODEL = """\
// Known noise, three raw covariates far from 0: the posterior is Gaussian, in closed form.
data {
  int<lower=1> D;
  real<lower=0> sigma;
}
silo data {
  int<lower=0> N;
  matrix[N, D] x;
  vector[N] y;
}
parameters {
  global real alpha;
  global vector[D] beta;
}
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  y ~ normal(alpha + x * beta, sigma);
}
inference {
  method = sfvi;  // PVI, the plan's choice, has this posterior in closed form
}
"""


def centring_data(folder, seed, silos=4, rows=40, sigma=2.0):
    """Silo k's x_d ~ N(mean_d + k, sd_d^2) with means (40, 5, -12): the intercept and the slopes
    are correlated up to 0.99 in the posterior. Returns the exact posterior's means and sds of
    alpha, beta[1..3]: prior N(0, 10^2 I), precision I / 100 + Z'Z / sigma^2, Z = [1, x]."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({"D": 3, "sigma": sigma}, f)
    z, y = [], []
    for k in range(1, silos + 1):
        x = [[rng.gauss(m + k, s) for m, s in ((40.0, 6.0), (5.0, 1.0), (-12.0, 3.0))] for _ in range(rows)]
        ys = [3.0 + 0.5 * r[0] - 1.0 * r[1] + 0.25 * r[2] + rng.gauss(0, sigma) for r in x]
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"N": rows, "x": x, "y": ys}, f)
        z += [[1.0] + r for r in x]
        y += ys
    p = len(z[0])
    precision = [[(0.01 if i == j else 0.0) + sum(r[i] * r[j] for r in z) / sigma ** 2 for j in range(p)] for i in range(p)]
    mean = solve(precision, [sum(r[i] * v for r, v in zip(z, y)) / sigma ** 2 for i in range(p)])
    sd = [math.sqrt(solve(precision, [1.0 if j == i else 0.0 for j in range(p)])[i]) for i in range(p)]
    names = ["alpha", "beta[1]", "beta[2]", "beta[3]"]
    return {n: (m, s) for n, m, s in zip(names, mean, sd)}


def require_exact(fit, ref, seed):
    """Every {name: (mean, sd)} of fit within 0.1 sd of the exact posterior ref's mean, its sd within
    5% (q is Gaussian like the posterior: what is left is the stopping rule's 0.05 sd)."""
    for name, (mean, sd) in fit.items():
        ref_mean, ref_sd = ref[name]
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        print(f"  {name}: {mean:.5g} (sd {sd:.4g}), exact {ref_mean:.5g} (sd {ref_sd:.4g}): {z:.3f} sd apart, "
              f"sd ratio {ratio:.4f}")
        require(z < 0.1 and abs(ratio - 1) < 0.05, f"seed {seed}: {name} is off the exact posterior")


def case_centring(fvic, cache, work):
    """A regression on raw covariates with a closed-form posterior, at three seeds: with SFVI's
    defaults (the model names the method, nothing else) it fits the intercept at the silos' centred data (fvic plan lists the one exchange
    of column sums and means), converges, and lands on the exact posterior: every mean within
    0.1 posterior sd and every sd within 5% (q is Gaussian like the posterior, so what is left
    is the stopping rule's tolerance, 0.05 sd), k-hat under 0.5."""
    model = os.path.join(work, "centring.fvi")
    with open(model, "w") as f:
        f.write(CENTRING_MODEL)
    for seed in (20261130, 20261131, 20261132):
        data = os.path.join(work, f"data-{seed}")
        ref = centring_data(data, seed)
        if seed == 20261130:
            plan = subprocess.run([fvic, "plan", model, "--data", data], capture_output=True, text=True).stdout
            require("before the first iteration" in plan and "the column sums of x and its rows" in plan,
                    "fvic plan does not list the centring's exchange:\n" + plan)
        out = os.path.join(work, f"out-{seed}")
        p, _ = run_defaults(fvic, cache, model, data, out)
        require("centred: alpha + x * beta" in p.stdout, "the run does not say it centred:\n" + p.stdout)
        require_converged(p, out)
        post = posterior(out)
        k = khat(out)
        print(f"  seed {seed}: {post['method']}, {post['iterations']} iterations, k-hat {k:.3f}")
        v = post["variables"]
        fit = {"alpha": (v["alpha"]["mean"][0], v["alpha"]["sd"][0])}
        for d in range(3):
            fit[f"beta[{d + 1}]"] = (v["beta"]["mean"][d], v["beta"]["sd"][d])
        require_exact(fit, ref, seed)
        require(k < 0.5, f"seed {seed}: k-hat {k}")


CENTRING_PRODUCTS_MODEL = """\
// centring.fvi's regression with its three raw covariates written apart, as a user writes age and
// income: an intercept of three products, each column centred at its own pooled mean.
data {
  real<lower=0> sigma;
}
silo data {
  int<lower=0> N;
  vector[N] x1;
  vector[N] x2;
  vector[N] x3;
  vector[N] y;
}
parameters {
  global real alpha;
  global real b1;
  global real b2;
  global real b3;
}
model {
  alpha ~ normal(0, 10);
  b1 ~ normal(0, 10);
  b2 ~ normal(0, 10);
  b3 ~ normal(0, 10);
  y ~ normal(alpha + b1 * x1 + x2 * b2 + b3 * x3, sigma);
}
inference {
  method = sfvi;
}
"""


def case_centring_products(fvic, cache, work):
    """centring's data and exact posterior with each covariate its own vector (`alpha + b1 * x1 +
    x2 * b2 + b3 * x3`), at two seeds: the plan lists one exchange per covariate, the run says it
    centred all three, converges, and every mean is within 0.1 posterior sd of the exact one and
    every sd within 5%, k-hat under 0.5 (as case_centring)."""
    model = os.path.join(work, "centring_products.fvi")
    with open(model, "w") as f:
        f.write(CENTRING_PRODUCTS_MODEL)
    for seed in (20261130, 20261131):
        matrix_data = os.path.join(work, f"matrix-{seed}")
        ref = centring_data(matrix_data, seed)
        data = os.path.join(work, f"data-{seed}")
        os.makedirs(data)
        with open(os.path.join(data, "data.json"), "w") as f:
            json.dump({"sigma": 2.0}, f)
        for name in sorted(os.listdir(matrix_data)):
            if not name.startswith("silo-"):
                continue
            with open(os.path.join(matrix_data, name)) as f:
                silo = json.load(f)
            columns = {f"x{d + 1}": [row[d] for row in silo["x"]] for d in range(3)}
            with open(os.path.join(data, name), "w") as f:
                json.dump({"N": silo["N"], **columns, "y": silo["y"]}, f)
        if seed == 20261130:
            plan = subprocess.run([fvic, "plan", model, "--data", data], capture_output=True, text=True).stdout
            for x in ("x1", "x2", "x3"):
                require(f"the column sums of {x} and its rows" in plan, f"fvic plan does not centre {x}:\n" + plan)
        out = os.path.join(work, f"out-{seed}")
        p, _ = run_defaults(fvic, cache, model, data, out)
        require("centred: alpha + x1 * b1 + x2 * b2 + x3 * b3 at the pooled column means of x1, x2, x3" in p.stdout,
                "the run does not say it centred every covariate:\n" + p.stdout)
        require_converged(p, out)
        post = posterior(out)
        k = khat(out)
        print(f"  seed {seed}: {post['method']}, {post['iterations']} iterations, k-hat {k:.3f}")
        v = post["variables"]
        fit = {ref_name: (v[name]["mean"][0], v[name]["sd"][0])
               for name, ref_name in (("alpha", "alpha"), ("b1", "beta[1]"), ("b2", "beta[2]"), ("b3", "beta[3]"))}
        require_exact(fit, ref, seed)
        require(k < 0.5, f"seed {seed}: k-hat {k}")


def case_flat(fvic, cache, work):
    """Stan's implicit flat prior (issue 37): sigma has no prior statement, so its density is
    uniform on sigma > 0, the log Jacobian alone on fvic's log scale. 3 silos of 4 rows, so that
    the prior matters: the Jacobian moves log sigma's mode by 0.5 log(9/8) (0.25 of its sd); the
    reference integrates the flat prior as written. A Gaussian q is too narrow for 12 rows (sds
    12-22% under the reference's at k-hat 0.61): the run must say so through the reweighted sds."""
    model = os.path.join(work, "flat.fvi")
    with open(model, "w") as f:
        f.write(RIDGE_MODEL.replace("  sigma ~ cauchy(0, 2.5);\n", "").replace(
            "// An unstandardised regression: x has mean 50 and sd 10, so a and b are strongly correlated.",
            "// sigma has no prior: uniform on sigma > 0, as in Stan."))
    require("flat prior" in subprocess.run([fvic, "plan", model], capture_output=True, text=True).stdout,
            "fvic plan does not list sigma's flat prior")
    data = os.path.join(work, "data")
    ref = ridge_reference(ridge_data(data, rows=4, seed=20261126, x_mean=0.0, x_sd=1.0), cauchy_scale=None,
                          width=4.0)
    regression_accurate_or_flagged(fvic, cache, work, model, data, ref, reweighting_flags=True)


STATEMENTS_MODEL = """\
// Statements the vectorised forms refuse in both parties: the server's prior scale from a
// function with a branch, each silo's likelihood a user density with a loop and a branch on its
// data, over a local it declares from its data. Each runs in its own party's program.
functions {
  real prior_scale(int k) {
    if (k > 2) return 10;
    return 1;
  }
  real gauss_lpdf(vector y, vector r, real s) {
    real t = 0;
    for (n in 1:num_elements(r)) {
      if (y[n] > 1e6) t += -1e9;
      else t += normal_lpdf(r[n] | 0, s);
    }
    return t;
  }
}
data {
  int<lower=0> K;
}
silo data {
  int<lower=0> N;
  vector[N] y;
}
parameters {
  global real mu;
}
model {
  vector[N] r = y - mu;
  mu ~ normal(0, prior_scale(K));
  y ~ gauss(r, 1);
}
"""


def case_statements_parties(fvic, cache, work):
    """STATEMENTS_MODEL with its defaults, 3 silos of 5-12 rows and K = 1 (the prior's sd 1, so it
    matters): the server's statements in its program, the silos' in theirs. The posterior is
    exact: mu ~ N(sum y / (1 + n), 1 / (1 + n)). Converged, k-hat < 0.5, and mu within 0.1 sd with
    its sd within 10% (q's family holds it exactly). And `fvic plan` names both programs and
    plans SFVI: a PVI client needs the likelihood as a vectorised `~` statement."""
    rng = random.Random(20261206)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({"K": 1}, f)
    ys = []
    for k in range(1, 4):
        y = [rng.gauss(0.7, 1.0) for _ in range(rng.randint(5, 12))]
        ys += y
        with open(os.path.join(data, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(y), "y": y}, f)
    model = os.path.join(work, "statements.fvi")
    with open(model, "w") as f:
        f.write(STATEMENTS_MODEL)
    plan = subprocess.run([fvic, "plan", model], capture_output=True, text=True)
    require(plan.returncode == 0, plan.stdout + plan.stderr)
    require(plan.stdout.startswith("statements: SFVI") and "the server's terms" in plan.stdout
            and "the silos' terms" in plan.stdout, "the plan does not name both parties' programs:\n" + plan.stdout)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require_converged(p, out)
    k = khat(out)
    require(k < 0.5, f"k-hat {k} on a posterior q holds exactly")
    precision = 1.0 + len(ys)
    v = posterior(out)["variables"]["mu"]
    fit = {"mu": (v["mean"][0], v["sd"][0])}
    ref = {"mu": (sum(ys) / precision, precision ** -0.5)}
    print(f"  mu: {fit['mu'][0]:.5f} (sd {fit['mu'][1]:.5f}), exact {ref['mu'][0]:.5f} (sd {ref['mu'][1]:.5f})")
    require_near_reference(fit, ref)


def case_silent_silos(fvic, cache, work):
    """A model whose silos' log density is not finite anywhere (sigma = log(mu - mu), -inf): every
    SFVI reply of theirs is refused, and the rule alone would call the prior converged. The run
    must say NOT converged, name each silo with how few of its requests it answered, write
    "converged": false, and still write its outputs and exit 0."""
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({}, f)
    for k, y in ((1, [1.0, 2.0, 3.0]), (2, [1.0, 2.0])):
        with open(os.path.join(data, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(y), "y": y}, f)
    model = os.path.join(work, "silent.fvi")
    with open(model, "w") as f:
        f.write("silo data {\n  int<lower=0> N;\n  vector[N] y;\n}\nparameters {\n  global real mu;\n}\n"
                "model {\n  mu ~ normal(0, 1);\n  y ~ normal(mu, log(mu - mu));\n}\n")
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out, sets=("method=sfvi",))
    verdict = [line for line in p.stdout.splitlines() if line.startswith(("converged after", "NOT converged"))]
    print("  " + (verdict[-1] if verdict else "no verdict"))
    require(verdict and verdict[-1].startswith("NOT converged"), "the run called a fit without its silos converged")
    for k in (1, 2):
        require(f"silo {k} answered " in verdict[-1], f"the verdict does not name silo {k}: {verdict[-1]}")
    require("warning: NOT converged" in p.stderr, "no warning on stderr:\n" + p.stderr)
    require(posterior(out).get("converged") is False, 'posterior.json does not say "converged": false')


# ---------------------------------------------------------------------------------------------
# Vertical regressions never tuned for (issue "Vertical models fit the model the user wrote")

VFL_N, VFL_SILOS, VFL_WIDTH = 300, 3, 2
VFL_LOADING = 0.75  # x_ic = mean_c + 0.75 f_i + sqrt(1 - 0.75^2) e_ic: every two columns correlate 0.5625
VFL_MEANS = [0.5, 0.0, -0.3, 0.0, 0.2, 0.0]
VFL_BETA = [0.8, -0.5, 0.3, 0.0, 0.6, -0.4]
VFL_PRIOR_VAR = [4.0] + [1.0] * (VFL_SILOS * VFL_WIDTH)  # b ~ normal(0, 2), beta ~ normal(0, 1)
VFL_SIGMA = 1.0  # the Gaussian case's known noise sd
VFL_CASES = {  # family: (seed, the true b, the true beta, the outcome's declaration, its likelihood)
    "gaussian": (20261201, -0.3, VFL_BETA, "vector[N] y;\n  real<lower=0> sigma;",
                 "y ~ normal(b + silo_sum(x * beta), sigma);"),
    "logistic": (20261202, -0.3, VFL_BETA, "array[N] int<lower=0, upper=1> y;",
                 "y ~ bernoulli_logit(b + silo_sum(x * beta));"),
    "poisson": (20261203, 0.5, [0.4 * c for c in VFL_BETA], "array[N] int<lower=0> y;",
                "y ~ poisson_log(b + silo_sum(x * beta));"),
}


def vfl_model(family):
    """The model as a user would write it (examples/vfl_logreg's layout) with no inference block."""
    _, _, _, outcome, likelihood = VFL_CASES[family]
    return f"""\
// A vertically split {family} regression: 3 silos of 2 columns each, the outcome on the server.
data {{
  int<lower=0> N;
}}
server data {{
  {outcome}
}}
split data {{
  int<lower=1> P;
  matrix[N, P] x;
}}
parameters {{
  global real b;
  split vector[P] beta;
}}
model {{
  b ~ normal(0, 2);
  beta ~ normal(0, 1);
  {likelihood}
}}
"""


def vfl_generate(family, means=VFL_MEANS):
    """N = 300 rows of 6 columns correlated across silos through one shared factor per row, half
    of them off-centre (so the intercept correlates with their coefficients too), and the outcome
    drawn from the family with the true coefficients. Values rounded as written to the files."""
    seed, b, beta, _, _ = VFL_CASES[family]
    rng = random.Random(seed)
    own = math.sqrt(1 - VFL_LOADING ** 2)
    x, y = [], []
    for _ in range(VFL_N):
        f = rng.gauss(0, 1)
        row = [round(m + VFL_LOADING * f + own * rng.gauss(0, 1), 6) for m in means]
        eta = b + sum(c * v for c, v in zip(beta, row))
        if family == "gaussian":
            y.append(round(eta + rng.gauss(0, VFL_SIGMA), 6))
        elif family == "logistic":
            y.append(1 if rng.random() < 1 / (1 + math.exp(-eta)) else 0)
        else:  # Poisson by inversion: the rates stay moderate (eta within about +-1.5)
            rate, k = math.exp(eta), 0
            term = cdf = math.exp(-rate)
            u = rng.random()
            while u > cdf:
                k += 1
                term *= rate / k
                cdf += term
            y.append(k)
        x.append(row)
    return x, y


def vfl_write(folder, family, x, y):
    """data.json {N}, server.json {y (, sigma)}, silo-K.json {P, x}: silo K the columns 2K-1, 2K."""
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({"N": len(x)}, f)
    server = {"y": y, "sigma": VFL_SIGMA} if family == "gaussian" else {"y": y}
    with open(os.path.join(folder, "server.json"), "w") as f:
        json.dump(server, f)
    for k in range(VFL_SILOS):
        block = [row[k * VFL_WIDTH:(k + 1) * VFL_WIDTH] for row in x]
        with open(os.path.join(folder, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"P": VFL_WIDTH, "x": block}, f)


def cholesky(a):
    """Lower-triangular L with L L' = a (a symmetric positive definite)."""
    n = len(a)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            s = a[i][j] - sum(low[i][k] * low[j][k] for k in range(j))
            if i == j:
                require(s > 0, "the reference's matrix is not positive definite")
                low[i][i] = math.sqrt(s)
            else:
                low[i][j] = s / low[j][j]
    return low


def forward(low, b):
    """x with L x = b."""
    x = []
    for i, row in enumerate(low):
        x.append((b[i] - sum(row[k] * x[k] for k in range(i))) / row[i])
    return x


def backward(low, b):
    """x with L' x = b."""
    n = len(low)
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (b[i] - sum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return x


def cholesky_inverse(low):
    """(L L')^-1."""
    n = len(low)
    cols = [backward(low, forward(low, [1.0 if i == j else 0.0 for i in range(n)])) for j in range(n)]
    return [[cols[j][i] for j in range(n)] for i in range(n)]


def vfl_exact(x, y, sigma=VFL_SIGMA, prior_var=VFL_PRIOR_VAR):
    """The Gaussian case's posterior of theta = (b, beta), exactly: precision
    P = diag(1 / prior_var) + A'A / sigma^2 with A = [1, x], mean P^-1 A'y / sigma^2."""
    rows = [(1.0, *r) for r in x]
    d = len(rows[0])
    prec = [[(1 / prior_var[i] if i == j else 0.0) + sum(r[i] * r[j] for r in rows) / sigma ** 2
             for j in range(d)] for i in range(d)]
    rhs = [sum(r[i] * yi for r, yi in zip(rows, y)) / sigma ** 2 for i in range(d)]
    low = cholesky(prec)
    cov = cholesky_inverse(low)
    return {"mean": backward(low, forward(low, rhs)), "sd": [math.sqrt(cov[i][i]) for i in range(d)],
            "cov": cov, "method": "exact Gaussian posterior"}


def vfl_predictive(ref, x, y, sigma=VFL_SIGMA):
    """The exact posterior predictive's log density per row and RMSE of the Gaussian case at rows
    (x, y): y_i ~ N(a_i' m, sigma^2 + a_i' C a_i), a_i = (1, x_i)."""
    lpd, sq = 0.0, 0.0
    for r, yi in zip(x, y):
        a = (1.0, *r)
        mean = sum(ai * mi for ai, mi in zip(a, ref["mean"]))
        var = sigma ** 2 + sum(a[i] * ref["cov"][i][j] * a[j] for i in range(len(a)) for j in range(len(a)))
        lpd += -0.5 * math.log(2 * math.pi * var) - 0.5 * (yi - mean) ** 2 / var
        sq += (yi - mean) ** 2
    return lpd / len(y), math.sqrt(sq / len(y))


def vfl_log_density(family, theta, rows, y, sigma=VFL_SIGMA):
    """log p(theta, y) up to a constant: the priors and the family's log likelihood of
    eta = A theta."""
    lp = -0.5 * sum(t * t / v for t, v in zip(theta, VFL_PRIOR_VAR))
    eta = [sum(map(operator.mul, r, theta)) for r in rows]
    if family == "gaussian":
        return lp - 0.5 * sum((yi - e) ** 2 for yi, e in zip(y, eta)) / sigma ** 2
    if family == "logistic":  # y eta - log(1 + e^eta), written without overflow
        return lp + sum(yi * e - (e + math.log1p(math.exp(-e)) if e > 0 else math.log1p(math.exp(e)))
                        for yi, e in zip(y, eta))
    return lp + sum(yi * e - math.exp(e) for yi, e in zip(y, eta))  # Poisson, less sum log y!


def vfl_mode(family, rows, y, sigma=VFL_SIGMA):
    """The posterior mode by Newton's method (step-halving on the log density) and the Hessian's
    Cholesky factor there: the Laplace approximation N(mode, (-H)^-1)."""
    d = len(rows[0])
    theta = [0.0] * d
    current = vfl_log_density(family, theta, rows, y, sigma)
    for _ in range(100):
        grad = [-t / v for t, v in zip(theta, VFL_PRIOR_VAR)]
        neg_hess = [[(1 / VFL_PRIOR_VAR[i] if i == j else 0.0) for j in range(d)] for i in range(d)]
        for r, yi in zip(rows, y):
            e = sum(map(operator.mul, r, theta))
            if family == "gaussian":
                g, w = (yi - e) / sigma ** 2, 1 / sigma ** 2
            elif family == "logistic":
                p = 1 / (1 + math.exp(-e))
                g, w = yi - p, p * (1 - p)
            else:
                w = math.exp(e)
                g = yi - w
            for i in range(d):
                grad[i] += g * r[i]
                wi = w * r[i]
                for j in range(i + 1):
                    neg_hess[i][j] += wi * r[j]
        for i in range(d):
            for j in range(i):
                neg_hess[j][i] = neg_hess[i][j]
        low = cholesky(neg_hess)
        step = backward(low, forward(low, grad))
        if max(abs(s) for s in step) < 1e-10:
            return theta, low
        scale = 1.0
        while True:
            trial = [t + scale * s for t, s in zip(theta, step)]
            value = vfl_log_density(family, trial, rows, y, sigma)
            if value >= current - 1e-12 or scale < 1e-8:
                break
            scale /= 2
        theta, current = trial, value
    require(False, f"Newton's method did not find the {family} posterior's mode")


def vfl_importance(family, x, y, sigma=VFL_SIGMA, draws=6000, seed=7, nu=5, inflate=1.2):
    """The posterior's means and sds by self-normalised importance sampling: the proposal is a
    multivariate Student-t with nu degrees of freedom centred at the mode, scale matrix
    inflate^2 times the Laplace covariance (heavier tails and wider than the posterior, so the
    weights stay bounded). Returns the means, sds and the effective sample size 1 / sum w^2."""
    rows = [(1.0, *r) for r in x]
    d = len(rows[0])
    mode, low = vfl_mode(family, rows, y, sigma)
    rng = random.Random(seed)
    thetas, log_w = [], []
    for _ in range(draws):
        z = [rng.gauss(0, 1) for _ in range(d)]
        stretch = math.sqrt(nu / rng.gammavariate(nu / 2, 2))  # one chi^2_nu draw for all d
        u = [zi * stretch for zi in z]  # u ~ multivariate t_nu(0, I)
        # theta = mode + inflate * L^-T u has covariance inflate^2 (L L')^-1 = inflate^2 (-H)^-1.
        offset = backward(low, u)
        theta = [m + inflate * o for m, o in zip(mode, offset)]
        log_q = -0.5 * (nu + d) * math.log1p(sum(ui * ui for ui in u) / nu)  # up to a constant
        thetas.append(theta)
        log_w.append(vfl_log_density(family, theta, rows, y, sigma) - log_q)
    top = max(log_w)
    w = [math.exp(lw - top) for lw in log_w]
    total = sum(w)
    w = [wi / total for wi in w]
    ess = 1 / sum(wi * wi for wi in w)
    mean = [sum(wi * t[i] for wi, t in zip(w, thetas)) for i in range(d)]
    sd = [math.sqrt(sum(wi * (t[i] - mean[i]) ** 2 for wi, t in zip(w, thetas))) for i in range(d)]
    return {"mean": mean, "sd": sd, "ess": ess, "draws": draws, "mode": mode,
            "method": f"Laplace + importance sampling (t_{nu} proposal, {draws} draws)"}


def vfl_reference(family, x, y):
    """The written model's posterior: exact for the Gaussian case, importance sampling otherwise
    (ESS at least 2000, or the reference itself is not trusted)."""
    if family == "gaussian":
        return vfl_exact(x, y)
    ref = vfl_importance(family, x, y)
    require(ref["ess"] >= 2000, f"the {family} reference's importance sampling has ESS {ref['ess']:.0f} "
                                f"of {ref['draws']} draws (needs >= 2000): the proposal does not fit")
    return ref


def vfl_case(family, limit, fvic, cache, work, means=VFL_MEANS):
    model = os.path.join(work, f"vfl_{family}.fvi")
    with open(model, "w") as f:
        f.write(vfl_model(family))
    x, y = vfl_generate(family, means)
    data = os.path.join(work, "data")
    vfl_write(data, family, x, y)
    start = time.monotonic()
    ref = vfl_reference(family, x, y)
    ess = f", ESS {ref['ess']:.0f}" if "ess" in ref else ""
    print(f"{os.path.basename(model)} reference: {ref['method']}{ess}, {time.monotonic() - start:.1f} s")
    if family == "gaussian" and means == VFL_MEANS:
        # The importance sampler the other two cases rely on, checked against the closed form:
        # on an exactly Gaussian posterior it must give the exact means and sds to Monte Carlo
        # error (about 0.016 sd and 1.2% at its ESS; the limits are 5 times that).
        check = vfl_importance(family, x, y)
        z = max(abs(m - e) / s for m, e, s in zip(check["mean"], ref["mean"], ref["sd"]))
        ratio = max(abs(s / e - 1) for s, e in zip(check["sd"], ref["sd"]))
        print(f"  importance sampling on this posterior (ESS {check['ess']:.0f}): means within {z:.3f} "
              f"exact sd, sds within {100 * ratio:.1f}%")
        require(z < 0.08 and ratio < 0.06, "the importance-sampling reference does not reproduce the exact "
                f"Gaussian posterior (means {z:.3f} sd apart, sds {100 * ratio:.1f}% off)")
    out = os.path.join(work, "out")
    # The raw case also scores held-out rows (`--test`: the training rows again), whose predictive
    # needs the written b at each draw: each silo's partial predictor less its mean over its rows.
    raw = means != VFL_MEANS
    p, _ = run_defaults(fvic, cache, model, data, out, extra=("--test", data) if raw else ())
    post = posterior(out)
    print(f"  {post.get('method')}, {post.get('iterations')} iterations, converged {post.get('converged')}, "
          f"k-hat {post.get('khat', 'not finite or absent')}")
    if raw:
        with open(os.path.join(out, "metrics.csv")) as f:
            last = list(csv.DictReader(f))[-1]
        lpd, rmse = vfl_predictive(ref, x, y)
        fit_lpd, fit_rmse = float(last["test_log_density"]), float(last["test_rmse"])
        print(f"  --test: log density per row {fit_lpd:.4f} (exact predictive {lpd:.4f}), RMSE {fit_rmse:.4f} "
              f"({rmse:.4f})")
        # 200 draws: the mixture's log density per row is within about 0.011 of the exact
        # predictive's (each draw's density varies about 15% across draws here); 3 times that.
        require(abs(fit_lpd - lpd) < 0.03 and abs(fit_rmse - rmse) < 0.03,
                f"--test: log density {fit_lpd:.4f} and RMSE {fit_rmse:.4f}, the exact predictive's {lpd:.4f} and "
                f"{rmse:.4f}")
    fit = [(post["variables"]["b"]["mean"][0], post["variables"]["b"]["sd"][0])]
    for k in range(1, VFL_SILOS + 1):
        beta = posterior(os.path.join(out, f"silo-{k}"))["variables"]["beta"]
        require(len(beta["mean"]) == VFL_WIDTH and len(beta["sd"]) == VFL_WIDTH,
                f"silo-{k}/posterior.json: beta has {len(beta['mean'])} means and {len(beta['sd'])} sds "
                f"(expected {VFL_WIDTH})")
        fit += list(zip(beta["mean"], beta["sd"]))
    names = ["b"] + [f"beta[{j + 1}] (silo {j // VFL_WIDTH + 1})" for j in range(VFL_SILOS * VFL_WIDTH)]
    failures = []
    for name, (mean, sd), ref_mean, ref_sd in zip(names, fit, ref["mean"], ref["sd"]):
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        print(f"  {name}: {mean:.4f} (sd {sd:.4f}), reference {ref_mean:.4f} (sd {ref_sd:.4f}): "
              f"{z:.3f} sd apart, sd ratio {ratio:.3f}")
        if z >= limit:
            failures.append(f"{name} is {z:.3f} reference sd from the posterior mean (limit {limit})")
        if abs(ratio - 1) >= 0.2:
            failures.append(f"{name}'s sd is {ratio:.3f} times the posterior's (limit 20%)")
    require_converged(p, out, "split block")
    require(post.get("method") == "vfl_exact", f"planned as {post.get('method')}, not vfl_exact")
    require(not failures, "not the written model's posterior: " + "; ".join(failures))
    if family == "gaussian":
        # q's joint Gaussian holds this posterior exactly: the parties' tail check must be made and
        # find q's moments (its Monte Carlo error at ESS ~1,000: 0.03 sd a mean, 2% an sd; it
        # warns beyond 0.25 sd, 20%, or an sd more than 10% narrower).
        tail = [line for line in p.stdout.splitlines() if line.startswith(("tail check:", "tail check ("))]
        print("  " + (tail[0] if tail else "no tail check line"))
        require(tail and tail[0].startswith("tail check ("), "the tail check was not made: " + (tail[0] if tail else "no line"))
        require("q's tails" not in p.stderr and "heavier-tailed" not in p.stderr,
                "the tail check warns on an exactly Gaussian posterior:\n" + p.stderr)


def case_vfl_power_block(fvic, cache, work):
    """The acceptance model vfl_logreg_power.fvi with its own inference block (power likelihood,
    mean-field q(z), rho = 0.5), no --set, at two seeds: each converges with both silos' blocks
    settled, and the two fits' means agree, so the reported mean is the fit's and not one
    point of the optimiser's jitter."""
    data = os.path.join(work, "data")
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "vfl_logreg", "generate.py"), "--silos", "2",
                    "--output", data], check=True, capture_output=True)
    model = os.path.join(EXAMPLES, "vfl_logreg", "vfl_logreg_power.fvi")
    fits = []
    for seed in (1, 2):
        out = os.path.join(work, f"seed{seed}")
        p, _ = run_defaults(fvic, cache, model, os.path.join(data, "power"), out, [f"seed={seed}"])
        require_converged(p, out, "split block")
        post = posterior(out)
        fit = [(post["variables"]["b"]["mean"][0], post["variables"]["b"]["sd"][0])]
        for k in (1, 2):
            beta = posterior(os.path.join(out, f"silo-{k}"))["variables"]["beta"]
            fit += list(zip(beta["mean"], beta["sd"]))
        print(f"  seed {seed}: {post.get('iterations')} iterations, k-hat {post.get('khat')}")
        fits.append(fit)
    # Each average's drift and standard error are under 0.05 q sd by the rule; two seeds' means
    # then differ by well under 0.5 q sd. Before the silo's estimator took the coupling and the
    # entropies in closed form, runs of 20,000-80,000 iterations differed by up to 0.91 q sd.
    gaps = [abs(a[0] - b[0]) / math.sqrt(0.5 * (a[1] ** 2 + b[1] ** 2)) for a, b in zip(*fits)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    print(f"  seeds 1 and 2: means at most {gaps[worst]:.3f} q sd apart (coordinate {worst}; 0 = b)")
    require(gaps[worst] < 0.5, f"two seeds' means are {gaps[worst]:.3f} q sd apart at coordinate {worst}")


def case_vfl_gaussian(fvic, cache, work):
    vfl_case("gaussian", 0.15, fvic, cache, work)


def case_vfl_raw(fvic, cache, work):
    """The Gaussian case at raw columns far from 0 (means 40, 0, -12, 5, 20, 0): the intercept and
    the off-centre columns' coefficients trade off along a ridge, which vfl_exact crosses by fitting
    b at the centred sum of the silos' partial predictors (center = on, the default)."""
    vfl_case("gaussian", 0.15, fvic, cache, work, means=[40.0, 0.0, -12.0, 5.0, 20.0, 0.0])


def case_vfl_outcome_scale(fvic, cache, work):
    """The Gaussian case with the outcome 100 times larger (y's sd about 190, sigma 100) and priors
    to match (b ~ normal(0, 1000), beta ~ normal(0, 100)): coefficients near 80 where Adam steps
    0.01. The server starts b at the mode of its own terms (y's mean) and sends the linear
    predictor's scale (sigma, 100), over 10 of which each silo's coefficients step: converged
    after 8,300 iterations, where without (mode_start = off) the same run needs 38,000 of its cap
    of 40,000. Converged, every mean within 0.15 exact sd and every sd within 20%."""
    x, y = vfl_generate("gaussian")
    y = [round(100 * v, 4) for v in y]
    sigma = 100 * VFL_SIGMA
    data = os.path.join(work, "data")
    vfl_write(data, "gaussian", x, y)
    with open(os.path.join(data, "server.json"), "w") as f:
        json.dump({"y": y, "sigma": sigma}, f)
    model = os.path.join(work, "vfl_outcome_scale.fvi")
    with open(model, "w") as f:
        f.write(vfl_model("gaussian").replace("b ~ normal(0, 2);", "b ~ normal(0, 1000);").replace(
            "beta ~ normal(0, 1);", "beta ~ normal(0, 100);"))
    ref = vfl_exact(x, y, sigma, [1000.0 ** 2] + [100.0 ** 2] * (VFL_SILOS * VFL_WIDTH))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("linear predictor's scale 100" in p.stdout, "the run did not scale the silos' steps:\n" + p.stdout)
    post = posterior(out)
    print(f"  {post.get('iterations')} iterations, k-hat {post.get('khat', 'not finite or absent')}")
    fit = {"b": (post["variables"]["b"]["mean"][0], post["variables"]["b"]["sd"][0])}
    for k in range(1, VFL_SILOS + 1):
        beta = posterior(os.path.join(out, f"silo-{k}"))["variables"]["beta"]
        for j, (m, sd) in enumerate(zip(beta["mean"], beta["sd"])):
            fit[f"beta[{(k - 1) * VFL_WIDTH + j + 1}]"] = (m, sd)
    failures = []
    for (name, (mean, sd)), ref_mean, ref_sd in zip(fit.items(), ref["mean"], ref["sd"]):
        z, ratio = abs(mean - ref_mean) / ref_sd, sd / ref_sd
        print(f"  {name}: {mean:.4f} (sd {sd:.4f}), exact {ref_mean:.4f} (sd {ref_sd:.4f}): {z:.3f} sd apart, "
              f"sd ratio {ratio:.3f}")
        if z >= 0.15 or abs(ratio - 1) >= 0.2:
            failures.append(f"{name}: {z:.3f} sd apart, sd ratio {ratio:.3f}")
    require_converged(p, out, "split block")
    require(not failures, "not the written model's posterior: " + "; ".join(failures))


def case_vfl_logistic(fvic, cache, work):
    vfl_case("logistic", 0.25, fvic, cache, work)


def case_vfl_poisson(fvic, cache, work):
    vfl_case("poisson", 0.25, fvic, cache, work)


HIER_MODEL = """\
// Varying intercepts, one per silo, and a slope of an uncentred predictor (mean 2).
silo data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real mu;
  global real beta;
  global real<lower=0> tau;
  global real<lower=0> sigma;
  local real alpha;
}
model {
  mu ~ normal(0, 10);
  beta ~ normal(0, 10);
  tau ~ normal(0, 5);
  sigma ~ normal(0, 5);
  alpha ~ normal(mu, tau);
  y ~ normal(alpha + beta * x, sigma);
}
"""


def grouped_data(folder, seed, x_mean, effect, y_of, x_sd=1.0):
    """6 silos of 8-30 rows, each with its own effect c_k ~ N(effect[0], effect[1]^2) (or c_k =
    effect(rng), effect a function), x ~ N(x_mean, x_sd^2) and y = y_of(c_k, x) + N(0, 1.2^2);
    data.json empty. Returns [(x, y)] per silo."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    silos = []
    for k in range(6):
        n = rng.choice([8, 12, 20, 30, 15, 10])
        c = effect(rng) if callable(effect) else rng.gauss(*effect)
        x = [round(rng.gauss(x_mean, x_sd), 4) for _ in range(n)]
        y = [round(y_of(c, xi) + rng.gauss(0, 1.2), 4) for xi in x]
        with open(os.path.join(folder, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": n, "x": x, "y": y}, f)
        silos.append((x, y))
    return silos


def hier_data(folder, seed=11, x_mean=2.0):
    """grouped_data with intercepts alpha_k ~ N(1, 0.5^2): y = alpha_k + 0.7 x + N(0, 1.2^2)."""
    return grouped_data(folder, seed, x_mean, (1.0, 0.5), lambda a, x: a + 0.7 * x)


def grid_reference(silos, names, row, prior, tau_range, sigma_range, points=(120, 80)):
    """The posterior of a regression y ~ N(v . theta, sigma) with a Gaussian prior on theta whose
    precision depends on a scale tau (row(k, x): silo k's design row v at x; prior(tau^2): the
    prior precision matrix and its log determinant): given (tau, sigma) theta's posterior and the
    marginal likelihood p(y | tau, sigma) are closed-form, and (log tau, log sigma) is integrated on
    a grid over tau_range x sigma_range (half-normal(0, 5) priors on both, the log's Jacobian).
    Returns {name: (mean, sd)} for names (theta's elements), tau and sigma."""
    D = len(names)
    xtx = [[0.0] * D for _ in range(D)]
    xty = [0.0] * D
    yy, n = 0.0, 0
    for k, (xs, ys) in enumerate(silos):
        for x, y in zip(xs, ys):
            v = row(k, x)
            for i in range(D):
                xty[i] += v[i] * y
                for j in range(D):
                    xtx[i][j] += v[i] * v[j]
            yy += y * y
            n += 1
    grid = []
    for a in range(points[0]):
        lt = math.log(tau_range[0]) + a * (math.log(tau_range[1]) - math.log(tau_range[0])) / (points[0] - 1)
        for b in range(points[1]):
            ls = math.log(sigma_range[0]) + b * (math.log(sigma_range[1]) - math.log(sigma_range[0])) / (points[1] - 1)
            t2, s2 = math.exp(2 * lt), math.exp(2 * ls)
            prior_prec, prior_log_det = prior(t2)
            prec = [[xtx[i][j] / s2 + prior_prec[i][j] for j in range(D)] for i in range(D)]
            r = [v / s2 for v in xty]
            low = cholesky(prec)
            m = backward(low, forward(low, r))
            log_det = 2 * sum(math.log(low[i][i]) for i in range(D))
            log_ml = (-0.5 * n * math.log(2 * math.pi * s2) - 0.5 * yy / s2 + 0.5 * sum(p * q for p, q in zip(m, r))
                      - 0.5 * log_det + 0.5 * prior_log_det)
            t, s = math.exp(lt), math.exp(ls)
            log_prior = -0.5 * (t / 5) ** 2 - 0.5 * (s / 5) ** 2 + lt + ls
            inverse = cholesky_inverse(low)
            grid.append((log_ml + log_prior, m, [inverse[i][i] for i in range(D)], t, s))
    top = max(g[0] for g in grid)
    weights = [math.exp(g[0] - top) for g in grid]
    total = sum(weights)
    weights = [w / total for w in weights]
    require(max(weights[i * points[1] + points[1] - 1] for i in range(points[0])) < 1e-6 and
            max(weights[(points[0] - 1) * points[1] + j] for j in range(points[1])) < 1e-6 and
            max(weights[j] for j in range(points[1])) < 1e-4 and
            max(weights[i * points[1]] for i in range(points[0])) < 1e-6,
            "the reference grid cuts off posterior mass")
    ref = {}
    for i, name in enumerate(names):
        mean = sum(w * g[1][i] for w, g in zip(weights, grid))
        second = sum(w * (g[2][i] + g[1][i] ** 2) for w, g in zip(weights, grid))
        ref[name] = (mean, math.sqrt(second - mean * mean))
    for name, at in (("tau", 3), ("sigma", 4)):
        mean = sum(w * g[at] for w, g in zip(weights, grid))
        second = sum(w * g[at] ** 2 for w, g in zip(weights, grid))
        ref[name] = (mean, math.sqrt(second - mean * mean))
    return ref


def hier_reference(silos, location=True):
    """The posterior of HIER_MODEL (or, location=False, of RAW_HIER_MODEL: no mu, alpha ~ N(0,
    tau)) by grid_reference: theta = (mu, beta, alpha_1..J), mu ~ N(0, 10^2), beta ~ N(0, 10^2),
    alpha_j ~ N(mu, tau^2)."""
    J = len(silos)
    first = 1 if location else 0  # beta's index; mu's is 0 where there is one
    D = first + 1 + J

    def row(k, x):
        v = [0.0] * D
        v[first], v[first + 1 + k] = x, 1.0
        return v

    def prior(t2):
        prec = [[0.0] * D for _ in range(D)]
        prec[first][first] = 1 / 100
        for k in range(J):
            prec[first + 1 + k][first + 1 + k] = 1 / t2
        if location:  # alpha_j - mu ~ N(0, tau^2)
            prec[0][0] = 1 / 100 + J / t2
            for k in range(J):
                prec[0][2 + k] = prec[2 + k][0] = -1 / t2
        return prec, -(first + 1) * math.log(100) - J * math.log(t2)

    names = ["mu"] * first + ["beta"] + [f"alpha[{k + 1}]" for k in range(J)]
    return grid_reference(silos, names, row, prior, (0.01, 20), (0.5, 3))


def global_fit(out):
    """The server's fit in OUT: {name: (mean, sd)} for mu (where the model has it), beta, tau and
    sigma."""
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    return {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
            for name in ("mu", "beta", "tau", "sigma") if name in post["variables"]}


def hier_fit(out):
    """HIER_MODEL's (or RAW_HIER_MODEL's) fit in OUT: global_fit and each silo's alpha."""
    fit = global_fit(out)
    for k in range(1, 7):
        alpha = posterior(os.path.join(out, f"silo-{k}"))["variables"]["alpha"]
        fit[f"alpha[{k}]"] = (alpha["mean"][0], alpha["sd"][0])
    return fit


def case_hier_linreg(fvic, cache, work):
    model = os.path.join(work, "hier_linreg.fvi")
    with open(model, "w") as f:
        f.write(HIER_MODEL)
    data = os.path.join(work, "data")
    ref = hier_reference(hier_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    fit = hier_fit(out)
    # tau is printed, not checked: a scale of 6 groups is skewed (as hier_logreg's tau).
    failures = off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require(not failures, "not the posterior (0.25 sd, 20%): " + "; ".join(failures))


def hier_scaled_model():
    """HIER_MODEL with every prior's scale 100 times larger, for an outcome 100 times larger."""
    return HIER_MODEL.replace("mu ~ normal(0, 10)", "mu ~ normal(0, 1000)").replace(
        "beta ~ normal(0, 10)", "beta ~ normal(0, 1000)").replace("tau ~ normal(0, 5)", "tau ~ normal(0, 500)").replace(
        "sigma ~ normal(0, 5)", "sigma ~ normal(0, 500)")


def case_hier_outcome_scale(fvic, cache, work):
    """hier_linreg's model and data with y 100 times larger and every prior's scale with it, so the
    posterior is exactly 100 times hier_linreg's (the reference's). From q's default Adam's steps of
    0.01 cannot walk mu to 200 in 20,000 iterations; the start at the locations' mode
    (SfviServer::start_at_locations: mu and beta at the mode of the log joint with each silo's
    alpha at its conditional mode, tau and sigma held) puts them there, and the fit converges
    within the limits (tau printed, as in hier_linreg). With mode_start = off the fit is within
    the limits or flagged (NOT converged or k-hat > 0.7) with the warning that names the cause,
    data far from the unit scale, and says to rescale them: never a silent wrong answer."""
    model = os.path.join(work, "hier_outcome_scale.fvi")
    with open(model, "w") as f:
        f.write(hier_scaled_model())
    data = os.path.join(work, "data")
    ref = {name: (100 * m, 100 * sd) for name, (m, sd) in hier_reference(hier_data(data)).items()}
    for k in range(1, 7):
        path = os.path.join(data, f"silo-{k}.json")
        with open(path) as f:
            silo = json.load(f)
        silo["y"] = [round(100 * v, 4) for v in silo["y"]]
        with open(path, "w") as f:
            json.dump(silo, f)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("started the unbounded globals' means at the mode" in p.stdout and "each silo's locals start" in p.stdout
            and "but silo" not in p.stdout,
            "the run does not say it started at the locations' mode:\n" + p.stdout)
    failures = off_reference(hier_fit(out), ref, unchecked=("tau",))
    require_converged(p, out)
    require(not failures, "not the posterior (0.25 sd, 20%): " + "; ".join(failures))

    out = os.path.join(work, "out-off")
    p, _ = run_defaults(fvic, cache, model, data, out, sets=("mode_start=off",))
    failures = off_reference(hier_fit(out), ref, unchecked=("tau",))
    post = posterior(out)
    k = khat(out)
    warned = [w for w in p.stderr.splitlines() if w.startswith("warning:")]
    named = any("Data on a scale far from 1" in w and "rescale" in w for w in warned)
    print(f"  mode_start = off: converged {post.get('converged')}, k-hat {k:.2f}; off the reference: {failures}; "
          f"the scale named: {named}")
    require(not failures or ((post.get("converged") is not True or k > 0.7) and named),
            "mode_start = off: off the posterior (" + "; ".join(failures) + ") and not flagged with the scale's "
            "warning: " + " | ".join(warned))


def groups_model():
    """hier_scaled_model with several groups in each silo, each row reading its group's intercept:
    `local vector[C] a`, `a[g]`."""
    return hier_scaled_model().replace(
        "// Varying intercepts, one per silo,", "// Varying intercepts, several groups in each silo (a[g]),").replace(
        "  int<lower=0> N;\n", "  int<lower=0> N;\n  int<lower=1> C;\n  array[N] int<lower=1, upper=C> g;\n").replace(
        "local real alpha;", "local vector[C] a;").replace("alpha ~ normal(mu, tau);", "a ~ normal(mu, tau);").replace(
        "alpha + beta * x", "a[g] + beta * x")


def groups_data(folder, seed, x_mean, y_scale):
    """4 silos of 4 groups each (4-10 rows a group): a_g ~ N(1, 0.5^2), x ~ N(x_mean, 1),
    y = y_scale (a_g + 0.7 x + N(0, 1.2^2)); silo-k.json holds N, C = 4, g, x and y. Returns the
    groups' (x, y / y_scale) at the unit scale, silo by silo, for hier_reference."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    groups = []
    for k in range(1, 5):
        g, x, y = [], [], []
        for c in range(1, 5):
            a = rng.gauss(1.0, 0.5)
            xs = [round(rng.gauss(x_mean, 1), 4) for _ in range(rng.randint(4, 10))]
            ys = [round(a + 0.7 * xi + rng.gauss(0, 1.2), 4) for xi in xs]
            groups.append((xs, ys))
            g += [c] * len(xs)
            x += xs
            y += [round(y_scale * v, 4) for v in ys]
        with open(os.path.join(folder, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(y), "C": 4, "g": g, "x": x, "y": y}, f)
    return groups


def groups_fit(out):
    """groups_model()'s fit in OUT: {name: (mean, sd)} for mu, beta, tau, sigma and the 16 groups'
    intercepts, alpha[1..16] silo by silo (hier_reference's names)."""
    fit = global_fit(out)
    for k in range(1, 5):
        a = posterior(os.path.join(out, f"silo-{k}"))["variables"]["a"]
        for c in range(4):
            fit[f"alpha[{4 * (k - 1) + c + 1}]"] = (a["mean"][c], a["sd"][c])
    return fit


def case_groups_outcome_scale(fvic, cache, work):
    """groups_model() on groups_data's scale times 100: a_g ~ N(100, 50^2), y = a_g + 70 x + N(0,
    120^2), x ~ N(2, 1). Each silo's intercepts are searched element by element
    (SfviSilo::local_mode_by_element, whose terms here are in the thousands), the start is taken,
    and the fit converges within the limits of the posterior, exactly 100 times that of the same
    data divided by 100 (hier_reference with each group as its own block; tau printed)."""
    data = os.path.join(work, "data")
    unit = hier_reference(groups_data(data, 29, 2.0, 100))
    ref = {name: (100 * m, 100 * sd) for name, (m, sd) in unit.items()}
    model = os.path.join(work, "groups_outcome_scale.fvi")
    with open(model, "w") as f:
        f.write(groups_model())
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("started the unbounded globals' means at the mode" in p.stdout,
            "the run does not say it started at the locations' mode:\n" + p.stdout)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    failures = off_reference(groups_fit(out), ref, unchecked=("tau",))
    require_converged(p, out)
    require(not failures, "not the posterior (0.25 sd, 20%): " + "; ".join(failures))


def case_groups_raw_x(fvic, cache, work):
    """groups_model() at the unit scale with x 20 sds from 0 (x ~ N(20, 1)): each silo's groups'
    intercepts `a[g]` are fitted at the centred x with their location mu (compiler/analysis/
    centring.h, a vector of groups' intercepts), so the ridge a raw x makes (mu, every a_g and
    beta trading off) is gone. Against the grid reference: mu, beta, sigma and every a_g within
    0.1 sd with sds within 10%, as centring_local's one intercept per silo (tau printed)."""
    data = os.path.join(work, "data")
    ref = hier_reference(groups_data(data, 31, 20.0, 1))
    model = os.path.join(work, "groups_raw_x.fvi")
    with open(model, "w") as f:
        f.write(groups_model().replace("mu ~ normal(0, 1000)", "mu ~ normal(0, 10)").replace(
            "beta ~ normal(0, 1000)", "beta ~ normal(0, 10)").replace("tau ~ normal(0, 500)", "tau ~ normal(0, 5)")
            .replace("sigma ~ normal(0, 500)", "sigma ~ normal(0, 5)"))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("with each silo's a" in p.stdout, "the run does not say the silos' a is centred:\n" + p.stdout)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    fit = groups_fit(out)
    off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require_near_reference(fit, ref, unchecked=("tau",))


def case_groups_global_raw_x(fvic, cache, work):
    """groups_raw_x's data and model with the 16 groups' intercepts one global vector (`global
    vector[J] a`, each silo's rows reading their groups by a global index): a and mu are both
    centred at the pooled x (two blocks of one x and one beta), sharing one exchange. The search
    over every global finds no mode (tau's is at 0), the search over the unbounded ones with the
    scales held does, and the fit starts there. mu, beta and every a_g within 0.1 sd with sds within
    10%; sigma within the issue's limits (0.25 sd, 20%): q, Gaussian in (log tau, log sigma), misses
    the skew of tau's posterior from 16 groups, and sigma's mean moves with it (about 0.1 sd; tau
    printed). At the raw x (center = off) the same run converges later (16,900 iterations against
    11,800) with the sds 3-5% short."""
    data = os.path.join(work, "data")
    ref = hier_reference(groups_data(data, 31, 20.0, 1))
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({"J": 16}, f)
    for k in range(1, 5):
        path = os.path.join(data, f"silo-{k}.json")
        with open(path) as f:
            silo = json.load(f)
        silo["g"] = [4 * (k - 1) + c for c in silo["g"]]
        del silo["C"]
        with open(path, "w") as f:
            json.dump(silo, f)
    text = (groups_model().replace("mu ~ normal(0, 1000)", "mu ~ normal(0, 10)")
            .replace("beta ~ normal(0, 1000)", "beta ~ normal(0, 10)").replace("tau ~ normal(0, 500)", "tau ~ normal(0, 5)")
            .replace("sigma ~ normal(0, 500)", "sigma ~ normal(0, 5)")
            .replace("silo data {", "data {\n  int<lower=1> J;\n}\nsilo data {")
            .replace("  int<lower=1> C;\n", "").replace("upper=C> g", "upper=J> g")
            .replace("local vector[C] a;", "global vector[J] a;"))
    require("global vector[J] a;" in text and "upper=J> g" in text, "the global groups' model is not derived")
    model = os.path.join(work, "groups_global_raw_x.fvi")
    with open(model, "w") as f:
        f.write(text)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("a + x * beta" in p.stdout and "mu + x * beta" in p.stdout,
            "the run does not say a and mu are centred:\n" + p.stdout)
    require("started the unbounded globals' means at their mode" in p.stdout,
            "the run does not say it started at the unbounded globals' mode:\n" + p.stdout)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
           for name in ("mu", "beta", "tau", "sigma")}
    a = post["variables"]["a"]
    for j in range(16):
        fit[f"alpha[{j + 1}]"] = (a["mean"][j], a["sd"][j])
    failures = off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require(not failures, "not the posterior (0.25 sd, 20%): " + "; ".join(failures))
    require_near_reference(fit, ref, unchecked=("tau", "sigma"))


def fit_centred(fvic, cache, work, text, name, data, ref, fit_of, header):
    """TEXT (written to WORK/NAME.fvi) run with its defaults on DATA: the run's header has HEADER (what
    is centred), the fit (FIT_OF of the output) is within 0.1 sd of REF with sds within 10% after
    converging by the rule; tau printed, not checked (a scale of few groups is skewed)."""
    model = os.path.join(work, name + ".fvi")
    with open(model, "w") as f:
        f.write(text)
    out = os.path.join(work, "out_" + name)
    p, _ = run_defaults(fvic, cache, model, data, out)
    require(header in p.stdout, f"the run does not say '{header}':\n" + p.stdout)
    fit = fit_of(out)
    off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require_near_reference(fit, ref, unchecked=("tau",))


def case_centring_hier(fvic, cache, work):
    """hier_linreg's model written with a non-centred random intercept (`mu + beta * x + u`, u a
    silo's local ~ N(0, tau)) and x 20 sds from 0: the global intercept mu is fitted at the centred
    x. The same posterior as hier_linreg's reference (alpha_k = mu + u_k): mu, beta and sigma within
    0.1 sd with sds within 10% (at the raw x, `center = off`, the sds of mu and beta are 24% short
    with k-hat 0.40: a silent wrong answer); tau printed, as there."""
    text = (HIER_MODEL.replace("  local real alpha;", "  local real u;")
            .replace("  alpha ~ normal(mu, tau);", "  u ~ normal(0, tau);")
            .replace("alpha + beta * x", "mu + beta * x + u"))
    data = os.path.join(work, "data")
    fit_centred(fvic, cache, work, text, "hier_noncentred", data, hier_reference(hier_data(data, x_mean=20.0)),
                global_fit, "centred: mu + x * beta")


def case_centring_local(fvic, cache, work):
    """hier_linreg's model as written (`alpha + beta * x`, alpha a silo's local ~ N(mu, tau)) with x
    20 sds from 0: alpha's location mu is fitted at the centred x, and each silo's alpha with it.
    Against the grid reference: mu, beta, sigma and every alpha within 0.1 sd with sds within 10%
    (at the raw x, `center = off`, the sds are 11-15% short: inside the issue's 20%, a silent loss
    all the same); tau printed, as there."""
    data = os.path.join(work, "data")
    fit_centred(fvic, cache, work, HIER_MODEL, "hier_linreg", data, hier_reference(hier_data(data, x_mean=20.0)),
                hier_fit, "centred: mu + x * beta at x's pooled column means, with each silo's alpha")


# HIER_MODEL with each silo's rows in two sets read in two sums with the same beta (a censored
# survival model's observed and censored rows, written Stan's other way): x and x2 are centred at
# their pooled mean, one shift for both sums.
COMPANIONS_MODEL = HIER_MODEL.replace("  vector[N] y;\n", "  vector[N] y;\n  int<lower=0> M;\n  vector[M] x2;\n"
                                      "  vector[M] y2;\n").replace(
    "  y ~ normal(alpha + beta * x, sigma);\n",
    "  y ~ normal(alpha + beta * x, sigma);\n  y2 ~ normal(alpha + beta * x2, sigma);\n")


def case_centring_companions(fvic, cache, work):
    """centring_local's data with each silo's rows cut in two sets, (x, y) and (x2, y2), read in two
    sums with one beta (COMPANIONS_MODEL): the same posterior, so the same grid reference. Both x
    are centred at their pooled mean (the run's header names them), and mu, beta, sigma and every
    alpha are within 0.1 sd with sds within 10%; tau printed. (Before the two were centred
    together neither was, and centring_local's raw-x fit has sds 11-15% short.)"""
    require(COMPANIONS_MODEL.count("alpha + beta * x") == 2, "COMPANIONS_MODEL is not derived")
    data = os.path.join(work, "data")
    silos = hier_data(data, x_mean=20.0)
    ref = hier_reference(silos)
    for k, (x, y) in enumerate(silos):
        half = len(x) // 2
        with open(os.path.join(data, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": half, "x": x[:half], "y": y[:half], "M": len(x) - half, "x2": x[half:], "y2": y[half:]}, f)
    fit_centred(fvic, cache, work, COMPANIONS_MODEL, "companions", data, ref, hier_fit,
                "(x or x2) * beta at x and x2's pooled column means, with each silo's alpha")


# HIER_MODEL in Stan's older style: x an array of reals, the likelihood a loop over the rows.
ARRAY_MODEL = HIER_MODEL.replace("  vector[N] x;\n", "  array[N] real x;\n").replace(
    "  y ~ normal(alpha + beta * x, sigma);\n", "  for (n in 1:N)\n    y[n] ~ normal(alpha + beta * x[n], sigma);\n")


def case_centring_arrays(fvic, cache, work):
    """centring_local's model and data with x an `array[N] real` read a row at a time (ARRAY_MODEL):
    fitted at the centred x as the vector is (the run's header says so), mu, beta, sigma and every
    alpha within 0.1 sd of the grid reference with sds within 10%; tau printed. (Before, an array x
    was fitted raw: on a hierarchical logistic probe at age in years its sds were 5-11% short of
    NUTS's, 3% with the vector.)"""
    require("array[N] real x;" in ARRAY_MODEL and "x[n]" in ARRAY_MODEL, "ARRAY_MODEL is not derived")
    data = os.path.join(work, "data")
    fit_centred(fvic, cache, work, ARRAY_MODEL, "arrays", data, hier_reference(hier_data(data, x_mean=20.0)),
                hier_fit, "centred: mu + x * beta at x's pooled column means, with each silo's alpha")


# HIER_MODEL with x given in tenths and scaled in transformed data: a silo's value computed when it
# reads its data, held (and centred) as data.
TD_MODEL = HIER_MODEL.replace("  vector[N] x;\n", "  vector[N] x_tenths;\n").replace(
    "parameters {", "transformed data {\n  vector[N] x = 10 * x_tenths;\n}\nparameters {", 1)


def case_centring_td(fvic, cache, work):
    """centring_local's data with each silo's x given in tenths and `vector[N] x = 10 * x_tenths;` in
    transformed data (TD_MODEL): the silo computes x when it reads its data, and it is centred as data
    is (the header says so); mu, beta, sigma and every alpha within 0.1 sd of the grid reference
    with sds within 10%; tau printed. (A value the kernels compute, before, read the centred x: x
    was not centred then, and a quadratic `vector[N] age2 = square(age);` had been fitted as
    another model.)"""
    require("vector[N] x = 10 * x_tenths;" in TD_MODEL, "TD_MODEL is not derived")
    data = os.path.join(work, "data")
    silos = hier_data(data, x_mean=20.0)
    for k, (x, y) in enumerate(silos):
        with open(os.path.join(data, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(x), "x_tenths": [v / 10 for v in x], "y": y}, f)
    fit_centred(fvic, cache, work, TD_MODEL, "td", data, hier_reference(silos), hier_fit,
                "centred: mu + x * beta at x's pooled column means, with each silo's alpha")


# Wards in hospitals: each silo (a hospital) has its own level a_h about mu, and each of its wards its
# own a_w about a_h with a known spread (0.5); x far from 0.
CHAIN_MODEL = """\
silo data {
  int<lower=0> N;
  int<lower=1> W;
  array[N] int<lower=1, upper=W> ward;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real mu;
  global real beta;
  global real<lower=0> tau;
  global real<lower=0> sigma;
  local real a_h;
  local vector[W] a_w;
}
model {
  mu ~ normal(0, 10);
  beta ~ normal(0, 10);
  tau ~ normal(0, 5);
  sigma ~ normal(0, 5);
  a_h ~ normal(mu, tau);
  a_w ~ normal(a_h, 0.5);
  y ~ normal(a_w[ward] + beta * x, sigma);
}
"""


def case_centring_chain(fvic, cache, work):
    """CHAIN_MODEL on hier_data's rows with x 20 sds from 0, each row in one of 2 wards of its silo:
    mu, each silo's a_h (a link: read only as a_w's location and in its own prior) and its wards'
    a_w are all fitted at the centred x, shifted together, so that a_w - a_h and a_h - mu are as
    written. Against the grid reference (theta = mu, beta, a_h, a_w given tau and sigma): mu, beta,
    sigma and every a_h and a_w within 0.1 sd with sds within 10%; tau printed. A link left unshifted
    would put every a_w about xbar beta (2 sds here) off. (With `center = off` this Gaussian chain
    is right too, after 14,100 iterations against 5,600; a logistic one on age in years, wards in 4
    hospitals, had sds 4-19% short of NUTS's at k-hat 0.70, 5-15% centred.)"""
    data = os.path.join(work, "data")
    silos = hier_data(data, x_mean=20.0)
    rng = random.Random(5)
    wards = []
    for k, (x, y) in enumerate(silos):
        ward = [1 + (n % 2) for n in range(len(x))]
        rng.shuffle(ward)
        shift = [rng.gauss(0, 0.5) for _ in range(2)]
        y = [round(v + shift[w - 1], 4) for v, w in zip(y, ward)]
        silos[k] = (x, y)
        wards.append(ward)
        with open(os.path.join(data, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(x), "W": 2, "ward": ward, "x": x, "y": y}, f)
    J = len(silos)
    D = 2 + J + 2 * J  # mu, beta, a_h[1..J], a_w[silo k's ward w] at 2 + J + 2k + w - 1

    def row(k, point):  # silo k's design row at (x, ward)
        x, w = point
        v = [0.0] * D
        v[1], v[2 + J + 2 * k + w - 1] = x, 1.0
        return v

    def prior(t2):  # a_h - mu ~ N(0, tau^2), a_w - a_h ~ N(0, 0.5^2), mu and beta N(0, 10^2)
        prec = [[0.0] * D for _ in range(D)]

        def add(i, j, w):  # w (theta_i - theta_j)^2 / 2 in the log density
            prec[i][i] += w
            prec[j][j] += w
            prec[i][j] -= w
            prec[j][i] -= w
        prec[0][0] = prec[1][1] = 1 / 100
        for k in range(J):
            add(2 + k, 0, 1 / t2)
            for w in range(2):
                add(2 + J + 2 * k + w, 2 + k, 4.0)
        return prec, -2 * math.log(100) - J * math.log(t2) + 2 * J * math.log(4.0)

    rows = [(list(zip(x, ward)), y) for (x, y), ward in zip(silos, wards)]
    names = (["mu", "beta"] + [f"a_h[{k + 1}]" for k in range(J)] +
             [f"a_w[{2 * k + w + 1}]" for k in range(J) for w in range(2)])
    ref = grid_reference(rows, names, row, prior, (1e-4, 20), (0.5, 3), points=(80, 40))

    def chain_fit(out):
        fit = global_fit(out)
        for k in range(1, J + 1):
            v = posterior(os.path.join(out, f"silo-{k}"))["variables"]
            fit[f"a_h[{k}]"] = (v["a_h"]["mean"][0], v["a_h"]["sd"][0])
            for w in range(2):
                fit[f"a_w[{2 * (k - 1) + w + 1}]"] = (v["a_w"]["mean"][w], v["a_w"]["sd"][w])
        return fit
    fit_centred(fvic, cache, work, CHAIN_MODEL, "chain", data, ref, chain_fit,
                "centred: mu + x * beta at x's pooled column means, with each silo's a_h and a_w")


# HIER_MODEL non-centred as Stan users write it: alpha a transformed parameter, mu + tau * z.
TP_MODEL = HIER_MODEL.replace("  local real alpha;\n}\n", "  local real z;\n}\ntransformed parameters {\n"
                              "  real alpha = mu + tau * z;\n}\n").replace(
    "  alpha ~ normal(mu, tau);\n", "  z ~ std_normal();\n")


# HIER_MODEL non-centred by Stan's affine transform: alpha = mu + tau * (the fit's coordinate).
AFFINE_MODEL = HIER_MODEL.replace("  local real alpha;\n", "  local real<offset=mu, multiplier=tau> alpha;\n")

# groups_raw_x's model non-centred: each silo's groups' a built in a loop from its local z.
TP_GROUPS_MODEL = TP_MODEL.replace("  int<lower=0> N;\n", "  int<lower=0> N;\n  int<lower=1> C;\n"
                                   "  array[N] int<lower=1, upper=C> g;\n").replace(
    "  local real z;\n", "  local vector[C] z;\n").replace(
    "  real alpha = mu + tau * z;\n", "  vector[C] a;\n  for (c in 1:C)\n    a[c] = mu + tau * z[c];\n").replace(
    "alpha + beta * x", "a[g] + beta * x")


def case_centring_tp(fvic, cache, work):
    """centring_local's data and posterior with the hierarchy written non-centred in transformed
    parameters (TP_MODEL: alpha = mu + tau * z, z each silo's local): mu reaches the sum
    `alpha + beta * x` through alpha, and is fitted at the centred x. mu, beta, sigma and every
    silo's alpha (the transformed parameter, reported at the written mu) within 0.1 sd of the grid
    reference with sds within 10%; tau printed. (Fitted raw, as before: mu's and beta's sds 26%
    short, warned by the tail check, after 14,900 iterations.) The same for groups within each
    silo (TP_GROUPS_MODEL on groups_raw_x's data: a[c] = mu + tau * z[c] in a loop, read as a[g]),
    every group's a checked; and for `local real<offset=mu, multiplier=tau> alpha` (AFFINE_MODEL,
    mu reaching the sum through alpha's transform; fitted raw: sds 26% short, warned)."""
    require("real alpha = mu + tau * z;" in TP_MODEL and "z ~ std_normal();" in TP_MODEL, "TP_MODEL is not derived")
    header = "centred: mu + x * beta at x's pooled column means"
    data = os.path.join(work, "data")
    ref = hier_reference(hier_data(data, x_mean=20.0))
    fit_centred(fvic, cache, work, TP_MODEL, "tp", data, ref, hier_fit, header)
    print("affine: local real<offset=mu, multiplier=tau> alpha")
    fit_centred(fvic, cache, work, AFFINE_MODEL, "affine", data, ref, hier_fit, header)
    # Groups within each silo (groups_raw_x's data), a vector built element by element in a loop.
    print("groups: a[c] = mu + tau * z[c] for each silo's 4 groups, read as a[g]")
    data = os.path.join(work, "groups")
    fit_centred(fvic, cache, work, TP_GROUPS_MODEL, "tp_groups", data, hier_reference(groups_data(data, 31, 20.0, 1)),
                groups_fit, header)


# HIER_MODEL with a second raw covariate written apart, as age and income are: alpha's location mu
# and each silo's alpha take both shifts (alpha + beta * x + gamma * v, x near 20 and v near -15).
TWO_COVARIATE_MODEL = HIER_MODEL.replace("  vector[N] x;\n", "  vector[N] x;\n  vector[N] v;\n").replace(
    "  global real beta;\n", "  global real beta;\n  global real gamma;\n").replace(
    "  beta ~ normal(0, 10);\n", "  beta ~ normal(0, 10);\n  gamma ~ normal(0, 10);\n").replace(
    "alpha + beta * x", "alpha + beta * x + gamma * v")


def case_centring_covariates(fvic, cache, work):
    """TWO_COVARIATE_MODEL on 6 silos of 8-30 rows (x ~ N(20, 1), v ~ N(-15, 1.5^2), alpha_k ~ N(1,
    0.5^2), y = alpha_k + 0.7 x - 0.4 v + N(0, 1.2^2)): the header says mu and each silo's alpha are
    centred at both covariates' pooled means, and against a grid reference (given tau and sigma the
    model is linear-Gaussian in mu, beta, gamma and the alphas, as hier_reference's) mu, beta,
    gamma, sigma and every alpha are within 0.1 sd with sds within 10%; tau printed. (At the raw
    data, `center = off`, mu is 0.22 sd off and gamma's sd 13% short, k-hat 0.74, after 13,500
    iterations at 8 times the draws; centred, 5,400.)"""
    model = os.path.join(work, "two_covariates.fvi")
    with open(model, "w") as f:
        f.write(TWO_COVARIATE_MODEL)
    data = os.path.join(work, "data")
    rng = random.Random(29)
    os.makedirs(data)
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({}, f)
    silos = []
    for k in range(6):
        n = rng.choice([8, 12, 20, 30, 15, 10])
        a = rng.gauss(1.0, 0.5)
        x = [round(rng.gauss(20.0, 1.0), 4) for _ in range(n)]
        v = [round(rng.gauss(-15.0, 1.5), 4) for _ in range(n)]
        y = [round(a + 0.7 * xi - 0.4 * vi + rng.gauss(0, 1.2), 4) for xi, vi in zip(x, v)]
        with open(os.path.join(data, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": n, "x": x, "v": v, "y": y}, f)
        silos.append((list(zip(x, v)), y))
    J, D = len(silos), 3 + len(silos)  # mu, beta, gamma, alpha_1..J

    def row(k, xv):
        r = [0.0] * D
        r[1], r[2], r[3 + k] = xv[0], xv[1], 1.0
        return r

    def prior(t2):
        prec = [[0.0] * D for _ in range(D)]
        prec[0][0] = 1 / 100 + J / t2
        prec[1][1] = prec[2][2] = 1 / 100
        for k in range(J):
            prec[3 + k][3 + k] = 1 / t2
            prec[0][3 + k] = prec[3 + k][0] = -1 / t2
        return prec, -3 * math.log(100) - J * math.log(t2)

    names = ["mu", "beta", "gamma"] + [f"alpha[{k + 1}]" for k in range(J)]
    ref = grid_reference(silos, names, row, prior, (0.01, 20), (0.5, 3))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("centred: mu + x * beta + v * gamma at the pooled column means of x, v, with each silo's alpha" in p.stdout,
            "the run does not say it centred both covariates:\n" + p.stdout)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
           for name in ("mu", "beta", "gamma", "tau", "sigma")}
    for k in range(1, J + 1):
        alpha = posterior(os.path.join(out, f"silo-{k}"))["variables"]["alpha"]
        fit[f"alpha[{k}]"] = (alpha["mean"][0], alpha["sd"][0])
    off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require_near_reference(fit, ref, unchecked=("tau",))


# hier_logreg's form (a silo's intercept about 0, no global location) as a regression on a raw
# covariate: with x near 20 the intercepts' shrinkage toward 0 is what pins beta, so beta's
# posterior sd grows with tau (a funnel between beta and tau that no Gaussian q holds).
RAW_HIER_MODEL = HIER_MODEL.replace("  global real mu;\n", "").replace("  mu ~ normal(0, 10);\n", "").replace(
    "alpha ~ normal(mu, tau);", "alpha ~ normal(0, tau);")


def case_raw_hier(fvic, cache, work):
    """RAW_HIER_MODEL on hier_linreg's data with x 20 sds from 0. Issue 26's held-out condition:
    either every mean within 0.25 reference sd and every sd within 20%, or k-hat > 0.7 and a
    warning naming the poor fit and what to try; no warning may call q's moments close when they
    are not."""
    require("mu" not in RAW_HIER_MODEL and "alpha ~ normal(0, tau);" in RAW_HIER_MODEL, "RAW_HIER_MODEL is not derived")
    model = os.path.join(work, "raw_hier.fvi")
    with open(model, "w") as f:
        f.write(RAW_HIER_MODEL)
    data = os.path.join(work, "data")
    ref = hier_reference(hier_data(data, x_mean=20.0), location=False)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    fit = hier_fit(out)
    off = off_reference(fit, ref, unchecked=("tau",))
    k = khat(out)
    flagged, warnings = flagged_poor(p, k)
    print(f"  accurate: {not off}; flagged (k-hat > 0.7 and a warning naming it): {flagged}")
    require(not off or flagged, "a silent wrong answer: " + "; ".join(off) + f" (k-hat {k}, warnings: {warnings})")
    require(not off or not any("sds are close" in w for w in warnings),
            "a warning calls q's moments close where they are not: " + "; ".join(off))


SLOPES_MODEL = """\
// Each silo's own slope about a global mean (random slopes), 6 silos: the mean's and the scale's
// posterior from so few groups is a funnel no Gaussian q holds.
silo data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real alpha;
  global real mu_b;
  global real<lower=0> tau;
  global real<lower=0> sigma;
  local real b;
}
model {
  alpha ~ normal(0, 10);
  mu_b ~ normal(0, 10);
  tau ~ normal(0, 5);
  sigma ~ normal(0, 5);
  b ~ normal(mu_b, tau);
  y ~ normal(alpha + x * b, sigma);
}
"""


def slopes_data(folder, seed=5, x_mean=5.0):
    """grouped_data with slopes b_k ~ N(0.7, 0.4^2): y = 1 + b_k x + N(0, 1.2^2)."""
    return grouped_data(folder, seed, x_mean, (0.7, 0.4), lambda b, x: 1.0 + b * x)


def slopes_reference(silos):
    """SLOPES_MODEL's posterior by grid_reference: theta = (alpha, mu_b, b_1..J), alpha and mu_b ~
    N(0, 10^2), b_j ~ N(mu_b, tau^2)."""
    J = len(silos)
    D = 2 + J

    def row(k, x):
        v = [0.0] * D
        v[0], v[2 + k] = 1.0, x
        return v

    def prior(t2):
        prec = [[0.0] * D for _ in range(D)]
        prec[0][0] = 1 / 100
        prec[1][1] = 1 / 100 + J / t2
        for k in range(J):
            prec[2 + k][2 + k] = 1 / t2
            prec[1][2 + k] = prec[2 + k][1] = -1 / t2
        return prec, -2 * math.log(100) - J * math.log(t2)

    return grid_reference(silos, ["alpha", "mu_b"] + [f"b[{k + 1}]" for k in range(J)], row, prior, (0.005, 20), (0.4, 4))


def slopes_fit(out):
    """SLOPES_MODEL's fit in OUT: {name: (mean, sd)} of the globals and each silo's slope."""
    post = posterior(out)
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
           for name in ("alpha", "mu_b", "tau", "sigma")}
    for j in range(1, 7):
        b = posterior(os.path.join(out, f"silo-{j}"))["variables"]["b"]
        fit[f"b[{j}]"] = (b["mean"][0], b["sd"][0])
    return post, fit


def case_random_slopes(fvic, cache, work):
    """SLOPES_MODEL at x near 5. The ELBO's q has the sds of mu_b and tau short of the posterior's
    (0.76 and 0.57) while its own k-hat, from its own draws, reads good. With the defaults the tail
    check finds that and the moment correction moves q to the posterior's moments: every checked
    mean within 0.25 sd and sd within 20% (issue 26's limits), posterior.json saying the moments
    were corrected. With correct_moments = off the ELBO's q stands, and then a warning on stderr
    must say q's tails are lighter than the posterior's and posterior.json's k-hat reading must
    not call the fit good without saying so."""
    model = os.path.join(work, "slopes.fvi")
    with open(model, "w") as f:
        f.write(SLOPES_MODEL)
    data = os.path.join(work, "data")
    ref = slopes_reference(slopes_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post, fit = slopes_fit(out)
    k = khat(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {k:.3f}, "
          f"moments corrected: {post.get('moments_corrected', False)}")
    off = off_reference(fit, ref, unchecked=("tau",))
    require(not off, "the defaults' fit is off: " + "; ".join(off) + f" (k-hat {k})")
    require(post.get("moments_corrected") is True, "posterior.json does not say q's moments were corrected")

    out = os.path.join(work, "out-elbo")
    p, _ = run_defaults(fvic, cache, model, data, out, sets=("correct_moments=off",))
    post, fit = slopes_fit(out)
    k = khat(out)
    print(f"  correct_moments = off: k-hat {k:.3f}, reading {post.get('khat_reading')!r}")
    off = off_reference(fit, ref, unchecked=("tau",))
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    for w in warnings:
        print("  stderr: " + w)
    require("moments_corrected" not in post, "correct_moments = off corrected the moments")
    lighter = [w for w in warnings if "lighter" in w or ("k-hat" in w and "poor" in w)]
    require(not off or lighter, "a silent wrong answer: " + "; ".join(off) + f" (k-hat {k})")
    require(not off or k > 0.7 or "tail check" in post.get("khat_reading", ""),
            f"k-hat {k:.2f} read as {post.get('khat_reading')!r} where q is off: " + "; ".join(off))


LOCAL_SLOPES_MODEL = """\
// Random intercepts and slopes at a raw covariate (x near 20, sd 3): each silo's a and b about
// global means; the slopes' spread known, the intercepts' learnt.
silo data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real mu_a;
  global real mu_b;
  global real<lower=0> tau;
  global real<lower=0> sigma;
  local real a;
  local real b;
}
model {
  mu_a ~ normal(0, 10);
  mu_b ~ normal(0, 10);
  tau ~ normal(0, 5);
  sigma ~ normal(0, 5);
  a ~ normal(mu_a, tau);
  b ~ normal(mu_b, 0.25);
  y ~ normal(a + b * x, sigma);
}
"""
LOCAL_SLOPES_SD = 0.25  # b's prior sd in LOCAL_SLOPES_MODEL


def local_slopes_data(folder, seed=23, x_mean=20.0, x_sd=3.0):
    """grouped_data with a_k ~ N(1, 2^2), b_k ~ N(0.7, 0.25^2) and x ~ N(x_mean, x_sd^2): y = a_k +
    b_k x + N(0, 1.2^2)."""
    return grouped_data(folder, seed, x_mean, lambda rng: (rng.gauss(1.0, 2.0), rng.gauss(0.7, LOCAL_SLOPES_SD)),
                        lambda ab, x: ab[0] + ab[1] * x, x_sd)


def local_slopes_reference(silos):
    """LOCAL_SLOPES_MODEL's posterior by grid_reference: theta = (mu_a, mu_b, a_1..J, b_1..J),
    mu_a and mu_b ~ N(0, 10^2), a_j ~ N(mu_a, tau^2), b_j ~ N(mu_b, 0.25^2)."""
    J = len(silos)
    D = 2 + 2 * J
    s2 = LOCAL_SLOPES_SD ** 2

    def row(k, x):
        v = [0.0] * D
        v[2 + k], v[2 + J + k] = 1.0, x
        return v

    def prior(t2):
        prec = [[0.0] * D for _ in range(D)]
        prec[0][0] = 1 / 100 + J / t2
        prec[1][1] = 1 / 100 + J / s2
        for k in range(J):
            prec[2 + k][2 + k] = 1 / t2
            prec[0][2 + k] = prec[2 + k][0] = -1 / t2
            prec[2 + J + k][2 + J + k] = 1 / s2
            prec[1][2 + J + k] = prec[2 + J + k][1] = -1 / s2
        return prec, -2 * math.log(100) - J * math.log(t2) - J * math.log(s2)

    names = ["mu_a", "mu_b"] + [f"a[{k + 1}]" for k in range(J)] + [f"b[{k + 1}]" for k in range(J)]
    return grid_reference(silos, names, row, prior, (0.01, 20), (0.5, 3), points=(80, 50))


def local_slopes_fit(out, J=6):
    post = posterior(out)
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
           for name in ("mu_a", "mu_b", "tau", "sigma")}
    for k in range(1, J + 1):
        silo = posterior(os.path.join(out, f"silo-{k}"))["variables"]
        for name in ("a", "b"):
            fit[f"{name}[{k}]"] = (silo[name]["mean"][0], silo[name]["sd"][0])
    return post, fit


def case_local_slopes(fvic, cache, work):
    """LOCAL_SLOPES_MODEL with x near 20, 7 sds from 0: each silo fits its a at its own mean of x
    (a_c = a + xbar b, nothing sent), against the grid reference: every mean within 0.1 sd and sd
    within 10% (tau printed). At the raw x (`center = off`) the same defaults take 17,300
    iterations and end with the silos' a and b sds 0.90-0.97 of the posterior's: the structured
    family holds a silo's locals independent given the globals, across a ridge at correlation
    -0.99."""
    model = os.path.join(work, "local_slopes.fvi")
    with open(model, "w") as f:
        f.write(LOCAL_SLOPES_MODEL)
    data = os.path.join(work, "data")
    ref = local_slopes_reference(local_slopes_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("centred in each silo: a + x * b" in p.stdout, "the run does not say each silo centred a:\n" + p.stdout)
    post, fit = local_slopes_fit(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require_near_reference(fit, ref, unchecked=("tau",))


GROUP_SLOPES_MODEL = """\
// Random intercepts and slopes by group within each silo (wards in hospitals) at a raw
// covariate (x near 20, sd 3): each group's a[g] and b[g] about global means; the slopes'
// spread known, the intercepts' learnt.
silo data {
  int<lower=0> N;
  int<lower=1> C;
  array[N] int<lower=1, upper=C> g;
  vector[N] x;
  vector[N] y;
}
parameters {
  global real mu_a;
  global real mu_b;
  global real<lower=0> tau;
  global real<lower=0> sigma;
  local vector[C] a;
  local vector[C] b;
}
model {
  mu_a ~ normal(0, 10);
  mu_b ~ normal(0, 10);
  tau ~ normal(0, 5);
  sigma ~ normal(0, 5);
  a ~ normal(mu_a, tau);
  b ~ normal(mu_b, 0.25);
  y ~ normal(a[g] + b[g] .* x, sigma);
}
"""
GROUP_SLOPES_SILOS, GROUP_SLOPES_GROUPS = 3, 3


def group_slopes_data(folder, seed=29, x_mean=20.0, x_sd=3.0, a_sd=4.0, sizes=(5, 12)):
    """3 silos of 3 groups of 5-12 rows (`sizes`), each group with a_c ~ N(1, a_sd^2), b_c ~
    N(0.7, 0.25^2), x ~ N(x_mean, x_sd^2) and y = a_c + b_c x + N(0, 1.2^2); the rows of a silo's
    groups interleaved. Returns [(x, y)] per group, silo by silo, for local_slopes_reference."""
    rng = random.Random(seed)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({}, f)
    groups = []
    for k in range(GROUP_SLOPES_SILOS):
        rows = []
        for c in range(GROUP_SLOPES_GROUPS):
            a, b = rng.gauss(1.0, a_sd), rng.gauss(0.7, LOCAL_SLOPES_SD)
            xs = [round(rng.gauss(x_mean, x_sd), 4) for _ in range(rng.randint(*sizes))]
            ys = [round(a + b * xi + rng.gauss(0, 1.2), 4) for xi in xs]
            groups.append((xs, ys))
            rows += [(c + 1, xi, yi) for xi, yi in zip(xs, ys)]
        rng.shuffle(rows)
        with open(os.path.join(folder, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(rows), "C": GROUP_SLOPES_GROUPS, "g": [r[0] for r in rows],
                       "x": [r[1] for r in rows], "y": [r[2] for r in rows]}, f)
    return groups


def case_group_slopes(fvic, cache, work):
    """GROUP_SLOPES_MODEL with x near 20, 7 sds from 0: each silo fits its groups' a[c] at the
    group's own mean of x (a_c[c] = a[c] + xbar_c b[c], nothing sent), against the grid reference
    (local_slopes_reference with each group a unit): every mean within 0.1 sd and sd within 10%
    (tau printed; seeds 1-4: within 0.029-0.086 sd, sds within 7%). At the raw x (`center = off`)
    the same defaults end NOT converged after 20,000 iterations with tau at 0.20 against the
    posterior's 5.1 and a[6] 3.3 sd off, flagged by k-hat 0.84. With a_sd = 2 (tau's posterior
    2.6, sd 1.4, reaching toward 0 where the groups' intercepts at x = 0, each 1.5-2.5 wide,
    funnel) q is flagged instead (k-hat 0.67, the tail check's 0.77 and its warning), its worst
    mean tau's 0.36 sd off."""
    model = os.path.join(work, "group_slopes.fvi")
    with open(model, "w") as f:
        f.write(GROUP_SLOPES_MODEL)
    data = os.path.join(work, "data")
    ref = local_slopes_reference(group_slopes_data(data))
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    require("centred in each silo: a[g] + x * b[g] at each group's own mean" in p.stdout,
            "the run does not say each silo centred a[g]:\n" + p.stdout)
    post = posterior(out)
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0])
           for name in ("mu_a", "mu_b", "tau", "sigma")}
    C = GROUP_SLOPES_GROUPS
    for k in range(GROUP_SLOPES_SILOS):
        silo = posterior(os.path.join(out, f"silo-{k + 1}"))["variables"]
        for name in ("a", "b"):
            for c in range(C):
                fit[f"{name}[{k * C + c + 1}]"] = (silo[name]["mean"][c], silo[name]["sd"][c])
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    off_reference(fit, ref, unchecked=("tau",))
    require_converged(p, out)
    require_near_reference(fit, ref, unchecked=("tau",))


REFERENCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "references")


def case_same_seed(fvic, cache, work):
    """Four runs of one model with one seed: posterior.json and draws.csv (the server's and each
    silo's) identical, draws.csv's `file =` line aside."""
    folder = os.path.join(REFERENCES, "group_slopes_few")

    def outputs(out):
        files = {}
        for root, _, names in os.walk(out):
            for name in names:
                if name in ("posterior.json", "draws.csv"):
                    with open(os.path.join(root, name)) as f:
                        lines = [line for line in f if not line.startswith("#   file = ")]
                    files[os.path.relpath(os.path.join(root, name), out)] = "".join(lines)
        return files

    runs = []
    for r in range(4):
        out = os.path.join(work, f"out{r}")
        run_defaults(fvic, cache, os.path.join(folder, "model.fvi"), os.path.join(folder, "data"), out,
                     sets=("max_rounds=60",))
        runs.append(outputs(out))
    require(len(runs[0]) == 8, f"expected the server's and three silos' posterior.json and draws.csv, found {sorted(runs[0])}")
    for r in range(1, len(runs)):
        differ = sorted(name for name in runs[0] if runs[r].get(name) != runs[0][name])
        require(not differ, f"run {r + 1} differs from run 1 in {differ} with the same seed")
    print(f"  4 runs, {len(runs[0])} files each: identical")


def held_out_case(name, weighed=False, globals_flagged=False):
    """A model written outside the examples, stored with its data and long-run NUTS on the pooled
    data (references/NAME: model.fvi, data/, pooled.stan, nuts.json, which says how NUTS was run):
    converged, and every parameter NUTS reports (the server's, and each silo's locals, named as
    nuts.json's "locals" maps them: "ab[{i},{k}]" is silo k's element i) within 0.25 sd and 20%.
    `weighed`: the silos report their locals weighed by the closing exchange's importance weights
    (k-hat <= 0.7), and the run says so. `globals_flagged`: a server's parameter may instead be off
    with a warning naming it (the locals may not); the run need not end converged."""
    def case(fvic, cache, work):
        folder = os.path.join(REFERENCES, name)
        with open(os.path.join(folder, "nuts.json")) as f:
            reference = json.load(f)
        ref = {key: tuple(v) for key, v in reference["posterior"].items()}
        out = os.path.join(work, "out")
        p, _ = run_defaults(fvic, cache, os.path.join(folder, "model.fvi"), os.path.join(folder, "data"), out)
        post = posterior(out)
        k = khat(out)
        print(f"  {reference['what']}: {post['method']}, {post['iterations']} iterations, "
              f"converged {post['converged']}, k-hat {k:.3f}")
        if weighed:
            require(k <= 0.7 and "weighed by the closing exchange's importance weights" in p.stdout,
                    f"the silos' locals were not weighed (k-hat {k}):\n" + p.stdout)
        server_fit, locals_fit = {}, {}
        for variable, v in post["variables"].items():
            scalar = len(v["mean"]) == 1 and not v.get("shape")
            for i, (mean, sd) in enumerate(zip(v["mean"], v["sd"]), 1):
                server_fit[variable if scalar else f"{variable}[{i}]"] = (mean, sd)
        silo = 1
        while os.path.exists(os.path.join(out, f"silo-{silo}", "posterior.json")):
            for variable, pattern in reference["locals"].items():
                v = posterior(os.path.join(out, f"silo-{silo}"))["variables"][variable]
                for i, (mean, sd) in enumerate(zip(v["mean"], v["sd"]), 1):
                    locals_fit[pattern.format(i=i, k=silo)] = (mean, sd)
            silo += 1
        server_fit = {key: value for key, value in server_fit.items() if key in ref}
        locals_fit = {key: value for key, value in locals_fit.items() if key in ref}
        missing = sorted(set(ref) - set(server_fit) - set(locals_fit) - {"rho"})
        require(not missing, f"no fitted value for the reference's {missing}")
        off = off_reference(locals_fit, ref)
        if globals_flagged:
            warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
            off += [o for o in off_reference(server_fit, ref) if not any(o.split(":")[0] in w for w in warnings)]
            require(not off, "off the NUTS reference with no warning naming the server's: " + "; ".join(off))
        else:
            require_converged(p, out)
            off += off_reference(server_fit, ref)
            require(not off, "off the NUTS reference: " + "; ".join(off))
    return case


FUNNEL_MODEL = """\
// Eight schools (Rubin 1981), one school a silo: a centred hierarchy whose scale tau has much of
// its posterior mass near zero, where theta and tau form a funnel.
silo data {
  real y;
  real<lower=0> s;
}
parameters {
  global real mu;
  global real<lower=0> tau;
  local real theta;
}
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, s);
}
"""

SCHOOLS_Y = [28, 8, -3, 7, -1, 1, 18, 12]
SCHOOLS_S = [15, 10, 16, 11, 9, 11, 10, 18]


def funnel_reference(points=4000):
    """The posterior of FUNNEL_MODEL by quadrature: given tau, the model is linear-Gaussian in mu
    and theta (mu ~ N(0, 25), y_j ~ N(mu, s_j^2 + tau^2) once theta_j is integrated out), so
    p(y | tau), mu | tau, y and theta_j | tau, y are closed-form; tau (half-Cauchy(0, 5)) is
    integrated on a grid in log tau from 1e-4 to 1e4 (the Jacobian tau). Returns {name: (mean, sd)}
    for mu, tau and theta[j]."""
    J = len(SCHOOLS_Y)
    logs, moments = [], []
    for a in range(points):
        lt = math.log(1e-4) + a * (math.log(1e4) - math.log(1e-4)) / (points - 1)
        tau = math.exp(lt)
        v = [sj * sj + tau * tau for sj in SCHOOLS_S]
        precision = 1 / 25 + sum(1 / vj for vj in v)
        b = sum(yj / vj for yj, vj in zip(SCHOOLS_Y, v))
        m, var = b / precision, 1 / precision
        log_marginal = (-0.5 * sum(math.log(2 * math.pi * vj) + yj * yj / vj for yj, vj in zip(SCHOOLS_Y, v))
                        - 0.5 * math.log(2 * math.pi * 25) + 0.5 * b * b / precision + 0.5 * math.log(2 * math.pi / precision))
        log_prior = math.log(2 / (math.pi * 5 * (1 + (tau / 5) ** 2)))  # half-Cauchy(0, 5)
        logs.append(log_marginal + log_prior + lt)  # + log tau: the grid is in log tau
        theta = []
        for yj, sj in zip(SCHOOLS_Y, SCHOOLS_S):
            w = tau * tau / (tau * tau + sj * sj)  # theta_j | mu, tau, y = w y_j + (1 - w) mu, var w s_j^2
            theta.append((w * yj + (1 - w) * m, w * sj * sj + (1 - w) ** 2 * var))
        moments.append((tau, m, var, theta))
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    total = sum(weights)
    weights = [w / total for w in weights]

    def mix(first, second):  # the mean and sd of a mixture given each grid point's mean and variance
        mean = sum(w * first(mo) for w, mo in zip(weights, moments))
        square = sum(w * (second(mo) + first(mo) ** 2) for w, mo in zip(weights, moments))
        return mean, math.sqrt(max(square - mean * mean, 0))

    ref = {"mu": mix(lambda mo: mo[1], lambda mo: mo[2]), "tau": mix(lambda mo: mo[0], lambda mo: 0.0)}
    for j in range(J):
        ref[f"theta[{j + 1}]"] = mix(lambda mo, j=j: mo[3][j][0], lambda mo, j=j: mo[3][j][1])
    return ref


def case_funnel(fvic, cache, work):
    """Eight schools, centred, one school a silo (a funnel: few groups, a scale near zero). Issue
    26: either every mean within 0.25 reference sd and every sd within 20%, or k-hat > 0.7 and a
    warning on stderr naming the problem and what to try."""
    model = os.path.join(work, "schools.fvi")
    with open(model, "w") as f:
        f.write(FUNNEL_MODEL)
    data = os.path.join(work, "data")
    os.makedirs(data)
    with open(os.path.join(data, "data.json"), "w") as f:
        json.dump({}, f)
    for j, (y, s) in enumerate(zip(SCHOOLS_Y, SCHOOLS_S)):
        with open(os.path.join(data, f"silo-{j + 1}.json"), "w") as f:
            json.dump({"y": y, "s": s}, f)
    ref = funnel_reference()
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post = posterior(out)
    k = khat(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {k:.3f}")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]) for name in ("mu", "tau")}
    for j in range(1, len(SCHOOLS_Y) + 1):
        theta = posterior(os.path.join(out, f"silo-{j}"))["variables"]["theta"]
        fit[f"theta[{j}]"] = (theta["mean"][0], theta["sd"][0])
    off = off_reference(fit, ref)
    flagged, warnings = flagged_poor(p, k)
    print(f"  accurate: {not off}; flagged (k-hat > 0.7 and a warning naming it): {flagged}")
    require(not off or flagged, "a silent wrong answer: " + "; ".join(off) + f" (k-hat {k}, warnings: {warnings})")


VFL_FUNNEL_MODEL = """\
// A vertically split Gaussian regression, 2 silos of 3 columns, each silo's coefficients about a
// scale it learns from its own block (lambda is split): silo 2's columns barely predict y, so its
// lambda reaches toward 0, where it and its betas form a funnel.
data {
  int<lower=0> N;
}
server data {
  vector[N] y;
  real<lower=0> sigma;
}
split data {
  int<lower=1> P;
  matrix[N, P] x;
}
parameters {
  global real b;
  split real<lower=0> lambda;
  split vector[P] beta;
}
model {
  b ~ normal(0, 2);
  lambda ~ normal(0, 1);
  beta ~ normal(0, lambda);
  y ~ normal(b + silo_sum(x * beta), sigma);
}
"""
VFL_FUNNEL_BETA = [0.8, -0.5, 0.3, 0.05, 0.0, -0.05]  # silo 1's columns, then silo 2's
VFL_FUNNEL_N, VFL_FUNNEL_SIGMA = 100, 2.0


def vfl_funnel_data(folder):
    """N = 100 rows of 6 standard normal columns, y = -0.3 + x beta + N(0, 2^2) (seed 20261205);
    silo K the columns 3K-2..3K. Returns (x, y) as written."""
    rng = random.Random(20261205)
    x = [[round(rng.gauss(0, 1), 6) for _ in range(6)] for _ in range(VFL_FUNNEL_N)]
    y = [round(-0.3 + sum(c * v for c, v in zip(VFL_FUNNEL_BETA, r)) + rng.gauss(0, VFL_FUNNEL_SIGMA), 6) for r in x]
    os.makedirs(folder)
    with open(os.path.join(folder, "data.json"), "w") as f:
        json.dump({"N": VFL_FUNNEL_N}, f)
    with open(os.path.join(folder, "server.json"), "w") as f:
        json.dump({"y": y, "sigma": VFL_FUNNEL_SIGMA}, f)
    for k in range(2):
        with open(os.path.join(folder, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"P": 3, "x": [r[3 * k:3 * k + 3] for r in x]}, f)
    return x, y


def vfl_funnel_conditionals(x, y):
    """The linear-Gaussian part of VFL_FUNNEL_MODEL's data: given the prior variances D of
    theta = (b, beta), P = D^-1 + A'A / sigma^2 (A = [1, x]) and r = A'y / sigma^2, theta | D ~
    N(P^-1 r, P^-1) and log p(y | D) = r'P^-1 r / 2 - log|P| / 2 - log|D| / 2 + const. Returns a
    function of D's diagonal giving (log p(y | D), the mean, the covariance)."""
    rows = [(1.0, *r) for r in x]
    d = len(rows[0])
    ata = [[sum(r[i] * r[j] for r in rows) / VFL_FUNNEL_SIGMA ** 2 for j in range(d)] for i in range(d)]
    rhs = [sum(r[i] * yi for r, yi in zip(rows, y)) / VFL_FUNNEL_SIGMA ** 2 for i in range(d)]

    def given(prior_var):
        prec = [[ata[i][j] + (1 / prior_var[i] if i == j else 0.0) for j in range(d)] for i in range(d)]
        low = cholesky(prec)
        mean = backward(low, forward(low, rhs))
        log_ml = (0.5 * sum(m * r for m, r in zip(mean, rhs)) - sum(math.log(low[i][i]) for i in range(d))
                  - 0.5 * sum(math.log(v) for v in prior_var))
        return log_ml, mean, cholesky_inverse(low)
    return given


def mixture_reference(cells):
    """The moments of a mixture of Gaussians over theta = (b, beta[1..6]) and of scales: cells of
    (log weight, scales, mean, covariance). Returns the normalised weights and each name's (mean,
    sd) for b and beta."""
    top = max(c[0] for c in cells)
    w = [math.exp(c[0] - top) for c in cells]
    total = sum(w)
    w = [wi / total for wi in w]
    ref = {}
    for i, name in enumerate(["b"] + [f"beta[{j + 1}]" for j in range(6)]):
        m = sum(wi * c[2][i] for wi, c in zip(w, cells))
        ref[name] = (m, math.sqrt(sum(wi * (c[3][i][i] + c[2][i] ** 2) for wi, c in zip(w, cells)) - m * m))
    return w, ref


def scale_moments(w, values):
    m = sum(wi * v for wi, v in zip(w, values))
    return m, math.sqrt(sum(wi * v * v for wi, v in zip(w, values)) - m * m)


def vfl_funnel_reference(x, y, points=60, lo=-7.0, hi=1.5):
    """VFL_FUNNEL_MODEL's posterior by quadrature: given (lambda_1, lambda_2) the model is
    linear-Gaussian in theta (vfl_funnel_conditionals, prior variances (4, lambda_1^2 x 3,
    lambda_2^2 x 3)). A points x points grid over u_k = log lambda_k (the density in u: the
    half-normal prior times lambda_k) weighs the conditional Gaussians; lambda's moments from the
    same weights."""
    given = vfl_funnel_conditionals(x, y)
    grid = [lo + (hi - lo) * i / (points - 1) for i in range(points)]
    cells = []
    for u1 in grid:
        for u2 in grid:
            lam = (math.exp(u1), math.exp(u2))
            log_ml, mean, cov = given([4.0] + [lam[0] ** 2] * 3 + [lam[1] ** 2] * 3)
            cells.append((log_ml - 0.5 * (lam[0] ** 2 + lam[1] ** 2) + u1 + u2, lam, mean, cov))
    w, ref = mixture_reference(cells)
    for k in range(2):
        ref[f"lambda[{k + 1}]"] = scale_moments(w, [c[1][k] for c in cells])
    edge = sum(wi for wi, c in zip(w, cells) if min(c[1]) <= math.exp(lo + 1e-9) or max(c[1]) >= math.exp(hi - 1e-9))
    require(edge < 1e-3, f"the quadrature grid's edges hold {edge:.2g} of the posterior: widen it")
    return ref


def case_vfl_funnel(fvic, cache, work):
    """VFL_FUNNEL_MODEL: a split scale per silo, silo 2's reaching toward 0 (a funnel in its block,
    which a Gaussian q over every party's block cannot follow). Issue 26: either every mean within
    0.25 reference sd and sd within 20% (the quadrature reference, vfl_funnel_reference), or a
    warning on stderr -- never a silent wrong answer. vfl_exact's k-hat reads q's own draws; its
    tail check, made by the parties together (each silo draws its block of a heavier-tailed
    proposal and weighs it with the server's weights), must have been made: its line on stdout."""
    model = os.path.join(work, "vfl_funnel.fvi")
    with open(model, "w") as f:
        f.write(VFL_FUNNEL_MODEL)
    data = os.path.join(work, "data")
    x, y = vfl_funnel_data(data)
    ref = vfl_funnel_reference(x, y)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post = posterior(out)
    k = khat(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {k:.3f}")
    require(post.get("method") == "vfl_exact", f"planned as {post.get('method')}, not vfl_exact")
    fit = {"b": (post["variables"]["b"]["mean"][0], post["variables"]["b"]["sd"][0])}
    for s in range(2):
        silo = posterior(os.path.join(out, f"silo-{s + 1}"))["variables"]
        fit[f"lambda[{s + 1}]"] = (silo["lambda"]["mean"][0], silo["lambda"]["sd"][0])
        for j in range(3):
            fit[f"beta[{3 * s + j + 1}]"] = (silo["beta"]["mean"][j], silo["beta"]["sd"][j])
    off = off_reference(fit, ref)
    tail = [line for line in p.stdout.splitlines() if line.startswith(("tail check:", "tail check ("))]
    print("  " + (tail[0] if tail else "no tail check line"))
    require(tail and "not made" not in tail[0], "vfl_exact's tail check was not made: " + (tail[0] if tail else "no line"))
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    for w in warnings:
        print("  stderr: " + w)
    print(f"  accurate: {not off}; warned: {bool(warnings)}")
    require(not off or warnings, "a silent wrong answer: " + "; ".join(off) + f" (k-hat {k})")


VFL_SHARED_SCALE_MODEL = VFL_FUNNEL_MODEL.replace(
    "// A vertically split Gaussian regression, 2 silos of 3 columns, each silo's coefficients about a\n"
    "// scale it learns from its own block (lambda is split): silo 2's columns barely predict y, so its\n"
    "// lambda reaches toward 0, where it and its betas form a funnel.\n",
    "// A vertically split Gaussian regression, 2 silos of 3 columns, every coefficient about one scale\n"
    "// the server holds (lambda is global): each silo's prior reads the server's draws of lambda.\n").replace(
    "  split real<lower=0> lambda;", "  global real<lower=0> lambda;")


def vfl_shared_scale_reference(x, y, points=500, lo=-7.0, hi=1.5):
    """VFL_SHARED_SCALE_MODEL's posterior by quadrature over u = log lambda: given lambda the model
    is linear-Gaussian in theta (vfl_funnel_conditionals, prior variances (4, lambda^2 x 6)); the
    grid weighs the conditionals by p(y | lambda) N+(lambda; 0, 1) lambda."""
    given = vfl_funnel_conditionals(x, y)
    cells = []
    for i in range(points):
        u = lo + (hi - lo) * i / (points - 1)
        lam = math.exp(u)
        log_ml, mean, cov = given([4.0] + [lam ** 2] * 6)
        cells.append((log_ml - 0.5 * lam ** 2 + u, lam, mean, cov))
    w, ref = mixture_reference(cells)
    require(w[0] + w[-1] < 1e-4, f"the quadrature grid's ends hold {w[0] + w[-1]:.2g} of the posterior: widen it")
    ref["lambda"] = scale_moments(w, [c[1] for c in cells])
    return ref


def case_vfl_shared_scale(fvic, cache, work):
    """VFL_SHARED_SCALE_MODEL (vfl_funnel's data, one global scale for every coefficient): vfl_exact
    sends the silos the server's draws of lambda with each adjoint and takes back their priors'
    gradient in them. Against the quadrature reference (vfl_shared_scale_reference): converged,
    every mean within 0.25 reference sd and sd within 20%, or a warning on stderr (issue 26)."""
    model = os.path.join(work, "vfl_shared_scale.fvi")
    with open(model, "w") as f:
        f.write(VFL_SHARED_SCALE_MODEL)
    data = os.path.join(work, "data")
    x, y = vfl_funnel_data(data)
    ref = vfl_shared_scale_reference(x, y)
    out = os.path.join(work, "out")
    p, _ = run_defaults(fvic, cache, model, data, out)
    post = posterior(out)
    print(f"  {post['method']}, {post['iterations']} iterations, k-hat {khat(out):.3f}")
    require(post.get("method") == "vfl_exact", f"planned as {post.get('method')}, not vfl_exact")
    fit = {name: (post["variables"][name]["mean"][0], post["variables"][name]["sd"][0]) for name in ("b", "lambda")}
    for s in range(2):
        beta = posterior(os.path.join(out, f"silo-{s + 1}"))["variables"]["beta"]
        for j in range(3):
            fit[f"beta[{3 * s + j + 1}]"] = (beta["mean"][j], beta["sd"][j])
    off = off_reference(fit, ref)
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    for w in warnings:
        print("  stderr: " + w)
    require_converged(p, out, "split block")
    require(not off or warnings, "a silent wrong answer: " + "; ".join(off))


CASES = {"flat": case_flat, "statements_parties": case_statements_parties, "silent_silos": case_silent_silos, "funnel": case_funnel, "pvi": case_pvi, "pvi_raw_x": case_pvi_raw_x, "fedgvi": case_fedgvi, "sfvi": case_sfvi, "sfvi_glmm": case_sfvi_glmm, "ridge": case_ridge, "ar1": case_ar1, "ordinal_raw": held_out_case("ordinal_raw"), "lkj_slopes": held_out_case("lkj_slopes"), "simplex_hier": held_out_case("simplex_hier"), "student_t_raw": held_out_case("student_t_raw"), "binomial_labs": held_out_case("binomial_labs"), "zip_counts": held_out_case("zip_counts"), "group_slopes_few": held_out_case("group_slopes_few", weighed=True, globals_flagged=True), "same_seed": case_same_seed, "outcome_scale": case_outcome_scale, "vfl_outcome_scale": case_vfl_outcome_scale, "centring": case_centring, "centring_products": case_centring_products, "centring_covariates": case_centring_covariates, "centring_hier": case_centring_hier, "centring_local": case_centring_local, "centring_companions": case_centring_companions, "centring_arrays": case_centring_arrays, "centring_td": case_centring_td, "centring_chain": case_centring_chain, "centring_tp": case_centring_tp, "hier_linreg": case_hier_linreg, "hier_outcome_scale": case_hier_outcome_scale,
         "groups_outcome_scale": case_groups_outcome_scale, "groups_raw_x": case_groups_raw_x,
         "groups_global_raw_x": case_groups_global_raw_x,
         "raw_hier": case_raw_hier, "random_slopes": case_random_slopes, "local_slopes": case_local_slopes, "group_slopes": case_group_slopes,
         "vfl_gaussian": case_vfl_gaussian, "vfl_raw": case_vfl_raw, "vfl_power_block": case_vfl_power_block, "vfl_logistic": case_vfl_logistic, "vfl_poisson": case_vfl_poisson, "vfl_funnel": case_vfl_funnel, "vfl_shared_scale": case_vfl_shared_scale}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
