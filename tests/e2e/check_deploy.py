#!/usr/bin/env python3
"""End-to-end checks of the deployed programs, NAME-server and NAME-client as real processes
talking gRPC on 127.0.0.1: usage  check_deploy.py FVIC CACHE CASE.

One model of each decomposition, each dealt into 4 silos in a temporary folder: PVI on
pima_logreg (its 614 training rows round-robin), SFVI on hier_logreg (hospitals 1 and 2, and
hospital 3 as two), VFL on vfl_logreg (the generator's 20 columns in 4 blocks of 5). `FVIC build`
compiles each once into CACHE/deploy-NAME (rebuilt when fvic or the runtime libraries are newer).
The test's certificates (a CA, a server certificate for IP:127.0.0.1 and DNS:localhost, client
certificates with CN silo-1..silo-4) are made here with openssl, with the silos' tokens. Every
process runs with a time limit and is killed at the end. Cases (PVI unless named otherwise):

  pvi_equal    TLS and tokens, 1 server and 4 clients, PVI with keys given to the server only:
               posterior.json (means, sds, ELBOs, and its closing lines: k-hat and the tail
               check, each from its own closing exchange) equals NAME-sim's on the same data and keys,
               metrics.csv has NAME-sim's header and rows, and one progress line per row.
  sparse_gp_equal
               the same for examples/sparse_gp_synthetic (seed 003: each silo's pseudo-observations
               travel through the server to the others), 300 rows dealt into 4 silos.
  fedavg_equal, fedvem_equal, fedavg_fsvi_equal
               the same for method = fedavg (server Adam, 3 of the 4 silos asked each round, drawn
               from the seed), fedvem and fedavg_fsvi (two context points per step) on pima_logreg.
  fsvi_rule    fedavg_fsvi stopped by the rule: the silos asked whether q's function at their context
               points settled (kPviSettled), the verdict naming it as NAME-sim's does.
  sfvi_equal, sfvi_lrt_equal, vfl_equal, vfl_exact_equal
               the same for SFVI (sfvi_lrt_equal: pima, mean-field, each silo's gradient through the
               local reparameterisation) and VFL (vfl_exact_equal: the exact decomposition, whose bytes per
               iteration must also be the ones `fvic plan` lists), and each silo's posterior.json (its locals, its split
               block) equals the one NAME-sim wrote for it.
  vfl_shared_scale_equal
               vfl_exact on that regression (unscaled) with one global prior scale lambda for every
               silo's coefficients: the server sends each client its draws of lambda with the
               adjoint, the closing exchange and the tail check; the equal case's checks.
  vfl_scale_equal
               vfl_exact on a vertical Gaussian regression with its outcome 100 times larger (6 columns
               in 4 silos): the server starts b at the mode of its own terms and sends every client
               the linear predictor's scale (Phase::kVflScale), at which its coefficients step; the
               equal case's checks (NAME-sim sent it too, or the fits would differ), and the server
               says so.
  sfvi_locations_equal
               SFVI on a hierarchical regression with its outcome 100 times larger (4 silos, a local
               intercept each): the server starts mu and beta at the locations' mode, each silo
               answering its profile over its intercept, and sends the point to every client
               (Phase::kSfviModeLocals); the equal case's checks, and the server says so.
  stan_statements
               examples/stan_programs/capture_recapture (360 histories dealt into 4 sites), SFVI:
               each client computes its transformed data (loops, ifs) when it reads its data, and
               its generated quantities z (a statement program drawing bernoulli_rng for the
               individuals never caught) and N_site; the equal case's checks of the server's
               posterior and metrics, and every silo's posterior (z, N_site) equals NAME-sim's.
  stan_quantities
               examples/stan_programs/regression_ppc (120 rows dealt into 4 silos) with two
               silo_sum generated quantities added, SFVI: the equal case's checks, the silos'
               generated quantity y_rep (posterior predictive replicates of their rows) in each
               client's silo-K/posterior.json and in none of the server's outputs, the server's
               bytes each way NAME-sim's; the silo_sum sums in the plan and the server's outputs,
               right at every draw, and what the closing exchange received on the wire.
  mtls         TLS with client certificates (--client-ca): a client presenting silo-2's
               certificate while claiming silo 1 is refused (exit 3, "refused" on stderr, and
               logged by the server), a client without a certificate cannot connect; then the
               4 silos with their own certificates complete the run (NAME-sim's posterior).
  wrong_token  during a run, a client with a wrong token is refused (exit 3, "wrong token for
               silo K") and a client with --insecure against the TLS server cannot connect
               (exit 1 after --reconnect-timeout 3); the server goes on, the 4 real silos
               complete the run, and the posterior is NAME-sim's.
  faults       4 clients with --test-fault nan@2, size@3, nonpd@2 and stale@4: each client
               says the server refused its bad reply, the server's stderr names the silo, the
               round and the reason, and the posterior is NAME-sim's (the bad replies changed
               nothing).
  huge_message a client sends a 2 MB reply to a server with --max-message 1: the server refuses
               it after its first part (RESOURCE_EXHAUSTED, "larger than"), the client says so,
               sends its real reply, and the posterior is NAME-sim's.
  hostile_join, hostile_load, absurd_silo, refused_backoff, operator_mistakes
               issue 27's hostile peers and careless operators: see each case's docstring.
  client_kill, sfvi_client_kill, vfl_client_kill
               --quorum 3 --deadline 2: a client killed (SIGKILL) mid-run; the server logs
               "going on without silo(s) K", goes on, and its progress lines say what is
               missing; the client restarted with --resume rejoins ("silo rejoined"), the last
               step has every silo, the server exits 0 with a finite posterior (and finite silo
               posteriors) and one metrics row per step.
  server_kill, sfvi_server_kill, vfl_server_kill, sfvi_locations_server_kill
               the server killed (SIGKILL) mid-run and restarted with --resume on the same port
               and output folder while the clients keep running (they reconnect): the
               posteriors (the server's and every silo's) equal an uninterrupted run's with the
               same (default) seed, and so do the byte counters in metrics.csv's last row.

Exit 0 on success, 1 with a message on the first failure, 77 (skip) without openssl.
"""
import csv
import hashlib
import json
import math
import os
import pty
import random
import re
import secrets
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, Failure, posterior, require, run_case  # noqa: E402
from check_stan_programs import check_silo_sums, regression_log_lik, silo_rows, with_silo_sums  # noqa: E402
from check_defaults import CHAIN_MODEL, hier_scaled_model, vfl_generate, vfl_model  # noqa: E402

SILOS = 4
# The server and NAME-sim run the same engines and the same rounds in the same order; only how
# the messages travel differs (docs/deployment.md). Here each PVI client splits its rows between
# the machine's 2 cores while NAME-sim's 4 silos get one thread each, which reorders the sums of
# a client's gradient (a few ulps per step); 1e-9 relative covers that and printing and parsing.
SAME = 1e-9


# ---------------------------------------------------------------------------------------------
# The programs, the data, the credentials

class Model:
    """One model of each decomposition, with its data dealt into 4 silos by `deal(work)`."""

    def __init__(self, example, deal, silo_posteriors=True):
        self.name = example
        self.fvi = os.path.join(EXAMPLES, example, example + ".fvi")
        self.deal = deal
        self.silo_posteriors = silo_posteriors  # its silos write posteriors of their own (locals, blocks)


def programs(fvic, cache, model):
    """CACHE/deploy-NAME holding NAME-sim, NAME-server and NAME-client, built by `FVIC build` if
    missing or older than FVIC."""
    NAME, MODEL = model.name, model.fvi
    out = os.path.join(cache, "deploy-" + NAME)
    paths = {role: os.path.join(out, f"{NAME}-{role}") for role in ("sim", "server", "client")}
    # Rebuilt when fvic or the runtime libraries it links into the programs are newer.
    runtime = os.path.join(os.path.dirname(os.path.abspath(fvic)), os.pardir, "runtime")
    libs = [os.path.join(runtime, lib) for lib in ("libfvi.a", "libfvi_net.a")]
    fvic_time = max(os.path.getmtime(p) for p in [fvic, MODEL] + [p for p in libs if os.path.exists(p)])
    if not all(os.path.exists(p) and os.path.getmtime(p) > fvic_time for p in paths.values()):
        os.makedirs(cache, exist_ok=True)
        p = subprocess.run([fvic, "build", MODEL, "-o", out], capture_output=True, text=True, timeout=600)
        require(p.returncode == 0, f"{fvic} build {MODEL} -o {out} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        for p in paths.values():
            require(os.path.exists(p), f"{fvic} build did not write {p}")
    return paths


def deal_rows(work, example_data, expected):
    """An example's rows (x, y of its silo-1..3.json) dealt round-robin into 4 silos; data.json as
    is. Returns the new data folder."""
    out = os.path.join(work, "data")
    os.makedirs(out)
    shutil.copy(os.path.join(example_data, "data.json"), os.path.join(out, "data.json"))
    rows = []
    for k in (1, 2, 3):
        with open(os.path.join(example_data, f"silo-{k}.json")) as f:
            s = json.load(f)
        rows += list(zip(s["x"], s["y"]))
    require(len(rows) == expected, f"expected {expected} rows, read {len(rows)}")
    for k in range(SILOS):
        part = rows[k::SILOS]
        with open(os.path.join(out, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(part), "x": [x for x, _ in part], "y": [y for _, y in part]}, f)
    return out


def four_silos(work):
    """pima_logreg's 614 training rows dealt round-robin into 4 silos."""
    return deal_rows(work, os.path.join(EXAMPLES, "pima_logreg", "data"), 614)


def four_hospitals(work):
    """hier_logreg's hospitals 1 and 2 as they are, hospital 3's 70 patients as two hospitals of
    35 (each silo has its own intercept; the split only makes a fourth silo)."""
    src, out = os.path.join(EXAMPLES, "hier_logreg", "data"), os.path.join(work, "data")
    os.makedirs(out)
    for f in ("data.json", "silo-1.json", "silo-2.json"):
        shutil.copy(os.path.join(src, f), os.path.join(out, f))
    with open(os.path.join(src, "silo-3.json")) as f:
        third = json.load(f)
    half = third["N"] // 2
    for k, rows in ((3, slice(0, half)), (4, slice(half, None))):
        part = {"x": third["x"][rows], "y": third["y"][rows]}
        with open(os.path.join(out, f"silo-{k}.json"), "w") as f:
            json.dump({"N": len(part["y"]), **part}, f)
    return out


def four_column_blocks(work):
    """vfl_logreg's 500 rows with their 20 columns in 4 blocks of 5, one per silo, labels on the
    server (the example's generator, --silos 4)."""
    out = os.path.join(work, "vfl")
    generator = os.path.join(EXAMPLES, "vfl_logreg", "generate.py")
    p = subprocess.run([sys.executable, generator, "--silos", str(SILOS), "--output", out], capture_output=True,
                       text=True, timeout=120)
    require(p.returncode == 0, f"{generator} failed:\n{p.stderr}")
    return os.path.join(out, "augmented")


def four_regression_silos(work):
    """examples/stan_programs/regression_ppc's 120 rows dealt round-robin into 4 silos of 30."""
    return deal_rows(work, os.path.join(EXAMPLES, "stan_programs", "regression_ppc", "data"), 120)


def four_sites(work):
    """examples/stan_programs/capture_recapture's 360 capture histories (3 sites of 120) dealt
    round-robin into 4 sites of 90; data.json (T) as is."""
    src, out = os.path.join(EXAMPLES, "stan_programs", "capture_recapture", "data"), os.path.join(work, "data")
    os.makedirs(out)
    shutil.copy(os.path.join(src, "data.json"), os.path.join(out, "data.json"))
    rows = []
    for k in (1, 2, 3):
        with open(os.path.join(src, f"silo-{k}.json")) as f:
            rows += json.load(f)["y"]
    for k in range(SILOS):
        part = rows[k::SILOS]
        with open(os.path.join(out, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"M": len(part), "y": part}, f)
    return out


def four_gp_silos(work):
    """examples/sparse_gp_synthetic's 300 rows (5 stretches of the line) dealt round-robin into 4
    silos; data.json (M and the fixed hyperparameters) as is."""
    src, out = os.path.join(EXAMPLES, "sparse_gp_synthetic", "data"), os.path.join(work, "data")
    os.makedirs(out)
    shutil.copy(os.path.join(src, "data.json"), os.path.join(out, "data.json"))
    rows = []
    for k in range(1, 6):
        with open(os.path.join(src, f"silo-{k}.json")) as f:
            s = json.load(f)
        rows += list(zip(s["x"], s["y"]))
    require(len(rows) == 300, f"expected 300 rows, read {len(rows)}")
    for k in range(SILOS):
        part = rows[k::SILOS]
        with open(os.path.join(out, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(part), "x": [x for x, _ in part], "y": [y for _, y in part]}, f)
    return out


PVI = Model("pima_logreg", four_silos)
# Seed 003's sparse GP (PVI with each silo's pseudo-observations; the other silos' travel through
# the server): no silo posteriors of its own.
SPARSE_GP = Model("sparse_gp_synthetic", four_gp_silos, silo_posteriors=False)
SFVI = Model("hier_logreg", four_hospitals)
# A Stan program with generated quantities: the server's (sigma_sq), the silos' (y_rep), and two
# each silo computes in part and the server sums (log_lik, n_total: check_stan_programs.py's
# with_silo_sums), written beside the cache's programs by case_stan_quantities.
STAN = Model("regression_ppc_sum", four_regression_silos)
VFL = Model("vfl_logreg", four_column_blocks)
# Transformed data built by statements (each client computes its counts when it reads its data)
# and `if` in a loop: capture-recapture, no locals.
CAPTURE = Model("capture_recapture", four_sites)
CAPTURE.fvi = os.path.join(EXAMPLES, "stan_programs", "capture_recapture", "capture_recapture.fvi")


def openssl(*args, cwd):
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    require(p.returncode == 0, f"openssl {' '.join(args)} failed:\n{p.stderr}")


def certificates(work):
    """A CA, the server's certificate (IP:127.0.0.1, DNS:localhost) and client certificates with
    CN silo-1..silo-4, in work/certs; returns the folder."""
    d = os.path.join(work, "certs")
    os.makedirs(d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=fvi test CA",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who, subject, ext in [("server", "/CN=localhost", ["-extfile", "san.ext"])] + \
                             [(f"silo-{k}", f"/CN=silo-{k}", []) for k in range(1, SILOS + 1)]:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", f"{who}.key",
                "-out", f"{who}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", *ext, "-out", f"{who}.pem", cwd=d)
    return d


def tokens(work):
    """work/tokens ("K TOKEN" lines) and work/silo-K.token; returns {K: token file}."""
    files = {}
    with open(os.path.join(work, "tokens"), "w") as all_tokens:
        for k in range(1, SILOS + 1):
            token = secrets.token_hex(16)
            all_tokens.write(f"{k} {token}\n")
            files[k] = os.path.join(work, f"silo-{k}.token")
            with open(files[k], "w") as f:
                f.write(token + "\n")
    for path in list(files.values()) + [os.path.join(work, "tokens")]:
        os.chmod(path, 0o600)  # secrets readable by their owner only, as a deployment keeps them
    return files


# ---------------------------------------------------------------------------------------------
# Processes: stdout and stderr go to files (no pipe can fill up); every one is killed at the end

class Party:
    def __init__(self, name, cmd, work):
        self.name, self.cmd = name, cmd
        stem = os.path.join(work, "logs", name)
        os.makedirs(os.path.dirname(stem), exist_ok=True)
        n = 1
        while os.path.exists(f"{stem}.{n}.out"):
            n += 1
        self.out_path, self.err_path = f"{stem}.{n}.out", f"{stem}.{n}.err"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def stdout(self):
        with open(self.out_path, errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def describe(self):
        rc = self.proc.poll()
        tail = lambda s: "\n".join(s.rstrip().splitlines()[-25:])  # noqa: E731
        return (f"--- {self.name} ({'running' if rc is None else f'exit {rc}'}): {' '.join(self.cmd)}\n"
                f"stdout:\n{tail(self.stdout())}\nstderr:\n{tail(self.stderr())}")


class Deployment:
    """The processes of one case: started with start(), all killed by close() (try/finally)."""

    def __init__(self, work, bins, data):
        self.work, self.bins, self.data = work, bins, data
        self.parties = []

    def start(self, name, cmd):
        p = Party(name, cmd, self.work)
        self.parties.append(p)
        return p

    def close(self):
        for p in self.parties:
            p.kill()

    def fail(self, message):
        raise Failure(message + "\n" + "\n".join(p.describe() for p in self.parties))

    def check(self, cond, message):
        if not cond:
            self.fail(message)

    def until(self, what, cond, timeout, watch=()):
        """Polls cond() until it holds; fails after `timeout` s or when a watched party exits first."""
        end = time.monotonic() + timeout
        while True:
            if cond():
                return
            for p in watch:
                if not p.running() and not cond():
                    self.fail(f"{p.name} exited ({p.proc.returncode}) while waiting for {what}")
            if time.monotonic() > end:
                self.fail(f"no {what} within {timeout} s")
            time.sleep(0.05)

    def wait(self, party, timeout, expect=0):
        try:
            rc = party.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"{party.name} did not finish within {timeout} s")
        if expect is not None:
            self.check(rc == expect, f"{party.name} exited with {rc}, expected {expect}")
        return rc

    def program(self, role):
        """The command that starts a role: NAME-server, or a generic program and its model."""
        b = self.bins[role]
        return list(b) if isinstance(b, (list, tuple)) else [b]

    def server(self, out, sets=(), options=(), port=0, name="server"):
        """NAME-server on 127.0.0.1:PORT (0: the server picks a free port, read from its first
        line); returns (party, port) once it listens."""
        cmd = self.program("server") + ["--listen", f"127.0.0.1:{port}", "--silos", str(SILOS), "--data", self.data,
               "--output", out, "--join-timeout", "60", "--give-up", "60"]
        for kv in sets:
            cmd += ["--set", kv]
        s = self.start(name, cmd + list(options))
        listening = re.compile(r"listening on 127\.0\.0\.1:(\d+) ")
        self.until(f"'listening on' from {name}", lambda: listening.search(s.stdout()), 20, [s])
        return s, int(listening.search(s.stdout()).group(1))

    def client(self, port, k, out, options=(), name=None):
        cmd = self.program("client") + ["--server", f"127.0.0.1:{port}", "--silo", str(k), "--data", self.data,
               "--output", out]
        return self.start(name or f"client-{k}", cmd + list(options))


def tls_client(certs, token_files, k, reconnect=30):
    return ["--ca", os.path.join(certs, "ca.pem"), "--token-file", token_files[k], "--reconnect-timeout", str(reconnect)]


def tls_server(certs, work):
    return ["--cert", os.path.join(certs, "server.pem"), "--key", os.path.join(certs, "server.key"),
            "--tokens", os.path.join(work, "tokens")]


def round_lines(text):
    """The progress lines of a server's stdout: [(round, rounds, line)] (PVI's rounds, SFVI's
    warm start and iterations, VFL's iterations)."""
    return [(int(m.group(1)), int(m.group(2)), m.group(0))
            for m in re.finditer(r"^(?:round|warm start|iteration) +(\d+)/(\d+) .*$", text, re.MULTILINE)]


def last_round(party):
    lines = round_lines(party.stdout())
    return lines[-1][0] if lines else 0


# ---------------------------------------------------------------------------------------------
# Results

def sim(bins, data, out, sets, options=()):
    cmd = [bins["sim"], "--data", data, "--output", out, "--quiet"] + list(options)
    for kv in sets:
        cmd += ["--set", kv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    require(p.returncode == 0, f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return posterior(out)


def same_posterior(got, want, what):
    """Means, sds and ELBOs equal to SAME relative; returns the largest relative difference."""
    require(sorted(got["variables"]) == sorted(want["variables"]),
            f"{what}: variables {sorted(got['variables'])} vs {sorted(want['variables'])}")
    require(all(len(got["variables"][n][s]) == len(want["variables"][n][s]) for n in want["variables"]
                for s in ("mean", "sd")), f"{what}: shapes differ")
    pairs = [(f"{n} {stat}[{i + 1}]", a, b) for n in want["variables"] for stat in ("mean", "sd")
             for i, (a, b) in enumerate(zip(got["variables"][n][stat], want["variables"][n][stat]))]
    got_elbo, want_elbo = got.get("elbo", []), want.get("elbo", [])  # a silo's posterior has none
    require(len(got_elbo) == len(want_elbo), f"{what}: {len(got_elbo)} ELBOs vs {len(want_elbo)}")
    pairs += [(f"elbo[{i + 1}]", a, b) for i, (a, b) in enumerate(zip(got_elbo, want_elbo))]
    worst = 0.0
    for label, a, b in pairs:
        require(math.isfinite(a) and math.isfinite(b), f"{what}: {label} is not finite ({a!r}, {b!r})")
        diff = abs(a - b) / max(abs(a), abs(b), 1e-300)
        require(diff <= SAME, f"{what}: {label} = {a!r} but {b!r} expected (relative difference {diff:.2e})")
        worst = max(worst, diff)
    return worst


def metrics_rounds(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return [int(row["round"]) for row in csv.DictReader(f)]


def last_metrics(out):
    with open(os.path.join(out, "metrics.csv")) as f:
        return list(csv.DictReader(f))[-1]


def finite_posterior(out):
    post = posterior(out)
    values = [v for var in post["variables"].values() for s in ("mean", "sd") for v in var[s]]
    require(values and all(math.isfinite(v) for v in values), f"{out}/posterior.json: not finite: {values}")
    require(all(v > 0 for var in post["variables"].values() for v in var["sd"]), f"{out}/posterior.json: an sd <= 0")
    return post


def setup(fvic, cache, work, certs=True, model=PVI):
    if shutil.which("openssl") is None:
        print("openssl is not installed: skipped")
        sys.exit(77)
    bins = programs(fvic, cache, model)
    data = model.deal(work)
    return bins, data, (certificates(work) if certs else None), tokens(work)


def complete(d, server, clients, timeout=60):
    """The server exits 0, then every client exits 0 having heard that the run is over."""
    d.wait(server, timeout)
    for c in clients:
        d.wait(c, 30)
        d.check("the run is over" in c.stdout(), f"{c.name} did not say the run is over")


# ---------------------------------------------------------------------------------------------
# Cases

def same_silo_posteriors(got_dir, want_dir, what):
    """Each silo-K/posterior.json that NAME-sim wrote (a silo's locals or split block) equals the
    one the client for silo K wrote; returns (how many, the largest relative difference)."""
    worst, n = 0.0, 0
    for k in range(1, SILOS + 1):
        want = os.path.join(want_dir, f"silo-{k}")
        if not os.path.exists(os.path.join(want, "posterior.json")):
            continue
        got = os.path.join(got_dir, f"silo-{k}")
        require(os.path.exists(os.path.join(got, "posterior.json")), f"the client for silo {k} wrote no posterior.json")
        worst = max(worst, same_posterior(posterior(got), posterior(want), f"{what}, silo {k}"))
        n += 1
    return n, worst


def equal_case(label, model, sets, held_out=None):
    """1 server and 4 clients over TLS with tokens, keys other than the model's defaults given to
    the server only (the clients run the server's keys, or their replies would differ): the
    server's posterior.json and each silo's equal NAME-sim's with the same keys; metrics.csv has
    NAME-sim's header and rows, and the server printed one progress line per row. `held_out(work)`
    gives options for both (--test, --ood): every held-out figure of every row equals NAME-sim's."""

    def case(fvic, cache, work):
        bins, data, certs, token_files = setup(fvic, cache, work, model=model)
        options = held_out(work) if held_out else []
        want_dir = os.path.join(work, "sim")
        want = sim(bins, data, want_dir, sets, options)
        out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
        d = Deployment(work, bins, data)
        try:
            server, port = d.server(out, sets, tls_server(certs, work) + options)
            clients = [d.client(port, k, silos, tls_client(certs, token_files, k)) for k in range(1, SILOS + 1)]
            complete(d, server, clients, timeout=120)
            d.check("refused" not in server.stderr(), "the server refused something")
            d.check("going on without" not in server.stderr(), "the server went on without a silo")
            lines = len(round_lines(server.stdout()))
            server_stdout = server.stdout()
        finally:
            d.close()
        worst = same_posterior(posterior(out), want, f"{model.name}-server vs NAME-sim")
        # The closing lines (k-hat, the reweighted moments, the tail check: two closing exchanges,
        # each its own round, so a client's reply cache cannot answer the second with the first).
        notes = [n["text"] for n in posterior(out).get("notes", [])]
        want_notes = [n["text"] for n in want.get("notes", [])]
        require(notes == want_notes, f"the server's closing lines differ from NAME-sim's:\n{notes}\n{want_notes}")
        n, worst_silo = same_silo_posteriors(silos, want_dir, f"{model.name}-client vs NAME-sim")
        require(model is PVI or not model.silo_posteriors or n > 0, f"NAME-sim wrote no silo posterior for {model.name}")
        rows, want_rows = metrics_rounds(out), metrics_rounds(want_dir)
        require(want_rows and rows == want_rows, f"metrics.csv rows {rows}, NAME-sim's {want_rows}")
        require(lines == len(rows), f"{lines} progress lines for {len(rows)} metrics rows")
        with open(os.path.join(out, "metrics.csv")) as f, open(os.path.join(want_dir, "metrics.csv")) as g:
            require(f.readline() == g.readline(), "metrics.csv headers of the server and NAME-sim differ")
        if held_out:
            with open(os.path.join(out, "metrics.csv")) as f, open(os.path.join(want_dir, "metrics.csv")) as g:
                got_rows, want_rows = list(csv.DictReader(f)), list(csv.DictReader(g))
            columns = [c for c in want_rows[0] if c.startswith("test_")]
            require(columns, "NAME-sim wrote no held-out figures")
            for r, (a, b) in enumerate(zip(got_rows, want_rows), start=1):
                for c in columns:
                    x, y = float(a[c]), float(b[c])
                    require(abs(x - y) <= SAME * max(1.0, abs(y)), f"metrics.csv row {r}: {c} {x!r}, NAME-sim's {y!r}")
            print(f"{label}: every row's {', '.join(columns)} as NAME-sim's (the last: "
                  f"{', '.join(f'{c} {float(want_rows[-1][c]):.4f}' for c in columns)})")
        print(f"{label}: {model.name} ({', '.join(sets)}): server and 4 clients equal NAME-sim: the server's "
              f"posterior to {worst:.1e}, the {n} silos' posteriors to {worst_silo:.1e}; metrics.csv rows "
              f"1..{len(rows)} as NAME-sim's; its {len(notes)} closing lines too "
              f"({'with' if any(n.startswith('tail check') for n in notes) else 'without'} a tail check)")
        return server_stdout

    return case


def pima_held_out(work):
    """pima_logreg's held-out rows, and as many rows of uniform noise over their covariates' ranges
    (seed 1) as out-of-distribution rows: --test and --ood."""
    test = os.path.join(EXAMPLES, "pima_logreg", "data", "test.json")
    with open(test) as f:
        rows = json.load(f)
    rng = random.Random(1)
    columns = list(zip(*rows["x"]))
    rows["x"] = [[rng.uniform(min(c), max(c)) for c in columns] for _ in rows["x"]]
    ood = os.path.join(work, "pima-ood.json")
    with open(ood, "w") as f:
        json.dump(rows, f)
    return ["--test", test, "--ood", ood]


def case_sfvi_rule(fvic, cache, work):
    """SFVI stopped by the rule, deployed (max_rounds, not rounds): the equal case's checks, and the
    stopping rule asked every silo over gRPC whether its locals had settled (Phase kSfviSettled,
    issue 26) before it stopped: the server's verdict names the silos' locals, as NAME-sim's."""
    # local_samples = 1: the ELBO, whose q(Z_L | Z_G) the silos judge (the bound's is not judged).
    stdout = equal_case("sfvi_rule", SFVI, ["max_rounds=8000", "refresh=100", "local_samples=1"])(fvic, cache, work)
    verdict = [line for line in stdout.splitlines() if line.startswith(("converged after", "NOT converged"))]
    require(verdict and "every silo's locals settled too" in verdict[-1],
            f"the verdict does not report the silos' locals: {verdict[-1] if verdict else 'no verdict'}")
    print(f"sfvi_rule: {verdict[-1]}")


def case_fsvi_rule(fvic, cache, work):
    """FedAvg FSVI stopped by the rule, deployed: the equal case's checks, and the server asked
    every silo over gRPC whether q's function at its context points had settled (Phase
    kPviSettled): the verdict names the silos' functions, as NAME-sim's. tol = 0.01: the objective
    of 4 silos' stochastic updates levels off by that within the few rounds a test can take."""
    stdout = equal_case("fsvi_rule", PVI, ["method=fedavg_fsvi", "max_rounds=12", "tol=0.01", "local_steps=50",
                                           "mc_samples=8", "context_points=2"])(fvic, cache, work)
    verdict = [line for line in stdout.splitlines() if line.startswith(("converged after", "NOT converged"))]
    require(verdict and "function at its context points" in verdict[-1],
            f"the verdict does not report the silos' functions: {verdict[-1] if verdict else 'no verdict'}")
    print(f"fsvi_rule: {verdict[-1]}")


def case_stan_quantities(fvic, cache, work):
    """regression_ppc with two silo_sum quantities deployed (SFVI, 4 clients): the equal case's
    checks (server and silos equal NAME-sim, y_rep in every silo's posterior.json), and the silos'
    generated quantity y_rep in none of the server's outputs, while the server's sigma_sq is there;
    the server's bytes each way are NAME-sim's; the silo_sum quantities are in the plan's closing
    messages and the server's outputs, right at every draw, and the closing exchange received
    exactly the silos' parts with their log joint (check_stan_programs.check_silo_sums)."""
    with open(os.path.join(EXAMPLES, "stan_programs", "regression_ppc", "regression_ppc.fvi")) as f:
        source = with_silo_sums(f.read(), "alpha + x * beta", "sigma")
    os.makedirs(cache, exist_ok=True)
    STAN.fvi = os.path.join(cache, "regression_ppc_sum.fvi")
    if not os.path.exists(STAN.fvi) or open(STAN.fvi).read() != source:
        with open(STAN.fvi, "w") as f:
            f.write(source)
    sets = ["rounds=300", "refresh=10"]
    server_stdout = equal_case("stan_quantities", STAN, sets)(fvic, cache, work)
    out, want_dir = os.path.join(work, "server"), os.path.join(work, "sim")
    variables = posterior(out)["variables"]
    require("sigma_sq" in variables and "y_rep" not in variables,
            f"the server's posterior.json holds {sorted(variables)}")
    with open(os.path.join(out, "draws.csv")) as f:
        header = next(line for line in f if not line.startswith("#"))
    require("y_rep" not in header, "the server's draws.csv names y_rep: " + header)
    for k in range(1, SILOS + 1):
        require("y_rep" in posterior(os.path.join(work, "silos", f"silo-{k}"))["variables"],
                f"the client for silo {k} wrote no y_rep")
    got, want = last_metrics(out), last_metrics(want_dir)
    require((got["bytes_sent"], got["bytes_received"]) == (want["bytes_sent"], want["bytes_received"]),
            f"the server's bytes sent/received {got['bytes_sent']}/{got['bytes_received']}, NAME-sim's "
            f"{want['bytes_sent']}/{want['bytes_received']}")
    print(f"stan_quantities: y_rep in the 4 clients' outputs only; the server's bytes {got['bytes_sent']}/"
          f"{got['bytes_received']} as NAME-sim's")
    rows, _ = silo_rows(os.path.join(work, "data"))
    at, parameters = regression_log_lik(rows, "alpha", "beta", "sigma")
    print("stan_quantities: the silo_sum quantities on the wire:")
    check_silo_sums(fvic, STAN.fvi, os.path.join(work, "data"), out, server_stdout, at, parameters, 2)


def case_mtls(fvic, cache, work):
    bins, data, certs, _ = setup(fvic, cache, work)
    sets = ["rounds=6"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
    ca = os.path.join(certs, "ca.pem")

    def cert_of(k):
        return ["--cert", os.path.join(certs, f"silo-{k}.pem"), "--key", os.path.join(certs, f"silo-{k}.key")]

    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, ["--cert", os.path.join(certs, "server.pem"),
                                            "--key", os.path.join(certs, "server.key"), "--client-ca", ca])
        # Before the real silos join: silo-2's certificate claiming silo 1, and no certificate.
        impostor = d.client(port, 1, os.path.join(work, "impostor"),
                            ["--ca", ca, "--reconnect-timeout", "10"] + cert_of(2), name="impostor")
        anonymous = d.client(port, 3, os.path.join(work, "anonymous"), ["--ca", ca, "--reconnect-timeout", "3"],
                             name="no-certificate")
        rc = d.wait(impostor, 30, expect=None)
        d.check(rc == 3 and "refused" in impostor.stderr(),
                f"the client with silo-2's certificate claiming silo 1 exited {rc}, expected 3 and 'refused'")
        d.check(re.search(r"^server: refused .*\(silo 1\): .*silo-1", server.stderr(), re.MULTILINE),
                "the server did not log the refusal of silo-2's certificate for silo 1")
        rc = d.wait(anonymous, 30, expect=None)
        d.check(rc not in (0, None), "a client without a certificate got through")
        d.check(server.running() and not round_lines(server.stdout()), "the server did not keep waiting for the silos")
        clients = [d.client(port, k, silos, ["--ca", ca, "--reconnect-timeout", "30"] + cert_of(k))
                   for k in range(1, SILOS + 1)]
        complete(d, server, clients)
        print(f"mtls: silo-2's certificate for silo 1: exit 3, '{impostor.stderr().strip().splitlines()[-1]}'")
        print(f"mtls: no certificate: exit {anonymous.proc.returncode}, "
              f"'{anonymous.stderr().strip().splitlines()[-1][:160]}'")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "mTLS server vs NAME-sim")
    print(f"mtls: the 4 silos with their certificates completed the run; NAME-sim's posterior (to {worst:.1e})")


def case_wrong_token(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    # Long enough rounds (about 0.15 s each, 3 s in all) that the bad clients come while the run
    # is going on.
    sets = ["rounds=20", "local_steps=1000"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
    bad = os.path.join(work, "bad.token")
    with open(bad, "w") as f:
        f.write(secrets.token_hex(16) + "\n")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, tls_server(certs, work))
        clients = [d.client(port, k, silos, tls_client(certs, token_files, k)) for k in range(1, SILOS + 1)]
        d.until("a first round line", lambda: last_round(server) >= 1, 30, [server])
        wrong = d.client(port, 2, os.path.join(work, "wrong"),
                         ["--ca", os.path.join(certs, "ca.pem"), "--token-file", bad, "--reconnect-timeout", "10"],
                         name="wrong-token")
        plain = d.client(port, 3, os.path.join(work, "plain"), ["--insecure", "--reconnect-timeout", "3"],
                         name="insecure")
        rc = d.wait(wrong, 30, expect=None)
        d.check(rc == 3 and "refused by the server: wrong token for silo 2" in wrong.stderr(),
                f"the client with a wrong token exited {rc}, expected 3 and 'wrong token for silo 2'")
        d.check(re.search(r"^server: refused .*\(silo 2\): wrong token for silo 2", server.stderr(), re.MULTILINE),
                "the server did not log the wrong token")
        d.check(server.running(), "the server was not running any more when the wrong token was refused")
        rc = d.wait(plain, 30, expect=None)
        d.check(rc == 1 and "no answer from the server" in plain.stderr(),
                f"the --insecure client against the TLS server exited {rc}, expected 1 and 'no answer from the server'")
        complete(d, server, clients)
        print(f"wrong_token: exit 3, '{wrong.stderr().strip().splitlines()[-1]}'")
        print(f"wrong_token: --insecure against TLS: exit 1, '{plain.stderr().strip().splitlines()[-1][:160]}'")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server vs NAME-sim")
    print(f"wrong_token: the 4 silos completed the run; NAME-sim's posterior (to {worst:.1e})")


# silo: (kind, round, what the server's reason says)
FAULTS = {1: ("nan", 2, "is not finite"), 2: ("size", 3, "values where"),
          3: ("nonpd", 2, "not positive definite"), 4: ("stale", 4, "stale")}


def case_faults(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    sets = ["rounds=6"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, tls_server(certs, work))
        clients = [d.client(port, k, os.path.join(work, "silos"),
                            tls_client(certs, token_files, k) + ["--test-fault", f"{kind}@{r}"])
                   for k, (kind, r, _) in FAULTS.items()]
        complete(d, server, clients)
        log = server.stderr()
        for c, (k, (kind, r, reason)) in zip(clients, FAULTS.items()):
            said = re.search(rf"test fault {kind} in round {r}: the server (refused it|ACCEPTED it) \((.*)\)$",
                             c.stdout(), re.MULTILINE)
            d.check(said, f"silo {k} did not report its test fault {kind}@{r}")
            d.check(said.group(1) == "refused it", f"the server accepted silo {k}'s {kind} reply in round {r}")
            d.check(reason in said.group(2), f"silo {k} ({kind}): the reason '{said.group(2)}' lacks '{reason}'")
            # A stale reply claims the round before.
            claimed = r - 1 if kind == "stale" else r
            line = re.search(rf"^server: refused a reply from silo {k} \(.*\) for round {claimed} \(pvi update\): (.*)$",
                             log, re.MULTILINE)
            d.check(line and reason in line.group(1), f"the server did not log the refusal of silo {k}'s {kind} reply")
            print(f"faults: silo {k} {kind}@{r}: {line.group(0)}")
        d.check(f"{len(FAULTS)} messages were refused" in log, "the server does not count 4 refused messages")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server with faults vs NAME-sim")
    print(f"faults: the posterior is NAME-sim's (to {worst:.1e}): the refused replies changed nothing")
    # silos.csv (the report's traffic section) counts each silo's refused reply in its round's row.
    with open(os.path.join(out, "silos.csv")) as f:
        rows = list(csv.DictReader(f))
    for k, (kind, r, _) in FAULTS.items():
        counts = [int(row["refused_replies"]) for row in rows if int(row["silo"]) == k]
        first = next((i + 1 for i, c in enumerate(counts) if c > 0), None)
        require(counts and counts[-1] == 1 and first == r,
                f"silos.csv: silo {k}'s refused replies by report {counts}, expected the one {kind} reply from report {r}")
    print(f"faults: silos.csv counts each silo's refused reply from its round on")


def case_huge_message(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    sets = ["rounds=4"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        # pima's messages are hundreds of bytes: a 1 MB limit refuses only the 2 MB fault.
        server, port = d.server(out, sets, tls_server(certs, work) + ["--max-message", "1"])
        clients = [d.client(port, k, os.path.join(work, "silos"), tls_client(certs, token_files, k) +
                            (["--test-fault", "huge@2", "--max-message", "1"] if k == 1 else []))
                   for k in range(1, SILOS + 1)]
        complete(d, server, clients)
        said = re.search(r"test fault huge in round 2: the server (refused it|ACCEPTED it) \((.*)\)$",
                         clients[0].stdout(), re.MULTILINE)
        d.check(said and said.group(1) == "refused it", "the 2 MB reply was not refused")
        d.check("larger than" in said.group(2), f"the refusal does not say why: '{said.group(2)}'")
        print(f"huge_message: silo 1's 2 MB reply to a --max-message 1 server: '{said.group(0)}'")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server after a huge message vs NAME-sim")
    print(f"huge_message: the server read none of it, went on, and the posterior is NAME-sim's (to {worst:.1e})")


def hostile_peer():
    """tests/net/hostile_peer.cpp's program, its path in $FVI_HOSTILE_PEER."""
    peer = os.environ.get("FVI_HOSTILE_PEER", "")
    require(os.path.exists(peer), f"FVI_HOSTILE_PEER is not the hostile_peer program: '{peer}'")
    return peer


def case_hostile_join(fvic, cache, work):
    """An insecure server (no TLS, no tokens: anyone may call) and a dishonest peer
    (tests/net/hostile_peer.cpp, its path in $FVI_HOSTILE_PEER): Join as silo 2^32 - 1, 2^31 and
    0, and with model names that forge a log line, clear the terminal, or run to 1000 KB (read,
    then refused) and 10 MB (refused unread). Every call is refused; the server's log holds no
    byte a peer wrote unescaped, no forged line and not the 1000 KB; then the honest silos join
    and the posterior is NAME-sim's (issue 27 items 1 and 4)."""
    peer = hostile_peer()
    bins, data, _, _ = setup(fvic, cache, work, certs=False)
    sets = ["rounds=4"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, ["--insecure"])
        p = subprocess.run([peer, f"127.0.0.1:{port}", "join"], capture_output=True, text=True, timeout=120)
        print(p.stdout.strip())
        d.check(p.returncode == 0, f"hostile_peer exited {p.returncode}: a call was not refused as expected\n"
                f"{p.stdout}{p.stderr}")
        d.check(server.running(), "the server stopped after the hostile calls")
        log = server.stderr()
        d.check("\x1b" not in log, "an escape byte a peer sent reached the server's log")
        d.check(not re.search(r"^server: silo joined: forged", log, re.MULTILINE), "a peer forged a log line")
        d.check(len(log) < 64 * 1024, f"the server logged {len(log)} bytes for six refused calls")
        d.check("evil\\x0aserver: silo joined: forged\\x1b[2J" in log, "the forged name is not in the log, escaped")
        clients = [d.client(port, k, os.path.join(work, "silos"), ["--insecure", "--reconnect-timeout", "30"])
                   for k in range(1, SILOS + 1)]
        complete(d, server, clients)
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server after hostile calls vs NAME-sim")
    print(f"hostile_join: 6 hostile calls refused, {len(log)} bytes of server log; then the run's posterior is "
          f"NAME-sim's (to {worst:.1e})")


def proc_status(pid):
    """VmRSS, VmHWM (kB) and Threads of a live process, from /proc/PID/status."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return {key: int(fields[key].split()[0]) for key in ("VmRSS", "VmHWM", "Threads")}


def fingerprint(server):
    m = re.search(r"model (\S+), kernels fingerprint ([0-9a-f]{16})", server.stdout())
    require(m, f"the server did not print its kernels' fingerprint:\n{server.stdout()}")
    return m.group(1), m.group(2)


def read_tokens(work):
    with open(os.path.join(work, "tokens")) as f:
        return dict(line.split() for line in f if line.strip())


# What an unauthenticated peer can make the server hold (issue 27 item 5): the first parts of
# at most 64 replies it has not checked yet (kUnprovenReplies: a message of at most 1 MB, held
# serialised and parsed, 2 MB), and gRPC's transport buffers, held to 128 MB by a resource quota
# (kTransportMemory; gRPC 1.51 buffers a whole oversized message before refusing it).
PRE_AUTH_BYTES = 64 * (2 << 20) + (128 << 20)


def case_hostile_load(fvic, cache, work):
    """Floods from peers the server has not authenticated, and from one that has (issue 27 items
    5 and 6), against an insecure server with tokens, before the silos join: 64 concurrent Submit
    calls with a wrong token, each sending 200 MB in parts, and 4 sending 200 MB as one message (the
    attack on protocol version 1), then 1,000 concurrent NextTask calls
    with silo 1's true credentials, held 8 s. The server's peak memory grows by less than
    PRE_AUTH_BYTES plus 64 MB for the allocator's own (without the quota, the four whole messages
    took 784 MB); its threads stay at its own count plus gRPC's pool, whatever the
    calls (the old server: one thread per waiting call, 1,010); it parks at most 4 NextTask calls
    of one silo and refuses the rest (RESOURCE_EXHAUSTED); its log of the refusals stays under
    16 KB (20 lines every 10 s, then a count). Then, with 100 Submit calls open that send nothing
    (each new call ends the oldest of those whose first part has not arrived, past 64), the 4
    silos join and the posterior is NAME-sim's."""
    peer = hostile_peer()
    bins, data, _, token_files = setup(fvic, cache, work, certs=False)
    sets = ["rounds=4"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, ["--insecure", "--tokens", os.path.join(work, "tokens")])
        model, fp = fingerprint(server)
        time.sleep(0.5)
        before = proc_status(server.proc.pid)
        for flood in (["64", "200"], ["4", "200", "whole"]):
            p = subprocess.run([peer, f"127.0.0.1:{port}", "flood-submit"] + flood, capture_output=True, text=True,
                               timeout=300)
            print(p.stdout.strip())
            d.check(p.returncode == 0, f"a Submit with a wrong token was accepted:\n{p.stdout}{p.stderr}")
        d.check(server.running(), "the server stopped under the Submit flood")
        after = proc_status(server.proc.pid)
        grown = (after["VmHWM"] - before["VmRSS"]) * 1024
        bound = PRE_AUTH_BYTES + (64 << 20)
        d.check(grown < bound, f"68 unauthenticated 200 MB Submit calls took the server's peak memory up by "
                f"{grown / 2**20:.0f} MB (bound {bound / 2**20:.0f} MB)")
        threads = [before["Threads"]]
        flood = subprocess.Popen([peer, f"127.0.0.1:{port}", "flood-poll", "1000", "1", read_tokens(work)["1"], model,
                                  fp, "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while flood.poll() is None:
            threads.append(proc_status(server.proc.pid)["Threads"])
            time.sleep(0.1)
        text = flood.stdout.read() + flood.stderr.read()
        print(text.strip())
        m = re.search(r"(\d+) answered;.* status 8 x(\d+)", text)
        d.check(m is not None, f"hostile_peer flood-poll did not report as expected:\n{text}")
        parked = int(m.group(1))
        d.check(parked <= 4 and int(m.group(2)) >= 996,
                f"the server answered {parked} of 1,000 NextTask calls of one silo (at most 4 may wait)")
        d.check(max(threads) <= before["Threads"] + 16,
                f"the server went from {before['Threads']} to {max(threads)} threads under 1,000 NextTask calls")
        # 100 Submit calls that send nothing, held through the run: the silos' replies still get in.
        idle = d.start("idle-submit", [peer, f"127.0.0.1:{port}", "idle-submit", "100", "60"])
        time.sleep(1)
        clients = [d.client(port, k, os.path.join(work, "silos"), ["--insecure", "--token-file", token_files[k],
                                                                   "--reconnect-timeout", "30"])
                   for k in range(1, SILOS + 1)]
        complete(d, server, clients)
        d.wait(idle, 90)
        print(idle.stdout().strip())
        ended = re.search(r"status 8 x(\d+)", idle.stdout())
        d.check(ended and int(ended.group(1)) >= 100 - 64,
                f"the server did not end the oldest of the idle Submit calls past 64:\n{idle.stdout()}")
        log_bytes = len(server.stderr())
        d.check(log_bytes < 16 * 1024 and "more refusals were not logged" in server.stderr(),
                f"the server logged {log_bytes} bytes for the refused calls (at most 20 lines every 10 s)")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server after the floods vs NAME-sim")
    print(f"hostile_load: peak memory +{grown / 2**20:.0f} MB under 68 x 200 MB unauthenticated Submit calls "
          f"(bound {bound / 2**20:.0f} MB); threads {before['Threads']} -> at most {max(threads)} under 1,000 "
          f"NextTask calls; {log_bytes} bytes of log in all; then the run's posterior is NAME-sim's "
          f"(to {worst:.1e})")


def case_absurd_silo(fvic, cache, work):
    """An authenticated but hostile silo (issue 27 item 7): silo 1 is hostile_peer answering every
    update with a change of 1e300 (-1e300 for the precision's part: a proper Gaussian, absurdly
    narrow), silos 2-4 are honest. Each of its replies is refused before it is applied ("outside
    [1e-100, 1e100]"; with pima's default full-rank family the 1e300s also overflow the precision
    matrix's factorisation: "improper"), at most 5 times an exchange (then the exchange goes on without it), and the
    run ends (exit 0) with a finite posterior of ordinary size. Then all four silos hostile: no
    round has a valid contribution, and the server stops with exit 4 instead of ending with the
    prior as the posterior."""
    peer = hostile_peer()
    bins, data, _, token_files = setup(fvic, cache, work, certs=False)
    sets = ["rounds=4"]
    tokens_of = read_tokens(work)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, ["--insecure", "--tokens", os.path.join(work, "tokens"), "--deadline", "5"])
        model, fp = fingerprint(server)
        hostile = d.start("absurd-1", [peer, f"127.0.0.1:{port}", "absurd", "1", tokens_of["1"], model, fp])
        clients = [d.client(port, k, os.path.join(work, "silos"), ["--insecure", "--token-file", token_files[k],
                                                                   "--reconnect-timeout", "30"])
                   for k in range(2, SILOS + 1)]
        complete(d, server, clients, timeout=120)
        d.wait(hostile, 30)
        log = server.stderr()
        refusals = re.findall(r"refused a reply from silo 1 \(.*\) for round (\d+) \(pvi update\): .*(?:1e100|improper)", log)
        d.check(refusals, f"the server did not refuse silo 1's 1e300s as out of range:\n{log[-3000:]}")
        per_round = {r: refusals.count(r) for r in set(refusals)}
        d.check(max(per_round.values()) <= 5, f"silo 1's replies were refused {per_round} times a round (at most 5)")
        d.check("going on without silo(s) 1" in log, "the server did not say it went on without silo 1")
        post = finite_posterior(out)
        biggest = max(abs(v) for var in post["variables"].values() for v in var["mean"])
        d.check(biggest < 100, f"a posterior mean of {biggest:g} after silo 1's 1e300s")
        print(f"absurd_silo: silo 1's 1e300s refused {len(refusals)} times in {len(per_round)} rounds "
              f"(at most {max(per_round.values())} a round); posterior finite, largest |mean| {biggest:.3g}")
    finally:
        d.close()
    out_all = os.path.join(work, "server-all")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out_all, sets, ["--insecure", "--tokens", os.path.join(work, "tokens"),
                                                "--deadline", "5"], name="server-all")
        model, fp = fingerprint(server)
        for k in range(1, SILOS + 1):
            d.start(f"absurd-all-{k}", [peer, f"127.0.0.1:{port}", "absurd", str(k), tokens_of[str(k)], model, fp])
        rc = d.wait(server, 120, expect=None)
        d.check(rc == 4 and "no silo gave a valid reply" in server.stderr(),
                f"with every silo hostile the server exited {rc}:\n{server.stderr()[-2000:]}")
    finally:
        d.close()
    print("absurd_silo: every silo hostile: the server stopped, exit 4, 'no silo gave a valid reply'")


def case_refused_backoff(fvic, cache, work):
    """A legitimate client whose own reply is refused (issue 27 item 7): --test-fault absurd@2
    makes silo 1's real reply in round 2 (and its cached copy) 1e300s. Asked again, the client
    waits longer each time and after 3 refusals tells the server it cannot answer; the server
    logs 3 refusals, not thousands, goes on without silo 1 for that round, and the run ends."""
    bins, data, certs, token_files = setup(fvic, cache, work)
    sets = ["rounds=4"]
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, tls_server(certs, work))
        clients = [d.client(port, k, os.path.join(work, "silos"), tls_client(certs, token_files, k) +
                            (["--test-fault", "absurd@2"] if k == 1 else [])) for k in range(1, SILOS + 1)]
        complete(d, server, clients, timeout=120)
        log = server.stderr()
        refusals = len(re.findall(r"refused a reply from silo 1 \(.*\) for round 2 ", log))
        d.check(refusals == 3, f"the server refused silo 1's round-2 reply {refusals} times (3 expected)")
        d.check(re.search(r"silo 1 could not do round 2 .*refused this silo's reply 3 times", log),
                f"silo 1 did not tell the server it could not answer:\n{log[-2000:]}")
        finite_posterior(out)
    finally:
        d.close()
    print(f"refused_backoff: silo 1's refused reply sent {refusals} times, then reported; the run ended")


def case_operator_mistakes(fvic, cache, work):
    """Token files as a careless operator leaves them (issue 27 item 12): a tokens file giving two
    silos one token is refused by the server before it listens (either silo could act as the
    other); a client's token file of spaces is refused before it dials; a token file others may
    read is used with a warning naming it; a server whose silos never join says there is nothing
    to resume, rather than naming a checkpoint that does not exist."""
    bins, data, certs, token_files = setup(fvic, cache, work)
    out = os.path.join(work, "server")
    shared = os.path.join(work, "shared-tokens")
    with open(shared, "w") as f:
        f.write("1 aaaaaaaaaaaaaaaa\n2 bbbbbbbbbbbbbbbb\n3 aaaaaaaaaaaaaaaa\n4 cccccccccccccccc\n")
    os.chmod(shared, 0o600)
    p = subprocess.run([bins["server"], "--listen", "127.0.0.1:0", "--silos", str(SILOS), "--data", data,
                        "--output", out, "--cert", os.path.join(certs, "server.pem"),
                        "--key", os.path.join(certs, "server.key"), "--tokens", shared],
                       capture_output=True, text=True, timeout=60)
    require(p.returncode != 0 and "shared-tokens:3: silo 3 has the token of silo 1" in p.stderr,
            f"a shared token was not refused ({p.returncode}): {p.stderr}")
    blank = os.path.join(work, "blank.token")
    with open(blank, "w") as f:
        f.write("   \n")
    os.chmod(blank, 0o600)
    p = subprocess.run([bins["client"], "--server", "127.0.0.1:1", "--silo", "1", "--data", data, "--output",
                        os.path.join(work, "c"), "--ca", os.path.join(certs, "ca.pem"), "--token-file", blank,
                        "--reconnect-timeout", "1"], capture_output=True, text=True, timeout=60)
    require(p.returncode != 0 and "blank.token: the token is empty (or only spaces)" in p.stderr,
            f"a blank token was not refused ({p.returncode}): {p.stderr}")
    os.chmod(token_files[1], 0o644)
    p = subprocess.run([bins["client"], "--server", "127.0.0.1:1", "--silo", "1", "--data", data, "--output",
                        os.path.join(work, "c"), "--ca", os.path.join(certs, "ca.pem"), "--token-file",
                        token_files[1], "--reconnect-timeout", "1"], capture_output=True, text=True, timeout=60)
    require(f"warning: {token_files[1]} is readable by other users of this machine" in p.stderr,
            f"no warning for a token file others can read: {p.stderr}")
    p = subprocess.run([bins["server"], "--listen", "127.0.0.1:0", "--silos", str(SILOS), "--data", data,
                        "--output", out, "--insecure", "--join-timeout", "1"], capture_output=True, text=True, timeout=60)
    require(p.returncode == 4 and "nothing to resume" in p.stderr and "server.checkpoint" not in p.stderr,
            f"a join timeout before any round: exit {p.returncode}, {p.stderr}")
    print("operator_mistakes: a shared token refused by the server, a blank one by the client, a readable one "
          "warned of; a join timeout says there is nothing to resume")


def client_kill_case(label, model, sets, steps, kill_at=3):
    """--quorum 3 --deadline 2: a client killed (SIGKILL) once `kill_at` of the run's `steps`
    progress lines are out; the server logs "going on without silo(s) K" and goes on by its
    decomposition's rule (docs/deployment.md); the client restarted with --resume rejoins and
    the run ends with every silo, exit 0, a finite posterior and one metrics row per step."""

    def case(fvic, cache, work):
        bins, data, certs, token_files = setup(fvic, cache, work, model=model)
        out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
        d = Deployment(work, bins, data)
        victim = 2
        steps_of = lambda party: len(round_lines(party.stdout()))  # noqa: E731
        try:
            server, port = d.server(out, sets, tls_server(certs, work) + ["--quorum", "3", "--deadline", "2"])
            clients = {k: d.client(port, k, silos, tls_client(certs, token_files, k)) for k in range(1, SILOS + 1)}
            d.until(f"{kill_at} steps", lambda: steps_of(server) >= kill_at, 40, [server])
            clients[victim].kill()
            killed_after = steps_of(server)
            d.check(killed_after < steps - 5, f"the run was nearly over ({killed_after} steps) when the client was killed")
            going_on = re.compile(rf"^server: round (\d+) \(([^)]*)\): going on without silo\(s\) {victim}$", re.MULTILINE)
            d.until(f"'going on without silo(s) {victim}'", lambda: going_on.search(server.stderr()), 20, [server])
            first_without = going_on.search(server.stderr()).group(0)
            # It goes on: a step completes without the silo.
            at = steps_of(server)
            d.until("a step without the killed silo", lambda: steps_of(server) > at, 30, [server])
            said = "silo terms missing" if model is PVI else "silo replies missing"
            d.check(any(said in line for _, _, line in round_lines(server.stdout())[killed_after:]),
                    f"no progress line since the silo went missing says '{said}'")
            back = d.client(port, victim, silos, tls_client(certs, token_files, victim) + ["--resume"],
                            name=f"client-{victim}-resumed")
            d.until("'silo rejoined'", lambda: f"server: silo rejoined: silo {victim}:" in server.stderr(), 20,
                    [server, back])
            rejoined_at, log_at = steps_of(server), len(server.stderr())
            complete(d, server, [c for k, c in clients.items() if k != victim] + [back], timeout=120)
            d.check("resumed from" in back.stdout(), "the restarted client did not say it resumed from its checkpoint")
            # Once back, the silo is in every exchange (but one or two in flight when it rejoined).
            later = going_on.findall(server.stderr()[log_at:])
            d.check(len(later) <= 2, f"after rejoining, silo {victim} was still missing from {len(later)} exchanges")
            d.check(steps_of(server) == steps, f"the server printed {steps_of(server)} steps, not {steps}")
            last = round_lines(server.stdout())[-1]
            d.check("missing" not in last[2], f"the last step is not complete: {last[2]}")
            missed = len(going_on.findall(server.stderr()))
            print(f"{label}: {model.name}: silo {victim} killed after {killed_after} of {steps} steps; "
                  f"'{first_without}'; {missed} exchanges without it; rejoined after step {rejoined_at}")
        finally:
            d.close()
        post = finite_posterior(out)
        rows = metrics_rounds(out)
        require(rows == list(range(1, steps + 1)), f"metrics.csv rows {rows}, expected 1..{steps}")
        n = 0
        for k in range(1, SILOS + 1):
            if os.path.exists(os.path.join(silos, f"silo-{k}", "posterior.json")):
                finite_posterior(os.path.join(silos, f"silo-{k}"))
                n += 1
        means = {name: [round(v, 3) for v in var["mean"]] for name, var in post["variables"].items()}
        print(f"{label}: the run completed; {n} finite silo posteriors; posterior means {means}")

    return case


def checkpoint_round(data):
    """The round a checkpoint was written after (runtime/src/program/checkpoint.cpp: "FVICKPT2", the
    kind's length and text, then the round, each a native-endian u64)."""
    require(data[:8] == b"FVICKPT2", "not an fvi checkpoint")
    kind = int.from_bytes(data[8:16], "little")
    return int.from_bytes(data[16 + kind:24 + kind], "little")


def server_kill_case(label, model, sets, steps, kill_at=3, resumed_says=None, prepare=None, clients_too=False,
                     stale_server=False):
    """The server killed (SIGKILL) a few steps into the run and restarted with --resume on the
    same port and output folder while the clients keep running: the posteriors (the server's and
    each silo's), the ELBOs and the byte counters equal an uninterrupted run's. `sets` make one
    progress line per step (a PVI round, an SFVI warm-start round or iteration, a VFL iteration),
    `steps` of them; the kill comes once `kill_at` have been printed. `resumed_says`: a line the
    resumed server prints; `prepare(cache)` first writes the model's file. `clients_too`: every
    client is killed with the server (a power cut) and restarted with --resume from its own
    checkpoint; the run ends the same. `stale_server` (with clients_too): the server's checkpoint
    is put back to the one of the step before the kill, as a kill between the clients' replies and
    the server's write leaves it; the resumed server asks that step again, the clients (whose
    checkpoints hold their replies to it) answer with the same replies, and the run ends the same."""

    def case(fvic, cache, work):
        if prepare:
            prepare(cache)
        bins, data, certs, token_files = setup(fvic, cache, work, model=model)
        d = Deployment(work, bins, data)
        try:
            ref, ref_silos = os.path.join(work, "reference"), os.path.join(work, "reference-silos")
            server, port = d.server(ref, sets, tls_server(certs, work), name="reference-server")
            clients = [d.client(port, k, ref_silos, tls_client(certs, token_files, k), name=f"reference-client-{k}")
                       for k in range(1, SILOS + 1)]
            complete(d, server, clients, timeout=120)
            d.check(len(round_lines(server.stdout())) == steps, f"the uninterrupted run did not print {steps} steps")

            out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
            server, port = d.server(out, sets, tls_server(certs, work))
            clients = [d.client(port, k, silos, tls_client(certs, token_files, k, reconnect=60))
                       for k in range(1, SILOS + 1)]
            checkpoint = os.path.join(out, "server.checkpoint")
            kept = {}  # round: the server's checkpoint after it
            if stale_server:
                # Each version of the server's checkpoint as it is replaced (a step takes a third
                # of a second or more here, the polling 20 ms), up to the one after step kill_at; the
                # kill then comes within the next step.
                end = time.monotonic() + 40
                while kill_at not in kept:
                    if os.path.exists(checkpoint):
                        with open(checkpoint, "rb") as f:
                            data = f.read()
                        kept.setdefault(checkpoint_round(data), data)
                    d.check(server.running() and time.monotonic() < end, f"no {kill_at} steps within 40 s")
                    time.sleep(0.02)
            d.until(f"{kill_at} steps", lambda: len(round_lines(server.stdout())) >= kill_at, 40, [server])
            server.kill()
            killed_after = len(round_lines(server.stdout()))
            d.check(killed_after < steps, "the run was over when the server was killed")
            time.sleep(0.5)
            d.check(all(c.running() for c in clients), "a client stopped when the server was killed")
            if clients_too:
                for c in clients:
                    c.kill()
                clients = [d.client(port, k, silos, tls_client(certs, token_files, k, reconnect=60) + ["--resume"],
                                    name=f"client-{k}-resumed") for k in range(1, SILOS + 1)]
            if stale_server:
                # The clients' checkpoints hold their replies to step R (some may be at R - 1, killed
                # before replying); the server's is put back to the one after step R - 1.
                rounds = []
                for k in range(1, SILOS + 1):
                    with open(os.path.join(silos, f"silo-{k}", "checkpoint"), "rb") as f:
                        rounds.append(checkpoint_round(f.read()))
                ahead = max(rounds)
                print(f"{label}: the clients' checkpoints after rounds {rounds}; the server's kept: {sorted(kept)}")
                d.check(ahead - 1 in kept, f"the clients replied to step {ahead}; the server's checkpoint after step "
                                           f"{ahead - 1} was not kept (kept: {sorted(kept)})")
                with open(checkpoint, "wb") as f:
                    f.write(kept[ahead - 1])
            again, port2 = d.server(out, sets, tls_server(certs, work) + ["--resume"], port=port,
                                    name="server-resumed")
            d.check(port2 == port, f"the resumed server listens on {port2}, not {port}")
            # Every client is still polling: the resumed server has its silos at once and must not
            # wait out --join-timeout (60 s here) before its first step.
            d.until("a step from the resumed server although its 4 clients are polling it",
                    lambda: round_lines(again.stdout()), 20, [again])
            complete(d, again, clients, timeout=120)
            if clients_too:
                d.check(all("resumed from" in c.stdout() for c in clients),
                        "a restarted client did not say it resumed from its checkpoint")
            if resumed_says:
                d.check(resumed_says in again.stdout(), f"the resumed server did not say '{resumed_says}'")
            resumed = re.search(r"^resumed from .* after (?:round|step|iteration) (\d+)$", again.stdout(), re.MULTILINE)
            d.check(resumed and int(resumed.group(1)) >= kill_at - (2 if stale_server else 1),
                    f"the restarted server did not resume from a checkpoint after step {kill_at - 1} or later")
            after = int(resumed.group(1))
            if stale_server:
                d.check(after == ahead - 1, f"the server resumed after step {after}, not {ahead - 1}, the one before "
                                            f"its clients' last replies")
            d.check(len(round_lines(again.stdout())) == steps - after,
                    f"the resumed server printed {len(round_lines(again.stdout()))} steps, not the {steps - after} "
                    f"after its checkpoint")
            print(f"{label}: server killed after {killed_after} of {steps} steps; '{resumed.group(0)}'")
        finally:
            d.close()
        worst = same_posterior(posterior(out), posterior(ref), "killed and resumed vs uninterrupted")
        n, worst_silo = same_silo_posteriors(silos, ref_silos, "killed and resumed vs uninterrupted")
        # The byte counters were checkpointed too: the resumed run ends having counted what the
        # uninterrupted one did.
        got, want = (last_metrics(o) for o in (out, ref))
        for column in ("bytes_sent", "bytes_received"):
            require(got[column] == want[column], f"metrics.csv {column} ends at {got[column]} after the resume, "
                                                 f"{want[column]} in the uninterrupted run")
        print(f"{label}: {model.name}: the posterior equals the uninterrupted run's (to {worst:.1e}; {n} silo "
              f"posteriors to {worst_silo:.1e}); bytes sent {got['bytes_sent']}, received {got['bytes_received']} "
              f"as uninterrupted")

    return case


def case_vfl_exact_equal(fvic, cache, work):
    """vfl_exact (the written model: each silo sends its partial predictor) deployed as vfl_equal
    is, and the bytes each silo exchanged per iteration are the ones `fvic plan` lists (the stopping
    rule's schedule among them, 3 doubles in every propose request), plus the joint family's
    layout, once: 1 double up, 3 down, as the plan says, and the rule's questions whether the
    split block has settled, 4 doubles each, at most one a window of 100 iterations."""
    sets = ["method=vfl_exact", "rounds=300", "refresh=10"]
    equal_case("vfl_exact_equal", VFL, sets)(fvic, cache, work)
    p = subprocess.run([fvic, "plan", VFL.fvi, "--data", os.path.join(work, "vfl", "augmented"), "--json"] +
                       [a for s in sets for a in ("--set", s)], capture_output=True, text=True, timeout=120)
    require(p.returncode == 0, f"fvic plan failed:\n{p.stderr}")
    plan = json.loads(p.stdout)
    require(plan["method"] == "vfl_exact", f"fvic plan chose {plan['method']}")
    per_iteration = sum(m["bytes_per_silo"][0] for m in plan["messages"])
    with open(os.path.join(work, "server", "metrics.csv")) as f:
        last = list(csv.DictReader(f))[-1]
    t = int(last["round"]) * 10  # one row every refresh = 10 iterations
    measured = round(float(last["silo1_bytes_per_iteration"]) * t)
    extra = measured - per_iteration * t
    layout = 8 * (1 + 3)
    require(any("once, before the first iteration" in r for r in plan["reasons"]), "the plan does not list the layout")
    require(layout <= extra <= layout + 32 * (t // 100 + 2),
            f"silo 1 exchanged {measured} B in {t} iterations; the plan lists {per_iteration} B an iteration")
    print(f"vfl_exact_equal: silo 1 exchanged {measured} B in {t} iterations: the plan's {per_iteration} B an "
          f"iteration, plus {extra} B of the layout and the stopping rule's questions")


# The vertical Gaussian regression of check_defaults.py's vfl_outcome_scale (its outcome 100 times
# larger), written beside the cache's programs by case_vfl_scale_equal; its columns dealt below.
SCALED = Model("vfl_scaled", None)


def four_blocks(work, scale=1.0):
    """check_defaults.vfl_generate's 300 Gaussian rows, y and sigma `scale` times larger, columns
    1-2, 3-4, 5 and 6 in silos 1-4, y and sigma on the server."""
    x, y = vfl_generate("gaussian")
    out = os.path.join(work, "data")
    os.makedirs(out)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({"N": len(x)}, f)
    with open(os.path.join(out, "server.json"), "w") as f:
        json.dump({"y": [round(scale * v, 4) for v in y], "sigma": scale}, f)
    for k, (first, last) in enumerate(((0, 2), (2, 4), (4, 5), (5, 6))):
        with open(os.path.join(out, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"P": last - first, "x": [row[first:last] for row in x]}, f)
    return out


SCALED.deal = lambda work: four_blocks(work, 100.0)

# The same regression with one prior scale for every silo's coefficients, a global
# (case_vfl_shared_scale_equal): each client's split prior reads the server's draws of lambda.
SHARED = Model("vfl_shared", four_blocks)


def write_model(model, cache, name, source):
    """model.fvi = CACHE/NAME.fvi holding `source`, rewritten only when it differs (the cache's
    programs are built from it)."""
    os.makedirs(cache, exist_ok=True)
    model.fvi = os.path.join(cache, name + ".fvi")
    if not os.path.exists(model.fvi) or open(model.fvi).read() != source:
        with open(model.fvi, "w") as f:
            f.write(source)


def case_vfl_scale_equal(fvic, cache, work):
    write_model(SCALED, cache, "vfl_scaled", vfl_model("gaussian").replace("b ~ normal(0, 2);", "b ~ normal(0, 1000);")
                .replace("beta ~ normal(0, 1);", "beta ~ normal(0, 100);"))
    server_stdout = equal_case("vfl_scale_equal", SCALED, ["rounds=300", "refresh=10"])(fvic, cache, work)
    require("linear predictor's scale 100" in server_stdout,
            "the server did not send the linear predictor's scale:\n" + server_stdout)
    print("vfl_scale_equal: the server sent the linear predictor's scale, 100, and its fit is NAME-sim's")


def case_vfl_shared_scale_equal(fvic, cache, work):
    write_model(SHARED, cache, "vfl_shared", vfl_model("gaussian").replace(
        "  split vector[P] beta;", "  global real<lower=0> lambda;\n  split vector[P] beta;").replace(
        "beta ~ normal(0, 1);", "lambda ~ normal(0, 1);\n  beta ~ normal(0, lambda);"))
    server_stdout = equal_case("vfl_shared_scale_equal", SHARED, ["rounds=300", "refresh=10"])(fvic, cache, work)
    require("tail check (" in server_stdout, "the deployed run made no tail check:\n" + server_stdout)
    print("vfl_shared_scale_equal: the clients' priors read the server's draws of lambda; the fit, k-hat and the tail "
          "check are NAME-sim's")


HIER_SCALED = Model("hier_scaled", None)


def four_scaled_groups(work):
    """4 silos of 10-25 rows: y = 100 (a_k + 0.7 x + N(0, 1.2^2)), a_k ~ N(1, 0.5^2), x ~ N(2, 1)."""
    rng = random.Random(17)
    out = os.path.join(work, "data")
    os.makedirs(out)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({}, f)
    for k in range(1, SILOS + 1):
        a, n = rng.gauss(1, 0.5), 10 + 5 * (k - 1)
        x = [rng.gauss(2, 1) for _ in range(n)]
        y = [round(100 * (a + 0.7 * v + rng.gauss(0, 1.2)), 4) for v in x]
        with open(os.path.join(out, f"silo-{k}.json"), "w") as f:
            json.dump({"N": n, "x": x, "y": y}, f)
    return out


HIER_SCALED.deal = four_scaled_groups


def case_sfvi_locations_equal(fvic, cache, work):
    """check_defaults.case_hier_outcome_scale's model over 4 silos: the server starts mu and beta at
    the locations' mode (each silo answering with alpha integrated out, Phase::kSfviMode) and sends
    the point to every silo (Phase::kSfviModeLocals), whose alpha starts at its conditional mode;
    the deployed posteriors, the server's and each silo's, equal NAME-sim's."""
    write_model(HIER_SCALED, cache, "hier_scaled", hier_scaled_model())
    server_stdout = equal_case("sfvi_locations_equal", HIER_SCALED, ["rounds=300", "refresh=10"])(fvic, cache, work)
    require("started the unbounded globals' means at the mode" in server_stdout and
            "each silo's locals start at their conditional mode there" in server_stdout and
            "but silo" not in server_stdout,
            "the server did not start at the locations' mode:\n" + server_stdout)
    print("sfvi_locations_equal: the server started at the locations' mode, every silo's locals at theirs")


CHAIN = Model("centring_chain", None)


def four_hospitals_in_wards(work):
    """4 silos (hospitals) of 12-24 rows, each row in one of 2 wards: y = a_h + w + 0.7 x + N(0,
    1.2^2), a_h ~ N(1, 0.5^2), a ward's w ~ N(0, 0.5^2), x ~ N(20, 1)."""
    rng = random.Random(23)
    out = os.path.join(work, "data")
    os.makedirs(out)
    with open(os.path.join(out, "data.json"), "w") as f:
        json.dump({}, f)
    for k in range(1, SILOS + 1):
        a, w, n = rng.gauss(1, 0.5), [rng.gauss(0, 0.5) for _ in range(2)], 12 + 4 * (k - 1)
        ward = [1 + r % 2 for r in range(n)]
        x = [round(rng.gauss(20, 1), 4) for _ in range(n)]
        y = [round(a + w[g - 1] + 0.7 * v + rng.gauss(0, 1.2), 4) for g, v in zip(ward, x)]
        with open(os.path.join(out, f"silo-{k}.json"), "w") as f:
            json.dump({"N": n, "W": 2, "ward": ward, "x": x, "y": y}, f)
    return out


CHAIN.deal = four_hospitals_in_wards


def case_sfvi_chain_equal(fvic, cache, work):
    """check_defaults.CHAIN_MODEL (wards' a_w about each hospital's a_h about mu, x 20 sds from 0):
    the server centres mu with each silo's a_h and a_w, and every deployed client maps its a_h and
    a_w back to the written ones as NAME-sim's silos do: the posteriors, the server's and each
    silo's, equal NAME-sim's."""
    write_model(CHAIN, cache, "centring_chain", CHAIN_MODEL)
    server_stdout = equal_case("sfvi_chain_equal", CHAIN, ["rounds=300", "refresh=10"])(fvic, cache, work)
    require("with each silo's a_h and a_w" in server_stdout, "the server did not centre the chain:\n" + server_stdout)
    print("sfvi_chain_equal: the server centred mu with each silo's a_h and a_w; the clients' fits are NAME-sim's")


def case_generic_programs(fvic, cache, work):
    """issue 28's generic programs, fvi-server and fvi-client (beside FVIC), given the model file:
    (1) 1 server and 4 clients, each client with --accept-plan of the plan `fvic plan --json` saved
    for the model: the posterior equals NAME-sim's (the compiled program from `fvic build`), and the
    server's first lines give the model's SHA-256 (hashlib's); (2) a client given a model in which
    hier_logreg's local alpha became a global refuses to join before it dials anyone (exit 3),
    naming the message its plan would add; (3) a client whose audited model differs from the
    server's in one prior's constant (same kernels, same plan) joins, is sent the server's text,
    refuses (exit 3, "another model", both SHA-256s) and keeps the server's text for a diff; (4) a
    client without --accept-plan whose stdin is a terminal (a pseudo-terminal) asks, refuses on
    Enter and on "n" (exit 3) and goes on to dial the server on "y"."""
    bins, data, certs, token_files = setup(fvic, cache, work, model=PVI)
    binary_dir = os.path.dirname(os.path.abspath(fvic))
    generic = {role: os.path.join(binary_dir, f"fvi-{role}") for role in ("server", "client")}
    for path in generic.values():
        require(os.path.exists(path), f"{path} is not built")
    sets = ["rounds=4", "local_steps=200", "mc_samples=8"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)

    def plan_of(model, name):
        p = subprocess.run([fvic, "plan", "--json", model], capture_output=True, text=True, timeout=60)
        require(p.returncode == 0, f"fvic plan --json {model} failed:\n{p.stderr}")
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(p.stdout)
        return path

    agreed = plan_of(PVI.fvi, "agreed-plan.json")
    with open(PVI.fvi) as f:
        source = f.read()
    sha = hashlib.sha256(source.encode()).hexdigest()
    out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
    d = Deployment(work, {"server": [generic["server"], PVI.fvi],
                          "client": [generic["client"], PVI.fvi, "--accept-plan", agreed]}, data)
    try:
        server, port = d.server(out, sets, tls_server(certs, work))
        d.check(f"SHA-256 {sha}" in server.stdout(), f"fvi-server did not print the model's SHA-256 {sha}")
        clients = [d.client(port, k, silos, tls_client(certs, token_files, k)) for k in range(1, SILOS + 1)]
        complete(d, server, clients, timeout=120)
        d.check("the plan agrees with" in clients[0].stdout(), "fvi-client did not say its audit passed")
        d.check("never leaves this silo" in clients[0].stdout(), "fvi-client did not say what never leaves the silo")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "fvi-server and 4 fvi-clients vs NAME-sim")

    # (2) A local variable made global: the plan would send it.
    hier = os.path.join(EXAMPLES, "hier_logreg", "hier_logreg.fvi")
    with open(hier) as f:
        hier_source = f.read()
    require("local real alpha;" in hier_source, "examples/hier_logreg no longer declares `local real alpha;`")
    leaky = os.path.join(work, "leaky", "hier_logreg.fvi")
    os.makedirs(os.path.dirname(leaky))
    with open(leaky, "w") as f:
        f.write(hier_source.replace("local real alpha;", "global real alpha;"))
    hier_agreed = plan_of(hier, "hier-agreed-plan.json")
    p = subprocess.run([generic["client"], leaky, "--accept-plan", hier_agreed, "--server", "127.0.0.1:9",
                        "--silo", "1", "--data", os.path.join(EXAMPLES, "hier_logreg", "data"), "--insecure"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    require(p.returncode == 3 and "refusing to join" in p.stderr and "alpha" in p.stderr,
            f"fvi-client given a model whose plan sends alpha: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    extra = [line.strip() for line in p.stderr.splitlines()[1:]]

    # (3) The server runs another text than the silo audited.
    changed = os.path.join(work, "changed", "pima_logreg.fvi")
    os.makedirs(os.path.dirname(changed))
    edited = re.sub(r"normal\(0, (\d)", lambda m: f"normal(0, {int(m.group(1)) % 9 + 1}", source, count=1)
    require(edited != source, "pima_logreg has no `normal(0, D` prior to edit")
    with open(changed, "w") as f:
        f.write(edited)
    d = Deployment(work, {"server": [generic["server"], changed],
                          "client": [generic["client"], PVI.fvi, "--accept-plan", agreed]}, data)
    try:
        server, port = d.server(os.path.join(work, "server-changed"), sets, tls_server(certs, work))
        client = d.client(port, 1, os.path.join(work, "silo-changed"), tls_client(certs, token_files, 1))
        d.wait(client, 60, expect=3)
        err = client.stderr()
        kept = os.path.join(work, "silo-changed", "silo-1", "server-model.fvi")
        d.check("another model" in err and sha in err and hashlib.sha256(edited.encode()).hexdigest() in err,
                "fvi-client did not name both SHA-256s")
        d.check(os.path.exists(kept) and open(kept).read() == edited, "fvi-client did not keep the server's text")
    finally:
        d.close()
    # (4) No --accept-plan, on a terminal: the client asks. Enter (the default, N) or "n" refuses
    # before it dials anyone; "y" joins (it dials the address given, where nothing answers).
    def confirm(answer):
        master, terminal = pty.openpty()
        try:
            p = subprocess.Popen([generic["client"], PVI.fvi, "--server", "127.0.0.1:9", "--silo", "1", "--data", data,
                                  "--insecure", "--reconnect-timeout", "1"],
                                 stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            os.close(terminal)
            terminal = None
            os.write(master, answer.encode())
            out, err = p.communicate(timeout=60)
        finally:
            if terminal is not None:
                os.close(terminal)
            os.close(master)
        require("join the run and send these? [y/N]" in out, f"fvi-client on a terminal did not ask:\n{out}\n{err}")
        return p.returncode, err

    for answer in ("\n", "n\n"):
        code, err = confirm(answer)
        require(code == 3 and "not joining (not confirmed)" in err and "join:" not in err,
                f"fvi-client answered {answer!r} on a terminal: exit {code}\n{err}")
    code, err = confirm("y\n")
    require(code != 3 and "join: no answer from the server" in err,
            f"fvi-client answered 'y' on a terminal did not go on to join: exit {code}\n{err}")
    print(f"generic_programs: fvi-server and 4 fvi-clients (plan audited) equal NAME-sim's posterior to {worst:.1e}; "
          f"a client refused a model whose plan adds {extra}; a client refused a server whose model's SHA-256 differs; "
          f"on a terminal a client asked, refused on Enter and 'n', and dialled the server on 'y'")


CASES = {
    "generic_programs": case_generic_programs,
    "sfvi_chain_equal": case_sfvi_chain_equal,
    "sparse_gp_equal": equal_case("sparse_gp_equal", SPARSE_GP, ["rounds=3", "local_steps=60"]),
    "pvi_equal": equal_case("pvi_equal", PVI, ["rounds=6", "local_steps=200", "mc_samples=8"], pima_held_out),
    "fedavg_equal": equal_case("fedavg_equal", PVI, ["method=fedavg", "rounds=5", "local_steps=50", "mc_samples=8",
                                                     "server_optimiser=adam", "server_lr=0.05", "clients_per_round=3"]),
    "fedvem_equal": equal_case("fedvem_equal", PVI, ["method=fedvem", "rounds=4", "local_steps=50", "mc_samples=8"]),
    # The context points are drawn by each silo from its own rows (seed, silo, round): the same
    # in the deployed clients as in NAME-sim.
    "fsvi_rule": case_fsvi_rule,
    "fedavg_fsvi_equal": equal_case("fedavg_fsvi_equal", PVI, ["method=fedavg_fsvi", "rounds=3", "local_steps=50",
                                                               "mc_samples=8", "context_points=2"]),
    "sfvi_equal": equal_case("sfvi_equal", SFVI, ["rounds=300", "warm_start=20", "refresh=10"]),
    # A mean-field q and no locals: each silo's gradient through the local reparameterisation,
    # from the silo's own noise stream.
    "sfvi_lrt_equal": equal_case("sfvi_lrt_equal", PVI, ["method=sfvi", "family=meanfield", "rounds=300",
                                                         "refresh=10"]),
    "vfl_equal": equal_case("vfl_equal", VFL, ["rounds=300", "refresh=10"]),
    "vfl_exact_equal": case_vfl_exact_equal,
    "sfvi_rule": case_sfvi_rule,
    "stan_quantities": case_stan_quantities,
    "vfl_scale_equal": case_vfl_scale_equal,
    "vfl_shared_scale_equal": case_vfl_shared_scale_equal,
    "sfvi_locations_equal": case_sfvi_locations_equal,
    "stan_statements": equal_case("stan_statements", CAPTURE, ["rounds=300", "refresh=10"]),
    "mtls": case_mtls,
    "wrong_token": case_wrong_token,
    "faults": case_faults,
    "huge_message": case_huge_message,
    "hostile_load": case_hostile_load,
    "absurd_silo": case_absurd_silo,
    "refused_backoff": case_refused_backoff,
    "hostile_join": case_hostile_join,
    "operator_mistakes": case_operator_mistakes,
    "client_kill": client_kill_case("client_kill", PVI, ["rounds=30", "local_steps=1000"], 30),
    "sfvi_client_kill": client_kill_case("sfvi_client_kill", SFVI, ["rounds=600", "warm_start=20", "refresh=1"], 620,
                                         kill_at=60),
    "vfl_client_kill": client_kill_case("vfl_client_kill", VFL, ["rounds=600", "refresh=1"], 600, kill_at=60),
    "server_kill": server_kill_case("server_kill", PVI, ["rounds=12", "local_steps=1000"], 12),
    # FedAvg's checkpoint: q, which silos have answered, the server Adam's moments (no factors).
    "fedavg_server_kill": server_kill_case("fedavg_server_kill", PVI,
                                           ["method=fedavg", "server_optimiser=adam", "server_lr=0.1", "rounds=12",
                                            "local_steps=1000", "clients_per_round=3"], 12),
    "sfvi_server_kill": server_kill_case("sfvi_server_kill", SFVI, ["rounds=600", "warm_start=20", "refresh=1"], 620,
                                         kill_at=60),
    # A power cut: the server and every client killed at once, each restarted from its own checkpoint.
    "sfvi_all_kill": server_kill_case("sfvi_all_kill", SFVI, ["rounds=600", "warm_start=20", "refresh=1"], 620,
                                      kill_at=60, clients_too=True),
    "vfl_all_kill": server_kill_case("vfl_all_kill", VFL, ["rounds=600", "refresh=1"], 600, kill_at=60,
                                     clients_too=True),
    # ... with the server's checkpoint a step behind its clients' (killed between their replies and
    # its write): they answer that step again from theirs.
    "all_kill_stale_server": server_kill_case("all_kill_stale_server", PVI, ["rounds=12", "local_steps=1000"], 12,
                                              clients_too=True, stale_server=True),
    # The same where each silo's state moves with every step (SFVI-Avg's warm start: each silo's
    # locals and its copy of q take avg_steps steps a round), so that a silo which stepped again
    # would answer differently.
    "sfvi_all_kill_stale_server": server_kill_case("sfvi_all_kill_stale_server", SFVI,
                                                   ["rounds=20", "warm_start=8", "avg_steps=4000", "refresh=1"], 28,
                                                   kill_at=4, clients_too=True, stale_server=True),
    "vfl_server_kill": server_kill_case("vfl_server_kill", VFL, ["rounds=600", "refresh=1"], 600, kill_at=60),
    # Started at the locations' mode (sfvi_locations_equal's run): resumed, q is the checkpoint's and
    # no search runs again.
    "sfvi_locations_server_kill": server_kill_case(
        "sfvi_locations_server_kill", HIER_SCALED, ["rounds=300", "refresh=1"], 300, kill_at=60,
        resumed_says="not searched for a start: q is the checkpoint's",
        prepare=lambda cache: write_model(HIER_SCALED, cache, "hier_scaled", hier_scaled_model())),
}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
