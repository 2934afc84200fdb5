#!/usr/bin/env python3
"""`fvic plan` shows what crosses the network: its per-message sizes must be the bytes the run
counts. The plan and the programs take them from one place (runtime/include/fvi/message/sizes.h);
this checks the two against each other on a short run of each horizontal method: the bytes in
metrics.csv's first row (its `round` counts reports: the first `refresh` iterations; the bytes are
cumulative) equal the plan's bytes per silo, summed
over the silos, times the iterations (PVI's include each round's objective, which its stopping rule
and damping read), plus the exchanges the plan does not list because they only serve the progress
lines (SFVI-Avg: every refresh round, the broadcast down and one number up; once, before the first
round, each silo's row count up) or happen once (vfl_exact's joint family: its layout, before the first iteration, each silo's
block size up and its place down, 3 numbers; the AXDA methods have none). SFVI's mode search, before
the first iteration, takes as many exchanges as its Newton steps need: there the iterations' bytes
are the second row's less the first's, and the first row's surplus must be whole points of the
plan's opening messages.

Usage: check_plan_bytes.py FVIC CACHE"""
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def plan_bytes(fvic, model, data, keys):
    cmd = [fvic, "plan", model, "--data", data, "--json"]
    for kv in keys:
        cmd += ["--set", kv]
    plan = json.loads(run(cmd))
    down = sum(sum(m["bytes_per_silo"]) for m in plan["messages"] if m["from"] == "server")
    up = sum(sum(m["bytes_per_silo"]) for m in plan["messages"] if m["to"] == "server")
    return plan, down, up


def first_rows(fvic, cache, model, data, keys, out):
    """metrics.csv's first two rows (one where the run reports once) as (steps, sent, received)."""
    cmd = [fvic, "run", model, "--data", data, "--output", out, "--quiet"]
    for kv in keys:
        cmd += ["--set", kv]
    run(cmd, env=dict(os.environ, FVIC_CACHE=cache))
    with open(os.path.join(out, "metrics.csv")) as f:
        rows = list(csv.DictReader(f))[:2]
    refresh = next((int(kv.split("=")[1]) for kv in keys if kv.startswith("refresh=")), 1)
    return [(int(r["round"]) * refresh, int(r["bytes_sent"]), int(r["bytes_received"])) for r in rows]


def mode_search_points(plan, silos, sent, received):
    """SFVI's mode search before the first iteration (the plan's opening messages): P points of the
    n globals down to each silo, n + 2 numbers back per point. n from the plan's largest exchange
    (2n points: 2n x n doubles down, 2n x (n + 2) up); P from the bytes, or None when they are not
    P such points."""
    down, up = (m["doubles_per_silo"][0] for m in plan["opening_messages"][:2])
    n = 2 * down // (up - down)
    points, rest = divmod(sent, 8 * n * silos)
    return points if rest == 0 and points > 0 and received == 8 * (n + 2) * points * silos else None


def main():
    fvic, cache = sys.argv[1], sys.argv[2]
    failed = 0
    cases = [
        # name, model, data, keys, extra (down, up) bytes per silo per step beyond the plan's messages
        ("PVI (pima_logreg, mean-field)", "examples/pima_logreg/pima_logreg.fvi", "examples/pima_logreg/data",
         ["rounds=2"], None),
        ("SFVI (hier_logreg, structured, with locals)", "examples/hier_logreg/hier_logreg.fvi",
         "examples/hier_logreg/data", ["rounds=40", "refresh=10"], "sfvi"),
        ("SFVI-Avg (hier_logreg)", "examples/hier_logreg/hier_logreg.fvi", "examples/hier_logreg/data",
         ["method=sfvi_avg", "rounds=4", "refresh=1"], "avg"),
    ]
    with tempfile.TemporaryDirectory() as work:
        vfl = os.path.join(work, "vfl")
        run([sys.executable, os.path.join(ROOT, "examples/vfl_logreg/generate.py"), "--silos", "2", "--output", vfl])
        cases += [
            ("VFL augmented (vfl_logreg, 2 silos)", "examples/vfl_logreg/vfl_logreg.fvi",
             os.path.join(vfl, "augmented"), ["rounds=20", "refresh=10"], None),
            ("VFL power (vfl_logreg_power, 2 silos)", "examples/vfl_logreg/vfl_logreg_power.fvi",
             os.path.join(vfl, "power"), ["rounds=20", "refresh=10"], None),
            ("VFL exact, joint family (vfl_logreg, 2 silos)", "examples/vfl_logreg/vfl_logreg.fvi",
             os.path.join(vfl, "augmented"), ["method=vfl_exact", "rounds=20", "refresh=10"], "vfl"),
        ]
        for i, (name, model, data, keys, extra) in enumerate(cases):
            model, data = os.path.join(ROOT, model), os.path.join(ROOT, data)
            plan, down, up = plan_bytes(fvic, model, data, keys)
            silos = plan["silos"]
            rows = first_rows(fvic, cache, model, data, keys, os.path.join(work, str(i)))
            steps, sent, received = rows[0]
            if extra == "sfvi":
                # The mode search's points before the first iteration (as many as its Newton steps
                # need; e2e.sfvi.privacy reads them too): the iterations' bytes are the second row's
                # less the first's, and the first row's surplus over its iterations is the search's.
                (first, first_sent, first_received), (steps, sent, received) = rows[0], rows[1]
                steps -= first
                sent, received = sent - first_sent, received - first_received
                points = mode_search_points(plan, silos, first_sent - first * down, first_received - first * up)
                ok = points is not None
                failed += not ok
                print(f"{'ok' if ok else 'FAIL'}: {name}: before the first iteration, sent "
                      f"{first_sent - first * down} B, received {first_received - first * up} B: "
                      f"{points if ok else 'not'} points of the mode search as the plan's opening messages give them")
            extra_down = extra_up = 0
            if extra == "avg":  # the objective at the averaged q: the broadcast down, one number up
                broadcast = sum(m["bytes_per_silo"][0] for m in plan["messages"] if m["to"] == "server")
                extra_down, extra_up = broadcast * silos, 8 * silos
            want_sent = steps * (down + extra_down) + (3 * 8 * silos if extra == "vfl" else 0)
            want_received = steps * (up + extra_up) + (8 * silos if extra in ("avg", "vfl") else 0)
            ok = (sent, received) == (want_sent, want_received)
            failed += not ok
            print(f"{'ok' if ok else 'FAIL'}: {name}: {steps} steps, {silos} silos: sent {sent} B, received "
                  f"{received} B; the plan's messages give {want_sent} B and {want_received} B")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
