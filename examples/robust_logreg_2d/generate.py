#!/usr/bin/env python3
"""2-D logistic regression with outliers (FedGVI, seed 000 section 5.3; the authors' dataset
`synthetic_4`): deterministic, seed 20250503.

Clean data: 100 points of a two-component Gaussian mixture with weights (1/2, 1/2) (so the class
counts are Binomial(100, 1/2), as the authors' Multinomial draw), class 1 ~ N([3, 4],
[[1, .35], [.35, .75]]) and class 0 ~ N([0, 0], [[.8, -.4], [-.4, 1]]). The paper's clean data
are linearly separable: a draw that a perceptron cannot separate is discarded and the mixture
drawn again (truth.json records how many draws it took and the separating line found).
Outliers: ceil(0.05 * 100 / 0.95) = 6 points from N([1, 5], [[.15, .1], [.1, .15]]), labelled 0.

The 106 rows are shuffled and dealt into 5 silos (22, 21, 21, 21, 21). Writes, under OUT (this
script's folder by default):
  data/         the contaminated data, 5 silos, and test.json = the 100 clean points
  data-clean/   the same 5 silos without the 6 outliers (the paper's target is PVI on these)
  data-pooled/  the contaminated data in one silo (silos 1..5 concatenated), for 5-vs-1 checks
  truth.json    the generating settings, which rows are outliers, the separating line
"""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20250503
N, SILOS, OUTLIER_FRACTION = 100, 5, 0.05
CLASS1 = ([3.0, 4.0], [[1.0, 0.35], [0.35, 0.75]])
CLASS0 = ([0.0, 0.0], [[0.8, -0.4], [-0.4, 1.0]])
OUTLIERS = ([1.0, 5.0], [[0.15, 0.1], [0.1, 0.15]])


def draw(rng, component):
    return [round(v, 6) for v in fvidata.mvnormal(rng, *component)]


def perceptron(points, epochs=10000):
    """A line (w1, w2, b) with y = 1 exactly where w . x + b > 0, or None if none was found."""
    w = [0.0, 0.0, 0.0]
    for _ in range(epochs):
        mistakes = 0
        for x, y in points:
            s = 1.0 if y == 1 else -1.0
            if s * (w[0] * x[0] + w[1] * x[1] + w[2]) <= 0.0:
                w = [w[0] + s * x[0], w[1] + s * x[1], w[2] + s]
                mistakes += 1
        if mistakes == 0:
            return w
    return None


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data*/ and truth.json").parse_args()

    rng = random.Random(SEED)
    for attempt in range(1, 101):
        labels = [1 if rng.random() < 0.5 else 0 for _ in range(N)]
        clean = [(draw(rng, CLASS1 if y == 1 else CLASS0), y) for y in labels]
        line = perceptron(clean)
        if line is not None:
            break
    else:
        sys.exit("robust_logreg_2d: no linearly separable draw in 100 attempts")
    n_out = math.ceil(OUTLIER_FRACTION * N / (1.0 - OUTLIER_FRACTION))
    outliers = [(draw(rng, OUTLIERS), 0) for _ in range(n_out)]

    rows = [(x, y, False) for x, y in clean] + [(x, y, True) for x, y in outliers]
    rng.shuffle(rows)
    silos = fvidata.split_round_robin(rows, SILOS)

    def silo(rs):
        return {"N": len(rs), "x": [x for x, _, _ in rs], "y": [y for _, y, _ in rs]}

    public = {"D": 2}
    test = silo([(x, y, False) for x, y in clean])
    fvidata.write_data_dir(os.path.join(args.output, "data"), public,
                           [silo(s) for s in silos], test)
    fvidata.write_data_dir(os.path.join(args.output, "data-clean"), public,
                           [silo([r for r in s if not r[2]]) for s in silos], test)
    fvidata.write_data_dir(os.path.join(args.output, "data-pooled"), public,
                           [silo([r for s in silos for r in s])], test)
    truth = {
        "seed": SEED,
        "draws_until_separable": attempt,
        "class_1": {"label": 1, "mean": CLASS1[0], "cov": CLASS1[1]},
        "class_0": {"label": 0, "mean": CLASS0[0], "cov": CLASS0[1]},
        "outliers": {"label": 0, "count": n_out, "mean": OUTLIERS[0], "cov": OUTLIERS[1]},
        "outlier_rows": [[i for i, r in enumerate(s) if r[2]] for s in silos],
        "separating_line": {"w": line[:2], "b": line[2],
                            "meaning": "w . x + b > 0 exactly for the clean points of class 1"},
    }
    fvidata.write_json(os.path.join(args.output, "truth.json"), truth)
    print(f"robust_logreg_2d: {sum(labels)} of {N} clean points in class 1 "
          f"(separable at draw {attempt}); {n_out} outliers; silo sizes "
          f"{[len(s) for s in silos]}")


if __name__ == "__main__":
    main()
