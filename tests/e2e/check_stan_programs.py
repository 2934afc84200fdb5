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
names the parameter (issue 26: a right answer or a loud warning, never a silent wrong one). The
silos' own transformed parameters are not written yet: they are listed as not compared.

Cases: eight_schools_noncentered, hier_regression_tp, regression_ppc. Exit 0 on success, 1 with
a message on the first failure.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, Failure, require  # noqa: E402

TOLERANCE_SD = 0.25


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


def run_case(fvic, cache, case):
    root = os.path.join(EXAMPLES, "stan_programs", case)
    with open(os.path.join(root, "reference", "nuts_summary.json")) as f:
        nuts = json.load(f)["parameters"]
    with tempfile.TemporaryDirectory() as out:
        cmd = [fvic, "run", os.path.join(root, case + ".fvi"), "--data", os.path.join(root, "data"), "--output", out]
        p = subprocess.run(cmd, env=dict(os.environ, FVIC_CACHE=cache), capture_output=True, text=True, timeout=1200)
        require(p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        require("converged after" in p.stdout, f"{case}: the run did not converge:\n{p.stdout}")
        fitted = written_values(out)
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
    require(len(not_written) < len(nuts), f"{case}: nothing compared")
    if not_written:
        print(f"  not written by the run (the silos' transformed parameters): {', '.join(not_written)}")


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
