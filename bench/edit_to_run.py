#!/usr/bin/env python3
"""Benchmark (issue 28): from a one-character edit of a model's prior to its first iteration.

For every acceptance model, a copy is edited (the first digit of its first `~` statement's
arguments becomes another: `normal(0, 2)` -> `normal(0, 3)`), then `fvic run` starts on data of
the model's shape, and the time is taken when the program prints its header, which it does once
the data are read and checked, every factor is bound and the server is ready, immediately before
its first iteration; the run is then stopped. Three backends, each on a fresh edit:

  llvm   `fvic run` (the default): the model from its IR, its fused loops compiled by LLVM's
         JIT in the process (the JIT's own time, which fvic prints, in its own column)
  graph  `fvic run --backend graph`: the model from its IR, the loops interpreted
  cpp    `fvic run --backend cpp`: NAME-sim compiled first (its kernels and main; the edit
         changes both, so the cache misses, as it does for a user who edits a model)

beside the floor (`fvic --version`: a process start) and `fvic dump --ir` of the same model (the
front end, lowering and the adjoints: all the graph backend compiles; building its table from
the IR is not timed apart). Where the example has the comparable Stan program (its reference/
folder) and R has rstan, rstan's `stan_model` of an edited copy is timed too (Stan's compile, a
lower bound on its edit to first iteration). Each figure is the median of --runs runs.

    bench/edit_to_run.py [--fvic build/bin/fvic] [--runs 3] [--skip-cpp] [--models a,b]

Data are made once under build/bench/edit_to_run/ by the examples' generators (small sizes).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build", "bench", "edit_to_run")


def generated(name, command):
    """The data directory `command` (a generator's argv, writing into --output) makes, made once."""
    out = os.path.join(WORK, "data", name)
    if not os.path.isdir(out):
        subprocess.run([sys.executable] + command + ["--output", out], cwd=ROOT, check=True, capture_output=True)
    return out


def data_for(model):
    ex = lambda *p: os.path.join(ROOT, "examples", *p)
    if model in ("hier_logreg", "glmm_sixcities", "linreg_conjugate", "clutter"):
        return ex(model, "data")
    if model == "robust_logreg":
        return ex("robust_logreg_2d", "data")
    if model == "bnn_classifier":
        return generated("bnn", ["examples/fashion_bnn/generate.py", "--contamination", "20", "--slice", "600"])
    if model == "multinomial_eb":
        return generated("multinomial", ["examples/multinomial_eb/generate.py", "--silos", "5", "--rows", "200",
                                         "--test-rows", "1000"])
    if model == "split_nn":
        return os.path.join(generated("split_nn", ["examples/split_nn/generate.py"]), "fold-1", "train")
    if model in ("vfl_logreg", "vfl_logreg_power"):
        folder = "power" if model == "vfl_logreg_power" else "augmented"
        return os.path.join(generated("vfl_logreg", ["examples/vfl_logreg/generate.py", "--silos", "4"]), folder)
    if model == "vfl_poisson_multilevel":
        return os.path.join(generated("vfl_poisson", ["examples/vfl_poisson_multilevel/generate.py"]), "augmented")
    raise SystemExit(f"no data for {model}")


def edited(model_path, serial, directory):
    """A copy of the model with one digit of its first prior changed (serial picks which)."""
    text = open(model_path).read()
    for m in re.finditer(r"~[^;]*", text):
        digit = re.search(r"\d", m.group(0))
        if digit:
            at = m.start() + digit.start()
            new = str((int(text[at]) + 1 + serial) % 9 + 1)
            text = text[:at] + new + text[at + 1:]
            break
    else:
        raise SystemExit(f"{model_path}: no prior with a digit to edit")
    path = os.path.join(directory, os.path.basename(model_path))
    open(path, "w").write(text)
    return path


def seconds_to_header(argv, env):
    """Seconds from starting argv to its header line (`NAME: method = ...`), and the JIT's own
    seconds if it printed them (`llvm: ... compiled in N ms`); the run is then stopped."""
    start = time.monotonic()
    p = subprocess.Popen(["stdbuf", "-oL"] + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    lines, jit = [], None
    for line in p.stdout:
        lines.append(line)
        m = re.match(r"^llvm: .* compiled in (\d+) ms", line)
        if m:
            jit = int(m.group(1)) / 1000
        if re.match(r"^\S+: .*method = ", line):
            elapsed = time.monotonic() - start
            p.kill()
            p.wait()
            return elapsed, jit
    p.wait()
    raise SystemExit("no header from " + " ".join(argv) + ":\n" + "".join(lines[-20:]))


STAN_PROGRAMS = {"hier_logreg": "examples/hier_logreg/reference/hier_logreg.stan",
                 "glmm_sixcities": "examples/glmm_sixcities/reference/glmm.stan"}


def rstan_seconds(model, serial, directory):
    """rstan's stan_model on a copy of the model's Stan program with one prior digit edited, or None."""
    if model not in STAN_PROGRAMS or shutil.which("Rscript") is None:
        return None
    path = edited(os.path.join(ROOT, STAN_PROGRAMS[model]), serial, directory)
    script = f"suppressMessages(library(rstan)); t <- system.time(stan_model('{path}')); cat(t[['elapsed']])"
    p = subprocess.run(["Rscript", "-e", script], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    return float(p.stdout.strip().split()[-1])


def seconds(argv):
    start = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fvic", default=os.path.join(ROOT, "build", "bin", "fvic"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cpp-runs", type=int, default=1, help="runs of the cpp backend (each a 20-60 s compile)")
    parser.add_argument("--skip-cpp", action="store_true")
    parser.add_argument("--models", default="")
    args = parser.parse_args()
    acceptance = os.path.join(ROOT, "examples", "acceptance")
    models = sorted(f[:-4] for f in os.listdir(acceptance) if f.endswith(".fvi"))
    if args.models:
        models = [m for m in models if m in args.models.split(",")]
    os.makedirs(WORK, exist_ok=True)
    cache = os.path.join(WORK, "fvic-cache")
    shutil.rmtree(cache, ignore_errors=True)  # a cache of its own, empty: every cpp run compiles
    env = dict(os.environ, FVIC_CACHE=cache, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    floor = statistics.median(seconds([args.fvic, "--version"]) for _ in range(5))
    print(f"floor (fvic --version, a process start): {1000 * floor:.0f} ms")
    print(f"{'model':<24} {'dump --ir':>10} {'llvm':>10} {'its JIT':>10} {'graph':>10} {'cpp':>10} {'rstan':>10}"
          "  (edit to first iteration; medians)")
    serial = 0
    for model in models:
        data = data_for(model)
        source = os.path.join(acceptance, model + ".fvi")
        front = statistics.median(seconds([args.fvic, "dump", "--ir", source]) for _ in range(args.runs))
        figures, jit = {}, []
        for backend in ["llvm", "graph"] + ([] if args.skip_cpp else ["cpp"]):
            times = []
            for _ in range(args.runs if backend != "cpp" else args.cpp_runs):
                serial += 1
                with tempfile.TemporaryDirectory(dir=WORK) as d:
                    path = edited(source, serial, d)
                    argv = [args.fvic, "run", path, "--data", data, "--output", os.path.join(d, "out"),
                            "--backend", backend]
                    elapsed, compiled = seconds_to_header(argv, env)
                    times.append(elapsed)
                    if backend == "llvm":
                        jit.append(compiled or 0.0)  # no line: no fused loop to compile
            figures[backend] = statistics.median(times)
        cpp = f"{figures['cpp']:.2f} s" if "cpp" in figures else "-"
        stan = None
        if not args.skip_cpp:
            serial += 1
            with tempfile.TemporaryDirectory(dir=WORK) as d:
                stan = rstan_seconds(model, serial, d)
        stan = f"{stan:.2f} s" if stan is not None else "-"
        print(f"{model:<24} {1000 * front:>7.0f} ms {figures['llvm']:>8.2f} s {1000 * statistics.median(jit):>7.0f} ms "
              f"{figures['graph']:>8.2f} s {cpp:>10} {stan:>10}", flush=True)
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
