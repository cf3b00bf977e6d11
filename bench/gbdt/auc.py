#!/usr/bin/env python3
"""ROC-AUC of scores against the labels of a CSV's first column (rank formula, ties averaged).

    auc.py LABELS.csv SCORES [--column NAME]
SCORES: a CSV with a header (the column NAME, default 'prediction') or, without --column,
one score per line (LightGBM's output_result). Prints the AUC with 6 decimals."""
import argparse
import csv

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("labels")
ap.add_argument("scores")
ap.add_argument("--column")
a = ap.parse_args()
with open(a.labels) as f:
    r = csv.reader(f)
    next(r)
    y = np.array([float(row[0]) for row in r])
if a.column:
    with open(a.scores) as f:
        s = np.array([float(row[a.column]) for row in csv.DictReader(f)])
else:
    s = np.loadtxt(a.scores, dtype=np.float64).reshape(-1)
assert len(s) == len(y), f"{len(s)} scores for {len(y)} labels"
order = np.argsort(s, kind="mergesort")
ranks = np.empty(len(s))
ss = s[order]
i = 0
while i < len(ss):
    j = i
    while j < len(ss) and ss[j] == ss[i]:
        j += 1
    ranks[order[i:j]] = (i + j + 1) / 2.0
    i = j
pos = float((y == 1).sum())
neg = len(y) - pos
print(f"{(ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg):.6f}")
