#!/usr/bin/env python3
"""End-to-end checks of SFVI through `fvic run`: usage  check_sfvi.py FVIC CACHE CASE.

  privacy      hier_logreg, SFVI: the server's files hold the global parameters only; each
               silo's local intercept is in silo-K/posterior.json alone; the bytes counted are
               exactly the messages of seed 002 Alg. 1 (eta_G and the round down, with the
               stopping rule's schedule, 3 numbers; g_eta and the ELBO term up: no eps_G, no
               local value), computed here from the sizes, and before them the mode search's
               points and answers (n globals each way, n + 2 numbers back per point).
  methods      sfvi_avg, independent and a warm-started sfvi run and write their files; the
               independent fit sends nothing and writes each silo's own global posterior.

Exit 0 on success, 1 with a message on the first failure, 77 (skipped) when an example's data
is absent.
"""
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, posterior, require, run_case, run_fvic  # noqa: E402

HIER = os.path.join(EXAMPLES, "hier_logreg")


def metrics_rows(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def case_privacy(fvic, cache, work):
    out = os.path.join(work, "sfvi")
    rounds = 300
    run_fvic(fvic, cache, os.path.join(HIER, "hier_logreg.fvi"), os.path.join(HIER, "data"), out,
             ["rounds=%d" % rounds, "mc_samples=2", "refresh=100"])
    post = posterior(out)
    require(set(post["variables"]) == {"beta", "tau"},
            "posterior.json should hold beta and tau only, has %s" % sorted(post["variables"]))
    with open(os.path.join(out, "draws.csv")) as f:
        header = next(line for line in f if not line.startswith("#"))
    require("alpha" not in header, "draws.csv (the server's) names a local variable: " + header)
    silos = sorted(d for d in os.listdir(os.path.join(HIER, "data")) if d.startswith("silo-"))
    for s in silos:
        k = s[len("silo-"):-len(".json")]
        local = posterior(os.path.join(out, "silo-" + k))
        require(set(local["variables"]) == {"alpha"}, "silo-%s/posterior.json should hold alpha only" % k)
    # Bytes: the default structured eta_G of beta (D = 3) and log tau is 4 means, 4 log sds and
    # the 6 entries below L_G's unit diagonal; no hyperparameters.
    with open(os.path.join(HIER, "data", "data.json")) as f:
        d = json.load(f)["D"]
    n_params = 2 * (d + 1) + (d + 1) * d // 2
    per_message = 8 * (n_params + 1)  # eta_G + round down; g_eta + ELBO term up
    schedule = 8 * 3  # the rule's step scale, averaging epoch and draws, at the head of each request
    rows = metrics_rows(out)
    steps = rounds - int(rows[0]["iteration"])
    sent = int(rows[-1]["bytes_sent"]) - int(rows[0]["bytes_sent"])
    received = int(rows[-1]["bytes_received"]) - int(rows[0]["bytes_received"])
    want_sent, want_received = steps * len(silos) * (schedule + per_message), steps * len(silos) * per_message
    require(sent == want_sent and received == want_received,
            "bytes sent/received over iterations %s-%d: %d/%d, expected %d/%d"
            % (rows[0]["iteration"], rounds, sent, received, want_sent, want_received))
    # Before iteration 1, the locations' mode search (fvic plan's "before the first iteration"):
    # P points of the n = D + 1 globals to every silo, n + 2 numbers back per point (whether its
    # term is defined there, its maximum over the silo's alpha, that maximum's gradient): no local
    # value. Its start lies near q's default here, so no point follows.
    n = d + 1
    opening_sent = int(rows[0]["bytes_sent"]) - int(rows[0]["iteration"]) * len(silos) * (schedule + per_message)
    opening_received = int(rows[0]["bytes_received"]) - int(rows[0]["iteration"]) * len(silos) * per_message
    points = opening_sent // (8 * n * len(silos))
    require(points > 0 and opening_sent == points * 8 * n * len(silos) and
            opening_received == points * 8 * (n + 2) * len(silos),
            "the opening exchanges: sent %d, received %d bytes; not P points of %d globals to each of %d silos and "
            "%d numbers back for each" % (opening_sent, opening_received, n, len(silos), n + 2))


def case_methods(fvic, cache, work):
    model, data = os.path.join(HIER, "hier_logreg.fvi"), os.path.join(HIER, "data")
    n_silos = len([d for d in os.listdir(data) if d.startswith("silo-")])
    for method, sets in [("sfvi_avg", ["method=sfvi_avg", "rounds=20", "avg_steps=10"]),
                         ("independent", ["method=independent", "rounds=20", "avg_steps=10"]),
                         ("warm", ["warm_start=3", "avg_steps=10", "rounds=100"])]:
        out = os.path.join(work, method)
        run_fvic(fvic, cache, model, data, out, sets)
        rows = metrics_rows(out)
        require(rows, method + ": metrics.csv is empty")
        for k in range(1, n_silos + 1):
            local = posterior(os.path.join(out, "silo-%d" % k))
            require(set(local["variables"]) == {"alpha"}, "%s: silo-%d/posterior.json" % (method, k))
        if method == "independent":
            require(int(rows[-1]["bytes_sent"]) == 0 and int(rows[-1]["bytes_received"]) == 0,
                    "the independent fit communicated: %s" % rows[-1])
            require(not os.path.exists(os.path.join(out, "posterior.json")),
                    "the independent fit has no global posterior of the federation")
            for k in range(1, n_silos + 1):
                with open(os.path.join(out, "silo-%d" % k, "global.json")) as f:
                    g = json.load(f)
                require(set(g["variables"]) == {"beta", "tau"}, "independent: silo-%d/global.json" % k)
        else:
            require(set(posterior(out)["variables"]) == {"beta", "tau"}, method + ": posterior.json")
            require(int(rows[-1]["bytes_sent"]) > 0, method + ": no bytes counted")


CASES = {"privacy": case_privacy, "methods": case_methods}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
