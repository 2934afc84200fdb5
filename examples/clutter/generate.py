#!/usr/bin/env python3
"""The clutter problem of FedGVI (seed 000, section 5.1): deterministic, seed 20250501.

The location is drawn as in the paper's data-generating process: theta ~ N(0, 0.5^2) and the
clean component sits at c = theta - 2. Of the N = 100 observations exactly eps * N = 25 come from
the contamination N(c + 5, 0.5^2) (= N(theta + 3, 0.5^2)) and 75 from the clean N(c, 1); the 100
are shuffled and dealt into 5 silos of 20. The target of inference is c.

Writes OUT/data/{data.json, silo-1.json ... silo-5.json} and OUT/truth.json (c, theta, eps and
which rows of each silo are contamination). OUT defaults to this script's folder.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import fvidata  # noqa: E402

SEED = 20250501
N, EPS, SILOS = 100, 0.25, 5


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/ and truth.json").parse_args()

    rng = random.Random(SEED)
    theta = rng.gauss(0.0, 0.5)
    c = theta - 2.0
    n_bad = round(EPS * N)
    rows = [(round(rng.gauss(c, 1.0), 6), False) for _ in range(N - n_bad)]
    rows += [(round(rng.gauss(c + 5.0, 0.5), 6), True) for _ in range(n_bad)]
    rng.shuffle(rows)
    silos = fvidata.split_round_robin(rows, SILOS)

    fvidata.write_data_dir(
        os.path.join(args.output, "data"), {},
        [{"N": len(s), "x": [x for x, _ in s]} for s in silos])
    xs = [x for x, _ in rows]
    truth = {
        "seed": SEED,
        "theta": theta,
        "c": c,
        "eps": EPS,
        "contamination": {"mean": c + 5.0, "sd": 0.5},
        "contaminated_rows": [[i for i, (_, bad) in enumerate(s) if bad] for s in silos],
        "sample_mean": sum(xs) / N,
        # The exact posterior of the model with the NLL (what PVI converges to): prior N(0, 1),
        # likelihood N(theta, 1), so precision N + 1 and mean sum(x) / (N + 1).
        "nll_posterior": {"mean": sum(xs) / (N + 1), "sd": (N + 1) ** -0.5},
    }
    fvidata.write_json(os.path.join(args.output, "truth.json"), truth)
    print(f"clutter: c = {c:.6f} (theta = {theta:.6f}); {n_bad} of {N} rows contaminated; "
          f"sample mean {truth['sample_mean']:.6f}; NLL posterior mean "
          f"{truth['nll_posterior']['mean']:.6f}")


if __name__ == "__main__":
    main()
