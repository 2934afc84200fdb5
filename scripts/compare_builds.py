#!/usr/bin/env python3
"""Are two builds of fvic the same to the bit? For a refactoring that must not change a result:
every example run by each build's `fvic run` (NAME-sim), and one model of each method deployed
(NAME-server and 4 NAME-client over TLS, tests/e2e/check_deploy.py's set-up), with the same keys
and seeds. Every file each run writes (posterior.json, draws.csv, metrics.csv, silo-K/ outputs,
the server's and clients' checkpoints) must be byte-identical between the builds, except the
`seconds` column of metrics.csv, the seconds so far in a server's checkpoint (the last value of
its state) and the output folder's own path (draws.csv records it). Bytes on the wire
are metrics.csv's bytes_sent / bytes_received columns, compared with the rest.

Usage: scripts/compare_builds.py OLD_BUILD_DIR NEW_BUILD_DIR WORK_DIR [--old-only] [CASE...]
  (each BUILD_DIR a configured and built tree: bin/fvic, runtime/libfvi.a, runtime/libfvi_net.a)
A side's finished runs are kept in WORK_DIR/old and WORK_DIR/new and not run again; --old-only
runs the old build's side alone (while the new one is still being written). Prints one line per
case and exits 1 if any differs."""
import csv
import io
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import check_deploy as deploy  # noqa: E402

EX = os.path.join(ROOT, "examples")

# name: (model, data, keys): short runs of every example and method; the keys fix the step count
# so both builds take the same steps.
SIM_CASES = {
    "linreg_conjugate": ("linreg_conjugate/linreg_conjugate.fvi", "linreg_conjugate/data", ["rounds=5"]),
    "pima_logreg": ("pima_logreg/pima_logreg.fvi", "pima_logreg/data", ["rounds=5"]),
    "clutter": ("clutter/clutter.fvi", "clutter/data", ["rounds=5"]),
    "robust_logreg_2d": ("robust_logreg_2d/robust_logreg_2d.fvi", "robust_logreg_2d/data", ["rounds=5"]),
    "hier_logreg": ("hier_logreg/hier_logreg.fvi", "hier_logreg/data", ["rounds=400"]),
    "glmm_sixcities": ("glmm_sixcities/glmm_sixcities.fvi", "glmm_sixcities/data", ["rounds=400"]),
    "hier_logreg_avg": ("hier_logreg/hier_logreg.fvi", "hier_logreg/data", ["method=sfvi_avg", "rounds=40"]),
    "vfl_logreg": ("vfl_logreg/vfl_logreg.fvi", "@vfl/augmented", ["rounds=300"]),
    "vfl_logreg_power": ("vfl_logreg/vfl_logreg_power.fvi", "@vfl/power", ["rounds=300"]),
    "logreg_pooled": ("vfl_logreg/logreg_pooled.fvi", "@vfl/pooled", ["rounds=5"]),
    "vfl_poisson_multilevel": ("vfl_poisson_multilevel/vfl_poisson_multilevel.fvi", "@poisson/augmented",
                               ["rounds=300"]),
    "split_nn": ("split_nn/split_nn.fvi", "@split_nn/fold-1/train", ["rounds=200"]),
    "bnn_classifier": ("acceptance/bnn_classifier.fvi", "@fashion", ["rounds=2", "local_steps=20"]),
    "multinomial_eb": ("multinomial_eb/multinomial_eb.fvi", "@multinomial", ["rounds=5"]),
    "regression_ppc": ("stan_programs/regression_ppc/regression_ppc.fvi", "stan_programs/regression_ppc/data",
                       ["rounds=300"]),
}
DEPLOY_CASES = {
    "deploy_pvi": (deploy.PVI, ["rounds=4", "local_steps=100", "mc_samples=8"]),
    "deploy_sfvi": (deploy.SFVI, ["rounds=200", "warm_start=20", "refresh=10"]),
    "deploy_vfl": (deploy.VFL, ["rounds=200", "refresh=10"]),
}


def generated(work, which):
    """The examples whose data a generator writes, generated once into WORK/data."""
    out = os.path.join(work, "data", which)
    if not os.path.exists(out):
        script, args = {
            "vfl": ("vfl_logreg/generate.py", ["--silos", "2"]),
            "poisson": ("vfl_poisson_multilevel/generate.py", []),
            "split_nn": ("split_nn/generate.py", []),
            "fashion": ("fashion_bnn/generate.py", ["--slice", "200", "--test-rows", "100"]),
            "multinomial": ("multinomial_eb/generate.py", ["--silos", "5", "--rows", "50", "--test-rows", "100"]),
        }[which]
        subprocess.run([sys.executable, os.path.join(EX, script), "--output", out] + args, check=True,
                       capture_output=True, timeout=600)
    return out


def data_dir(work, spec):
    if spec.startswith("@"):
        which, _, rest = spec[1:].partition("/")
        return os.path.join(generated(work, which), rest)
    return os.path.join(EX, spec)


def without_seconds(path):
    """metrics.csv with its wall-clock column dropped."""
    with open(path) as f:
        rows = list(csv.reader(f))
    if rows and "seconds" in rows[0]:
        i = rows[0].index("seconds")
        rows = [r[:i] + r[i + 1:] for r in rows]
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    return out.getvalue()


def contents(path, base):
    """A file's bytes, with its own run's folder written as OUT: draws.csv records its path."""
    with open(path, "rb") as f:
        data = f.read()
    return data.replace(base.encode(), b"OUT")


def server_checkpoint(path):
    """A server checkpoint (runtime/src/program/checkpoint.cpp: magic, kind, round, then the state,
    extra and traffic vectors) with its wall-clock seconds, the state's last value, set to 0."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    at = 8
    (n,) = struct.unpack_from("<Q", data, at)
    at += 8 + n + 8  # the kind, the round
    (count,) = struct.unpack_from("<Q", data, at)
    at += 8
    if count:
        struct.pack_into("<d", data, at + 8 * (count - 1), 0.0)
    return bytes(data)


def compare_trees(a, b):
    """Files that differ (or exist on one side only) between two output folders; [] if none."""
    diffs, files = [], 0
    names = set()
    for root, _, fs in os.walk(a):
        names |= {os.path.relpath(os.path.join(root, f), a) for f in fs}
    for root, _, fs in os.walk(b):
        names |= {os.path.relpath(os.path.join(root, f), b) for f in fs}
    for name in sorted(names):
        pa, pb = os.path.join(a, name), os.path.join(b, name)
        if not (os.path.exists(pa) and os.path.exists(pb)):
            diffs.append(name + " (one side only)")
            continue
        files += 1
        if os.path.basename(name) == "server.checkpoint":
            same = server_checkpoint(pa) == server_checkpoint(pb)
        elif os.path.basename(name) == "metrics.csv":
            same = without_seconds(pa) == without_seconds(pb)
        else:
            same = contents(pa, a) == contents(pb, b)
        if not same:
            diffs.append(name)
    return files, diffs


def run_sim(build, cache, model, data, out, keys):
    cmd = [os.path.join(build, "bin", "fvic"), "run", os.path.join(EX, model), "--data", data, "--output", out,
           "--quiet"]
    for kv in keys:
        cmd += ["--set", kv]
    env = dict(os.environ, FVIC_CACHE=cache)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def run_deployed(build, work, model, keys):
    """The server and 4 clients of `model` over TLS; returns the folder holding server/ and silos/."""
    fvic = os.path.join(build, "bin", "fvic")
    os.makedirs(work)
    bins, data, certs, token_files = deploy.setup(fvic, os.path.join(work, "cache"), work, model=model)
    out, silos = os.path.join(work, "run", "server"), os.path.join(work, "run", "silos")
    d = deploy.Deployment(work, bins, data)
    try:
        server, port = d.server(out, keys, deploy.tls_server(certs, work))
        clients = [d.client(port, k, silos, deploy.tls_client(certs, token_files, k))
                   for k in range(1, deploy.SILOS + 1)]
        deploy.complete(d, server, clients, timeout=600)
    finally:
        d.close()
    return os.path.join(work, "run")


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    old, new, work = (os.path.abspath(p) for p in sys.argv[1:4])
    rest = sys.argv[4:]
    old_only = "--old-only" in rest
    wanted = [c for c in rest if c != "--old-only"] or list(SIM_CASES) + list(DEPLOY_CASES)
    os.makedirs(work, exist_ok=True)
    failed = 0
    for name in wanted:
        outs = []
        for label, build in (("old", old),) if old_only else (("old", old), ("new", new)):
            base = os.path.join(work, label, name)
            done = os.path.join(work, label, name + ".done")
            if os.path.exists(done):
                outs.append(open(done).read())
                continue
            if os.path.exists(base):
                subprocess.run(["rm", "-rf", base], check=True)
            if name in SIM_CASES:
                model, data, keys = SIM_CASES[name]
                out = os.path.join(base, "out")
                run_sim(build, os.path.join(work, label, "cache"), model, data_dir(work, data), out, keys)
            else:
                model, keys = DEPLOY_CASES[name]
                out = run_deployed(build, base, model, keys)
            with open(done, "w") as f:
                f.write(out)
            outs.append(out)
        if old_only:
            print(f"{name:24s} old build's run kept in {outs[0]}", flush=True)
            continue
        files, diffs = compare_trees(*outs)
        failed += bool(diffs)
        print(f"{name:24s} {files:3d} files  " + ("identical" if not diffs else "DIFFER: " + ", ".join(diffs)),
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
