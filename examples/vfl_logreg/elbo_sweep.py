#!/usr/bin/env python3
"""ELBO of the power-likelihood and augmented models for J in {2, 10} at each rho given (default
0.5 1 2), amortised q(z), 6,000 iterations, 4 draws, Adam 0.01: the README's table.

  python3 examples/vfl_logreg/elbo_sweep.py [--fvic build/bin/fvic] [--work build/vfl_logreg/sweep] [RHO ...]

Each figure is the mean of the last 8 progress rows of metrics.csv (each the mean estimate over
its 250 iterations), as `ctest -R e2e.vfl.elbo` computes it.
"""
import argparse
import csv
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fvic", default=os.path.join(REPO, "build", "bin", "fvic"))
    parser.add_argument("--work", default=os.path.join(REPO, "build", "vfl_logreg", "sweep"))
    parser.add_argument("rho", nargs="*", default=["0.5", "1", "2"])
    args = parser.parse_args()
    print("| rho | J | power-likelihood | augmented | gap |")
    print("|---|---|---|---|---|")
    for rho in args.rho:
        for J in (2, 10):
            data = os.path.join(args.work, "J%d" % J)
            if not os.path.isdir(data):
                subprocess.run([sys.executable, os.path.join(HERE, "generate.py"), "--silos", str(J), "--output", data],
                               check=True, capture_output=True)
            elbo = {}
            for layout, model in (("power", "vfl_logreg_power.fvi"), ("augmented", "vfl_logreg.fvi")):
                out = os.path.join(args.work, "%s-J%d-rho%s" % (layout, J, rho))
                cmd = [args.fvic, "run", os.path.join(HERE, model), "--data", os.path.join(data, layout), "--output",
                       out, "--quiet"]
                for kv in ("rounds=6000", "mc_samples=4", "rho=" + rho, "q_z=amortized", "refresh=250", "lr=0.01"):
                    cmd += ["--set", kv]
                subprocess.run(cmd, check=True)
                with open(os.path.join(out, "metrics.csv")) as f:
                    rows = list(csv.DictReader(f))[-8:]
                elbo[layout] = sum(float(r["elbo"]) for r in rows) / len(rows)
            print("| %s | %d | %.1f | %.1f | %+.1f |" % (rho, J, elbo["power"], elbo["augmented"],
                                                       elbo["power"] - elbo["augmented"]), flush=True)


if __name__ == "__main__":
    main()
