#!/usr/bin/env python3
"""scikit-learn oracle for millrace feature transforms.

Generates a fixed train/test CSV pair (seeded), fits each case's features
spec with mr_feattool (fit on train, apply to test, through a saved and
reloaded artifact), fits the equivalent scikit-learn transformer on the same
data, and compares every output value to 1e-9 (relative above 1).

usage: features_oracle.py MR_FEATTOOL WORKDIR
Prints one "ok N - case" line per comparison; exits 1 on the first mismatch.
"""
import csv
import io
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (KBinsDiscretizer, MinMaxScaler, OneHotEncoder, OrdinalEncoder,
                                   StandardScaler)

TOL = 1e-9
warnings.simplefilter("ignore", UserWarning)  # KBinsDiscretizer notes merged bins; expected here
TOOL, WORK = sys.argv[1], sys.argv[2]
PLANS = ["basic", "pro", "team", "enterprise", "edu", "legacy"]
PLAN_P = [0.40, 0.25, 0.15, 0.10, 0.06, 0.04]
CITIES = ["c%02d" % i for i in range(12)]


def gen(n, rng, test):
    rows = []
    for _ in range(n):
        age = None if rng.random() < 0.15 else round(float(rng.normal(40, 12)), 1)
        income = round(float(rng.lognormal(10, 0.6)), 2)
        tenure = None if rng.random() < 0.1 else int(rng.integers(0, 72))
        plan = str(rng.choice(PLANS, p=PLAN_P))
        if test and rng.random() < 0.1:
            plan = "platinum"  # unseen in train
        city = str(rng.choice(CITIES))
        if test and rng.random() < 0.1:
            city = "atlantis"
        plan_na = None if rng.random() < 0.2 else str(rng.choice(PLANS[:4], p=[0.1, 0.5, 0.3, 0.1]))
        rows.append([age, income, tenure, plan, city, plan_na, int(rng.random() < 0.3)])
    return rows


HEADER = ["age", "income", "tenure", "plan", "city", "plan_na", "churn"]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for r in rows:
            w.writerow(["" if v is None else (repr(v) if isinstance(v, float) else str(v)) for v in r])


rng = np.random.default_rng(20240611)
train_rows, test_rows = gen(400, rng, False), gen(150, rng, True)
train_csv, test_csv = os.path.join(WORK, "train.csv"), os.path.join(WORK, "test.csv")
write_csv(train_csv, train_rows)
write_csv(test_csv, test_rows)
na = {"keep_default_na": False, "na_values": [""]}
train = pd.read_csv(train_csv, **na)
test = pd.read_csv(test_csv, **na)

# The onehot top-k comparison needs distinct counts around the cut (ties
# break differently: millrace keeps the smaller value, scikit-learn the larger).
counts = sorted(train["plan"].value_counts().tolist(), reverse=True)
assert counts[2] != counts[3], counts

n_ok = 0


STRINGS = ["plan", "city", "plan_na"]


def run_tool(name, yaml, drop=STRINGS):
    """Fits yaml; the string columns in drop (those the case does not
    encode) are dropped explicitly, as millrace requires of every column."""
    spec = os.path.join(WORK, name + ".yaml")
    with open(spec, "w") as f:
        f.write(yaml)
        if drop:
            f.write("- drop: {columns: [%s]}\n" % ", ".join(drop))
    art = os.path.join(WORK, name + ".mrft")
    p = subprocess.run([TOOL, "fit", spec, train_csv, test_csv, "churn", art], capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL %s: mr_feattool exited %d\n%s" % (name, p.returncode, p.stderr))
        sys.exit(1)
    return pd.read_csv(io.StringIO(p.stdout), keep_default_na=False, na_values=["nan"])


def compare(name, ours, col, ref):
    global n_ok
    if col not in ours.columns:
        print("FAIL %s: no output column %r (have %s)" % (name, col, list(ours.columns)))
        sys.exit(1)
    got = ours[col].to_numpy(dtype=float)
    ref = np.asarray(ref, dtype=float)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    for i, (a, b) in enumerate(zip(got, ref)):
        if math.isnan(b) and math.isnan(a):
            continue
        if math.isnan(a) or math.isnan(b) or abs(a - b) > TOL * max(1.0, abs(b)):
            print("FAIL %s: column %s row %d: millrace %r, scikit-learn %r" % (name, col, i, a, b))
            sys.exit(1)
    n_ok += 1
    print("ok %d - %s: %s (%d values)" % (n_ok, name, col, len(ref)))


def sk(est, cols):
    est.fit(train[cols])
    return est.transform(test[cols])


# 1. SimpleImputer: mean + indicator, median, most_frequent, constant
o = run_tool("impute", "- impute: {columns: [age], strategy: mean, indicator: true}\n"
                       "- impute: {columns: [tenure], strategy: most_frequent}\n"
                       "- impute: {columns: [income], strategy: median}\n")
r = sk(SimpleImputer(strategy="mean", add_indicator=True), ["age"])
compare("SimpleImputer(mean, add_indicator)", o, "age", r[:, 0])
compare("SimpleImputer(mean, add_indicator)", o, "age#missing", r[:, 1])
compare("SimpleImputer(most_frequent)", o, "tenure", sk(SimpleImputer(strategy="most_frequent"), ["tenure"])[:, 0])
o = run_tool("impute2", "- impute: {columns: [age], strategy: median}\n"
                        "- impute: {columns: [tenure], strategy: constant, value: -1}\n")
compare("SimpleImputer(median)", o, "age", sk(SimpleImputer(strategy="median"), ["age"])[:, 0])
compare("SimpleImputer(constant)", o, "tenure", sk(SimpleImputer(strategy="constant", fill_value=-1), ["tenure"])[:, 0])

# 2. StandardScaler (after mean imputation, and with NaN passing through)
o = run_tool("standardize", "- impute: {columns: [age], strategy: mean}\n"
                            "- standardize: {columns: [age, income, tenure]}\n")
compare("StandardScaler", o, "age", sk(make_pipeline(SimpleImputer(strategy="mean"), StandardScaler()), ["age"])[:, 0])
compare("StandardScaler", o, "income", sk(StandardScaler(), ["income"])[:, 0])
compare("StandardScaler (NaN kept)", o, "tenure", sk(StandardScaler(), ["tenure"])[:, 0])

# 3. MinMaxScaler
o = run_tool("minmax", "- minmax: {columns: numeric}\n")
for c in ["income", "tenure", "age"]:
    compare("MinMaxScaler", o, c, sk(MinMaxScaler(), [c])[:, 0])

# 4. KBinsDiscretizer(quantile, ordinal)
o = run_tool("bucketize", "- bucketize: {columns: [income], n_bins: 5}\n"
                          "- impute: {columns: [age], strategy: median}\n"
                          "- bucketize: {columns: [age], n_bins: 7}\n")
kb = dict(encode="ordinal", strategy="quantile", subsample=None)
compare("KBinsDiscretizer(quantile, 5)", o, "income", sk(KBinsDiscretizer(n_bins=5, **kb), ["income"])[:, 0])
compare("KBinsDiscretizer(quantile, 7)", o, "age",
        sk(make_pipeline(SimpleImputer(strategy="median"), KBinsDiscretizer(n_bins=7, **kb)), ["age"])[:, 0])

# 5. OneHotEncoder: top-k + infrequent, and all categories with unknowns ignored
o = run_tool("onehot", "- onehot: {columns: [plan], top_k: 3, other: true}\n"
                       "- onehot: {columns: [city], top_k: 0, other: false}\n", drop=["plan_na"])
enc = OneHotEncoder(max_categories=4, handle_unknown="infrequent_if_exist", sparse_output=False)
r = sk(enc, ["plan"])
for j, name in enumerate(enc.get_feature_names_out(["plan"])):
    ours = "plan=other" if name == "plan_infrequent_sklearn" else "plan=" + name[len("plan_"):]
    compare("OneHotEncoder(max_categories=4)", o, ours, r[:, j])
enc = OneHotEncoder(handle_unknown="ignore", sparse_output=False)
r = sk(enc, ["city"])
for j, name in enumerate(enc.get_feature_names_out(["city"])):
    compare("OneHotEncoder(handle_unknown=ignore)", o, "city=" + name[len("city_"):], r[:, j])

# 6. OrdinalEncoder with a reserved code for unknowns
o = run_tool("ordinal", "- ordinal: {columns: [city, plan]}\n", drop=["plan_na"])
for c in ["city", "plan"]:
    k = train[c].nunique()
    compare("OrdinalEncoder(unknown_value=%d)" % k, o, c,
            sk(OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=k), [c])[:, 0])

# 7. categorical imputation then one-hot
o = run_tool("impute_cat", "- impute: {columns: [plan_na], strategy: most_frequent}\n"
                           "- onehot: {columns: [plan_na], top_k: 0, other: false}\n", drop=["plan", "city"])
enc = make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore", sparse_output=False))
r = sk(enc, ["plan_na"])
for j, name in enumerate(enc[-1].get_feature_names_out(["plan_na"])):
    compare("SimpleImputer(most_frequent)+OneHotEncoder", o, "plan_na=" + name[len("plan_na_"):], r[:, j])

# 8. clip + log1p against numpy
o = run_tool("clip_log", "- clip: {columns: [income], lo: 10000, hi: 60000}\n- log1p: {columns: [income]}\n")
compare("numpy log1p(clip)", o, "income", np.log1p(np.clip(test["income"].to_numpy(), 10000, 60000)))

print("features oracle: %d comparisons against scikit-learn agree to %g" % (n_ok, TOL))
