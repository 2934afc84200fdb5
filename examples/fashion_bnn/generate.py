#!/usr/bin/env python3
"""FashionMNIST with random label contamination, 3 silos (FedGVI, seed 000 section 5.5, Table 2):
deterministic, seed 20250505.

Source: the idx files of Debian's dataset-fashion-mnist package (/usr/share/datasets/
fashion-mnist). Inputs are pixels / 255 as float32 784-vectors (row-major 28 x 28); labels are
1-based (class c of the idx file is label c + 1, as the model's categorical runs over 1..K).

Procedure, in this order:
  1. The 60,000 training images are shuffled (seed SEED). With --slice N only the first S * N of
     the shuffled images are kept (a uniformly random subset), and only the first --test-rows
     test images.
  2. Contamination (the authors' `random_contamination`): exactly round(P / 100 * n) of the n
     training rows, chosen uniformly at random without replacement, get a label drawn uniformly
     from the K - 1 *other* classes. The choice is nested: the rows contaminated at 10% are
     among those at 20%, with the same wrong labels (one random order and one random offset
     1..K-1 per row, drawn from seed SEED + 1 independently of P).
  3. The rows are dealt into S silos (row i of the shuffled order to silo i mod S): a
     homogeneous split, 20,000 rows each for S = 3. With --partition dirichlet, label skew
     instead (seed 001's experiments: 100 clients, alpha 1): for each class, proportions over
     the silos drawn from Dirichlet(alpha) and its rows cut by them (examples/common/fvidata.py
     split_dirichlet; seed SEED + 2), drawn again until every silo has a row. The labels the
     skew follows are the (possibly contaminated) training labels.
  4. The test images keep their true labels: the test set is clean.
  5. With --ood, two out-of-distribution sets of as many rows as the test set, for `fvic run
     --ood` (MNIST is not packaged in Debian; seed 001's other OOD sets stand in): ood-uniform,
     pixels from the standard uniform, and ood-normal, from the standard normal (seed SEED + 3);
     their labels are all 1 (the likelihood needs one; it is never scored); and ood-noise, the
     first half of each (against it an AUROC is the mean of the two sets' AUROCs).

Writes OUT/data.json (D = 784, H = 200, K = 10), OUT/silo-K.json (N) with OUT/silo-K/{x,y}.npy,
and OUT/test.json (N) with OUT/test/{x,y}.npy (with --ood also OUT/ood-uniform and
OUT/ood-normal alike); x is '<f4' N x 784, y is '<i8' N.
OUT defaults to build/fashion_bnn/data-P (data-P-sliceN with --slice) in the repository.
"""
import argparse
import array
import gzip
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20250505
D, H, K = 784, 200, 10
SOURCE = "/usr/share/datasets/fashion-mnist"
PIXEL = [v / 255.0 for v in range(256)]


def read_idx(path, magic, dims):
    """The payload bytes of an idx file (gzip) whose header has `magic` and `dims` sizes."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"fashion_bnn: cannot read {path}: {e}\n"
                 "  install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist)"
                 " or pass --source DIR")
    head = struct.unpack(">" + "I" * (1 + dims), raw[:4 * (1 + dims)])
    size = 1
    for n in head[1:]:
        size *= n
    if head[0] != magic or len(raw) != 4 * (1 + dims) + size:
        sys.exit(f"fashion_bnn: {path} is not an idx file of magic {magic} "
                 f"(header {head}, {len(raw)} bytes)")
    return head[1], raw[4 * (1 + dims):]


def load(source, split):
    n, images = read_idx(os.path.join(source, f"{split}-images-idx3-ubyte.gz"), 2051, 3)
    m, labels = read_idx(os.path.join(source, f"{split}-labels-idx1-ubyte.gz"), 2049, 1)
    if n != m or len(images) != n * D or max(labels) >= K:
        sys.exit(f"fashion_bnn: {split} images ({n}) and labels ({m}) do not match")
    return images, labels


def write_part(out, name, images, rows, labels):
    """Writes rows (indices into `images`) with the given 0-based labels as part `name`."""
    pixels = b"".join(images[i * D:(i + 1) * D] for i in rows)
    x = array.array("f", map(PIXEL.__getitem__, pixels))
    y = array.array("q", (c + 1 for c in labels))
    fvidata.write_npy_part(out, name, {"N": len(rows)},
                           {"x": (x, (len(rows), D), "<f4"), "y": (y, (len(rows),), "<i8")})


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contamination", type=int, default=0, metavar="P",
                        help="percent of training labels replaced by a random other label "
                             "(0..100; the paper uses 0, 10, 20, 40)")
    parser.add_argument("--output", help="the data directory to write (default: "
                        "build/fashion_bnn/data-P[-sliceN] in the repository)")
    parser.add_argument("--silos", type=int, default=3, help="number of silos (default 3)")
    parser.add_argument("--slice", type=int, metavar="N",
                        help="keep only N training rows per silo (a small version for tests)")
    parser.add_argument("--test-rows", type=int, metavar="M",
                        help="keep only the first M test images (default: all 10,000, or 1,000 "
                             "with --slice)")
    parser.add_argument("--partition", choices=["round-robin", "dirichlet"], default="round-robin",
                        help="homogeneous silos (default) or label skew by Dirichlet(--alpha)")
    parser.add_argument("--alpha", type=float, default=1.0,
                        help="the Dirichlet's concentration with --partition dirichlet (default 1)")
    parser.add_argument("--ood", action="store_true",
                        help="also write the uniform- and normal-noise OOD sets (ood-uniform, ood-normal)")
    parser.add_argument("--source", default=SOURCE,
                        help="folder of the idx .gz files (default: %(default)s)")
    args = parser.parse_args()
    if not 0 <= args.contamination <= 100:
        parser.error("--contamination must be a percentage between 0 and 100")
    if args.silos < 1:
        parser.error("--silos must be at least 1")
    if not args.alpha > 0:
        parser.error("--alpha must be positive")

    train_images, train_labels = load(args.source, "train")
    test_images, test_labels = load(args.source, "t10k")
    n_train = len(train_labels) if args.slice is None else args.silos * args.slice
    n_test = args.test_rows if args.test_rows is not None else (
        len(test_labels) if args.slice is None else 1000)
    if not 1 <= n_train <= len(train_labels):
        parser.error(f"--slice: at most {len(train_labels) // args.silos} rows per silo")
    if not 0 <= n_test <= len(test_labels):
        parser.error(f"--test-rows: at most {len(test_labels)}")
    out = args.output or os.path.join(
        here, "..", "..", "build", "fashion_bnn", f"data-{args.contamination}"
        + ("" if args.slice is None else f"-slice{args.slice}"))
    out = os.path.normpath(out)

    order = list(range(len(train_labels)))
    random.Random(SEED).shuffle(order)
    order = order[:n_train]
    labels = [train_labels[i] for i in order]

    crng = random.Random(SEED + 1)
    contamination_order = list(range(n_train))
    crng.shuffle(contamination_order)
    offsets = [crng.randrange(1, K) for _ in range(n_train)]
    n_bad = (args.contamination * n_train + 50) // 100  # round(P% of n), half up
    for pos in contamination_order[:n_bad]:
        labels[pos] = (labels[pos] + offsets[pos]) % K

    fvidata.clear_data_dir(out)
    fvidata.write_json(os.path.join(out, "data.json"), {"D": D, "H": H, "K": K})
    if args.partition == "dirichlet":
        try:
            positions = fvidata.split_dirichlet(list(range(n_train)), labels, args.silos, args.alpha,
                                                random.Random(SEED + 2))
        except ValueError as e:
            sys.exit(f"fashion_bnn: {e}")
    else:
        positions = fvidata.split_round_robin(list(range(n_train)), args.silos)
    bad = set(contamination_order[:n_bad])
    for k, pos in enumerate(positions, start=1):
        write_part(out, f"silo-{k}", train_images, [order[p] for p in pos],
                   [labels[p] for p in pos])
        print(f"fashion_bnn: silo {k}: {len(pos)} rows, "
              f"{sum(p in bad for p in pos)} contaminated")
    write_part(out, "test", test_images, range(n_test), test_labels[:n_test])
    if args.ood:
        orng = random.Random(SEED + 3)
        noise = {}
        for name, draw in (("ood-uniform", orng.random), ("ood-normal", lambda: orng.gauss(0.0, 1.0))):
            noise[name] = array.array("f", (draw() for _ in range(n_test * D)))
        # ood-noise: the first half of the uniform rows, then the first half of the normal ones.
        # An AUROC averages over (in, out) pairs, so against it it is the mean of the two AUROCs.
        half = n_test // 2 * D
        noise["ood-noise"] = noise["ood-uniform"][:half] + noise["ood-normal"][:n_test * D - half]
        for name, x in noise.items():
            fvidata.write_npy_part(out, name, {"N": n_test},
                                   {"x": (x, (n_test, D), "<f4"), "y": (array.array("q", [1] * n_test), (n_test,), "<i8")})
    print(f"fashion_bnn: {n_bad} of {n_train} training labels contaminated "
          f"({args.contamination}%); {n_test} clean test rows; wrote {out}")


if __name__ == "__main__":
    main()
