#!/usr/bin/env python3
"""XGBoost side of the gbdt comparisons (bench/gbdt/run.sh, tests/e2e/test_gbdt_vs_xgboost.sh).

Data specs as mr_gbdt_tool takes them: a CSV (label in column --label-col, header allowed,
"?"/"nan"/"" missing) or f32:X_PATH:Y_PATH:N_FEATURES. Prints key=value lines:
bin_s (DMatrix/QuantileDMatrix construction), train_s, predict_s, predict_rows_per_s and
test metrics (auc, logloss, error | rmse, mae | multi_logloss, multi_error).
"""
import argparse
import sys
import time

import numpy as np
import xgboost as xgb


def load(spec, label_col):
    if spec.startswith("f32:"):
        _, xp, yp, f = spec.split(":")
        x = np.fromfile(xp, dtype="<f4").reshape(-1, int(f))
        y = np.fromfile(yp, dtype="<f4")
        return x, y
    import pandas as pd
    df = pd.read_csv(spec, header=None, na_values=["?", "nan", "NA", ""], skipinitialspace=True,
                     dtype=str, keep_default_na=True)
    # header: first row not numeric
    try:
        df.iloc[0].astype(float)
    except ValueError:
        df = df.iloc[1:]
    a = df.astype(np.float32).to_numpy()
    y = a[:, label_col]
    x = np.delete(a, label_col, axis=1)
    return np.ascontiguousarray(x), y


def auc(y, s):
    order = np.argsort(s, kind="mergesort")
    ss = s[order]
    r = np.empty(len(s))
    # average ranks for ties
    i = 0
    ranks = np.arange(1, len(s) + 1, dtype=np.float64)
    _, idx, counts = np.unique(ss, return_index=True, return_counts=True)
    for start, c in zip(idx, counts):
        if c > 1:
            ranks[start:start + c] = ranks[start:start + c].mean()
    r[order] = ranks
    npos = (y > 0.5).sum()
    nneg = len(y) - npos
    return (r[y > 0.5].sum() - npos * (npos + 1) / 2) / (npos * nneg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--label-col", type=int, default=0)
    ap.add_argument("--objective", default="binary")
    ap.add_argument("--num-class", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--leaves", type=int, default=31)
    ap.add_argument("--max-bin", type=int, default=255)
    ap.add_argument("--min-child-weight", type=float, default=1.0)  # XGBoost's default
    ap.add_argument("--lambda", dest="lam", type=float, default=1.0)  # XGBoost's default
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pred-out")
    a = ap.parse_args()
    x, y = load(a.train, a.label_col)
    t0 = time.time()
    dtr = xgb.QuantileDMatrix(x, label=y, max_bin=a.max_bin) if hasattr(xgb, "QuantileDMatrix") else \
        xgb.DMatrix(x, label=y, nthread=a.threads)
    t1 = time.time()
    del x
    obj = {"binary": "binary:logistic", "regression": "reg:squarederror",
           "multiclass": "multi:softprob"}[a.objective]
    params = {"objective": obj, "tree_method": "hist", "grow_policy": "lossguide", "max_leaves": a.leaves,
              "max_depth": 0, "eta": a.lr, "max_bin": a.max_bin, "nthread": a.threads,
              "min_child_weight": a.min_child_weight, "lambda": a.lam, "verbosity": 0}
    if a.objective == "multiclass":
        params["num_class"] = a.num_class
    t2, c2 = time.time(), time.process_time()
    bst = xgb.train(params, dtr, num_boost_round=a.rounds)
    t3, c3 = time.time(), time.process_time()
    del dtr
    xt, yt = load(a.test, a.label_col)
    # best of three, each on a fresh DMatrix (a second predict on the same
    # DMatrix would be served from XGBoost's prediction cache)
    best = None
    for _ in range(3):
        dte = xgb.DMatrix(xt, nthread=a.threads)
        s0 = time.time()
        pred = bst.predict(dte)
        s1 = time.time()
        if best is None or s1 - s0 < best:
            best = s1 - s0
        del dte
    t4, t5 = 0.0, best
    print(f"train_rows={len(y)}\ntest_rows={len(yt)}")
    print(f"bin_s={t1 - t0:.3f}\ntrain_s={t3 - t2:.3f}\npredict_s={t5 - t4:.4f}")
    print(f"predict_rows_per_s={len(yt) / max(t5 - t4, 1e-9):.0f}")
    print(f"train_cpu_s={c3 - c2:.3f}")
    if a.objective == "binary":
        p = np.clip(pred.astype(np.float64), 1e-15, 1 - 1e-15)
        ll = -np.mean(np.where(yt > 0.5, np.log(p), np.log(1 - p)))
        print(f"auc={auc(yt, pred.astype(np.float64)):.6f}\nlogloss={ll:.6f}")
        print(f"error={np.mean((pred > 0.5) != (yt > 0.5)):.6f}")
    elif a.objective == "multiclass":
        p = np.clip(pred[np.arange(len(yt)), yt.astype(int)], 1e-15, 1)
        print(f"multi_logloss={-np.mean(np.log(p)):.6f}")
        print(f"multi_error={np.mean(pred.argmax(axis=1) != yt.astype(int)):.6f}")
    else:
        d = pred - yt
        print(f"rmse={np.sqrt(np.mean(d * d)):.6f}\nmae={np.mean(np.abs(d)):.6f}")
    if a.pred_out:
        np.savetxt(a.pred_out, pred, fmt="%.9g", delimiter=",")


if __name__ == "__main__":
    sys.exit(main())
