#!/usr/bin/env python3
"""NAME-server --status-port: the live page of a deployed run, one client killed and back (issue 31).

Usage: check_status_page.py FVIC CACHE ARTIFACTS

pima_logreg deployed as the demo deploys it (scripts/demo.sh): the server and three clinics, each
with its own silo-K.json, over gRPC (tokens, no TLS here: the page is what is tested), the server
with --status-port 0 (127.0.0.1, a free port it prints), --quorum 2 --deadline 6 and a fixed 30
rounds. (A round takes about 0.4 s; with a 2 s deadline, rounds run while headless Chromium renders
the page on the same 2 cores missed every reply once, and the server rightly gave up.) Once some rounds are done, clinic 2 is killed (SIGKILL):

  - status.json (read over HTTP) says silo 2 missed the last exchange, its count of missed
    replies grows, and the server's log on the page says "going on without silo(s) 2";
  - the page, opened in headless Chromium from the server (it fetches status.json itself),
    renders every chart with data and shows silo 2's row as "missing" (screenshot kept);

then clinic 2 is started again with --resume:

  - status.json and the page show it "answering" again and the log "silo rejoined: silo 2"; the
    run ends, every party exit 0, the server with OUT/report.html and each clinic with its own
    silo-K/report.html.

Before the clinics join, requests that are not GET of / or /status.json get 405 or 404, an
8 KiB+ header 431, bytes that are not HTTP 400, and the page goes on serving.

Exits 77 without chromium or openssl.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_deploy import EXAMPLES, Deployment, Model, programs, round_lines  # noqa: E402
from check_pvi import Failure  # noqa: E402
from check_report import Page, open_in_chromium  # noqa: E402

DATA = os.path.join(EXAMPLES, "pima_logreg", "data")
ROUNDS = 30


def fetch(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read()


def status(port):
    code, kind, body = fetch(port, "/status.json")
    if code != 200 or not kind.startswith("application/json"):
        raise Failure(f"GET /status.json: {code} {kind}")
    return json.loads(body)


def raw_request(port, text):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(text)
        reply = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:  # the server closed with some of our bytes unread
                break
            if not chunk:
                break
            reply += chunk
    return reply.split(b"\r\n", 1)[0].decode(errors="replace")


def silo_row(page_dom, k):
    m = re.search(rf'<tr[^>]*data-silo="{k}"[^>]*data-status="([^"]+)"', page_dom)
    return m.group(1) if m else None


def rendered_page(d, chromium, port, work, screenshot, want):
    """The page from the server, in Chromium, until `want(dom)` holds (the page redraws every 2 s)."""
    end = time.monotonic() + 40
    while True:
        dom, console = open_in_chromium(chromium, f"127.0.0.1:{port}/", screenshot, work, url=True)
        p = Page()
        p.feed(dom)
        d.check("data-errors" not in p.body, f"the status page recorded errors: {p.body}")
        errors = [line for line in console if "Uncaught" in line]
        d.check(not errors, "the status page's console:\n" + "\n".join(errors))
        if p.body.get("data-rendered") is not None and want(dom):
            d.check(int(p.body["data-rendered"]) == int(p.body["data-charts"]) == len(p.charts) > 0,
                    f"{p.body.get('data-rendered')} of {p.body.get('data-charts')} charts rendered")
            empty = [c for c, marks in p.charts.items() if marks == 0]
            d.check(not empty, f"status page charts without marks: {empty}")
            return dom, p
        if time.monotonic() > end:
            d.fail("the status page never showed what was expected; its DOM ends:\n" + dom[-3000:])
        time.sleep(1)


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    fvic, cache, artifacts = sys.argv[1:]
    chromium = shutil.which("chromium")
    if not chromium or not shutil.which("openssl"):
        print("SKIP: chromium or openssl is not installed (scripts/test.sh installs chromium)")
        return 77
    os.makedirs(artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fvic-status-")
    bins = programs(fvic, cache, Model("pima_logreg", None))
    tokens = {k: subprocess.run(["openssl", "rand", "-hex", "16"], capture_output=True, text=True).stdout.strip()
              for k in (1, 2, 3)}
    with open(os.path.join(work, "tokens"), "w") as f:
        f.writelines(f"{k} {t}\n" for k, t in tokens.items())
    for k, t in tokens.items():
        with open(os.path.join(work, f"silo-{k}.token"), "w") as f:
            f.write(t + "\n")
        os.chmod(os.path.join(work, f"silo-{k}.token"), 0o600)
    os.chmod(os.path.join(work, "tokens"), 0o600)
    out, silos = os.path.join(work, "server"), os.path.join(work, "clinics")
    d = Deployment(work, bins, DATA)

    def client(k, extra=(), name=None):
        return d.start(name or f"client-{k}", [bins["client"], "--server", f"127.0.0.1:{port}", "--silo", str(k),
                                               "--data", DATA, "--output", silos, "--insecure", "--token-file",
                                               os.path.join(work, f"silo-{k}.token"), "--reconnect-timeout", "30"]
                       + list(extra))

    try:
        server = d.start("server", [bins["server"], "--listen", "127.0.0.1:0", "--silos", "3", "--data", DATA,
                                    "--output", out, "--insecure", "--tokens", os.path.join(work, "tokens"),
                                    "--quorum", "2", "--deadline", "6", "--join-timeout", "60", "--give-up", "60",
                                    "--status-port", "0", "--set", f"rounds={ROUNDS}", "--set", "local_steps=1000"])
        listening = re.compile(r"listening on 127\.0\.0\.1:(\d+) ")
        page_at = re.compile(r"status page at http://127\.0\.0\.1:(\d+)/")
        d.until("the listening and status page lines", lambda: listening.search(server.stdout()) and
                page_at.search(server.stdout()), 20, [server])
        port, status_port = int(listening.search(server.stdout()).group(1)), int(page_at.search(server.stdout()).group(1))
        s = status(status_port)
        d.check(s["state"] == "waiting for the silos" and s["silos"] == 3 and not any(r["joined"] for r in s["silo_table"]),
                f"before any silo joined: {s['state']}, {s['silo_table']}")
        # What a browser may not do.
        for request, expected in [(b"POST / HTTP/1.1\r\nHost: x\r\n\r\n", "405"),
                                  (b"GET /../../etc/passwd HTTP/1.1\r\n\r\n", "404"),
                                  (b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n", "431"),
                                  (b"\x00\xff garbage\r\n\r\n", "400")]:
            line = raw_request(status_port, request)
            d.check(expected in line, f"{request[:30]!r}: answered {line!r}, expected {expected}")
        d.check(status(status_port)["state"] == "waiting for the silos", "the status page stopped answering")

        clients = {k: client(k) for k in (1, 2, 3)}
        steps = lambda: len(round_lines(server.stdout()))  # noqa: E731
        d.until("3 rounds", lambda: steps() >= 3, 60, [server])
        clients[2].kill()
        killed_after = steps()
        d.check(killed_after < ROUNDS - 8, f"the run was nearly over ({killed_after} rounds) when clinic 2 was killed")
        d.until("status.json saying silo 2 missed the last exchange",
                lambda: status(status_port)["silo_table"][1]["missed_last_report"], 40, [server])
        s = status(status_port)
        d.check(s["silo_table"][1]["missing_replies"] >= 1 and not s["silo_table"][0]["missed_last_report"] and
                not s["silo_table"][2]["missed_last_report"], f"status.json's silos while 2 is down: {s['silo_table']}")
        d.check(any("going on without silo(s) 2" in e["text"] for e in s["events"]),
                f"the page's log lacks 'going on without silo(s) 2': {s['events'][-5:]}")
        missing_dom, p = rendered_page(d, chromium, status_port, work, os.path.join(artifacts, "status-silo-missing.png"),
                                       lambda dom: silo_row(dom, 2) == "missing")
        d.check(silo_row(missing_dom, 1) == "answering" and silo_row(missing_dom, 3) == "answering",
                f"silos 1 and 3 on the page: {silo_row(missing_dom, 1)}, {silo_row(missing_dom, 3)}")
        print(f"status_page: clinic 2 killed after {killed_after} rounds; status.json and the page (charts "
              f"{p.body['data-rendered']}/{p.body['data-charts']}) show silo 2 missing, "
              f"{s['silo_table'][1]['missing_replies']} replies missed")

        back = client(2, ["--resume"], name="client-2-resumed")
        d.until("status.json showing silo 2 answering again", lambda: (lambda t: t["step"] > killed_after + 1 and
                not t["silo_table"][1]["missed_last_report"] and
                any("silo rejoined: silo 2" in e["text"] for e in t["events"]))(status(status_port)), 60, [server])
        back_dom, _ = rendered_page(d, chromium, status_port, work, os.path.join(artifacts, "status-silo-back.png"),
                                    lambda dom: silo_row(dom, 2) == "answering")
        d.check("silo rejoined: silo 2" in back_dom, "the page's log does not show the rejoin")

        for party in (server, clients[1], clients[3], back):
            d.wait(party, 180)
        # The run's page, and each clinic's own page of its outputs, written at the end.
        d.check(os.path.exists(os.path.join(out, "report.html")) and "report.html" in server.stdout(),
                "the server did not write and name OUT/report.html")
        for k in (1, 2, 3):
            page = os.path.join(silos, f"silo-{k}", "report.html")
            d.check(os.path.exists(page), f"clinic {k} wrote no {page}")
        print(f"status_page: clinic 2 back with --resume: the page shows it answering and 'silo rejoined: silo 2'; "
              f"the run ended ({steps()} rounds)")
    except Failure as e:
        print("FAIL: " + str(e))
        return 1
    finally:
        d.close()
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
