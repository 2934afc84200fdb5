#!/usr/bin/env python3
"""Checks the data generators of examples/: usage  check_examples.py FVIC EXAMPLE.

For one example, runs its generate.py twice into temporary folders and checks that
  - both runs give identical bytes (determinism), and the committed data/ (if any) is what the
    generator writes now;
  - every file exists and every variable has the type and shape the model declares, with ints
    inside their declared bounds;
  - silo sizes add up to the total, and the example's own promises hold (exact contamination
    counts, outliers and clean rows where the README says, exact posterior consistent with the
    data, ...), each with a tolerance from the mathematics;
  - `fvic check` accepts the model silently and `fvic plan --data` sees the silos.
Exit 0 on success, 1 on the first failure (with a message), 77 when the example's source data is
not installed (CTest reports the test as skipped).

Files are read back with this script's own JSON/.npy reader, not with examples/common/fvidata.py.
"""
import array
import ast
import collections
import csv
import filecmp
import gzip
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
SKIP = 77
FASHION_SOURCE = "/usr/share/datasets/fashion-mnist"


class Failure(Exception):
    pass


def require(cond, message):
    if not cond:
        raise Failure(message)


# ---------------------------------------------------------------------------------------------
# Reading data directories back

def read_json(path):
    require(os.path.isfile(path), f"missing file {path}")
    with open(path) as f:
        return json.load(f)


def read_npy(path):
    """(descr, shape, values) of a .npy v1.0 file, checked to be C-ordered and complete."""
    require(os.path.isfile(path), f"missing file {path}")
    with open(path, "rb") as f:
        raw = f.read()
    require(raw[:8] == b"\x93NUMPY\x01\x00", f"{path}: not a .npy v1.0 file")
    hlen = int.from_bytes(raw[8:10], "little")
    require((10 + hlen) % 64 == 0, f"{path}: data does not start on a 64-byte boundary")
    header = ast.literal_eval(raw[10:10 + hlen].decode("latin1"))
    require(header["fortran_order"] is False, f"{path}: not C order")
    codes = {"<f4": "f", "<f8": "d", "<i8": "q"}
    require(header["descr"] in codes, f"{path}: dtype {header['descr']} is not <f4, <f8 or <i8")
    values = array.array(codes[header["descr"]])
    values.frombytes(raw[10 + hlen:])
    if sys.byteorder != "little":
        values.byteswap()
    count = math.prod(header["shape"])
    require(len(values) == count,
            f"{path}: {len(values)} values for shape {header['shape']}")
    return header["descr"], tuple(header["shape"]), values


def shape_of(value):
    """The shape of a JSON value (nested lists, rectangular), or None if ragged."""
    if not isinstance(value, list):
        return ()
    inner = [shape_of(v) for v in value]
    if any(s is None or s != inner[0] for s in inner):
        return None
    return (len(value),) + (inner[0] if inner else ())


def flatten(value):
    if isinstance(value, list):
        return [x for v in value for x in flatten(v)]
    return [value]


def check_variable(where, name, value, kind, shape, bounds=(None, None)):
    """A JSON variable: its shape, its element type ('int' or 'real') and its bounds."""
    got = shape_of(value)
    require(got == tuple(shape), f"{where}: `{name}` has shape {got}, the model declares {shape}")
    for v in flatten(value):
        if kind == "int":
            require(isinstance(v, int) and not isinstance(v, bool),
                    f"{where}: `{name}` holds {v!r}, the model declares int")
        else:
            require(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                    f"{where}: `{name}` holds {v!r}, the model declares a finite real")
        lo, hi = bounds
        require((lo is None or v >= lo) and (hi is None or v <= hi),
                f"{where}: `{name}` holds {v}, outside [{lo}, {hi}]")


def read_json_dir(folder, public_schema, silo_schema, silos, test):
    """Reads data.json, silo-1..S.json (exactly S of them) and test.json if `test`, checking each
    against the schemas: name -> (kind, shape in names of ints, bounds). Returns (public, silos,
    test)."""
    names = sorted(os.listdir(folder))
    want = ["data.json"] + [f"silo-{k}.json" for k in range(1, silos + 1)]
    want += ["test.json"] if test else []
    require(names == sorted(want), f"{folder}: files {names}, expected {sorted(want)}")
    public = read_json(os.path.join(folder, "data.json"))
    check_part(folder + "/data.json", public, {}, public_schema)
    parts = []
    for name in want[1:]:
        part = read_json(os.path.join(folder, name))
        check_part(f"{folder}/{name}", part, public, silo_schema)
        parts.append(part)
    return public, parts[:silos], (parts[silos] if test else None)


def check_part(where, part, public, schema):
    require(sorted(part) == sorted(schema),
            f"{where}: variables {sorted(part)}, the model declares {sorted(schema)}")
    sizes = dict(public)
    for name, (kind, shape, bounds) in schema.items():  # scalars first: sizes come from them
        if not shape:
            check_variable(where, name, part[name], kind, (), bounds)
            sizes[name] = part[name]
    for name, (kind, shape, bounds) in schema.items():
        if shape:
            dims = tuple(sizes[d] if isinstance(d, str) else d for d in shape)
            check_variable(where, name, part[name], kind, dims, bounds)


LOGREG = {"N": ("int", (), (0, None)), "x": ("real", ("N", "D"), (None, None)),
          "y": ("int", ("N",), (0, 1))}


# ---------------------------------------------------------------------------------------------
# Running generators and fvic

def run(cmd, expect_rc=0):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    require(proc.returncode == expect_rc,
            f"`{' '.join(cmd)}` exited {proc.returncode} (expected {expect_rc}):\n"
            f"{proc.stdout}{proc.stderr}")
    return proc


def generate(example, out, *extra):
    run([sys.executable, os.path.join(EXAMPLES, example, "generate.py"), "--output", out,
         *extra])


def same_tree(a, b):
    """True if folders a and b hold the same files with identical bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def generate_twice(example, tmp, *extra):
    """Generates into tmp/a and tmp/b; fails unless the two are byte-identical. Returns tmp/a."""
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    generate(example, a, *extra)
    generate(example, b, *extra)
    require(same_tree(a, b), f"two runs of generate.py {' '.join(extra)} differ")
    return a


def check_committed(example, generated, folders):
    """The committed files of the example are exactly what the generator writes now."""
    for name in folders:
        committed = os.path.join(EXAMPLES, example, name)
        fresh = os.path.join(generated, name)
        same = same_tree(committed, fresh) if os.path.isdir(fresh) else filecmp.cmp(
            committed, fresh, shallow=False)
        require(same, f"committed {name} differs from what generate.py writes now; "
                      f"rerun `python3 examples/{example}/generate.py` and commit")


def check_model(fvic, example, data_dirs_and_silos, method="pvi"):
    model = os.path.join(EXAMPLES, example, f"{example}.fvi")
    out = run([fvic, "check", model])
    require(out.stdout == "" and out.stderr == "",
            f"fvic check {model} printed:\n{out.stdout}{out.stderr}")
    for folder, silos in data_dirs_and_silos:
        plan = json.loads(run([fvic, "plan", "--json", model, "--data", folder]).stdout)
        require(plan["method"] == method, f"{model}: plan chose {plan['method']}, not {method}")
        require(plan["silos"] == silos,
                f"fvic plan --data {folder}: {plan['silos']} silos, expected {silos}")


def mean(values):
    return math.fsum(values) / len(values)


def within(name, value, target, tol):
    require(abs(value - target) <= tol,
            f"{name} = {value}, expected {target} within {tol}")


# ---------------------------------------------------------------------------------------------
# The examples

def check_clutter(fvic, tmp):
    out = generate_twice("clutter", tmp)
    check_committed("clutter", out, ["data", "truth.json"])
    data = os.path.join(out, "data")
    _, silos, _ = read_json_dir(data, {}, {"N": ("int", (), (0, None)),
                                           "x": ("real", ("N",), (None, None))}, 5, False)
    require([s["N"] for s in silos] == [20] * 5, f"silo sizes {[s['N'] for s in silos]}")
    truth = read_json(os.path.join(out, "truth.json"))
    c, theta, eps = truth["c"], truth["theta"], truth["eps"]
    within("c - (theta - 2)", c - (theta - 2.0), 0.0, 1e-12)
    within("theta (a draw from N(0, 0.5^2))", theta, 0.0, 5 * 0.5)
    bad = [x for s, rows in zip(silos, truth["contaminated_rows"]) for i, x in enumerate(s["x"])
           if i in rows]
    good = [x for s, rows in zip(silos, truth["contaminated_rows"])
            for i, x in enumerate(s["x"]) if i not in rows]
    require(len(bad) == round(eps * 100) == 25, f"{len(bad)} contaminated rows, not 25")
    # Means of 25 draws of N(c + 5, 0.5^2) and 75 of N(c, 1): 5 standard errors.
    within("mean of contaminated rows", mean(bad), c + 5.0, 5 * 0.5 / math.sqrt(25))
    within("mean of clean rows", mean(good), c, 5 * 1.0 / math.sqrt(75))
    xs = bad + good
    within("NLL posterior mean", truth["nll_posterior"]["mean"],
           math.fsum(xs) / 101, 1e-12)
    within("NLL posterior sd", truth["nll_posterior"]["sd"], 1 / math.sqrt(101), 1e-15)
    check_model(fvic, "clutter", [(data, 5)])


def check_robust_logreg_2d(fvic, tmp):
    out = generate_twice("robust_logreg_2d", tmp)
    check_committed("robust_logreg_2d", out, ["data", "data-clean", "data-pooled", "truth.json"])
    public_schema = {"D": ("int", (), (1, None))}
    dirty = read_json_dir(os.path.join(out, "data"), public_schema, LOGREG, 5, True)
    clean = read_json_dir(os.path.join(out, "data-clean"), public_schema, LOGREG, 5, True)
    pooled = read_json_dir(os.path.join(out, "data-pooled"), public_schema, LOGREG, 1, True)
    for public, _, _ in (dirty, clean, pooled):
        require(public == {"D": 2}, f"data.json is {public}, not D = 2")
    truth = read_json(os.path.join(out, "truth.json"))

    def rows(silo):
        return list(zip(map(tuple, silo["x"]), silo["y"]))

    sizes = [s["N"] for s in dirty[1]]
    require(sum(sizes) == 106 and max(sizes) - min(sizes) <= 1,
            f"silo sizes {sizes} (106 rows, homogeneous)")
    outliers, kept = [], []
    for silo, out_rows, clean_silo in zip(dirty[1], truth["outlier_rows"], clean[1]):
        outliers += [r for i, r in enumerate(rows(silo)) if i in out_rows]
        kept_here = [r for i, r in enumerate(rows(silo)) if i not in out_rows]
        require(kept_here == rows(clean_silo),
                "data-clean is not data without the outliers, silo by silo")
        kept += kept_here
    require(len(outliers) == 6 and all(y == 0 for _, y in outliers),
            f"outliers {outliers} (6 rows labelled 0)")
    require(rows(pooled[1][0]) == [r for s in dirty[1] for r in rows(s)],
            "data-pooled is not silos 1..5 concatenated")
    for test in (dirty[2], clean[2], pooled[2]):
        require(sorted(rows(test)) == sorted(kept),
                "test.json is not the 100 clean rows")
    # Means, 5 standard errors per coordinate from the generating covariances.
    groups = [(outliers, [1.0, 5.0], [0.15, 0.15]),
              ([r for r in kept if r[1] == 1], [3.0, 4.0], [1.0, 0.75]),
              ([r for r in kept if r[1] == 0], [0.0, 0.0], [0.8, 1.0])]
    for group, mu, var in groups:
        for j in range(2):
            within(f"mean of coordinate {j + 1} of a group of {len(group)}",
                   mean([x[j] for x, _ in group]), mu[j], 5 * math.sqrt(var[j] / len(group)))
    line = truth["separating_line"]
    for x, y in kept:
        score = line["w"][0] * x[0] + line["w"][1] * x[1] + line["b"]
        require((score > 0) == (y == 1), f"the line does not separate {x}, {y}")
    check_model(fvic, "robust_logreg_2d", [(os.path.join(out, "data"), 5),
                                           (os.path.join(out, "data-clean"), 5),
                                           (os.path.join(out, "data-pooled"), 1)])


def check_linreg_conjugate(fvic, tmp):
    out = generate_twice("linreg_conjugate", tmp)
    check_committed("linreg_conjugate", out, ["data", "truth.json"])
    data = os.path.join(out, "data")
    schema = {"N": ("int", (), (0, None)), "x": ("real", ("N", "D"), (None, None)),
              "y": ("real", ("N",), (None, None))}
    public, silos, test = read_json_dir(
        data, {"D": ("int", (), (1, None)), "sigma": ("real", (), (0, None))}, schema, 4, True)
    require(public == {"D": 3, "sigma": 0.5}, f"data.json is {public}")
    require([s["N"] for s in silos] == [30, 50, 20, 40] and test["N"] == 100,
            "silo sizes are not 30, 50, 20, 40 with 100 test rows")
    truth = read_json(os.path.join(out, "truth.json"))
    w, sigma, d = truth["w"], public["sigma"], public["D"]
    train = [(x, y) for s in silos for x, y in zip(s["x"], s["y"])]
    # Standardised residuals with the true weights: chi-square with n degrees of freedom (mean
    # n, sd sqrt(2n)), accepted within 5 sds. Rounding to 6 decimals is far below sigma.
    for name, rows in (("training", train), ("test", list(zip(test["x"], test["y"])))):
        chi2 = math.fsum((y - sum(a * b for a, b in zip(w, x))) ** 2 for x, y in rows) / sigma**2
        within(f"{name} chi-square", chi2, len(rows), 5 * math.sqrt(2 * len(rows)))
    # The exact posterior solves (I + X'X / s^2) m = X'y / s^2 with covariance its inverse.
    post = truth["exact_posterior"]
    prec = [[(i == j) + math.fsum(x[i] * x[j] for x, _ in train) / sigma**2 for j in range(d)]
            for i in range(d)]
    rhs = [math.fsum(x[i] * y for x, y in train) / sigma**2 for i in range(d)]
    for i in range(d):
        within(f"row {i} of precision * mean",
               math.fsum(prec[i][j] * post["mean"][j] for j in range(d)), rhs[i],
               1e-10 * max(1.0, abs(rhs[i])))
        within(f"sd {i}", post["sd"][i], math.sqrt(post["cov"][i][i]), 1e-15)
        for j in range(d):
            within(f"(precision * cov)[{i}][{j}]",
                   math.fsum(prec[i][k] * post["cov"][k][j] for k in range(d)), float(i == j),
                   1e-10)
    check_model(fvic, "linreg_conjugate", [(data, 4)])


def check_fsvi_regression(fvic, tmp):
    out = generate_twice("fsvi_regression", tmp)
    check_committed("fsvi_regression", out, ["data", "test.json"])
    data = os.path.join(out, "data")
    schema = {"N": ("int", (), (0, None)), "x": ("real", ("N", 1), (None, None)),
              "y": ("real", ("N",), (None, None))}
    public_schema = {"H": ("int", (), (1, None)), "sigma": ("real", (), (0, None)), "T": ("int", (), (1, None)),
                     "x_grid": ("real", ("T", 1), (None, None))}
    public, silos, _ = read_json_dir(data, public_schema, schema, 2, False)
    test = read_json(os.path.join(out, "test.json"))
    require([s["N"] for s in silos] == [80, 80] and test["N"] == 40, "silo sizes are not 80, 80 with 40 test rows")
    xs = [[x[0] for x in s["x"]] for s in silos] + [[x[0] for x in test["x"]]]
    # spec 001 §4.1: x = 5 (x' 0.72 + 0.1) with x' in [0, 1); the split by sorted x puts every
    # point of silo 1 below every point of silo 2.
    require(all(0.5 <= x < 4.1 for part in xs for x in part), "an x outside [0.5, 4.1)")
    require(xs[0] == sorted(xs[0]) and xs[1] == sorted(xs[1]) and max(xs[0]) <= min(xs[1]),
            "the silos are not the training points sorted by x and cut in half")
    grid = [g[0] for g in public["x_grid"]]
    require(public["H"] == 100 and abs(grid[0] + 3.1) < 1e-9 and abs(grid[-1] - 7.7) < 1e-9,
            f"H = {public['H']}, grid [{grid[0]}, {grid[-1]}]: not 100 units over [-3.1, 7.7]")
    within("sigma", public["sigma"], 8 * math.sqrt(0.03), 1e-6)
    check_model(fvic, "fsvi_regression", [(data, 2)], method="fedavg_fsvi")


def check_pima_logreg(fvic, tmp):
    out = generate_twice("pima_logreg", tmp)
    check_committed("pima_logreg", out, ["data", "standardisation.json"])
    data = os.path.join(out, "data")
    public, silos, test = read_json_dir(data, {"D": ("int", (), (1, None))}, LOGREG, 3, True)
    require(public == {"D": 8}, f"data.json is {public}")
    sizes = [s["N"] for s in silos]
    require(sizes == [205, 205, 204] and test["N"] == 154,
            f"silo sizes {sizes} and {test['N']} test rows (expected 205, 205, 204; 154)")
    with open(os.path.join(EXAMPLES, "pima_logreg", "raw", "pima.csv"), newline="") as f:
        raw = [([float(v) for v in r[:8]], int(r[8] == "pos")) for r in list(csv.reader(f))[1:]]
    require(len(raw) == 768, f"raw/pima.csv has {len(raw)} rows, not 768")
    scale = read_json(os.path.join(out, "standardisation.json"))
    mu, sd = scale["mean"], scale["sd"]
    train = [(x, y) for s in silos for x, y in zip(s["x"], s["y"])]
    # Every raw row appears exactly once, in a silo or in the test set (raw values have at most
    # 3 decimals, so rounding the un-standardised values to 4 decimals recovers them exactly).
    back = sorted((tuple(round(v * s + m, 4) for v, s, m in zip(x, sd, mu)), y)
                  for x, y in train + list(zip(test["x"], test["y"])))
    require(back == sorted((tuple(round(v, 4) for v in x), y) for x, y in raw),
            "the silos and the test set are not the raw rows, each exactly once")
    # Standardised with the training rows' statistics: mean 0 and sd (n - 1) 1 on train.
    for j in range(8):
        col = [x[j] for x, _ in train]
        within(f"training mean of feature {j + 1}", mean(col), 0.0, 1e-12)
        var = math.fsum(v * v for v in col) / (len(col) - 1)
        within(f"training sd of feature {j + 1}", math.sqrt(var), 1.0, 1e-12)
    check_model(fvic, "pima_logreg", [(data, 3)])


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    return raw[4 + 4 * dims:]


def read_npy_dir(folder, part, rows, d, k):
    """Checks `part`.json ({"N": rows}) and part/{x,y}.npy; returns (x, y)."""
    require(read_json(os.path.join(folder, f"{part}.json")) == {"N": rows},
            f"{folder}/{part}.json is not {{\"N\": {rows}}}")
    descr, shape, x = read_npy(os.path.join(folder, part, "x.npy"))
    require(descr == "<f4" and shape == (rows, d), f"{part}/x.npy: {descr} {shape}")
    require(min(x) >= 0.0 and max(x) <= 1.0, f"{part}/x.npy: pixels outside [0, 1]")
    descr, shape, y = read_npy(os.path.join(folder, part, "y.npy"))
    require(descr == "<i8" and shape == (rows,), f"{part}/y.npy: {descr} {shape}")
    require(min(y) >= 1 and max(y) <= k, f"{part}/y.npy: labels outside 1..{k}")
    require(sorted(os.listdir(os.path.join(folder, part))) == ["x.npy", "y.npy"],
            f"{folder}/{part}: files other than x.npy and y.npy")
    return x, y


def check_fashion_bnn(fvic, tmp):
    if not os.path.isfile(os.path.join(FASHION_SOURCE, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: {FASHION_SOURCE} is absent: install Debian's dataset-fashion-mnist "
              "(scripts/setup.sh does)")
        sys.exit(SKIP)
    # Bad arguments and a missing source fail with a message, not a traceback.
    gen = [sys.executable, os.path.join(EXAMPLES, "fashion_bnn", "generate.py")]
    proc = run(gen + ["--contamination", "150", "--output", os.path.join(tmp, "bad")], 2)
    require("--contamination" in proc.stderr, f"no message for --contamination 150: {proc.stderr}")
    proc = run(gen + ["--source", os.path.join(tmp, "nowhere"), "--output", tmp], 1)
    require("dataset-fashion-mnist" in proc.stderr, f"no message for a missing source: {proc.stderr}")

    per_silo, n_test, silos, d, k = 600, 1000, 3, 784, 10
    dirty = generate_twice("fashion_bnn", os.path.join(tmp, "p20"),
                           "--slice", str(per_silo), "--contamination", "20")
    clean, light = os.path.join(tmp, "p0"), os.path.join(tmp, "p10")
    generate("fashion_bnn", clean, "--slice", str(per_silo), "--contamination", "0")
    generate("fashion_bnn", light, "--slice", str(per_silo), "--contamination", "10")
    for folder in (dirty, clean):
        names = sorted(os.listdir(folder))
        want = sorted(["data.json", "test.json", "test"] + [f"silo-{s}{e}" for s in (1, 2, 3)
                                                            for e in (".json", "")])
        require(names == want, f"{folder}: files {names}, expected {want}")
        require(read_json(os.path.join(folder, "data.json")) == {"D": 784, "H": 200, "K": 10},
                f"{folder}/data.json is not D = 784, H = 200, K = 10")

    # The raw images, keyed by their bytes, with the (1-based) labels they carry.
    train_images = read_idx(os.path.join(FASHION_SOURCE, "train-images-idx3-ubyte.gz"))
    train_labels = read_idx(os.path.join(FASHION_SOURCE, "train-labels-idx1-ubyte.gz"))
    labels_of, copies = {}, collections.Counter()
    for i, c in enumerate(train_labels):
        image = train_images[i * d:(i + 1) * d]
        labels_of.setdefault(image, set()).add(c + 1)
        copies[image] += 1
    pixel = array.array("f", [v / 255 for v in range(256)])

    changed, changed10, seen = 0, 0, collections.Counter()
    for s in range(1, silos + 1):
        x, y = read_npy_dir(dirty, f"silo-{s}", per_silo, d, k)
        x0, y0 = read_npy_dir(clean, f"silo-{s}", per_silo, d, k)
        require(x == x0, f"silo {s}: the images differ between 0% and 20% contamination")
        changed += sum(a != b for a, b in zip(y, y0))
        _, y10 = read_npy_dir(light, f"silo-{s}", per_silo, d, k)
        changed10 += sum(a != b for a, b in zip(y10, y0))
        require(all(b == c for a, b, c in zip(y0, y10, y) if a != b),
                f"silo {s}: a label wrong at 10% is not wrong the same way at 20% (nesting)")
        for r in range(per_silo):
            row = x0[r * d:(r + 1) * d]
            image = bytes(round(v * 255) for v in row)
            require(array.array("f", (pixel[p] for p in image)) == row,
                    f"silo {s} row {r + 1}: pixels are not p / 255 in float32")
            require(y0[r] in labels_of.get(image, ()),
                    f"silo {s} row {r + 1}: not a training image with clean label {y0[r]}")
            seen[image] += 1
    require(changed == (20 * silos * per_silo + 50) // 100,
            f"{changed} training labels differ from the clean ones, expected exactly 20% of "
            f"{silos * per_silo}")
    require(changed10 == (10 * silos * per_silo + 50) // 100,
            f"{changed10} training labels differ at 10%, expected exactly 10% of {silos * per_silo}")
    # Rows are distinct training images: no image appears more often than in the raw data.
    for image, count in seen.items():
        require(count <= copies[image], f"an image appears {count} times in the silos but "
                                        f"{copies[image]} times in the training set")

    test_images = read_idx(os.path.join(FASHION_SOURCE, "t10k-images-idx3-ubyte.gz"))
    test_labels = read_idx(os.path.join(FASHION_SOURCE, "t10k-labels-idx1-ubyte.gz"))
    for folder in (dirty, clean):
        x, y = read_npy_dir(folder, "test", n_test, d, k)
        require(list(y) == [c + 1 for c in test_labels[:n_test]],
                f"{folder}/test: labels are not the first {n_test} clean test labels")
        require(x == array.array("f", (pixel[p] for p in test_images[:n_test * d])),
                f"{folder}/test: images are not the first {n_test} test images / 255")
    check_model(fvic, "fashion_bnn", [(dirty, silos)])
    check_fashion_skew(tmp, labels_of, copies, d, k)


def check_fashion_skew(tmp, labels_of, copies, d, k):
    """--partition dirichlet: every kept training image in exactly one silo, and the class shares
    across the silos as spread as Dirichlet(alpha) makes them; --ood: the two noise sets."""
    silos, per_silo, alpha = 10, 60, 0.1
    skew = generate_twice("fashion_bnn", os.path.join(tmp, "skew"), "--slice", str(per_silo), "--silos", str(silos),
                          "--partition", "dirichlet", "--alpha", str(alpha), "--ood", "--test-rows", "500")
    counts = [[0] * k for _ in range(silos)]
    seen = collections.Counter()
    for s in range(1, silos + 1):
        n = read_json(os.path.join(skew, f"silo-{s}.json"))["N"]
        require(n >= 1, f"silo {s} of the Dirichlet split has no rows")
        x, y = read_npy_dir(skew, f"silo-{s}", n, d, k)
        for r in range(n):
            image = bytes(round(v * 255) for v in x[r * d:(r + 1) * d])
            require(y[r] in labels_of.get(image, ()), f"skewed silo {s} row {r + 1}: not a training image")
            seen[image] += 1
            counts[s - 1][y[r] - 1] += 1
    require(sum(seen.values()) == silos * per_silo, f"the Dirichlet split holds {sum(seen.values())} rows, "
                                                     f"expected {silos * per_silo}")
    for image, count in seen.items():
        require(count <= copies[image], "an image appears twice in the Dirichlet split")
    # Each class's shares over the silos are a draw of Dirichlet(alpha, ..., alpha): each share has
    # mean 1/S and variance (1/S)(1 - 1/S)/(S alpha + 1) (0.045 here; rounding adds under 1e-4).
    # Over 10 classes the mean square's relative standard error is about 25%: a factor of 2 is 4.
    expected = (1 / silos) * (1 - 1 / silos) / (silos * alpha + 1)
    squares = []
    for c in range(k):
        n_c = sum(counts[s][c] for s in range(silos))
        squares += [(counts[s][c] / n_c - 1 / silos) ** 2 for s in range(silos)]
    got = sum(squares) / len(squares)
    print(f"fashion_bnn: Dirichlet({alpha}) over {silos} silos: share variance {got:.4f}, expected {expected:.4f}")
    require(expected / 2 <= got <= 2 * expected, f"class shares vary by {got:.4f}, Dirichlet({alpha}) gives {expected:.4f}")
    # The OOD sets: 500 rows each, labels 1, pixels standard uniform / standard normal.
    for name, mean, sd in (("ood-uniform", 0.5, math.sqrt(1 / 12)), ("ood-normal", 0.0, 1.0)):
        require(read_json(os.path.join(skew, f"{name}.json")) == {"N": 500}, f"{name}.json is not {{\"N\": 500}}")
        descr, shape, x = read_npy(os.path.join(skew, name, "x.npy"))
        require(descr == "<f4" and shape == (500, d), f"{name}/x.npy: {descr} {shape}")
        _, _, y = read_npy(os.path.join(skew, name, "y.npy"))
        require(set(y) == {1}, f"{name}/y.npy: labels other than 1")
        m = sum(x) / len(x)
        v = sum((a - m) ** 2 for a in x) / (len(x) - 1)
        se = sd / math.sqrt(len(x))  # 392,000 pixels
        require(abs(m - mean) < 5 * se and abs(math.sqrt(v) - sd) < 0.01 * sd,
                f"{name}: pixel mean {m:.4f} sd {math.sqrt(v):.4f}, expected {mean} and {sd:.4f}")
        if name == "ood-uniform":
            require(min(x) >= 0 and max(x) < 1, "ood-uniform: pixels outside [0, 1)")


CHECKS = {"clutter": check_clutter, "robust_logreg_2d": check_robust_logreg_2d,
          "linreg_conjugate": check_linreg_conjugate, "pima_logreg": check_pima_logreg,
          "fashion_bnn": check_fashion_bnn, "fsvi_regression": check_fsvi_regression}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CHECKS:
        sys.exit(f"usage: check_examples.py FVIC {{{','.join(CHECKS)}}}")
    fvic, example = sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix=f"fvi-{example}-") as tmp:
        try:
            CHECKS[example](fvic, tmp)
        except Failure as e:
            print(f"FAIL: {example}: {e}")
            return 1
    print(f"{example}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
