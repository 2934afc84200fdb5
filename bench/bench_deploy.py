#!/usr/bin/env python3
"""What the deployed programs cost beyond the computation: NAME-server and S NAME-client
processes talking gRPC on 127.0.0.1 (--insecure) against NAME-sim, the same rounds in one process.

The model is examples/pima_logreg (PVI, D = 8 features + a bias: 18 doubles per Gaussian factor).
Its 614 training rows (data/silo-1..3.json) are dealt round-robin into S silos (64 by default:
9-10 rows each), data.json as it is; the model has no server data, so there is no server.json.
`FVIC build` compiles NAME-sim, NAME-server and NAME-client into a temporary folder.

Each repeat runs NAME-sim, then the server and S clients, with the same keys (--set rounds=R
--set local_steps=L). Per round, from each run's metrics.csv (seconds are cumulative wall time):

  overhead per round = networked seconds per round - NAME-sim seconds per round

and the payload bytes per round (the server's count: 8 bytes per double). A PVI round is two
exchanges with every silo (pvi update, pvi evaluate); each exchange is, per silo, a NextTask RPC
(the server's request) and a Submit RPC (the reply), and the client writes its checkpoint (write,
fsync, rename) before each reply (docs/deployment.md). The server's memory: VmRSS just after it
listens (no client), once all S silos have joined (its stderr's "silo joined" lines), and its
peak (VmHWM, from wait4's ru_maxrss at exit).

The machine's own limits, measured in the same run:
  - the median round trip of a request/reply of the same sizes between two Python processes over
    loopback TCP (TCP_NODELAY), best of 5 batches of --trips: the floor for one RPC (Python's
    own per-call cost is in it, so it is, if anything, above the kernel's floor); also with both
    processes pinned to one CPU (best of 3), which leaves out the wake-up of the other CPU (on
    this VM an idle vCPU's wake-up costs tens of microseconds);
  - the median write + fsync + rename of a file the size of a client's checkpoint, in the same
    folder the clients write to, best of 3 batches of 100: the floor for one checkpoint;
  - the machine's cores: the CPU seconds the server and the clients use per round (/proc/PID/stat
    once all silos joined, wait4's rusage at exit) against the wall time of those rounds.
The overhead per exchange (overhead per round / (S x 2)) is printed beside them. Unless
--no-tmpfs, each repeat also runs the networked case with the server's and clients' outputs and
checkpoints on /dev/shm (tmpfs, where fsync costs nothing): what the checkpoints' fsyncs cost.

  python3 bench/bench_deploy.py [FVIC] [--silos 64] [--rounds 20] [--local-steps 50]
                                [--repeats 3] [--trips 2000] [--timeout 120] [--no-tmpfs] [--keep]

Exit 0 after printing the summary; 1 with the command and its output if a program fails or hangs.
Every process started here is ended in a finally block.
"""
import argparse
import csv
import functools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

print = functools.partial(print, flush=True)  # progress lines appear as they happen

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(REPO, "examples", "pima_logreg")
MODEL = os.path.join(EX, "pima_logreg.fvi")
NAME = "pima_logreg"

# Every process this script starts, so the finally block can end the ones still running.
PROCS = []
FORKED = []


class Failure(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Processes

def spawn(cmd, out, err):
    with open(out, "w") as o, open(err, "w") as e:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=o, stderr=e)
    p.cmd = cmd
    p.out, p.err = out, err
    PROCS.append(p)
    return p


def reap(p, block):
    """wait4 on p (WNOHANG unless block): None while it runs, else its rusage (returncode set)."""
    if p.returncode is not None:
        return getattr(p, "rusage", None)
    pid, status, ru = os.wait4(p.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    p.returncode = os.waitstatus_to_exitcode(status)
    p.rusage = ru
    return ru


def wait_all(procs, deadline):
    while True:
        if all(reap(p, False) is not None for p in procs):
            return
        if time.monotonic() > deadline:
            raise Failure("timed out")
        time.sleep(0.02)


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(lines[-n:]) if lines else "(empty)"


def describe(p):
    return (f"$ {' '.join(p.cmd)}\nexit status: {p.returncode}\n"
            f"--- stdout (last lines)\n{tail(p.out)}\n--- stderr (last lines)\n{tail(p.err)}")


def end_everything():
    for p in PROCS:
        if p.returncode is None and p.poll() is None:
            try:
                p.kill()
            except ProcessLookupError:
                pass
    for p in PROCS:
        if p.returncode is None:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    for pid in FORKED:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def proc_status(pid):
    """VmRSS, VmHWM (kB) and Threads of a running process, from /proc/PID/status."""
    got = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "Threads"):
                    got[key] = int(value.split()[0])
    except OSError:
        return None
    return got


def cpu_seconds(pid):
    """utime + stime of a process so far, from /proc/PID/stat (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loopback_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])  # received bytes (each loopback packet counted once)
    return 0


# ---------------------------------------------------------------------------------------------
# The programs and the data

def build(fvic, out):
    t0 = time.monotonic()
    p = subprocess.run([fvic, "build", MODEL, "-o", out], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise Failure(f"$ {fvic} build {MODEL} -o {out}\nexit status {p.returncode}\n{p.stdout}\n{p.stderr}")
    paths = {role: os.path.join(out, f"{NAME}-{role}") for role in ("sim", "server", "client")}
    for path in paths.values():
        if not os.path.exists(path):
            raise Failure(f"{fvic} build did not write {path}")
    return paths, time.monotonic() - t0


def deal(silos, out):
    """The example's training rows (silo-1..3.json) dealt round-robin into `silos` silos."""
    src = os.path.join(EX, "data")
    os.makedirs(out)
    rows = []
    for k in (1, 2, 3):
        with open(os.path.join(src, f"silo-{k}.json")) as f:
            d = json.load(f)
        rows += list(zip(d["x"], d["y"]))
    if silos > len(rows):
        raise Failure(f"{silos} silos but only {len(rows)} rows")
    shutil.copy(os.path.join(src, "data.json"), out)
    sizes = []
    for s in range(silos):
        part = rows[s::silos]
        sizes.append(len(part))
        with open(os.path.join(out, f"silo-{s + 1}.json"), "w") as f:
            json.dump({"N": len(part), "x": [x for x, _ in part], "y": [y for _, y in part]}, f)
    return len(rows), sizes


def metrics(path, rounds):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if [int(r["round"]) for r in rows] != list(range(1, rounds + 1)):
        raise Failure(f"{path}: rounds {[r['round'] for r in rows]}, expected 1..{rounds}")
    last = rows[-1]
    return {
        "per_round": float(last["seconds"]) / rounds,
        "deltas": [float(b["seconds"]) - float(a["seconds"]) for a, b in zip(rows, rows[1:])],
        "sent": int(last["bytes_sent"]) / rounds,
        "received": int(last["bytes_received"]) / rounds,
        "elbo": [float(r["elbo"]) for r in rows],
    }


# ---------------------------------------------------------------------------------------------
# One run of each

def run_sim(bins, data, out, sets, rounds, timeout):
    t0 = time.monotonic()
    p = spawn([bins["sim"], "--data", data, "--output", out, "--quiet"] + sets,
              os.path.join(out + ".stdout"), os.path.join(out + ".stderr"))
    try:
        wait_all([p], t0 + timeout)
    except Failure:
        raise Failure(f"NAME-sim did not finish in {timeout} s\n{describe(p)}")
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise Failure(f"NAME-sim failed\n{describe(p)}")
    m = metrics(os.path.join(out, "metrics.csv"), rounds)
    m.update(wall=wall, cpu=p.rusage.ru_utime + p.rusage.ru_stime, maxrss=p.rusage.ru_maxrss)
    return m


def run_networked(bins, data, out, silos, sets, rounds, timeout, results=None):
    """The server and `silos` clients; their logs in `out`, their outputs and checkpoints in
    `results` (default: `out`)."""
    os.makedirs(out)
    results = results or out
    os.makedirs(results, exist_ok=True)
    clients_out = os.path.join(results, "clients")
    os.makedirs(clients_out)
    logs = os.path.join(out, "clients")
    os.makedirs(logs, exist_ok=True)
    t_start = time.monotonic()
    deadline = t_start + timeout
    server = spawn([bins["server"], "--listen", "127.0.0.1:0", "--silos", str(silos), "--data", data,
                    "--output", os.path.join(results, "server"), "--insecure"] + sets,
                   os.path.join(out, "server.stdout"), os.path.join(out, "server.stderr"))

    # The address: port 0 makes the server pick a free port and print it.
    port = None
    while port is None:
        if reap(server, False) is not None:
            raise Failure(f"the server stopped before listening\n{describe(server)}")
        if time.monotonic() > t_start + 30:
            raise Failure(f"the server did not print its address in 30 s\n{describe(server)}")
        with open(server.out) as f:
            for line in f:
                if "listening on 127.0.0.1:" in line:
                    port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
        time.sleep(0.005)
    time.sleep(0.1)  # settled, no client yet
    idle = proc_status(server.pid)

    t_clients = time.monotonic()
    clients = [spawn([bins["client"], "--server", f"127.0.0.1:{port}", "--silo", str(k), "--data", data,
                      "--output", clients_out, "--insecure", "--quiet"],
                     os.path.join(logs, f"{k}.stdout"), os.path.join(logs, f"{k}.stderr"))
               for k in range(1, silos + 1)]

    # Every silo joined: the server's stderr has S "silo joined" lines.
    joined_status, t_joined, lo_joined = None, None, None
    while joined_status is None:
        if reap(server, False) is not None:
            raise Failure(f"the server stopped before all silos joined\n{describe(server)}")
        for c in clients:
            if reap(c, False) is not None:
                raise Failure(f"client {c.cmd[c.cmd.index('--silo') + 1]} stopped before the run\n{describe(c)}")
        if time.monotonic() > deadline:
            raise Failure(f"not every silo joined in {timeout} s\n{describe(server)}")
        with open(server.err) as f:
            n = sum("silo joined" in line for line in f)
        if n >= silos:
            joined_status = proc_status(server.pid)
            t_joined = time.monotonic()
            lo_joined = loopback_bytes()
            server_cpu_joined = cpu_seconds(server.pid)
            clients_cpu_joined = sum(cpu_seconds(c.pid) for c in clients)
        else:
            time.sleep(0.005)

    # The rounds: sample the server's memory now and then until it exits.
    max_rss = joined_status["VmRSS"]
    while reap(server, False) is None:
        if time.monotonic() > deadline:
            raise Failure(f"the server did not finish in {timeout} s (a hang?)\n{describe(server)}")
        st = proc_status(server.pid)
        if st and "VmRSS" in st:  # an exited, unreaped server has no VmRSS
            max_rss = max(max_rss, st["VmRSS"])
        time.sleep(0.05)
    t_server_done = time.monotonic()
    lo_done = loopback_bytes()
    if server.returncode != 0:
        raise Failure(f"the server failed\n{describe(server)}")
    try:
        wait_all(clients, time.monotonic() + 30)
    except Failure:
        late = [c for c in clients if c.returncode is None]
        raise Failure(f"{len(late)} client(s) still running 30 s after the server exited\n{describe(late[0])}")
    bad = [c for c in clients if c.returncode != 0]
    if bad:
        raise Failure(f"{len(bad)} client(s) failed; the first:\n{describe(bad[0])}")

    m = metrics(os.path.join(results, "server", "metrics.csv"), rounds)
    server_cpu = server.rusage.ru_utime + server.rusage.ru_stime
    clients_cpu = sum(c.rusage.ru_utime + c.rusage.ru_stime for c in clients)
    ckpt = os.path.join(clients_out, "silo-1", "checkpoint")
    m.update(
        idle=idle, joined=joined_status, max_rss=max_rss, peak=server.rusage.ru_maxrss,
        join_seconds=t_joined - t_clients, server_wall=t_server_done - t_start,
        server_cpu=server_cpu, clients_cpu=clients_cpu,
        # CPU from all silos joined to the exit, per round (the rounds, plus writing the outputs)
        server_cpu_round=(server_cpu - server_cpu_joined) / rounds,
        clients_cpu_round=(clients_cpu - clients_cpu_joined) / rounds,
        rounds_wall=t_server_done - t_joined,
        client_maxrss=statistics.median(c.rusage.ru_maxrss for c in clients),
        wire=(lo_done - lo_joined) / rounds,
        checkpoint_bytes=os.path.getsize(ckpt) if os.path.exists(ckpt) else 256,
    )
    return m


# ---------------------------------------------------------------------------------------------
# The machine's limits

def recv_exactly(sock, buf):
    view, got = memoryview(buf), 0
    while got < len(buf):
        n = sock.recv_into(view[got:])
        if n == 0:
            return False
        got += n
    return True


def loopback_rtt(request_bytes, reply_bytes, trips, cpus=None):
    """Median and 10th percentile (seconds) of a request/reply over loopback TCP between two
    processes (this one and a forked echo); cpus = (this one's, the echo's) pins them."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the echo side
        try:
            if cpus:
                os.sched_setaffinity(0, {cpus[1]})
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            req, rep = bytearray(request_bytes), bytes(reply_bytes)
            while recv_exactly(conn, req):
                conn.sendall(rep)
        finally:
            os._exit(0)
    FORKED.append(pid)
    listener.close()
    mask = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, {cpus[0]})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req, rep = bytes(request_bytes), bytearray(reply_bytes)
    times = []
    for i in range(trips + 200):
        t0 = time.perf_counter_ns()
        sock.sendall(req)
        if not recv_exactly(sock, rep):
            raise Failure("the loopback echo closed")
        if i >= 200:  # after a warm-up
            times.append(time.perf_counter_ns() - t0)
    sock.close()
    os.sched_setaffinity(0, mask)
    os.waitpid(pid, 0)
    FORKED.remove(pid)
    times.sort()
    return statistics.median(times) * 1e-9, times[len(times) // 10] * 1e-9


def checkpoint_floor(folder, size, count=100):
    """Median seconds of write + fsync + close + rename of `size` bytes, as save_checkpoint does."""
    path, tmp, data = os.path.join(folder, "fsync-probe"), os.path.join(folder, "fsync-probe.tmp"), os.urandom(size)
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, path)
        times.append(time.perf_counter() - t0)
    os.unlink(path)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------

def us(seconds):
    return f"{seconds * 1e6:.0f} us"


def ms(seconds):
    return f"{seconds * 1e3:.1f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fvic", nargs="?", default=None, help="the compiler (default build/bin/fvic)")
    ap.add_argument("--silos", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--local-steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each; the best is reported")
    ap.add_argument("--trips", type=int, default=2000, help="loopback round trips")
    ap.add_argument("--timeout", type=float, default=120, help="seconds allowed per run")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--no-tmpfs", action="store_true",
                    help="skip the variant with the outputs and checkpoints on /dev/shm")
    args = ap.parse_args()
    fvic = args.fvic or ("build/bin/fvic" if os.path.exists("build/bin/fvic") else os.path.join(REPO, "build", "bin", "fvic"))
    if not os.access(fvic, os.X_OK):
        print(f"bench_deploy: no compiler at {fvic}", file=sys.stderr)
        return 2
    fvic = os.path.abspath(fvic)
    S, R = args.silos, args.rounds
    sets = ["--set", f"rounds={R}", "--set", f"local_steps={args.local_steps}"]

    work = tempfile.mkdtemp(prefix="bench_deploy.")
    shm = None
    try:
        load = os.getloadavg()[0]
        bins, build_seconds = build(fvic, os.path.join(work, "bin"))
        data = os.path.join(work, "data")
        nrows, sizes = deal(S, data)
        print(f"bench_deploy: {NAME} (PVI), {nrows} rows in {S} silos ({min(sizes)}-{max(sizes)} rows each), "
              f"{R} rounds, local_steps={args.local_steps}; best of {args.repeats} runs of each")
        print(f"  programs: {fvic} build ({build_seconds:.1f} s) into {work}/bin")
        print(f"  machine: {os.cpu_count()} CPUs, 1-minute load average {load:.2f} before the build")

        # The variant: outputs and checkpoints on tmpfs, where fsync costs nothing.
        if not args.no_tmpfs and os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
            shm = tempfile.mkdtemp(prefix="bench_deploy.", dir="/dev/shm")
        sims, nets, shms = [], [], []
        for r in range(args.repeats):
            sims.append(run_sim(bins, data, os.path.join(work, f"sim-{r}"), sets, R, args.timeout))
            nets.append(run_networked(bins, data, os.path.join(work, f"net-{r}"), S, sets, R, args.timeout))
            line = (f"  run {r + 1}: NAME-sim {ms(sims[-1]['per_round'])} per round, "
                    f"networked {ms(nets[-1]['per_round'])} per round "
                    f"(all {S} silos joined {nets[-1]['join_seconds']:.2f} s after the clients started)")
            if shm:
                shms.append(run_networked(bins, data, os.path.join(work, f"shm-{r}"), S, sets, R, args.timeout,
                                          results=os.path.join(shm, f"run-{r}")))
                line += f", networked with checkpoints on tmpfs {ms(shms[-1]['per_round'])}"
            print(line)

        sim = min(sims, key=lambda m: m["per_round"])
        net = min(nets, key=lambda m: m["per_round"])
        same = all(m["elbo"] == sim["elbo"] for m in sims + nets + shms)

        exchanges = 2 * S  # per round: pvi update and pvi evaluate, with every silo
        req = max(1, round(net["sent"] / exchanges))
        rep = max(1, round(net["received"] / exchanges))
        # Best of 5 batches, as the runs are best of --repeats: a short batch is easily disturbed.
        # As the processes run (the scheduler places them; on a VM a wake-up of an idle vCPU
        # can cost tens of us), and both on one CPU (no cross-CPU wake-up: the kernel's path alone).
        batches = [loopback_rtt(req, rep, args.trips) for _ in range(5)]
        rtt, rtt10 = min(batches)
        rtts = [b[0] for b in batches]
        cpu0 = min(os.sched_getaffinity(0))
        rtt_one, rtt_one10 = min(loopback_rtt(req, rep, args.trips, (cpu0, cpu0)) for _ in range(3))
        clients_dir = os.path.join(work, "net-0", "clients")
        fsyncs = [checkpoint_floor(clients_dir, net["checkpoint_bytes"]) for _ in range(3)]
        fsync = min(fsyncs)

        overhead = net["per_round"] - sim["per_round"]
        per_exchange = overhead / exchanges
        kb = lambda b: f"{b / 1024:.1f} kB"
        idle, joined = net["idle"], net["joined"]
        per_client = (joined["VmRSS"] - idle["VmRSS"]) / S

        print()
        print("(a) seconds per round (metrics.csv, best run)")
        print(f"  NAME-sim ({S} silos on threads):       {ms(sim['per_round'])}   "
              f"(median round {ms(statistics.median(sim['deltas']))})")
        print(f"  server + {S} client processes, gRPC:   {ms(net['per_round'])}   "
              f"(median round {ms(statistics.median(net['deltas']))}; runs {', '.join(ms(n['per_round']) for n in nets)})")
        print(f"  overhead beyond compute:              {ms(overhead)} per round = {overhead / sim['per_round']:.1f}x "
              f"NAME-sim's round")
        print(f"  ELBOs of every round equal NAME-sim's: {'yes' if same else 'NO'}")
        print(f"  payload per round (server's count): sent {kb(net['sent'])}, received {kb(net['received'])} "
              f"= {net['sent'] / S:.0f} B + {net['received'] / S:.0f} B per silo")
        print(f"  on the loopback interface, all silos joined -> server exit, per round: {kb(net['wire'])} "
              f"({net['wire'] / (net['sent'] + net['received']):.1f}x the payload; TCP/IP headers, ACKs, "
              f"HTTP/2 and gRPC framing, the 5 s NextTask polls; any other loopback traffic too)")
        if shms:
            best_shm = min(shms, key=lambda m: m["per_round"])
            print(f"  same, outputs and checkpoints on tmpfs (fsync free): {ms(best_shm['per_round'])} per round "
                  f"(runs {', '.join(ms(m['per_round']) for m in shms)})")
        print(f"  CPU, whole processes (start-up and data loading included): NAME-sim {sim['cpu']:.2f} s "
              f"in {sim['wall']:.2f} s wall; server {net['server_cpu']:.2f} s + {S} clients "
              f"{net['clients_cpu']:.2f} s in {net['server_wall']:.2f} s wall")
        busy = (net["server_cpu_round"] + net["clients_cpu_round"]) * R / net["rounds_wall"]
        print(f"  CPU per round from all joined to the server's exit: server {ms(net['server_cpu_round'])} + "
              f"clients {ms(net['clients_cpu_round'])}; NAME-sim whole process {ms(sim['cpu'] / R)}; "
              f"{busy:.2f} of the machine's {os.cpu_count()} cores busy in that window")
        print()
        print("(b) the server's memory (/proc/PID/status, best run)")
        print(f"  listening, no client:   VmRSS {idle['VmRSS']} kB, {idle['Threads']} threads")
        print(f"  all {S} silos joined:   VmRSS {joined['VmRSS']} kB, {joined['Threads']} threads")
        print(f"  per connected client:   {per_client:.1f} kB  (= (RSS_{S} - RSS_0) / {S})")
        print(f"  during the rounds:      VmRSS at most {net['max_rss']} kB (sampled every 50 ms); "
              f"peak VmHWM {net['peak']} kB")
        print(f"  each run's per-client figure: "
              f"{', '.join('%.1f' % ((n['joined']['VmRSS'] - n['idle']['VmRSS']) / S) for n in nets)} kB; "
              f"a client's own peak RSS (median): {net['client_maxrss']:.0f} kB; NAME-sim's peak: {sim['maxrss']} kB")
        print()
        print("(c) the machine's limits, same run")
        print(f"  loopback TCP request/reply ({req} B / {rep} B, two Python processes, TCP_NODELAY, "
              f"{args.trips} trips, best of 5 batches): median {us(rtt)}, 10th percentile {us(rtt10)}; "
              f"the batches' medians {', '.join(us(t) for t in rtts)}")
        print(f"  same, both processes pinned to CPU {cpu0} (best of 3 batches): median {us(rtt_one)}, "
              f"10th percentile {us(rtt_one10)}")
        print(f"  checkpoint write + fsync + rename ({net['checkpoint_bytes']} B, {clients_dir}, best of 3 x 100): median {us(fsync)}; "
              f"the batches' medians {', '.join(us(t) for t in fsyncs)}")
        print(f"  overhead per exchange = {ms(overhead)} / ({S} x 2) = {us(per_exchange)} = "
              f"{per_exchange / rtt:.1f}x the loopback round trip ({per_exchange / rtt_one:.1f}x the pinned one)")
        floor = 2 * rtt + fsync
        print(f"  one exchange's floor if done one after another (NextTask + Submit round trips + the "
              f"client's checkpoint): {us(floor)}; overhead per exchange / that = {per_exchange / floor:.2f}")
        print()
        print(f"summary: {S} silos, {R} rounds: networked {ms(net['per_round'])} per round against NAME-sim's "
              f"{ms(sim['per_round'])}: {ms(overhead)} of overhead per round, {us(per_exchange)} per silo "
              f"exchange ({per_exchange / rtt:.0f}x a {us(rtt)} loopback round trip; a checkpoint fsync is "
              f"{us(fsync)}); {per_client:.0f} kB of server memory per connected client, server peak "
              f"{net['peak'] / 1024:.1f} MB")
        return 0
    except Failure as e:
        print(f"bench_deploy: FAILED\n{e}", file=sys.stderr)
        return 1
    finally:
        end_everything()
        for folder in (work, shm):
            if folder and args.keep:
                print(f"  kept {folder}")
            elif folder:
                shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
