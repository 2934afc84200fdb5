#!/usr/bin/env python3
"""End-to-end checks of the vertical methods through `fvic run`: usage  check_vfl.py FVIC CACHE CASE.
Data: examples/vfl_logreg/generate.py (seed 004 section 5.1's synthetic logistic regression,
n = 500, p = 20), written into a temporary folder.

  privacy      vfl_logreg (augmented, labels on the server) and vfl_logreg_power, J = 2: the
               server's files hold the intercept b only; silo K's beta block is in
               silo-K/posterior.json alone; the bytes counted are exactly Algorithm 1's
               (z_k up, one gradient vector down, per row and draw) and Algorithm 2's messages.
  derived      vfl_logreg with a transformed parameter of a silo's block (beta2 = 2 * beta) and
               generated quantities of the block (beta_sum = sum(beta)) and of the server's b
               (b_twice = 2 * b), J = 2, 40 fixed iterations: each silo writes beta2 and beta_sum
               beside its beta (posterior.json, draws.csv), equal to 2 beta and sum(beta) at every
               draw; the server writes b_twice = 2 b at every draw and nothing of the blocks; the
               bytes of every iteration are those of the model without them; `fvic plan` says
               where each is written.
  elbo         ELBO(power) > ELBO(augmented) at J = 2 (seed 004 section 5.1, claim 1), rho = 1,
               amortised q(z) (the paper's family). The paper's claim 2 (a smaller gap at J = 10)
               does not hold in our runs with this family, and with mean-field q(z) the order of
               claim 1 is reversed: examples/vfl_logreg/README.md has those figures; this test
               checks only what holds.
  rho          as rho shrinks (2, 1, 0.5) the augmented model's beta means approach centralised
               mean-field VI of the original model (logreg_pooled.fvi, one silo, PVI): the mean
               distance in centralised posterior sds decreases strictly.

  poisson      seed 004 section 5.2 (examples/vfl_poisson_multilevel: N = 2000 areas, J = 2 silos of
               2 covariates, 5 remoteness levels): the augmented model with amortised q(z) at
               rho = 1 gives silo 1's global mean effect mu_1 close to centralised mean-field VI of
               the true model (poisson_pooled.fvi) run here: means within 0.5 centralised sd, sds
               within a factor 2; and its level slopes beta_1[r] (first covariate) within 15 % of
               the centralised ones (the augmented model inflates them by up to 8 % at rho = 1).

  heldout      the classical split network (split_nn_deterministic.fvi, q_z = none) on one Pima
               fold: the held-out mean log likelihood NAME-sim reports equals the one computed here
               from the silos' written networks and the test rows (examples/split_nn), to 1e-9.

Exit 0 on success, 1 with a message on the first failure.
"""
import csv
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, posterior, require, run_case, run_fvic  # noqa: E402

EX = os.path.join(EXAMPLES, "vfl_logreg")
EX_POISSON = os.path.join(EXAMPLES, "vfl_poisson_multilevel")
N, P = 500, 20


def generate(work, silos):
    out = os.path.join(work, "J%d" % silos)
    if not os.path.isdir(out):
        subprocess.run([sys.executable, os.path.join(EX, "generate.py"), "--silos", str(silos), "--output", out],
                       check=True, capture_output=True)
    return out


def metrics_rows(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def final_elbo(out, last=8):
    """The mean of the last `last` progress rows' ELBO estimates (each a mean over its window)."""
    rows = metrics_rows(out)[-last:]
    return sum(float(r["elbo"]) for r in rows) / len(rows)


def fit(fvic, cache, work, silos, layout, out_name, sets):
    data = os.path.join(generate(work, silos), layout)
    model = os.path.join(EX, "vfl_logreg.fvi" if layout == "augmented" else "vfl_logreg_power.fvi")
    out = os.path.join(work, out_name)
    WARNINGS[out] = run_fvic(fvic, cache, model, data, out, sets).stderr
    return out


WARNINGS = {}  # a fit's output directory -> its run's stderr (the warnings)


def beta_of(out, silos):
    mean = []
    for k in range(1, silos + 1):
        mean += posterior(os.path.join(out, "silo-%d" % k))["variables"]["beta"]["mean"]
    return mean


def case_privacy(fvic, cache, work):
    rounds, draws, J = 40, 3, 2
    for layout in ("augmented", "power"):
        out = fit(fvic, cache, work, J, layout, "privacy-" + layout,
                  ["rounds=%d" % rounds, "mc_samples=%d" % draws, "refresh=10", "q_z=meanfield"])
        require(set(posterior(out)["variables"]) == {"b"}, layout + ": posterior.json should hold b only")
        # Both score the written model at the end (the power model's labels are public: the
        # server evaluates its likelihood at the silos' summed partial predictors).
        khat = posterior(out).get("khat")
        require(isinstance(khat, (int, float)) and math.isfinite(khat), "%s: no finite k-hat (%r)" % (layout, khat))
        print("%s: k-hat %.2f against the written model" % (layout, khat))
        if khat > 0.7:  # the warning says what to try: with mean-field q(z), an amortised one first
            require("try q_z = amortized" in WARNINGS[out] and "vfl_exact" in WARNINGS[out],
                    "%s: k-hat %.2f, and the warning does not say what to try:\n%s" % (layout, khat, WARNINGS[out]))
        with open(os.path.join(out, "draws.csv")) as f:
            header = next(line for line in f if not line.startswith("#"))
        require("beta" not in header, layout + ": the server's draws.csv names a silo's variable: " + header)
        for k in range(1, J + 1):
            block = posterior(os.path.join(out, "silo-%d" % k))
            require(set(block["variables"]) == {"beta"}, "%s: silo-%d/posterior.json should hold beta only" % (layout, k))
            require(len(block["variables"]["beta"]["mean"]) == P // J, "%s: silo-%d holds %d betas" % (layout, k, P // J))
        row = N * draws * 8  # one value per row and draw
        schedule = 3 * 8  # each propose request: the stopping rule's step scale, averaging epoch and draws
        if layout == "augmented":  # Alg. 1: z_k and the ELBO term up; G down
            up, down = J * (row + 8), J * (schedule + row)
        else:  # Alg. 2: z_k, H_k, d/db and the ELBO term up; b, sum_{j != k} z_j and H down
            up, down = J * (2 * row + draws * 8 + 8), J * (schedule + draws * 8 + 2 * row)
        last = metrics_rows(out)[-1]
        require(int(last["bytes_received"]) == rounds * up and int(last["bytes_sent"]) == rounds * down,
                "%s: bytes received/sent %s/%s, expected %d/%d" % (layout, last["bytes_received"], last["bytes_sent"],
                                                                   rounds * up, rounds * down))


def draws_rows(path):
    """draws.csv's draws as dicts of floats: comment lines skipped, and the first row, which is
    q's mean (CmdStan's variational output), where a derived value is the mean of its draws."""
    with open(path) as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(line for line in f if not line.startswith("#"))]
    return rows[1:]


def with_derived(source):
    """vfl_logreg.fvi with derived values of a silo's block and of the server's b."""
    source = source.replace("model {", "transformed parameters {\n  vector[P] beta2 = 2 * beta;\n}\nmodel {", 1)
    return source.replace("inference {", "generated quantities {\n  real beta_sum = sum(beta);\n"
                                          "  real b_twice = 2 * b;\n}\ninference {", 1)


def close(a, b):
    """Equal within draws.csv's 10 significant digits."""
    return abs(a - b) <= 1e-8 * max(1.0, abs(a), abs(b))


def case_derived(fvic, cache, work):
    J, sets = 2, ["rounds=40", "mc_samples=3", "refresh=10", "q_z=meanfield"]
    data = os.path.join(generate(work, J), "augmented")
    with open(os.path.join(EX, "vfl_logreg.fvi")) as f:
        source = with_derived(f.read())
    model = os.path.join(work, "vfl_derived.fvi")
    with open(model, "w") as f:
        f.write(source)
    plan = subprocess.run([fvic, "plan", model, "--json"], capture_output=True, text=True, check=True).stdout
    where = {d["name"]: d["where"] for d in json.loads(plan)["derived"]}
    for name in ("beta2", "beta_sum"):
        require(where.get(name, "").startswith("silo k: its own silo-K/posterior.json"),
                "the plan says %s is written %r" % (name, where.get(name)))
    require(where.get("b_twice", "").startswith("server"), "the plan says b_twice is written %r" % where.get("b_twice"))
    out = os.path.join(work, "derived")
    run_fvic(fvic, cache, model, data, out, sets)
    plain = fit(fvic, cache, work, J, "augmented", "derived-plain", sets)
    require(set(posterior(out)["variables"]) == {"b", "b_twice"}, "posterior.json holds %s, not b and b_twice"
            % sorted(posterior(out)["variables"]))
    rows = draws_rows(os.path.join(out, "draws.csv"))
    require(all(close(r["b_twice"], 2 * r["b"]) for r in rows), "the server's b_twice is not 2 b at every draw")
    require(not any(k.startswith("beta") for k in rows[0]), "the server's draws.csv names a silo's value")
    for k in range(1, J + 1):
        silo = os.path.join(out, "silo-%d" % k)
        require(set(posterior(silo)["variables"]) == {"beta", "beta2", "beta_sum"},
                "silo-%d/posterior.json holds %s" % (k, sorted(posterior(silo)["variables"])))
        rows = draws_rows(os.path.join(silo, "draws.csv"))
        p = P // J
        for r in rows:
            beta = [r["beta.%d" % (i + 1)] for i in range(p)]
            require(all(close(r["beta2.%d" % (i + 1)], 2 * b) for i, b in enumerate(beta)),
                    "silo %d: beta2 is not 2 beta at a draw" % k)
            # sum(beta) from 10-digit values: the rounding of p of them
            require(abs(r["beta_sum"] - sum(beta)) <= p * 1e-9 * max(1.0, max(abs(b) for b in beta)),
                    "silo %d: beta_sum %.10g is not sum(beta) %.10g" % (k, r["beta_sum"], sum(beta)))
        print("silo %d: %d draws of beta2 and beta_sum, each 2 beta and sum(beta)" % (k, len(rows)))
    got, want = metrics_rows(out)[-1], metrics_rows(plain)[-1]
    for column in ("bytes_sent", "bytes_received"):
        require(got[column] == want[column], "%s %s with the derived values, %s without" % (column, got[column], want[column]))
    print("bytes per run with and without the derived values: %s sent, %s received" % (got["bytes_sent"], got["bytes_received"]))


def case_elbo(fvic, cache, work):
    sets = ["rounds=6000", "mc_samples=4", "rho=1", "q_z=amortized", "refresh=250", "lr=0.01"]
    J = 2
    power = final_elbo(fit(fvic, cache, work, J, "power", "power-%d" % J, sets))
    augmented = final_elbo(fit(fvic, cache, work, J, "augmented", "augmented-%d" % J, sets))
    print("J = %d: ELBO power %.2f, augmented %.2f, gap %.2f" % (J, power, augmented, power - augmented))
    require(power > augmented, "J = %d: ELBO(power) %.2f is not above ELBO(augmented) %.2f" % (J, power, augmented))


def case_rho(fvic, cache, work):
    pooled = os.path.join(generate(work, 2), "pooled")
    central = os.path.join(work, "central")
    run_fvic(fvic, cache, os.path.join(EX, "logreg_pooled.fvi"), pooled, central,
             ["rounds=1", "local_steps=4000", "mc_samples=8"])
    ref = posterior(central)["variables"]["beta"]
    distance = {}
    for rho in (2.0, 1.0, 0.5):
        out = fit(fvic, cache, work, 2, "augmented", "rho-%g" % rho,
                  ["rounds=6000", "mc_samples=4", "rho=%g" % rho, "q_z=meanfield", "refresh=500", "lr=0.01"])
        beta = beta_of(out, 2)
        distance[rho] = sum(abs(b - m) / s for b, m, s in zip(beta, ref["mean"], ref["sd"])) / P
        print("rho = %g: mean |beta - centralised| = %.3f centralised sd" % (rho, distance[rho]))
    require(distance[2.0] > distance[1.0] > distance[0.5],
            "the distance to centralised VI does not shrink with rho: %s" % distance)


def case_poisson(fvic, cache, work):
    data = os.path.join(work, "poisson")
    subprocess.run([sys.executable, os.path.join(EX_POISSON, "generate.py"), "--output", data],
                   check=True, capture_output=True)
    central = os.path.join(work, "poisson-central")
    run_fvic(fvic, cache, os.path.join(EX_POISSON, "poisson_pooled.fvi"), os.path.join(data, "pooled"), central,
             ["rounds=8000", "mc_samples=8", "lr=0.01", "refresh=500"])
    augmented = os.path.join(work, "poisson-augmented")
    run_fvic(fvic, cache, os.path.join(EX_POISSON, "vfl_poisson_multilevel.fvi"), os.path.join(data, "augmented"),
             augmented, ["rounds=6000", "mc_samples=4", "lr=0.01", "rho=1", "q_z=amortized", "refresh=500"])
    ref = posterior(central)["variables"]
    fit = posterior(os.path.join(augmented, "silo-1"))["variables"]
    with open(os.path.join(data, "truth.json")) as f:
        truth = json.load(f)
    m_ref, s_ref = ref["mu1"]["mean"][0], ref["mu1"]["sd"][0]
    m_fit, s_fit = fit["mu"]["mean"][0], fit["mu"]["sd"][0]
    print("mu_1: augmented rho = 1 %.4f (sd %.4f), centralised MFVI %.4f (sd %.4f), truth %.4f"
          % (m_fit, s_fit, m_ref, s_ref, truth["mu"][0][0]))
    # mu_1 is learnt from the 5 level slopes beta_1[r] (~400 areas of ~300 counts each pin every
    # slope to +-0.003), so its posterior in both models is essentially that of the mean of 5 draws
    # from N(mu_1, sigma_1), sigma_1 ~ 0.36: sd ~ 0.13, 40 times a slope's. The augmented model
    # moves the slopes by under 1 % (up to 8 % with a free offset), their mean by < 0.01 (under 0.1 sd); the rest is the jitter of
    # each fit's last Adam iterate (lr 0.01; mu_1 moves by ~0.02 between seeds and run lengths).
    # Observed |difference|: 0.05 sd (q_z_offset = residual); with a free offset 0.13-0.21 sd at
    # this budget (seeds 1-3), up to 0.35 sd after 20,000
    # iterations. 0.5 sd keeps a margin over those and still fails the sign-flipped local optimum
    # the amortised fit falls into when it starts far from the rate (mu_1 ~ 0.01, 1.1 sd away;
    # README.md, "b = log 0.01").
    require(abs(m_fit - m_ref) < 0.5 * s_ref,
            "mu_1: augmented %.4f is %.2f centralised sd from centralised MFVI %.4f"
            % (m_fit, abs(m_fit - m_ref) / s_ref, m_ref))
    require(0.5 < s_fit / s_ref < 2, "mu_1: augmented sd %.4f against centralised %.4f" % (s_fit, s_ref))
    P = ref["beta1"]["shape"][1]
    for r, (b_fit, b_ref, s_ref) in enumerate(zip(fit["beta"]["mean"][0::P], ref["beta1"]["mean"][0::P],
                                                  ref["beta1"]["sd"][0::P])):
        print("beta_1[%d]: augmented %.4f, centralised %.4f (sd %.4f): %.2f sd"
              % (r + 1, b_fit, b_ref, s_ref, abs(b_fit - b_ref) / s_ref))
        # With q_z_offset = residual (the default) z's scale is the slopes' alone and q(z | theta)
        # follows m with unit slope: both fits then estimate the counts' slopes, and differ by the
        # two stochastic fits' error at this budget (under 1 sd each). 3 sd allows that and fails
        # the ridge of a free offset, where the network's slope in m and the slopes share z's
        # scale (level 4 +3.5 %, 7 sd; -1.5 .. +8.2 % over the levels and seeds 1-3), and a
        # flipped or collapsed slope (100 %, hundreds of sds).
        require(abs(b_fit - b_ref) < 3 * s_ref,
                "beta_1[%d]: augmented %.4f, centralised %.4f: %.2f centralised sd apart"
                % (r + 1, b_fit, b_ref, abs(b_fit - b_ref) / s_ref))


def case_heldout(fvic, cache, work):
    import math
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "split_nn", "generate.py"), "--output", work],
                   check=True, capture_output=True)
    fold = os.path.join(work, "fold-3")
    out = os.path.join(work, "heldout")
    run_fvic(fvic, cache, os.path.join(EXAMPLES, "split_nn", "split_nn_deterministic.fvi"),
             os.path.join(fold, "train"), out, ["rounds=300", "lr=0.01", "refresh=300"],
             test=os.path.join(fold, "test"))
    reported = float(metrics_rows(out)[-1]["test_log_density"])
    with open(os.path.join(fold, "test", "server.json")) as f:
        y = json.load(f)["y"]
    eta = [0.0] * len(y)
    for k in (1, 2):
        net = posterior(os.path.join(out, "silo-%d" % k))["variables"]
        with open(os.path.join(fold, "test", "silo-%d.json" % k)) as f:
            x = json.load(f)["x"]
        P, H = net["W1"]["shape"]
        W1, c1, W2, w = (net[n]["mean"] for n in ("W1", "c1", "W2", "w"))  # row-major elements
        for i, row in enumerate(x):
            h1 = [math.tanh(sum(row[p] * W1[p * H + j] for p in range(P)) + c1[j]) for j in range(H)]
            h2 = [math.tanh(sum(h1[j] * W2[j * 2 + c] for j in range(H))) for c in range(2)]
            eta[i] += h2[0] * w[0] + h2[1] * w[1]
    # log p(y | eta) of a Bernoulli with logit eta, stably
    lp = [(-math.log1p(math.exp(-e)) if e > 0 else e - math.log1p(math.exp(e))) if t == 1 else
          (-e - math.log1p(math.exp(-e)) if e > 0 else -math.log1p(math.exp(e))) for t, e in zip(y, eta)]
    expected = sum(lp) / len(lp)
    print("held-out mean log likelihood: NAME-sim %.12f, computed here %.12f" % (reported, expected))
    # metrics.csv prints 10 significant digits; the sums here and in NAME-sim differ in the last bits
    require(abs(reported - expected) < 1e-9, "held-out log likelihood %.12f != %.12f" % (reported, expected))


CASES = {"privacy": case_privacy, "derived": case_derived, "elbo": case_elbo, "rho": case_rho, "poisson": case_poisson, "heldout": case_heldout}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
