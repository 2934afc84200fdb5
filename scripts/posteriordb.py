#!/usr/bin/env python3
"""Stan models as a Stan user brings them, through fvic: a corpus measurement (issue 37).

usage: scripts/posteriordb.py PDB [--fvic PATH] [--run] [--only NAME]... [--timeout S] [--work DIR]

PDB is a copy of stan-dev/posteriordb's `posterior_database` folder (models/stan, posteriors,
data/data, reference_posteriors/summary_statistics); it is fetched by hand, not in CI. Each Stan
model is translated mechanically, as a Stan user would start: every data block stays public
`data`, `global` goes before every declaration of the `parameters` block, nothing else changes.
Then `fvic check` runs on it, and the script prints how many pass and the others counted by
their first error (the error's words with names and numbers taken out), each with its models.

With --run, every posterior that has data and a reference posterior and whose model passes the
check is fitted with `fvic run` and its defaults (pooled: one data file), and compared with the
reference (posteriordb's mean_value and mean_squared_value, from long NUTS runs): per posterior,
the largest |mean - reference mean| / reference sd over every reference value the run writes,
the range of sd / reference sd, k-hat, whether the run warned, and the seconds it took.
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile

TYPES = ("real", "int", "vector", "row_vector", "matrix", "array", "simplex", "ordered", "positive_ordered",
         "unit_vector", "cholesky_factor_corr", "cholesky_factor_cov", "corr_matrix", "cov_matrix", "complex")


def skip_comment(text, i):
    """The index after a comment starting at i, or i when none starts there."""
    if text.startswith("//", i) or text.startswith("#", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    return i


def parameters_block(text):
    """(start, end) of the body of the `parameters` block (not `transformed parameters`)."""
    for m in re.finditer(r"\bparameters\s*\{", text):
        before = text[:m.start()].rstrip()
        if before.endswith("transformed"):
            continue
        start = m.end()
        depth, i = 1, start
        while i < len(text) and depth:
            j = skip_comment(text, i)
            if j != i:
                i = j
                continue
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        return start, i - 1
    return None


def translate(stan):
    """The .fvi of a Stan program: `global ` before each declaration of its parameters block."""
    block = parameters_block(stan)
    if not block:
        return stan
    start, end = block
    out, i, at_statement = [], start, True
    body = stan[start:end]
    i = 0
    while i < len(body):
        j = skip_comment(body, i)
        if j != i:
            out.append(body[i:j])
            i = j
            continue
        c = body[i]
        if at_statement and not c.isspace():
            word = re.match(r"[A-Za-z_]\w*", body[i:])
            if word and word.group(0) in TYPES:
                out.append("global ")
            at_statement = False
        if c == ";":
            at_statement = True
        out.append(c)
        i += 1
    return stan[:start] + "".join(out) + stan[end:]


def first_error(stderr):
    for line in stderr.splitlines():
        m = re.match(r"[^:]+:\d+:\d+: error: (.*)", line) or re.match(r".*error: (.*)", line)
        if m:
            return m.group(1)
    return stderr.strip().splitlines()[-1] if stderr.strip() else "no message"


def reason(message):
    """The error's kind: names in quotes and numbers replaced, so that models group by it."""
    r = re.sub(r"'[^']*'", "'…'", message)
    r = re.sub(r"`[^`]*`", "`…`", r)
    return re.sub(r"\b\d+\b", "N", r)


def detail(message):
    m = re.search(r"'([^']*)'", message)
    return m.group(1) if m else ""


def check_all(pdb, fvic, work, only):
    models_dir = os.path.join(pdb, "models", "stan")
    results = {}
    for name in sorted(f[:-5] for f in os.listdir(models_dir) if f.endswith(".stan")):
        if only and name not in only:
            continue
        with open(os.path.join(models_dir, name + ".stan")) as f:
            fvi = translate(f.read())
        path = os.path.join(work, name + ".fvi")
        with open(path, "w") as f:
            f.write(fvi)
        p = subprocess.run([fvic, "check", path], capture_output=True, text=True, timeout=120)
        results[name] = None if p.returncode == 0 else first_error(p.stderr)
    return results


def print_check(results):
    passed = [n for n, e in results.items() if e is None]
    print(f"fvic check: {len(passed)} of {len(results)} models pass ({100 * len(passed) / max(1, len(results)):.0f}%)")
    groups = collections.defaultdict(list)
    for name, e in results.items():
        if e is not None:
            groups[reason(e)].append((name, detail(e)))
    for r, models in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        names = collections.Counter(d for _, d in models if d)
        named = ", ".join(f"{d} ({c})" if c > 1 else d for d, c in names.most_common(12))
        print(f"  {len(models):3d}  {r}" + (f"  [{named}]" if named else ""))
        print(f"       {', '.join(n for n, _ in models[:8])}{' ...' if len(models) > 8 else ''}")
    return passed


def reference(pdb, posterior):
    base = os.path.join(pdb, "reference_posteriors", "summary_statistics")
    mean_path = os.path.join(base, "mean_value", "mean_value", posterior + ".json")
    square_path = os.path.join(base, "mean_squared_value", "mean_squared_value", posterior + ".json")
    if not (os.path.exists(mean_path) and os.path.exists(square_path)):
        return None
    with open(mean_path) as f:
        mean = json.load(f)
    with open(square_path) as f:
        square = json.load(f)
    squares = dict(zip(square["names"], square["mean_squared_value"]))
    out = {}
    for n, m in zip(mean["names"], mean["mean_value"]):
        if n in squares:
            out[n] = (m, math.sqrt(max(0.0, squares[n] - m * m)))
    return out


def written(out):
    """name[i] / name[i,j] -> (mean, sd) from OUT/posterior.json (elements row-major)."""
    with open(os.path.join(out, "posterior.json")) as f:
        variables = json.load(f)["variables"]
    values = {}
    for name, v in variables.items():
        shape = v["shape"]
        if not shape:
            values[name] = (v["mean"][0], v["sd"][0])
            continue
        index = [0] * len(shape)
        for m, s in zip(v["mean"], v["sd"]):
            values[f"{name}[{','.join(str(i + 1) for i in index)}]"] = (m, s)
            for d in reversed(range(len(shape))):
                index[d] += 1
                if index[d] < shape[d]:
                    break
                index[d] = 0
    return values


def run_all(pdb, fvic, work, passed, timeout, only):
    rows = []
    for f in sorted(os.listdir(os.path.join(pdb, "posteriors"))):
        with open(os.path.join(pdb, "posteriors", f)) as g:
            info = json.load(g)
        name, model, data_name = info["name"], info["model_name"], info.get("data_name")
        if (only and model not in only) or model not in passed or not data_name:
            continue
        ref = reference(pdb, info.get("reference_posterior_name") or "")
        archive = os.path.join(pdb, "data", "data", data_name + ".json.zip")
        if not ref or not os.path.exists(archive):
            continue
        data = os.path.join(work, data_name + ".json")
        with zipfile.ZipFile(archive) as z, open(data, "wb") as out:
            out.write(z.read(z.namelist()[0]))
        out = os.path.join(work, "out-" + name)
        began = time.time()
        try:
            p = subprocess.run([fvic, "run", os.path.join(work, model + ".fvi"), "--data", data, "--output", out],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            rows.append((name, f"timed out after {timeout} s"))
            continue
        seconds = time.time() - began
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "run.log"), "w") as log:  # the run's own lines, to read afterwards
            log.write(p.stdout + p.stderr)
        if p.returncode != 0 or not os.path.exists(os.path.join(out, "posterior.json")):
            rows.append((name, "run failed: " + first_error(p.stderr)[:100]))
            continue
        got = written(out)
        z, ratios = 0.0, []
        for n, (m, s) in ref.items():
            if n in got and s > 0:
                z = max(z, abs(got[n][0] - m) / s)
                ratios.append(got[n][1] / s)
        khat = re.search(r"Pareto k-hat ([-\d.]+|nan|inf)", p.stdout)
        warned = "warning:" in p.stderr
        compared = f"{len(ratios)} of {len(ref)} values"
        if not ratios:
            rows.append((name, "no reference value written"))
            continue
        verdict = "ok" if z <= 0.25 and 0.8 <= min(ratios) and max(ratios) <= 1.2 else (
            "warned" if warned or (khat and khat.group(1) not in ("nan",) and float(khat.group(1)) > 0.7) else "WRONG, silent")
        rows.append((name, f"max z {z:6.2f}  sd ratio {min(ratios):.2f}-{max(ratios):.2f}  k-hat "
                           f"{khat.group(1) if khat else '-':>5}  {seconds:5.0f} s  {compared}  {verdict}"))
    print(f"fvic run with defaults, pooled, against posteriordb's reference posteriors: {len(rows)} posteriors")
    for name, line in rows:
        print(f"  {name:55s} {line}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pdb")
    ap.add_argument("--fvic", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin", "fvic"))
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--work")
    a = ap.parse_args()
    pdb = a.pdb if os.path.isdir(os.path.join(a.pdb, "models")) else os.path.join(a.pdb, "posterior_database")
    work = a.work or tempfile.mkdtemp(prefix="posteriordb-")
    os.makedirs(work, exist_ok=True)
    passed = print_check(check_all(pdb, a.fvic, work, set(a.only)))
    if a.run:
        run_all(pdb, a.fvic, work, set(passed), a.timeout, set(a.only))
    print(f"(the translated models and the runs' outputs are in {work})")


if __name__ == "__main__":
    sys.exit(main())
