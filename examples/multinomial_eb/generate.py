#!/usr/bin/env python3
"""FashionMNIST split evenly over J silos for the empirical-Bayes multinomial regression of seed 002
section 4.1 (Table 1): deterministic, seed 20250601.

MNIST is not packaged in Debian; FashionMNIST (Debian's dataset-fashion-mnist, same 28 x 28 format
and 10 classes) stands in for it. Inputs are pixels / 255 as float32 784-vectors, labels 1-based,
read with examples/fashion_bnn/generate.py's reader.

The 60,000 training images are shuffled (seed SEED); silo j (1-based) gets shuffled rows
(j-1)*n .. j*n-1, so J = 25, n = 200 and J = 5, n = 10,000 are the paper's two settings
(5,000 and 50,000 training rows). The test part is the full clean 10,000-image test set.

Writes OUT/data.json (D = 784, K = 10), OUT/silo-j.json (N) with OUT/silo-j/{x,y}.npy and
OUT/test.json with OUT/test/{x,y}.npy. OUT defaults to build/multinomial_eb/J<J>-n<n>.
"""
import argparse
import importlib.util
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import fvidata  # noqa: E402

SEED = 20250601


def fashion_reader():
    """examples/fashion_bnn/generate.py as a module (its idx reader and npy writer)."""
    path = os.path.join(HERE, "..", "fashion_bnn", "generate.py")
    spec = importlib.util.spec_from_file_location("fashion_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--silos", type=int, default=25, metavar="J", help="number of silos")
    parser.add_argument("--rows", type=int, default=200, metavar="n", help="training rows per silo")
    parser.add_argument("--test-rows", type=int, default=10000, metavar="M",
                        help="keep the first M test images (default: all 10,000)")
    parser.add_argument("--output", help="data directory to write")
    parser.add_argument("--source", default="/usr/share/datasets/fashion-mnist",
                        help="folder of the idx .gz files (default: %(default)s)")
    args = parser.parse_args()
    fashion = fashion_reader()
    if args.silos < 1 or args.rows < 1:
        parser.error("--silos and --rows must be positive")
    images, labels = fashion.load(args.source, "train")
    test_images, test_labels = fashion.load(args.source, "t10k")
    if args.silos * args.rows > len(labels):
        parser.error(f"--silos x --rows exceeds the {len(labels)} training images")
    if not 1 <= args.test_rows <= len(test_labels):
        parser.error(f"--test-rows must be in 1..{len(test_labels)}")
    out = os.path.normpath(args.output or os.path.join(
        HERE, "..", "..", "build", "multinomial_eb", f"J{args.silos}-n{args.rows}"))

    order = list(range(len(labels)))
    random.Random(SEED).shuffle(order)
    fvidata.clear_data_dir(out)
    fvidata.write_json(os.path.join(out, "data.json"), {"D": fashion.D, "K": fashion.K})
    for j in range(args.silos):
        rows = order[j * args.rows:(j + 1) * args.rows]
        fashion.write_part(out, f"silo-{j + 1}", images, rows, [labels[i] for i in rows])
    fashion.write_part(out, "test", test_images, range(args.test_rows),
                       test_labels[:args.test_rows])
    print(f"multinomial_eb: {args.silos} silos x {args.rows} rows, {args.test_rows} test rows; "
          f"wrote {out}")


if __name__ == "__main__":
    main()
