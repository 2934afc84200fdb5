"""Writing fvic data directories from Python's standard library (no numpy).

Layout (DESIGN.md section 5): `data.json` holds the public `data` block, `silo-K.json` silo K's
`silo data` (K = 1..S), in Stan's JSON format: vectors and int arrays as lists, matrices as lists
of rows. Large arrays go in a directory `silo-K/` with one NumPy `.npy` file (format v1.0) per
variable, the silo's scalars staying in `silo-K.json`. Held-out data is `test.json` (plus `test/`
for arrays), with the same variables as one silo.

The example generators (examples/*/generate.py) import this module; tests/examples/ reads the
files back with its own reader.
"""
import argparse
import array
import json
import math
import os
import re
import struct
import sys

NPY_DTYPES = {"<f4": "f", "<f8": "d", "<i8": "q"}  # .npy descr -> array typecode


def example_arguments(script, doc, writes):
    """The command line of an example's generate.py: `--output DIR`, the folder receiving
    `writes`, by default the script's own folder. Returns the parser (to add options to)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--output", default=os.path.dirname(os.path.abspath(script)),
                        help=f"folder receiving {writes} (default: %(default)s)")
    return parser


def write_json(path, obj):
    """Writes `obj` as one line of JSON plus a newline (byte-identical for identical input)."""
    with open(path, "w") as f:
        json.dump(obj, f)
        f.write("\n")


def write_npy(path, values, shape, descr):
    """Writes a C-order .npy v1.0 file. `values` is an array.array (or a sequence) holding
    prod(shape) elements; `descr` is '<f4', '<f8' or '<i8'."""
    if descr not in NPY_DTYPES:
        raise ValueError(f"write_npy: unsupported dtype {descr!r}")
    code = NPY_DTYPES[descr]
    if not isinstance(values, array.array) or values.typecode != code:
        values = array.array(code, values)
    count = 1
    for n in shape:
        count *= n
    if len(values) != count:
        raise ValueError(f"write_npy {path}: {len(values)} values for shape {tuple(shape)}")
    if sys.byteorder != "little":
        values = array.array(code, values)
        values.byteswap()
    shape = tuple(int(n) for n in shape)
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, shape)
    # Magic (6) + version (2) + header length (2) + header, padded with spaces and ended by a
    # newline so that the data starts on a 64-byte boundary (the .npy format's alignment).
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00")
        f.write(struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        values.tofile(f)


def clear_data_dir(out):
    """Removes the files a previous run left in `out` (data.json, silo-K.json, silo-K/, test*),
    so that the number of silo files is always the number of silos just written."""
    if not os.path.isdir(out):
        os.makedirs(out)
        return
    for name in os.listdir(out):
        path = os.path.join(out, name)
        if not re.fullmatch(r"data\.json|silo-\d+(\.json)?|test(\.json)?", name):
            continue
        if os.path.isdir(path):
            for inner in os.listdir(path):
                if inner.endswith(".npy"):
                    os.remove(os.path.join(path, inner))
            os.rmdir(path)
        else:
            os.remove(path)


def write_data_dir(out, public, silos, test=None):
    """Writes a JSON data directory: `public` (dict) to data.json, silos[k-1] (dict) to
    silo-k.json, and `test` (dict, optional) to test.json."""
    clear_data_dir(out)
    write_json(os.path.join(out, "data.json"), public)
    for k, silo in enumerate(silos, start=1):
        write_json(os.path.join(out, f"silo-{k}.json"), silo)
    if test is not None:
        write_json(os.path.join(out, "test.json"), test)


def write_npy_part(out, name, scalars, arrays):
    """Writes one silo (name 'silo-K') or the test set (name 'test') as `name.json` holding
    `scalars` and a directory `name/` holding one .npy per entry of `arrays`, a dict
    variable -> (values, shape, descr)."""
    write_json(os.path.join(out, f"{name}.json"), scalars)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    for var, (values, shape, descr) in arrays.items():
        write_npy(os.path.join(folder, f"{var}.npy"), values, shape, descr)


def split_round_robin(rows, silos):
    """Deals `rows` to `silos` lists like cards (row i to silo i mod S): a homogeneous split
    whose sizes differ by at most one."""
    return [rows[k::silos] for k in range(silos)]


def split_dirichlet(rows, labels, silos, alpha, rng, min_rows=1, attempts=1000):
    """Label skew (Hsu, Qi and Brown 2019; seed 001's experiments): for each class, proportions
    p ~ Dirichlet(alpha, ..., alpha) over the silos, and that class's rows (in `rows` order,
    shuffled by `rng`) cut into consecutive blocks of sizes round(p * n_class), the last silo
    taking what rounding leaves. Small alpha gives each silo few classes; large alpha approaches
    a homogeneous split. Drawn again (up to `attempts` times) until every silo has `min_rows`
    rows. `labels[i]` is row rows[i]'s class."""
    if alpha <= 0 or silos < 1:
        raise ValueError(f"split_dirichlet: alpha {alpha} and silos {silos} must be positive")
    by_class = {}
    for r, c in zip(rows, labels):
        by_class.setdefault(c, []).append(r)
    for _ in range(attempts):
        out = [[] for _ in range(silos)]
        for c in sorted(by_class):
            members = by_class[c][:]
            rng.shuffle(members)
            g = [rng.gammavariate(alpha, 1.0) for _ in range(silos)]
            total = sum(g)
            if total == 0:  # every draw underflowed (tiny alpha): one silo takes the class
                pick = rng.randrange(silos)
                g, total = [1.0 if k == pick else 0.0 for k in range(silos)], 1.0
            start = 0
            for k in range(silos):
                size = len(members) - start if k == silos - 1 else min(len(members) - start,
                                                                       round(g[k] / total * len(members)))
                out[k] += members[start:start + size]
                start += size
        if all(len(o) >= min_rows for o in out):
            return out
    raise ValueError(f"split_dirichlet: no draw in {attempts} gave every one of {silos} silos "
                     f"{min_rows} rows (alpha {alpha}): fewer silos or a larger alpha")


def split_sizes(rows, sizes):
    """Cuts `rows` into consecutive blocks of the given sizes (which must add up)."""
    if sum(sizes) != len(rows):
        raise ValueError(f"split_sizes: sizes {sizes} do not add up to {len(rows)} rows")
    out, start = [], 0
    for n in sizes:
        out.append(rows[start:start + n])
        start += n
    return out


def cholesky(a):
    """The lower Cholesky factor L (L L' = a) of a small symmetric positive-definite matrix."""
    d = len(a)
    chol = [[0.0] * d for _ in range(d)]
    for i in range(d):
        for j in range(i + 1):
            s = a[i][j] - math.fsum(chol[i][k] * chol[j][k] for k in range(j))
            if i == j:
                if s <= 0.0:
                    raise ValueError("cholesky: the matrix is not positive definite")
                chol[i][i] = math.sqrt(s)
            else:
                chol[i][j] = s / chol[j][j]
    return chol


def mvnormal(rng, mean, cov):
    """One draw from N(mean, cov) for a small dense covariance."""
    chol = cholesky(cov)
    z = [rng.gauss(0.0, 1.0) for _ in mean]
    return [m + math.fsum(chol[i][k] * z[k] for k in range(i + 1)) for i, m in enumerate(mean)]
