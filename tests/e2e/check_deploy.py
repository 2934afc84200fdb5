#!/usr/bin/env python3
"""End-to-end checks of the deployed programs, NAME-server and NAME-client as real processes
talking gRPC on 127.0.0.1: usage  check_deploy.py FVIC CACHE CASE.

`FVIC build` compiles examples/pima_logreg once into CACHE/deploy-pima_logreg (reused while it
is newer than FVIC). The data are the example's 614 training rows dealt into 4 silos (data.json
as it is), written into a temporary folder with the test's certificates (a CA, a server
certificate for IP:127.0.0.1 and DNS:localhost, client certificates with CN silo-1..silo-4, all
made here with openssl) and tokens. Every process runs with a time limit and is killed at the end.

  pvi_equal    TLS and tokens, 1 server and 4 clients, PVI with keys given to the server only:
               posterior.json (means, sds, ELBOs) equals NAME-sim's on the same data and keys,
               and metrics.csv has one row per round, 1..R.
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
  client_kill  --quorum 3 --deadline 2: a client killed (SIGKILL) mid-run; the server logs
               "going on without silo(s) K" and goes on; the client restarted with --resume
               rejoins ("silo rejoined"), the last round has every silo's term, the server exits
               0 with a finite posterior and one metrics row per round.
  server_kill  the server killed (SIGKILL) after a few rounds and restarted with --resume on the
               same port and output folder while the clients keep running (they reconnect): the
               posterior equals an uninterrupted run's with the same (default) seed, and so do
               the byte counters in metrics.csv's last row.

Exit 0 on success, 1 with a message on the first failure, 77 (skip) without openssl.
"""
import csv
import json
import math
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_pvi import EXAMPLES, Failure, posterior, require, run_case  # noqa: E402

EX = os.path.join(EXAMPLES, "pima_logreg")
MODEL = os.path.join(EX, "pima_logreg.fvi")
NAME = "pima_logreg"
SILOS = 4
# The server and NAME-sim run the same engines and the same rounds in the same order; only how
# the messages travel differs (docs/deployment.md). The same arithmetic in the same order gives
# the same bits, so 1e-9 relative is a tolerance for nothing but printing and parsing.
SAME = 1e-9


# ---------------------------------------------------------------------------------------------
# The programs, the data, the credentials

def programs(fvic, cache):
    """CACHE/deploy-NAME holding NAME-sim, NAME-server and NAME-client, built by `FVIC build` if
    missing or older than FVIC."""
    out = os.path.join(cache, "deploy-" + NAME)
    paths = {role: os.path.join(out, f"{NAME}-{role}") for role in ("sim", "server", "client")}
    # Rebuilt when fvic or the runtime libraries it links into the programs are newer.
    runtime = os.path.join(os.path.dirname(os.path.abspath(fvic)), os.pardir, "runtime")
    libs = [os.path.join(runtime, lib) for lib in ("libfvi.a", "libfvi_net.a")]
    fvic_time = max(os.path.getmtime(p) for p in [fvic] + [p for p in libs if os.path.exists(p)])
    if not all(os.path.exists(p) and os.path.getmtime(p) > fvic_time for p in paths.values()):
        os.makedirs(cache, exist_ok=True)
        p = subprocess.run([fvic, "build", MODEL, "-o", out], capture_output=True, text=True, timeout=600)
        require(p.returncode == 0, f"{fvic} build {MODEL} -o {out} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        for p in paths.values():
            require(os.path.exists(p), f"{fvic} build did not write {p}")
    return paths


def four_silos(work):
    """The example's training rows (silo-1..3.json) dealt round-robin into 4 silos; data.json as is."""
    src, out = os.path.join(EX, "data"), os.path.join(work, "data")
    os.makedirs(out)
    shutil.copy(os.path.join(src, "data.json"), os.path.join(out, "data.json"))
    rows = []
    for k in (1, 2, 3):
        with open(os.path.join(src, f"silo-{k}.json")) as f:
            s = json.load(f)
        rows += list(zip(s["x"], s["y"]))
    require(len(rows) == 614, f"expected 614 training rows, read {len(rows)}")
    for k in range(SILOS):
        part = rows[k::SILOS]
        with open(os.path.join(out, f"silo-{k + 1}.json"), "w") as f:
            json.dump({"N": len(part), "x": [x for x, _ in part], "y": [y for _, y in part]}, f)
    return out


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

    def server(self, out, sets=(), options=(), port=0, name="server"):
        """NAME-server on 127.0.0.1:PORT (0: the server picks a free port, read from its first
        line); returns (party, port) once it listens."""
        cmd = [self.bins["server"], "--listen", f"127.0.0.1:{port}", "--silos", str(SILOS), "--data", self.data,
               "--output", out, "--join-timeout", "60", "--give-up", "60"]
        for kv in sets:
            cmd += ["--set", kv]
        s = self.start(name, cmd + list(options))
        listening = re.compile(r"listening on 127\.0\.0\.1:(\d+) ")
        self.until(f"'listening on' from {name}", lambda: listening.search(s.stdout()), 20, [s])
        return s, int(listening.search(s.stdout()).group(1))

    def client(self, port, k, out, options=(), name=None):
        cmd = [self.bins["client"], "--server", f"127.0.0.1:{port}", "--silo", str(k), "--data", self.data,
               "--output", out]
        return self.start(name or f"client-{k}", cmd + list(options))


def tls_client(certs, token_files, k, reconnect=30):
    return ["--ca", os.path.join(certs, "ca.pem"), "--token-file", token_files[k], "--reconnect-timeout", str(reconnect)]


def tls_server(certs, work):
    return ["--cert", os.path.join(certs, "server.pem"), "--key", os.path.join(certs, "server.key"),
            "--tokens", os.path.join(work, "tokens")]


def round_lines(text):
    """The progress lines of a server's stdout: [(round, rounds, line)]."""
    return [(int(m.group(1)), int(m.group(2)), m.group(0))
            for m in re.finditer(r"^round +(\d+)/(\d+) .*$", text, re.MULTILINE)]


def last_round(party):
    lines = round_lines(party.stdout())
    return lines[-1][0] if lines else 0


# ---------------------------------------------------------------------------------------------
# Results

def sim(bins, data, out, sets):
    cmd = [bins["sim"], "--data", data, "--output", out, "--quiet"]
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
    require(len(got["elbo"]) == len(want["elbo"]), f"{what}: {len(got['elbo'])} ELBOs vs {len(want['elbo'])}")
    pairs += [(f"elbo[{i + 1}]", a, b) for i, (a, b) in enumerate(zip(got["elbo"], want["elbo"]))]
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


def setup(fvic, cache, work, certs=True):
    if shutil.which("openssl") is None:
        print("openssl is not installed: skipped")
        sys.exit(77)
    bins = programs(fvic, cache)
    data = four_silos(work)
    return bins, data, (certificates(work) if certs else None), tokens(work)


def complete(d, server, clients, timeout=60):
    """The server exits 0, then every client exits 0 having heard that the run is over."""
    d.wait(server, timeout)
    for c in clients:
        d.wait(c, 30)
        d.check("the run is over" in c.stdout(), f"{c.name} did not say the run is over")


# ---------------------------------------------------------------------------------------------
# Cases

def case_pvi_equal(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    # Keys other than the model's defaults, given to the server only: the clients run the
    # server's keys, or their replies (and the posterior) would differ from NAME-sim's.
    sets = ["rounds=6", "local_steps=200", "mc_samples=8"]
    want = sim(bins, data, os.path.join(work, "sim"), sets)
    out = os.path.join(work, "server")
    d = Deployment(work, bins, data)
    try:
        server, port = d.server(out, sets, tls_server(certs, work))
        clients = [d.client(port, k, os.path.join(work, "silos"), tls_client(certs, token_files, k))
                   for k in range(1, SILOS + 1)]
        complete(d, server, clients)
        d.check("refused" not in server.stderr(), "the server refused something")
        d.check([r for r, _, _ in round_lines(server.stdout())] == list(range(1, 7)), "progress lines are not rounds 1..6")
    finally:
        d.close()
    worst = same_posterior(posterior(out), want, "server vs NAME-sim")
    rounds = metrics_rounds(out)
    require(rounds == list(range(1, 7)), f"metrics.csv rounds {rounds}, expected 1..6")
    with open(os.path.join(out, "metrics.csv")) as f, open(os.path.join(work, "sim", "metrics.csv")) as g:
        require(f.readline() == g.readline(), "metrics.csv headers of the server and NAME-sim differ")
    print(f"pvi_equal: server (TLS, tokens, 4 clients) and NAME-sim agree; largest relative difference {worst:.1e}; "
          f"metrics.csv rounds {rounds}")


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


def case_client_kill(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    rounds = 30
    sets = [f"rounds={rounds}", "local_steps=1000"]
    out, silos = os.path.join(work, "server"), os.path.join(work, "silos")
    d = Deployment(work, bins, data)
    victim = 2
    try:
        server, port = d.server(out, sets, tls_server(certs, work) + ["--quorum", "3", "--deadline", "2"])
        clients = {k: d.client(port, k, silos, tls_client(certs, token_files, k)) for k in range(1, SILOS + 1)}
        d.until("round 3", lambda: last_round(server) >= 3, 40, [server])
        clients[victim].kill()
        killed_after = last_round(server)
        d.check(killed_after < rounds - 5, f"the run was nearly over ({killed_after} rounds) when the client was killed")
        going_on = re.compile(rf"^server: round (\d+) \(pvi \w+\): going on without silo\(s\) {victim}$", re.MULTILINE)
        d.until(f"'going on without silo(s) {victim}'", lambda: going_on.search(server.stderr()), 20, [server])
        without = int(going_on.search(server.stderr()).group(1))
        # It goes on: a round completes without the silo.
        d.until("a round without the killed silo", lambda: last_round(server) >= without, 20, [server])
        d.check("silo terms missing" in round_lines(server.stdout())[-1][2],
                "a round without the killed silo does not say its term is missing")
        back = d.client(port, victim, silos, tls_client(certs, token_files, victim) + ["--resume"],
                        name=f"client-{victim}-resumed")
        d.until("'silo rejoined'", lambda: f"server: silo rejoined: silo {victim}:" in server.stderr(), 20,
                [server, back])
        rejoined_at = last_round(server)
        complete(d, server, [c for k, c in clients.items() if k != victim] + [back], timeout=90)
        d.check("resumed from" in back.stdout(), "the restarted client did not say it resumed from its checkpoint")
        last = round_lines(server.stdout())[-1]
        d.check(last[0] == rounds and "missing" not in last[2], f"the last round is not complete: {last[2]}")
        print(f"client_kill: silo {victim} killed after round {killed_after}; "
              f"'{going_on.search(server.stderr()).group(0)}'; rejoined in round {rejoined_at + 1}")
    finally:
        d.close()
    post = finite_posterior(out)
    rows = metrics_rounds(out)
    require(rows == list(range(1, rounds + 1)), f"metrics.csv rounds {rows}, expected 1..{rounds}")
    print(f"client_kill: the run completed; w means {[round(v, 3) for v in post['variables']['w']['mean']]}")


def case_server_kill(fvic, cache, work):
    bins, data, certs, token_files = setup(fvic, cache, work)
    rounds = 12
    sets = [f"rounds={rounds}", "local_steps=1000"]
    d = Deployment(work, bins, data)
    try:
        ref = os.path.join(work, "reference")
        server, port = d.server(ref, sets, tls_server(certs, work), name="reference-server")
        clients = [d.client(port, k, os.path.join(work, "reference-silos"), tls_client(certs, token_files, k),
                            name=f"reference-client-{k}") for k in range(1, SILOS + 1)]
        complete(d, server, clients)

        out = os.path.join(work, "server")
        server, port = d.server(out, sets, tls_server(certs, work))
        clients = [d.client(port, k, os.path.join(work, "silos"), tls_client(certs, token_files, k, reconnect=60))
                   for k in range(1, SILOS + 1)]
        d.until("round 3", lambda: last_round(server) >= 3, 40, [server])
        server.kill()
        killed_after = last_round(server)
        d.check(killed_after < rounds, "the run was over when the server was killed")
        time.sleep(0.5)
        d.check(all(c.running() for c in clients), "a client stopped when the server was killed")
        again, port2 = d.server(out, sets, tls_server(certs, work) + ["--resume"], port=port, name="server-resumed")
        d.check(port2 == port, f"the resumed server listens on {port2}, not {port}")
        # Every client is still polling: the resumed server has its silos at once and must not
        # wait out --join-timeout (60 s here) before its first round.
        d.until("round from the resumed server although its 4 clients are polling it",
                lambda: round_lines(again.stdout()), 20, [again])
        complete(d, again, clients)
        resumed = re.search(r"^resumed from .* after round (\d+)$", again.stdout(), re.MULTILINE)
        d.check(resumed and int(resumed.group(1)) >= 3, "the restarted server did not resume after round 3 or later")
        d.check(round_lines(again.stdout())[0][0] == int(resumed.group(1)) + 1,
                "the resumed server did not go on with the round after its checkpoint")
        print(f"server_kill: server killed after round {killed_after}; '{resumed.group(0)}'")
    finally:
        d.close()
    worst = same_posterior(posterior(out), posterior(ref), "killed and resumed vs uninterrupted")
    rows = metrics_rounds(out)
    require(rows[-1] == rounds and sorted(set(rows)) == list(range(1, rounds + 1)),
            f"metrics.csv rounds {rows}: not every round 1..{rounds}")
    # The byte counters were checkpointed too: the resumed run ends having counted what the
    # uninterrupted one did.
    got, want = (last_metrics(o) for o in (out, ref))
    for column in ("bytes_sent", "bytes_received"):
        require(got[column] == want[column], f"metrics.csv {column} ends at {got[column]} after the resume, "
                                             f"{want[column]} in the uninterrupted run")
    print(f"server_kill: the posterior equals the uninterrupted run's (to {worst:.1e}); metrics.csv rounds {rows}")


CASES = {
    "pvi_equal": case_pvi_equal,
    "mtls": case_mtls,
    "wrong_token": case_wrong_token,
    "faults": case_faults,
    "client_kill": case_client_kill,
    "server_kill": case_server_kill,
}


if __name__ == "__main__":
    sys.exit(run_case(CASES, __doc__))
