#!/usr/bin/env python3
"""Writes the eight schools data (Rubin 1981; posteriordb's eight_schools) as one silo per school:
data/data.json is empty (the model has no public data) and data/silo-J.json holds school J's
estimated treatment effect y and its standard error sigma. Nothing is random.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
import fvidata  # noqa: E402

Y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]
SIGMA = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]


def main():
    args = fvidata.example_arguments(__file__, __doc__, "data/").parse_args()
    fvidata.write_data_dir(os.path.join(args.output, "data"), {},
                           [{"y": y, "sigma": s} for y, s in zip(Y, SIGMA)])
    print(f"eight_schools_noncentered: {len(Y)} silos, one school each")


if __name__ == "__main__":
    main()
