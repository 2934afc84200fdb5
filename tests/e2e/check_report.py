#!/usr/bin/env python3
"""fvic report's page, opened in headless Chromium (issue 31).

Usage: check_report.py FVIC CACHE CASE ARTIFACTS

Each case runs an example with its defaults (the run writes OUT/report.html and says so), makes
the report again (`fvic report OUT`), and loads the page in Debian's Chromium (--headless --dump-dom, with a virtual-time budget so the charts'
promises settle). The page's script (report/page.js) marks <body> with data-charts (the charts it
asked Vega-Lite for) and data-rendered (those that rendered), and data-errors on any failure. The
check reads the rendered DOM: every chart rendered, no error, and every chart's SVG holds marks
with data (a path, line or rect with geometry); the sections the run's method has are present;
the page is self-contained (no src= or href= to anything but the page itself); Chromium's console
printed no error. A screenshot of each page is kept in ARTIFACTS.

  pvi   examples/pima_logreg with --test: the objective and each silo's term of it (its
        expected log likelihood), the held-out metrics, 9 marginals with their stated
        normal(0, 10) priors, traffic per round and per silo.
  sfvi  examples/hier_logreg (SFVI): the server's page (each silo's term of the ELBO charted; k-hat
        0.89 read as the tail check reads it: its means and sds close),
        and silo 1's page from OUT/silo-1 (its local alpha's marginals, no plan: the silo's own
        outputs).
  vfl   examples/vfl_logreg (vertical, two silos): the server's page.

Exits 77 (skipped) when Chromium is not installed; scripts/test.sh installs it.
"""
import html
import html.parser
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


def require(condition, message):
    if not condition:
        print("FAIL: " + message)
        sys.exit(1)


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    require(p.returncode == 0, "%s failed (%d):\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p


class Page(html.parser.HTMLParser):
    """The rendered DOM: body's data attributes, each chart's marks, outside references."""

    def __init__(self):
        super().__init__()
        self.body = {}
        self.charts = {}        # id -> number of mark shapes with geometry
        self.stack = []         # open elements: (tag, chart id or None)
        self.references = []    # src/href values
        self.headings = []
        self.in_heading = False

    def current_chart(self):
        for tag, chart in reversed(self.stack):
            if chart:
                return chart
        return None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        chart = None
        if tag == "div" and "chart" in (a.get("class") or "").split():
            chart = a.get("id")
            self.charts[chart] = 0
        for key in ("src", "href"):
            if key in a and a[key] and not a[key].startswith("#"):
                self.references.append(a[key])
        inside = self.current_chart()
        if inside and tag in ("path", "line", "rect") and any(k in a for k in ("d", "x1", "width")):
            # Vega draws marks as paths (d), rules as lines, and rects; an empty path has d="".
            if a.get("d") not in ("", None) or "x1" in a or (a.get("width") not in (None, "0")):
                self.charts[inside] += 1
        if tag in ("h1", "h2"):
            self.in_heading = True
            self.headings.append("")
        if tag not in ("br", "img", "meta", "input", "link", "hr"):
            self.stack.append((tag, chart))

    def handle_endtag(self, tag):
        if tag in ("h1", "h2"):
            self.in_heading = False
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break

    def handle_data(self, data):
        if self.in_heading and self.headings:
            self.headings[-1] += data


def open_in_chromium(chromium, page, screenshot, work, url=False):
    """Chromium's DOM of `page` (a file, or with url=True an http address without its scheme)
    after the scripts have run, and its console lines; a screenshot as well."""
    address = ("http://" if url else "file://") + page
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + tempfile.mkdtemp(dir=work), "--virtual-time-budget=20000",
             "--enable-logging=stderr", "--v=0"]
    p = subprocess.run(flags + ["--dump-dom", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    require(p.returncode == 0, "chromium --dump-dom failed:\n" + p.stderr[-3000:])
    console = [line for line in p.stderr.splitlines() if "CONSOLE" in line]
    subprocess.run(flags + ["--hide-scrollbars", "--window-size=1200,4000", "--screenshot=" + screenshot,
                            address], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return p.stdout, console


def check_page(chromium, out, name, artifacts, work, expect_charts, expect_sections):
    page = os.path.join(out, "report.html")
    if not name.endswith("silo-1"):
        require(os.path.exists(page), "the run did not write " + page)
        os.remove(page)
    made = run([FVIC, "report", out])
    require(os.path.exists(page) and "wrote " + page in made.stdout, "fvic report did not write " + page)
    size = os.path.getsize(page)
    require(size < 10 * 1024 * 1024, "%s is %d bytes, over 10 MB" % (page, size))
    screenshot = os.path.join(artifacts, "report-%s.png" % name)
    dom, console = open_in_chromium(chromium, os.path.abspath(page), screenshot, work)
    p = Page()
    p.feed(dom)
    p.dom = dom
    charts, rendered = p.body.get("data-charts"), p.body.get("data-rendered")
    require(charts is not None and rendered is not None,
            "%s: the page never finished rendering (body %s)" % (name, p.body))
    require("data-errors" not in p.body, "%s: the page recorded %s errors (see #report-errors)" % (name, p.body.get("data-errors")))
    require(int(charts) == len(p.charts) and int(rendered) == int(charts) and int(charts) > 0,
            "%s: %s of %s charts rendered, %d chart containers" % (name, rendered, charts, len(p.charts)))
    empty = [c for c, marks in p.charts.items() if marks == 0]
    require(not empty, "%s: charts without any drawn mark: %s" % (name, empty))
    for c in expect_charts:
        require(any(k == c or k.startswith(c) for k in p.charts), "%s: no chart %s among %s" % (name, c, sorted(p.charts)))
    for s in expect_sections:
        require(s in p.headings, "%s: no section %r among %s" % (name, s, p.headings))
    require(not p.references, "%s: the page refers to outside files: %s" % (name, p.references[:5]))
    errors = [line for line in console if "Uncaught" in line or "rror" in line.split("CONSOLE", 1)[1]]
    require(not errors, "%s: the console printed errors:\n%s" % (name, "\n".join(errors[:10])))
    require(os.path.exists(screenshot) and os.path.getsize(screenshot) > 10000, "%s: no screenshot" % name)
    print("%s: %s charts rendered, marks per chart min %d; %d KiB; sections %s; screenshot %s" %
          (name, rendered, min(p.charts.values()), size // 1024, ", ".join(p.headings[1:]), screenshot))
    return p


def fvic_run(cache, model, data, out, extra=()):
    env = dict(os.environ, FVIC_CACHE=cache)
    p = run([FVIC, "run", model, "--data", data, "--output", out] + list(extra), env=env)
    require(re.search(r"^wrote .*report\.html", p.stdout, re.MULTILINE), "the run did not say it wrote report.html")


def case_pvi(chromium, cache, work, artifacts):
    ex = os.path.join(EXAMPLES, "pima_logreg")
    out = os.path.join(work, "pvi")
    fvic_run(cache, os.path.join(ex, "pima_logreg.fvi"), os.path.join(ex, "data"), out,
             ["--test", os.path.join(ex, "data", "test.json")])
    p = check_page(chromium, out, "pvi", artifacts, work,
                   ["chart-objective", "chart-silo-terms", "chart-stopping-rule", "chart-test_log_density",
                    "chart-test_accuracy", "chart-test_ece", "chart-marginal-", "chart-bytes-per-round",
                    "chart-bytes-per-silo"],
                   ["The plan", "Convergence", "Posterior marginals", "Posterior summary", "Traffic", "The model"])
    marginals = [c for c in p.charts if c.startswith("chart-marginal-")]
    require(len(marginals) == 9, "pvi: %d marginals, expected 9 (w[1..8], b)" % len(marginals))


def case_sfvi(chromium, cache, work, artifacts):
    ex = os.path.join(EXAMPLES, "hier_logreg")
    out = os.path.join(work, "sfvi")
    fvic_run(cache, os.path.join(ex, "hier_logreg.fvi"), os.path.join(ex, "data"), out)
    server = check_page(chromium, out, "sfvi", artifacts, work,
               ["chart-objective", "chart-silo-terms", "chart-stopping-rule", "chart-marginal-", "chart-bytes-per-round",
                "chart-bytes-per-silo"],
               ["The plan", "Convergence", "Posterior marginals", "Traffic"])
    # k-hat over 0.7 whose tail check finds q's moments close: posterior.json's khat_reading says
    # so, and the page's facts read it, not "poor". hier_logreg's k-hat is over 0.7, its tail
    # check's own k-hat near 0.7 (0.66 at one version of the stopping rule, 0.76 at the next), so
    # whether its run holds is not this test's to decide: where it does not, the page must read
    # "poor", and the reading the server writes where it holds is put in posterior.json and the
    # page made again, so that the facts' reading of it is checked either way.
    with open(os.path.join(out, "posterior.json")) as f:
        post = json.load(f)
    require(post.get("khat", 0) > 0.7, "sfvi: hier_logreg's k-hat %s, expected over 0.7" % post.get("khat"))
    if "khat_reading" not in post:
        require(re.search(r"\d \(poor", html.unescape(server.dom)), "sfvi: k-hat %.2f, and the page's facts do not say poor"
                % post["khat"])
        post["khat_reading"] = ("poor tails: q's tails are lighter than the posterior's; its means and sds are close "
                                "(the tail check)")  # as runtime/src/program/server_loop.cpp writes it
        with open(os.path.join(out, "posterior.json"), "w") as f:
            json.dump(post, f)
        server = check_page(chromium, out, "sfvi", artifacts, work, ["chart-objective"], ["The plan"])
    require("means and sds are close" in post["khat_reading"],
            "sfvi: posterior.json's k-hat %s with another reading: %r" % (post.get("khat"), post.get("khat_reading")))
    # The facts table's cell: k-hat's figure, then the reading in brackets (the page's data holds the
    # two apart, so only the rendered cell matches).
    require(re.search(r"\d \(" + re.escape(post["khat_reading"]) + r"\)", html.unescape(server.dom)),
            "sfvi: the page's facts do not read k-hat as posterior.json does")
    # A silo's own page: its local posterior only.
    silo = check_page(chromium, os.path.join(out, "silo-1"), "sfvi-silo-1", artifacts, work, ["chart-marginal-"],
                      ["Posterior marginals", "Posterior summary"])
    require("The plan" not in silo.headings, "the silo's page shows a plan it does not hold")


def case_vfl(chromium, cache, work, artifacts):
    ex = os.path.join(EXAMPLES, "vfl_logreg")
    data = os.path.join(work, "vfl-data")
    run([sys.executable, os.path.join(ex, "generate.py"), "--silos", "2", "--output", data])
    out = os.path.join(work, "vfl")
    fvic_run(cache, os.path.join(ex, "vfl_logreg.fvi"), os.path.join(data, "augmented"), out)
    check_page(chromium, out, "vfl", artifacts, work,
               ["chart-objective", "chart-marginal-", "chart-bytes-per-round", "chart-bytes-per-silo"],
               ["The plan", "Convergence", "Posterior marginals", "Traffic"])


def main():
    global FVIC
    if len(sys.argv) != 5:
        print(__doc__)
        return 2
    FVIC, cache, case, artifacts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    chromium = shutil.which("chromium")
    if not chromium:
        print("SKIP: chromium is not installed (scripts/test.sh installs Debian's chromium)")
        return 77
    os.makedirs(artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fvic-report-")
    try:
        {"pvi": case_pvi, "sfvi": case_sfvi, "vfl": case_vfl}[case](chromium, cache, work, artifacts)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
