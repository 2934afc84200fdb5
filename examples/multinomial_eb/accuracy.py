#!/usr/bin/env python3
"""Prints the test accuracy of a finished run (the last row of OUT/metrics.csv: the final
posterior's posterior-predictive accuracy; for `independent`, the mean over the silos' own
posteriors) and the run's wall time and bytes sent. Usage: accuracy.py OUT NAME"""
import csv
import sys

out, name = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(f"{out}/metrics.csv")))
if not rows:
    sys.exit(f"accuracy: {out}/metrics.csv has no rows")
last = rows[-1]
print(f"{name}: test accuracy {100 * float(last['test_accuracy']):.2f}  "
      f"(round {last['round']}, {float(last['seconds']):.0f} s, "
      f"{int(float(last['bytes_sent'])) / 1e6:.1f} MB sent by the server)")
