#!/usr/bin/env python3
"""fvic's draws.csv read in R: usage  check_r.py FVIC CACHE CASE.

Each case runs an example through `fvic run`, then hands the server's draws.csv and silo 1's
(OUT/silo-1/draws.csv) to check_draws.R, which reads them as an R user does and checks:
rstan::read_stan_csv accepts them (CmdStan's variational layout); posterior::summarise_draws()
prints the numbers `fvic summary` prints, digit for digit; loo::psis(log_p__ - log_g__) gives
a Pareto k-hat within 0.05 of the k-hat fvic recorded (fvic_khat).

  pvi        pima_logreg (PVI, 3 silos)
  sfvi       hier_logreg (SFVI: silos hold a local intercept each)
  vfl        vfl_logreg with the default vertical method (vfl_exact, one full-rank Gaussian across
             the server and 2 silos, each silo its own block of beta), run to convergence
  conjugate  linreg_conjugate with damping 1: q is the exact posterior, so loo's k-hat is below
             0.5 and log_p__ - log_g__ is the same on every draw (sd < 1e-6 (1 + |mean|))

Needs Rscript with Debian's r-cran-rstan, r-cran-posterior and r-cran-loo (scripts/test.sh
installs them); exit 77 (skipped) with the reason when they are absent. A missing silo file is
a failure, not a skip. Exit 0 on success, 1 with a message on the failures.
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, Failure, require, run_case, run_fvic  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def require_r():
    """Skips (77) unless Rscript and the three packages are there."""
    rscript = shutil.which("Rscript")
    if not rscript:
        print("SKIP: Rscript is absent (scripts/test.sh installs r-base-core, r-cran-rstan, "
              "r-cran-posterior and r-cran-loo)")
        sys.exit(77)
    probe = ('missing <- Filter(function(p) !requireNamespace(p, quietly = TRUE), '
             'c("rstan", "posterior", "loo")); cat(missing); quit(status = as.integer(length(missing) > 0))')
    p = subprocess.run([rscript, "-e", probe], capture_output=True, text=True)
    if p.returncode != 0:
        print("SKIP: R packages absent: %s (Debian's r-cran-*; scripts/test.sh installs them)"
              % (p.stdout.strip() or p.stderr.strip()))
        sys.exit(77)
    return rscript


def summary_of(fvic, out, silo=None):
    cmd = [fvic, "summary", out] + (["--silo", str(silo)] if silo else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    require(p.returncode == 0, "%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p.stdout


def check(fvic, rscript, work, out, mode):
    """check_draws.R on the server's draws.csv and silo 1's; every failure is reported."""
    failures = []
    files = [(os.path.join(out, "draws.csv"), None, mode),
             (os.path.join(out, "silo-1", "draws.csv"), 1, "silo")]
    for csv_path, silo, file_mode in files:
        if not os.path.isfile(csv_path):
            failures.append("%s is absent: each silo writes its own draws.csv in the same layout" % csv_path)
            continue
        try:
            text = summary_of(fvic, out, silo)
        except Failure as e:
            failures.append(str(e))
            continue
        print(text)
        summary_path = os.path.join(work, "summary-%s.txt" % (silo or "server"))
        with open(summary_path, "w") as f:
            f.write(text)
        p = subprocess.run([rscript, os.path.join(HERE, "check_draws.R"), csv_path, summary_path, file_mode],
                           capture_output=True, text=True, timeout=600)
        print(p.stdout, end="")
        if p.returncode != 0:
            failures.append("check_draws.R on %s:\n%s%s" % (csv_path, p.stdout, p.stderr[-2000:]))
    require(not failures, "\n".join(failures))


def case_pvi(fvic, cache, work):
    rscript = require_r()
    ex = os.path.join(EXAMPLES, "pima_logreg")
    out = os.path.join(work, "pvi")
    run_fvic(fvic, cache, os.path.join(ex, "pima_logreg.fvi"), os.path.join(ex, "data"), out)
    check(fvic, rscript, work, out, "server")


def case_sfvi(fvic, cache, work):
    rscript = require_r()
    ex = os.path.join(EXAMPLES, "hier_logreg")
    out = os.path.join(work, "sfvi")
    run_fvic(fvic, cache, os.path.join(ex, "hier_logreg.fvi"), os.path.join(ex, "data"), out,
             ["rounds=300", "mc_samples=2", "refresh=100"])
    check(fvic, rscript, work, out, "server")


def case_vfl(fvic, cache, work):
    rscript = require_r()
    ex = os.path.join(EXAMPLES, "vfl_logreg")
    data = os.path.join(work, "data")
    subprocess.run([sys.executable, os.path.join(ex, "generate.py"), "--silos", "2", "--output", data],
                   check=True, capture_output=True)
    out = os.path.join(work, "vfl")
    run_fvic(fvic, cache, os.path.join(ex, "vfl_logreg.fvi"), os.path.join(data, "augmented"), out,
             ["method=vfl_exact"])
    check(fvic, rscript, work, out, "server")


def case_conjugate(fvic, cache, work):
    rscript = require_r()
    ex = os.path.join(EXAMPLES, "linreg_conjugate")
    out = os.path.join(work, "conjugate")
    run_fvic(fvic, cache, os.path.join(ex, "linreg_conjugate.fvi"), os.path.join(ex, "data"), out, ["damping=1"])
    check(fvic, rscript, work, out, "conjugate")


CASES = {"pvi": case_pvi, "sfvi": case_sfvi, "vfl": case_vfl, "conjugate": case_conjugate}

if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
