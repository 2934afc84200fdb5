#!/usr/bin/env python3
"""Stan programs brought over: usage  check_stan_programs.py FVIC CACHE CASE.

Each case is a directory of examples/stan_programs/: a Stan program as a Stan user writes it,
its .fvi twin (ownership marks and `silo data` added, nothing else changed: functions,
transformed data, transformed parameters and generated quantities kept as written) and a
long-run NUTS reference on the pooled data (reference/nuts_summary.json, rstan). The case runs
`fvic run` with nothing set and compares every reference parameter the run writes -- globals and
the server's transformed parameters and generated quantities in OUT/posterior.json, each silo's
locals (NAME[k] is silo k's NAME) in OUT/silo-K/posterior.json -- with NUTS: the mean within
0.25 NUTS sd (issue 32), or, where q's Gaussian shape cannot reach that, a warning on stderr that
names the parameter (issue 26: a right answer or a loud warning, never a silent wrong one).

Every case also checks where the derived values went (`fvic plan --json`'s "derived"): a value the
silos compute (it reads their data or locals) is in each silo-K/posterior.json and in none of the
server's outputs (posterior.json, draws.csv's header). regression_ppc also checks the wire and the
replicates: run twice for 400 fixed iterations, with and without its generated quantities block,
the bytes of every iteration each way are the same (the silos' replicates y_rep add nothing to any message); and each
row's replicate mean is the fitted mean alpha + x beta of the server's posterior within 5 Monte
Carlo standard errors (sd / sqrt(draws)).

The case silo_sum checks the generated quantities a silo computes in part and the server adds
up (`real log_lik = silo_sum(normal_lpdf(y | ...));`), by SFVI (regression_ppc), PVI
(linreg_conjugate) and SFVI with locals (hier_regression_tp, whose log_lik reads each silo's
local draws, which stay there: only finite is checked), each with two such quantities added to
its generated quantities: the plan
lists each silo's part among the closing messages; the server's posterior.json and draws.csv hold
the sums; at every draw of draws.csv, log_lik is the log likelihood of every silo's rows at that
draw's parameters, computed here from the data files (within the rounding of draws.csv's 10
digits, propagated through the likelihood), and n_total is the number of rows; the closing
exchange received exactly what the plan lists (8 bytes a number).

The case hyperparameters checks the server's derived values when SFVI also fits hyperparameters
(point estimates, after the globals in the server's draws): hier_regression_tp with sigma_alpha
moved to a `hyperparameters` block and a generated quantity of a global and the hyperparameter
(`mu_plus = mu_alpha + sigma_alpha`), 300 fixed iterations. The server's posterior.json holds
mu_plus; at every draw of draws.csv it is mu_alpha + sigma_alpha (sigma_alpha the same at every
draw); nothing is "not computed"; and the PSIS-reweighting line does not name the hyperparameter
(a constant has nothing to reweigh).

The case capture_recapture checks transformed data built by statements and `if`/`else` in a
loop (examples/stan_programs/capture_recapture): fvic plan says each silo computes s and C, and
the fit with defaults is within 0.25 posterior sd of the exact posterior (a grid over omega and
p), with sds within 20%.

The case pk_oral checks an ODE solve (examples/stan_programs/pk_oral: ode_rk45 of a user
function in a transformed parameter that each hospital's likelihood reads) against the exact
posterior of the model's closed form on a grid: within 0.25 posterior sd, sds within 20%.

ordinal_regression (examples/stan_programs/ordinal_regression) is the generic case for
ordered_logistic and `ordered` cutpoints; negbin_exposure (examples/stan_programs/negbin_exposure)
for neg_binomial_2_log with an exposure offset and an uncentred covariate. Those two and
regression_ppc, whose intercepts are fitted at the centred data, also need every sd within 10% of
NUTS's. weibull_frailty (examples/stan_programs/weibull_frailty) is a survival model: right-censored
rows through weibull_lccdf, a frailty per hospital (local), raw age read a row at a time (centred
and its steps scaled); its means only (at seed 3 tau's sd is 24% short, with the warnings).

The case silo_draws checks each silo's draws.csv: a pointwise log likelihood in generated
quantities is there, a column per row, equal at every draw to the density of that row at the
draw's parameters, by SFVI without locals (regression_ppc) and with them (hier_regression_tp).

Cases: eight_schools_noncentered, hier_regression_tp, regression_ppc, silo_sum, silo_draws, hyperparameters,
capture_recapture, pk_oral, ordinal_regression, negbin_exposure, weibull_frailty. Exit 0 on
success, 1 with a message on the first failure.
"""
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, Failure, require  # noqa: E402

TOLERANCE_SD = 0.25
# Regressions whose intercept SFVI fits at the centred data (docs/user-guide.md, "Centred data"):
# their posteriors are near Gaussian, so q's sds must also come within 10% of NUTS's (at the raw
# age negbin_exposure's were 17% short, a ridge the fit stopped on).
SD_TOLERANCE = {"negbin_exposure": 0.10, "regression_ppc": 0.10}


def written_values(out):
    """name[k] or name -> (mean, sd) from the server's posterior and each silo's."""
    values = {}

    def add(post, suffix):
        for name, v in post["variables"].items():
            shape = v["shape"]
            if not shape:
                values[name + suffix] = (v["mean"][0], v["sd"][0])
            elif len(shape) == 1 and not suffix:
                for i, (m, s) in enumerate(zip(v["mean"], v["sd"])):
                    values[f"{name}[{i + 1}]"] = (m, s)

    with open(os.path.join(out, "posterior.json")) as f:
        add(json.load(f), "")
    k = 1
    while os.path.exists(os.path.join(out, f"silo-{k}", "posterior.json")):
        with open(os.path.join(out, f"silo-{k}", "posterior.json")) as f:
            add(json.load(f), f"[{k}]")
        k += 1
    return values


def run(fvic, cache, model, data, out, sets=()):
    cmd = [fvic, "run", model, "--data", data, "--output", out] + [a for kv in sets for a in ("--set", kv)]
    p = subprocess.run(cmd, env=dict(os.environ, FVIC_CACHE=cache), capture_output=True, text=True, timeout=1200)
    require(p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def silo_dirs(out):
    k, dirs = 1, []
    while os.path.isdir(os.path.join(out, f"silo-{k}")):
        dirs.append(os.path.join(out, f"silo-{k}"))
        k += 1
    return dirs


def check_derived_placement(fvic, model, out):
    plan = json.loads(subprocess.run([fvic, "plan", model, "--json"], capture_output=True, text=True, check=True).stdout)
    silo_values = [d["name"] for d in plan["derived"]
                   if d["owner"] == "silo" and d["block"] != "transformed data"]
    with open(os.path.join(out, "posterior.json")) as f:
        server = set(json.load(f)["variables"])
    with open(os.path.join(out, "draws.csv")) as f:
        header = next(line for line in f if not line.startswith("#")).strip().split(",")
    for name in silo_values:
        require(name not in server, f"{name} (the silos') is in the server's posterior.json")
        require(not any(c == name or c.startswith(name + ".") for c in header),
                f"{name} (the silos') is in the server's draws.csv")
        for d in silo_dirs(out):
            with open(os.path.join(d, "posterior.json")) as f:
                require(name in json.load(f)["variables"], f"{name} is missing from {d}/posterior.json")
    print(f"  the silos' own derived values, in each silo's outputs only: {', '.join(silo_values) or 'none'}")


def last_bytes(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))
    return int(rows[-1]["bytes_sent"]), int(rows[-1]["bytes_received"])


def check_wire_and_replicates(fvic, cache, root, case):
    model, data = os.path.join(root, case + ".fvi"), os.path.join(root, "data")
    with open(model) as f:
        source = f.read()
    stripped = re.sub(r"generated quantities \{.*?\n\}\n", "", source, flags=re.S)
    require(stripped != source, "no generated quantities block to strip")
    with tempfile.TemporaryDirectory() as work:
        bare = os.path.join(work, case + ".fvi")
        with open(bare, "w") as f:
            f.write(stripped)
        with_gq, without = os.path.join(work, "with"), os.path.join(work, "without")
        run(fvic, cache, model, data, with_gq, ["rounds=400"])
        run(fvic, cache, bare, data, without, ["rounds=400"])
        a, b = last_bytes(with_gq), last_bytes(without)
        require(a == b, f"bytes sent/received {a} with the generated quantities, {b} without")
        print(f"  bytes sent/received with and without generated quantities: {a[0]}/{a[1]} both")
    # Replicates: each row's mean is the posterior's fitted mean, alpha + x beta at q's means.
    with tempfile.TemporaryDirectory() as out:
        run(fvic, cache, model, data, out)
        with open(os.path.join(out, "posterior.json")) as f:
            v = json.load(f)["variables"]
        alpha, beta = v["alpha"]["mean"][0], v["beta"]["mean"]
        worst = 0.0
        for k, d in enumerate(silo_dirs(out), start=1):
            with open(os.path.join(d, "posterior.json")) as f:
                rep = json.load(f)["variables"]["y_rep"]
            with open(os.path.join(data, f"silo-{k}.json")) as f:
                x = json.load(f)["x"]
            for n, row in enumerate(x):
                fitted = alpha + sum(b * xi for b, xi in zip(beta, row))
                z = abs(rep["mean"][n] - fitted) / (rep["sd"][n] / math.sqrt(1000))
                worst = max(worst, z)
        require(worst < 5, f"a replicate's mean is {worst:.1f} Monte Carlo standard errors from its fitted mean")
        print(f"  y_rep means against alpha + x beta: at most {worst:.2f} Monte Carlo standard errors")


# ---------------------------------------------------------------------------------------------
# silo_sum: generated quantities each silo computes in part, summed by the server

SILO_SUM_LINES = """  // Each silo's part, sent once at the end; the server writes the sum.
  real log_lik = silo_sum(normal_lpdf(y | {mean}, {sd}));
  real n_total = silo_sum(N);
"""


def with_silo_sums(source, mean, sd):
    """`source` with log_lik and n_total added to its generated quantities (a block made if none)."""
    lines = SILO_SUM_LINES.format(mean=mean, sd=sd)
    if "generated quantities {" in source:
        at = source.index("generated quantities {")
        end = source.index("\n}", at)
        return source[:end + 1] + lines + source[end + 1:]
    at = source.index("inference {") if "inference {" in source else len(source)
    return source[:at] + "generated quantities {\n" + lines + "}\n" + source[at:]


def draws_rows(out):
    """draws.csv's draws (its first row is q's mean, lp__ 0 and log_p__ 0), as dicts of floats."""
    with open(os.path.join(out, "draws.csv")) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [{k: float(v) for k, v in r.items()} for r in rows[1:]]


def silo_files(data):
    """Each silo's data file of a data folder (silo-1.json, silo-2.json, ...), parsed, in order."""
    k = 1
    while os.path.exists(os.path.join(data, f"silo-{k}.json")):
        with open(os.path.join(data, f"silo-{k}.json")) as f:
            yield json.load(f)
        k += 1


def silo_rows(data):
    rows, silos = [], 0
    for s in silo_files(data):
        rows += list(zip(s["x"], s["y"]))
        silos += 1
    return rows, silos


def normal_log_lik(rows, mean_of, sd):
    return sum(-0.5 * ((y - mean_of(x)) / sd) ** 2 - math.log(sd) - 0.5 * math.log(2 * math.pi) for x, y in rows)


ROUNDING = 5e-10  # draws.csv prints 10 significant digits: each value within 5e-10 of it, relatively


def check_silo_sums(fvic, model, data, out, stdout, log_lik_at, parameters, per_silo_numbers):
    """The plan lists each silo's parts, the server wrote their sums, and each sum is right at every
    draw: log_lik_at(draw) is the log likelihood of every row at the draw's `parameters` (columns
    of draws.csv), whose rounding there is propagated through it. Returns the worst error of
    log_lik in units of that propagated rounding."""
    plan = json.loads(subprocess.run([fvic, "plan", model, "--json", "--data", data], capture_output=True,
                                     text=True, check=True).stdout)
    parts = [m for m in plan["closing_messages"] if "silo_sum" in m["content"]]
    require(sorted(re.search(r"part of (\w+)", m["content"]).group(1) for m in parts) == ["log_lik", "n_total"],
            f"the plan's closing messages: {plan['closing_messages']}")
    with open(os.path.join(out, "posterior.json")) as f:
        variables = json.load(f)["variables"]
    require("log_lik" in variables and "n_total" in variables, f"the server's posterior.json holds {sorted(variables)}")
    draws = draws_rows(out)
    require(all(m["doubles"] == str(len(draws)) for m in parts), f"the plan's parts are not one number a draw: {parts}")
    rows, silos = silo_rows(data)
    worst = 0.0
    for d in draws:
        require(d["n_total"] == len(rows), f"n_total {d['n_total']} at a draw, the silos hold {len(rows)} rows")
        if log_lik_at is None:  # it reads the silos' locals, whose draws stay in the silos
            require(math.isfinite(d["log_lik"]), f"log_lik {d['log_lik']} at a draw")
            continue
        exact = log_lik_at(d)
        # Each parameter within 5e-10 of its printed value, relatively, moves the log likelihood
        # by at most this (first order, one at a time, added up); the printed sum is rounded too.
        tolerance = abs(exact) * ROUNDING + 1e-12
        for name in parameters:
            tolerance += abs(log_lik_at(dict(d, **{name: d[name] * (1 + ROUNDING)})) - exact)
        worst = max(worst, abs(d["log_lik"] - exact) / tolerance)
    require(worst <= 1, f"log_lik is {worst:.2f} roundings from the log likelihood at its draw")
    # Each silo received T draws and sent its log joint parts and the 2 sums' parts at each.
    got = re.search(r"closing exchange: sent (\d+) bytes, received (\d+) bytes", stdout)
    require(got, "no closing exchange line in the output:\n" + stdout)
    want = silos * (per_silo_numbers + 2) * len(draws) * 8
    require(int(got.group(2)) == want, f"the closing exchange received {got.group(2)} bytes, expected {silos} silos x "
                                       f"({per_silo_numbers} + 2 sums) x {len(draws)} draws x 8 = {want}")
    what = (f"log_lik is within {worst:.2f} of the rounding of the log likelihood computed here" if log_lik_at
            else "log_lik is finite (it reads the silos' locals)")
    print(f"  {len(parts)} silo_sum quantities in the plan's closing messages; at {len(draws)} draws {what}, "
          f"n_total = {len(rows)}; closing exchange received {want} bytes")
    return worst


def regression_log_lik(rows, intercept, slopes, sd):
    """log_lik_at and its parameters for y ~ normal(intercept + x * slopes, sd): names of draws.csv
    columns, or None / a number for what is not a parameter."""
    D = len(rows[0][0])
    names = [f"{slopes}.{i + 1}" for i in range(D)]
    parameters = names + [p for p in (intercept, sd) if isinstance(p, str)]

    def at(d):
        a = d[intercept] if intercept else 0.0
        s = d[sd] if isinstance(sd, str) else sd
        return normal_log_lik(rows, lambda x: a + sum(d[n] * xi for n, xi in zip(names, x)), s)

    return at, parameters


def case_silo_sum(fvic, cache):
    cases = [("SFVI", os.path.join(EXAMPLES, "stan_programs", "regression_ppc"), "regression_ppc",
              "alpha + x * beta", "sigma", ("alpha", "beta", "sigma"), 2),
             ("PVI", os.path.join(EXAMPLES, "linreg_conjugate"), "linreg_conjugate", "x * w", "sigma",
              (None, "w", None), 1),
             # Each silo's part reads its local intercept, drawn at the server's draws of the
             # globals by importance resampling (local_samples 16, the default here).
             ("SFVI with locals", os.path.join(EXAMPLES, "stan_programs", "hier_regression_tp"), "hier_regression_tp",
              "alpha + beta * x", "sigma", None, 2)]
    with tempfile.TemporaryDirectory() as work:
        for method, root, name, mean, sd, columns, numbers in cases:
            with open(os.path.join(root, name + ".fvi")) as f:
                source = with_silo_sums(f.read(), mean, sd)
            model, data, out = os.path.join(work, name + ".fvi"), os.path.join(root, "data"), os.path.join(work, method)
            with open(model, "w") as f:
                f.write(source)
            p = run(fvic, cache, model, data, out)
            rows, _ = silo_rows(data)
            at, parameters = None, []
            if columns:
                intercept, slopes, sd_column = columns
                if sd_column is None:  # known: public data
                    with open(os.path.join(data, "data.json")) as f:
                        sd_column = json.load(f)[sd]
                at, parameters = regression_log_lik(rows, intercept, slopes, sd_column)
            print(f"{method} ({name}):")
            require("not computed" not in p.stderr, "a silo_sum was not computed:\n" + p.stderr)
            check_silo_sums(fvic, model, data, out, p.stdout, at, parameters, numbers)


def with_hyperparameter(source):
    """hier_regression_tp.fvi with sigma_alpha a hyperparameter and a generated quantity reading it."""
    declared = "  global real<lower=0> sigma_alpha;\n"
    prior = "  sigma_alpha ~ normal(0, 1);   // half-normal\n"
    require(declared in source and prior in source, "hier_regression_tp.fvi no longer declares sigma_alpha as expected")
    source = source.replace(declared, "").replace(prior, "")
    source = source.replace("parameters {", "hyperparameters {\n  real<lower=0> sigma_alpha;\n}\nparameters {", 1)
    return source + "generated quantities {\n  real mu_plus = mu_alpha + sigma_alpha;\n}\n"


def case_hyperparameters(fvic, cache):
    root = os.path.join(EXAMPLES, "stan_programs", "hier_regression_tp")
    with tempfile.TemporaryDirectory() as work:
        model, out = os.path.join(work, "hyper.fvi"), os.path.join(work, "out")
        with open(os.path.join(root, "hier_regression_tp.fvi")) as f:
            source = with_hyperparameter(f.read())
        with open(model, "w") as f:
            f.write(source)
        p = run(fvic, cache, model, os.path.join(root, "data"), out, ["rounds=300"])
        require("not computed" not in p.stderr, "a derived value was not computed:\n" + p.stderr)
        with open(os.path.join(out, "posterior.json")) as f:
            variables = json.load(f)["variables"]
        require("mu_plus" in variables, f"the server's posterior.json holds {sorted(variables)}, not mu_plus")
        draws = draws_rows(out)
        require(len({d["sigma_alpha"] for d in draws}) == 1, "the hyperparameter sigma_alpha differs between draws")
        for d in draws:
            # three values each within their printed rounding
            tolerance = ROUNDING * (abs(d["mu_alpha"]) + abs(d["sigma_alpha"]) + abs(d["mu_plus"])) + 1e-15
            require(abs(d["mu_plus"] - (d["mu_alpha"] + d["sigma_alpha"])) <= tolerance,
                    f"mu_plus {d['mu_plus']} is not mu_alpha + sigma_alpha = {d['mu_alpha'] + d['sigma_alpha']}")
        reweighting = [line for line in p.stdout.splitlines() if line.startswith("PSIS-reweighted")]
        require(not any("sigma_alpha" in line for line in reweighting),
                "the reweighting names the hyperparameter, a constant:\n" + "\n".join(reweighting))
        print(f"  mu_plus = mu_alpha + sigma_alpha at {len(draws)} draws (sigma_alpha {draws[0]['sigma_alpha']:.4f}); "
              f"{reweighting[0] if reweighting else 'no reweighting line'}")


def compare_with_exact(exact, fitted):
    """Each parameter's mean within 0.25 exact posterior sd, its sd within 20%."""
    for name, (mean, sd) in exact.items():
        got, got_sd = fitted[name]
        off, ratio = abs(got - mean) / sd, got_sd / sd
        print(f"  {name:6s} fvic {got:.4f} (sd {got_sd:.4f})  exact {mean:.4f} (sd {sd:.4f})  {off:.2f} sd, "
              f"sd ratio {ratio:.3f}")
        require(off <= TOLERANCE_SD and abs(ratio - 1) <= 0.2,
                f"{name}: {off:.2f} posterior sds from the exact mean, sd ratio {ratio:.3f}")


def capture_recapture_posterior(data):
    """The exact posterior means and sds of omega and p (flat priors) on a 400 x 400 grid of cell
    midpoints over (0, 1)^2: each individual's likelihood depends only on its count of captures s,
    so the rows are tallied by s first."""
    with open(os.path.join(data, "data.json")) as f:
        T = json.load(f)["T"]
    counts = {}
    for silo in silo_files(data):
        for row in silo["y"]:
            counts[sum(row)] = counts.get(sum(row), 0) + 1
    n, cells = 400, []
    for a in range(n):
        omega = (a + 0.5) / n
        for b in range(n):
            p = (b + 0.5) / n
            lp = 0.0
            for s, c in counts.items():
                if s > 0:
                    lp += c * (math.log(omega) + math.lgamma(T + 1) - math.lgamma(s + 1) - math.lgamma(T - s + 1)
                               + s * math.log(p) + (T - s) * math.log1p(-p))
                else:
                    lp += c * math.log(omega * (1 - p) ** T + 1 - omega)
            cells.append((omega, p, lp))
    top = max(c[2] for c in cells)
    weights = [math.exp(c[2] - top) for c in cells]
    total = sum(weights)
    out = {}
    for i, name in enumerate(("omega", "p")):
        mean = sum(w * c[i] for w, c in zip(weights, cells)) / total
        var = sum(w * (c[i] - mean) ** 2 for w, c in zip(weights, cells)) / total
        out[name] = (mean, math.sqrt(var))
    return out


def check_site_populations(out, data, fitted, draws):
    """Each site's z (a statement program with bernoulli_rng in its generated quantities): 1 at
    every individual it caught; N_site = C + the never-caught drawn present, whose mean over the
    draws is C + (M - C) E[omega_nd] within its Monte Carlo error (each draw's z_i a Bernoulli of
    that draw's omega_nd, the silo's draws of q independent of the server's or the same)."""
    m_nd, sd_nd = fitted["omega_nd"]
    k = 1
    while os.path.exists(os.path.join(data, f"silo-{k}.json")):
        with open(os.path.join(data, f"silo-{k}.json")) as f:
            site = json.load(f)
        caught = [any(row) for row in site["y"]]
        C, M = sum(caught), site["M"]
        with open(os.path.join(out, f"silo-{k}", "posterior.json")) as f:
            z = json.load(f)["variables"]["z"]["mean"]
        require(all(z[i] == 1 for i in range(M) if caught[i]), f"silo {k}: z is not 1 at every individual caught")
        got = fitted[f"N_site[{k}]"][0]
        want = C + (M - C) * m_nd
        se = math.sqrt((M - C) * m_nd * (1 - m_nd) / draws + ((M - C) * sd_nd) ** 2 / draws)
        print(f"  site {k}: N_site {got:.2f}, C + (M - C) E[omega_nd] = {want:.2f} (Monte Carlo se {se:.2f})")
        require(abs(got - want) <= 4.5 * se, f"silo {k}: N_site's mean {got:.3f}, want {want:.3f} +- {4.5 * se:.3f}")
        k += 1
    require(k > 1, "no silo data files were read")


def case_capture_recapture(fvic, cache):
    """Transformed data built by statements (each silo's counts s and C, computed by its own loop
    when its data is read), `if`/`else` between likelihood terms inside a loop, and a term of the
    loop that does not read the loop variable: fitted with defaults against the exact posterior
    (a grid over the two parameters)."""
    root = os.path.join(EXAMPLES, "stan_programs", "capture_recapture")
    model, data = os.path.join(root, "capture_recapture.fvi"), os.path.join(root, "data")
    exact = capture_recapture_posterior(data)
    plan = subprocess.run([fvic, "plan", model], capture_output=True, text=True, check=True).stdout
    require(re.search(r"transformed data\s+s\s+each silo", plan) and re.search(r"transformed data\s+C\s+each silo", plan),
            "fvic plan does not say that each silo computes s and C:\n" + plan)
    require(re.search(r"statements run one at a time.*'generated quantities' \(line \d+\)", plan),
            "fvic plan does not say that the generated quantities run one statement at a time:\n" + plan)
    with tempfile.TemporaryDirectory() as out:
        p = run(fvic, cache, model, data, out)
        require("converged after" in p.stdout, f"the run did not converge:\n{p.stdout}")
        fitted = written_values(out)
        check_derived_placement(fvic, model, out)
        with open(os.path.join(out, "draws.csv")) as f:
            draws = sum(1 for line in f if line.strip() and not line.startswith("#")) - 1  # less the header
        check_site_populations(out, data, fitted, draws)
    compare_with_exact(exact, fitted)


def pk_oral_posterior(data):
    """The exact posterior means and sds of k_a and k_e: the closed form of the one-compartment
    model, C(t) = D k_a / (V (k_a - k_e)) (exp(-k_e t) - exp(-k_a t)), on a grid over (log k_a,
    log k_e) (their priors lognormal, so normal there): 120 x 120 cells over (-4, 3)^2, then
    200 x 200 over the box where the first grid's weights exceed 1e-12 of the largest."""
    with open(os.path.join(data, "data.json")) as f:
        shared = json.load(f)
    times, dose, volume, sigma = shared["times"], shared["dose"], shared["volume"], shared["sigma"]
    rows = [row for silo in silo_files(data) for row in zip(silo["sample"], silo["log_conc"])]

    def log_post(a, b):
        k_a, k_e = math.exp(a), math.exp(b)
        lp = -0.5 * a * a - 0.5 * (b + 1) ** 2
        for s, y in rows:
            t = times[s - 1]
            if abs(k_a - k_e) < 1e-9 * k_a:
                c = dose * k_a * t * math.exp(-k_a * t) / volume
            else:
                c = dose * k_a / (volume * (k_a - k_e)) * (math.exp(-k_e * t) - math.exp(-k_a * t))
            lp -= 0.5 * ((y - math.log(c)) / sigma) ** 2
        return lp

    def grid(a0, a1, b0, b1, n):
        cells = []
        for i in range(n):
            a = a0 + (i + 0.5) * (a1 - a0) / n
            for j in range(n):
                b = b0 + (j + 0.5) * (b1 - b0) / n
                cells.append((a, b, log_post(a, b)))
        return cells

    coarse = grid(-4, 3, -4, 3, 120)
    top = max(c[2] for c in coarse)
    kept = [c for c in coarse if c[2] > top + math.log(1e-12)]
    pad = 7 / 120
    fine = grid(min(c[0] for c in kept) - pad, max(c[0] for c in kept) + pad,
                min(c[1] for c in kept) - pad, max(c[1] for c in kept) + pad, 200)
    top = max(c[2] for c in fine)
    weights = [math.exp(c[2] - top) for c in fine]
    total = sum(weights)
    out = {}
    for i, name in enumerate(("k_a", "k_e")):
        mean = sum(w * math.exp(c[i]) for w, c in zip(weights, fine)) / total
        var = sum(w * (math.exp(c[i]) - mean) ** 2 for w, c in zip(weights, fine)) / total
        out[name] = (mean, math.sqrt(var))
    return out


def case_pk_oral(fvic, cache):
    """An ODE solved in a transformed parameter (ode_rk45 of a user function, a statement program
    with the Dormand-Prince steps of fvi/kernel/ode.h) whose values each hospital's likelihood
    reads: fvic plan says where the statements run; the fit with defaults is within 0.25 posterior
    sd of the exact posterior (the model's closed form on a grid), with sds within 20%."""
    root = os.path.join(EXAMPLES, "stan_programs", "pk_oral")
    model, data = os.path.join(root, "pk_oral.fvi"), os.path.join(root, "data")
    exact = pk_oral_posterior(data)
    plan = subprocess.run([fvic, "plan", model], capture_output=True, text=True, check=True).stdout
    require(re.search(r"statements run one at a time.*'transformed parameters' \(line \d+\)", plan),
            "fvic plan does not say that the transformed parameters run one statement at a time:\n" + plan)
    with tempfile.TemporaryDirectory() as out:
        p = run(fvic, cache, model, data, out)
        require("converged after" in p.stdout, f"the run did not converge:\n{p.stdout}")
        fitted = written_values(out)
        check_derived_placement(fvic, model, out)
    compare_with_exact(exact, fitted)


def check_observations(stdout, data):
    """The header's `silo k: n observations` is each silo's N, also where the likelihood is written
    as statements (weibull_frailty's loop of `target +=`, which has no rows of its own)."""
    for k, s in enumerate(silo_files(data), 1):
        if "N" not in s:
            continue
        m = re.search(rf"^  silo {k}: (\d+) observations", stdout, re.M)
        require(m is not None and int(m.group(1)) == s["N"],
                f"silo {k} holds {s['N']} rows; the header says {m.group(0) if m else 'nothing'}")


# ---------------------------------------------------------------------------------------------
# silo_draws: each silo's draws.csv holds its own quantities at its draws

POINTWISE_LINES = """  // Each row's log likelihood, for loo: the silo's own, at its draws.
  vector[N] log_lik_row;
  for (n in 1:N)
    log_lik_row[n] = normal_lpdf(y[n] | {mean}, sigma);
"""


def with_pointwise_log_lik(source, mean):
    """source with POINTWISE_LINES (`mean` the row's fitted mean) at the end of its generated
    quantities, or in a new block."""
    lines = POINTWISE_LINES.format(mean=mean)
    if "generated quantities {" in source:
        end = source.index("\n}", source.index("generated quantities {"))
        return source[:end + 1] + lines + source[end + 1:]
    at = source.index("inference {") if "inference {" in source else len(source)
    return source[:at] + "generated quantities {\n" + lines + "}\n" + source[at:]


def case_silo_draws(fvic, cache):
    """A pointwise log likelihood in generated quantities (`log_lik_row[n] = normal_lpdf(y[n] | ...)`,
    what loo reads) is in each silo's OUT/silo-K/draws.csv, a column per row, and at every draw it
    is the log density of that silo's row at the same draw's parameters (the silo's own locals and
    transformed parameters among them), computed here from the data file within the rounding of
    draws.csv's 10 digits: by SFVI without locals (regression_ppc, the silo's draws of the globals)
    and with them (hier_regression_tp, alpha = mu_alpha + sigma_alpha * z each silo's own)."""
    cases = [("regression_ppc", "alpha + x[n] * beta", lambda d, x: d["alpha"] + sum(d[f"beta.{i + 1}"] * v for i, v in enumerate(x))),
             ("hier_regression_tp", "alpha + beta * x[n]", lambda d, x: d["alpha"] + d["beta"] * x)]
    with tempfile.TemporaryDirectory() as work:
        for name, mean, mean_at in cases:
            root = os.path.join(EXAMPLES, "stan_programs", name)
            with open(os.path.join(root, name + ".fvi")) as f:
                source = with_pointwise_log_lik(f.read(), mean)
            model, data, out = os.path.join(work, name + ".fvi"), os.path.join(root, "data"), os.path.join(work, name)
            with open(model, "w") as f:
                f.write(source)
            run(fvic, cache, model, data, out)
            worst, checked = 0.0, 0
            for k, silo in enumerate(silo_files(data), start=1):
                draws = draws_rows(os.path.join(out, f"silo-{k}"))
                require(draws and f"log_lik_row.{silo['N']}" in draws[0],
                        f"{name}: silo {k}'s draws.csv has no log_lik_row column per row")
                for d in draws:
                    for n, (x, y) in enumerate(zip(silo["x"], silo["y"])):
                        def density(p):
                            return -0.5 * ((y - mean_at(p, x)) / p["sigma"]) ** 2 - math.log(p["sigma"]) - \
                                0.5 * math.log(2 * math.pi)
                        exact = density(d)
                        # Each parameter's printed rounding, carried through the density (first order).
                        tolerance = abs(exact) * ROUNDING + 1e-12
                        for p in d:
                            if not p.startswith(("log_lik_row", "lp__", "log_p__", "log_g__")):
                                tolerance += abs(density(dict(d, **{p: d[p] * (1 + ROUNDING)})) - exact)
                        worst = max(worst, abs(d[f"log_lik_row.{n + 1}"] - exact) / tolerance)
                        checked += 1
            require(worst <= 1, f"{name}: a silo's log_lik_row is {worst:.2f} roundings from the density at its draw")
            print(f"{name}: {checked} pointwise log likelihoods in the silos' draws.csv, each within {worst:.2f} of "
                  f"the rounding of the density at its draw computed here")


def run_case(fvic, cache, case):
    if case == "silo_draws":
        return case_silo_draws(fvic, cache)
    if case == "capture_recapture":
        return case_capture_recapture(fvic, cache)
    if case == "pk_oral":
        return case_pk_oral(fvic, cache)
    if case == "silo_sum":
        return case_silo_sum(fvic, cache)
    if case == "hyperparameters":
        return case_hyperparameters(fvic, cache)
    # eight_schools_offset: the same posterior written with `offset=mu, multiplier=tau`, against
    # eight_schools_noncentered's NUTS reference.
    folder = {"eight_schools_offset": "eight_schools_noncentered"}.get(case, case)
    root = os.path.join(EXAMPLES, "stan_programs", folder)
    with open(os.path.join(root, "reference", "nuts_summary.json")) as f:
        nuts = json.load(f)["parameters"]
    model = os.path.join(root, case + ".fvi")
    with tempfile.TemporaryDirectory() as out:
        p = run(fvic, cache, model, os.path.join(root, "data"), out)
        require("converged after" in p.stdout, f"{case}: the run did not converge:\n{p.stdout}")
        check_observations(p.stdout, os.path.join(root, "data"))
        fitted = written_values(out)
        check_derived_placement(fvic, model, out)
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
    not_written = []
    for name, ref in nuts.items():
        if name not in fitted:
            not_written.append(name)
            continue
        mean, sd = fitted[name]
        off = abs(mean - ref["mean"]) / ref["sd"]
        base = re.sub(r"\[\d+\]$", "", name)
        warned = any(re.search(r"\(" + re.escape(base) + r"[.)\[]", w) for w in warnings)
        verdict = "ok" if off <= TOLERANCE_SD else "warned" if warned else "FAIL"
        print(f"  {name:16s} fvic {mean:9.4f} (sd {sd:.4f})  NUTS {ref['mean']:9.4f} (sd {ref['sd']:.4f})  "
              f"{off:.2f} NUTS sd  {verdict}")
        require(verdict != "FAIL", f"{case}: {name} is {off:.2f} NUTS sds from the reference and no warning names "
                                   f"it:\n{p.stderr}")
        if case in SD_TOLERANCE:
            require(abs(sd / ref["sd"] - 1) <= SD_TOLERANCE[case],
                    f"{case}: {name}'s sd is {sd / ref['sd']:.3f} of NUTS's (limit {SD_TOLERANCE[case]:.0%})")
    require(len(not_written) < len(nuts), f"{case}: nothing compared")
    if not_written:
        print(f"  not written by the run: {', '.join(not_written)}")
    if case == "regression_ppc":
        check_wire_and_replicates(fvic, cache, root, case)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    fvic, cache, case = sys.argv[1:]
    try:
        run_case(fvic, cache, case)
    except Failure as e:
        print(f"FAIL: {e}")
        sys.exit(1)
    print(f"{case}: ok")


if __name__ == "__main__":
    main()
