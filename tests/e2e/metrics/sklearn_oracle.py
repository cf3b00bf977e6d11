"""scikit-learn oracle for the millrace metrics (tests/e2e/test_metrics_sklearn.sh).

usage: sklearn_oracle.py TOOL WORKDIR
Generates seeded prediction files (continuous scores, heavy ties, weights,
probabilities of exactly 0 and 1, multiclass argmax ties, zero targets for
MAPE), runs `TOOL binary|multiclass|regression FILE`, and compares every
number with scikit-learn / numpy on the same arrays: |a - b| <= 1e-9 * max(1, |b|).
Prints one line per case and exits 1 on the first mismatch.
"""
import json
import subprocess
import sys

import numpy as np
from sklearn import metrics as M
from sklearn.calibration import calibration_curve

TOL = 1e-9
TOOL, WORK = sys.argv[1], sys.argv[2]
checks = 0


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= TOL * max(1.0, abs(b))


def cmp(case, name, got, want):
    global checks
    got = np.atleast_1d(np.asarray(got, dtype=float)) if not isinstance(got, list) else np.asarray([np.nan if g is None else g for g in got], dtype=float)
    want = np.atleast_1d(np.asarray(want, dtype=float))
    if got.shape != want.shape:
        sys.exit(f"FAIL {case} {name}: shape {got.shape} != sklearn {want.shape}\n got={got[:10]}\nwant={want[:10]}")
    for i, (g, w) in enumerate(zip(got, want)):
        if np.isnan(w) and np.isnan(g):
            continue
        if not close(float(g), float(w)):
            sys.exit(f"FAIL {case} {name}[{i}]: millrace {g!r} != sklearn {w!r}")
    checks += got.size


def run(mode, path, *extra):
    out = subprocess.run([TOOL, mode, path, *extra], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"FAIL {path}: tool exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def write(path, *cols):
    with open(path, "w") as f:
        for row in zip(*cols):
            f.write(",".join("%.17g" % float(v) for v in row) + "\n")


def binary_case(name, y, s, w=None, thr=0.5):
    path = f"{WORK}/{name}.csv"
    write(path, y, s, *([w] if w is not None else []))
    r = run("binary", path, repr(thr))
    cmp(name, "roc_auc", r["roc_auc"], M.roc_auc_score(y, s, sample_weight=w))
    cmp(name, "average_precision", r["average_precision"], M.average_precision_score(y, s, sample_weight=w))
    cmp(name, "logloss", r["logloss"], M.log_loss(y, s, sample_weight=w, labels=[0, 1]))
    cmp(name, "brier", r["brier"], M.brier_score_loss(y, s, sample_weight=w))
    pred = (s >= thr).astype(int)
    cm = M.confusion_matrix(y, pred, labels=[0, 1], sample_weight=w).ravel()
    at = r["at"]
    cmp(name, "confusion@thr", [at["tn"], at["fp"], at["fn"], at["tp"]], cm)
    cmp(name, "accuracy@thr", at["accuracy"], M.accuracy_score(y, pred, sample_weight=w))
    cmp(name, "precision@thr", at["precision"], M.precision_score(y, pred, sample_weight=w, zero_division=0))
    cmp(name, "recall@thr", at["recall"], M.recall_score(y, pred, sample_weight=w, zero_division=0))
    cmp(name, "f1@thr", at["f1"], M.f1_score(y, pred, sample_weight=w, zero_division=0))
    # F1-optimal threshold: brute force over distinct scores with sklearn's f1_score
    ts = np.unique(s)[::-1]
    f1s = np.array([M.f1_score(y, (s >= t).astype(int), sample_weight=w, zero_division=0) for t in ts])
    best = f1s.max()
    cands = ts[np.abs(f1s - best) <= 1e-12]
    opt = r["f1_opt"]
    cmp(name, "f1_opt.f1", opt["f1"], best)
    if not np.any(np.abs(cands - opt["threshold"]) <= 0):
        sys.exit(f"FAIL {name} f1_opt.threshold {opt['threshold']!r} not among sklearn optima {cands[:5]}")
    if opt["threshold"] != cands.max():
        sys.exit(f"FAIL {name} f1_opt.threshold {opt['threshold']!r}: ties must go to the largest, {cands.max()!r}")
    fpr, tpr, thr_roc = M.roc_curve(y, s, sample_weight=w, drop_intermediate=False)
    cmp(name, "roc.fpr", r["roc"]["x"], fpr)
    cmp(name, "roc.tpr", r["roc"]["y"], tpr)
    cmp(name, "roc.thresholds", r["roc"]["aux"][1:], thr_roc[1:])
    prec, rec, thr_pr = M.precision_recall_curve(y, s, sample_weight=w)
    cmp(name, "pr.recall", r["pr"]["x"], rec[::-1])
    cmp(name, "pr.precision", r["pr"]["y"], prec[::-1])
    cmp(name, "pr.thresholds", r["pr"]["aux"][1:], thr_pr[::-1])
    # gain: stable descending sort, cut points k*n//10 (no sklearn equivalent)
    order = np.argsort(-s, kind="stable")
    ww = np.ones_like(s) if w is None else w
    cw, cp = np.cumsum(ww[order]), np.cumsum((ww * y)[order])
    cuts = sorted(set((k * len(s)) // 10 for k in range(1, 11)) - {0})
    gx = np.array([cw[c - 1] / ww.sum() for c in cuts])
    gy = np.array([cp[c - 1] / (ww * y).sum() for c in cuts])
    cmp(name, "gain.x", r["gain"]["x"], gx)
    cmp(name, "gain.y", r["gain"]["y"], gy)
    if w is None:
        pt, pp = calibration_curve(y, s, n_bins=10, strategy="uniform")
        cmp(name, "calib_uniform.frac_pos", r["calib_uniform10"]["y"], pt)
        cmp(name, "calib_uniform.mean_pred", r["calib_uniform10"]["x"], pp)
        pt, pp = calibration_curve(y, s, n_bins=7, strategy="quantile")
        cmp(name, "calib_quantile.frac_pos", r["calib_quantile7"]["y"], pt)
        cmp(name, "calib_quantile.mean_pred", r["calib_quantile7"]["x"], pp)
    print(f"ok binary {name} (n={len(y)}{', weighted' if w is not None else ''})")


def multiclass_case(name, y, P, w=None):
    K = P.shape[1]
    path = f"{WORK}/{name}.csv"
    write(path, y, *P.T, *([w] if w is not None else []))
    r = run("multiclass", path, str(K))
    pred = P.argmax(axis=1)
    lab = list(range(K))
    cmp(name, "accuracy", r["accuracy"], M.accuracy_score(y, pred, sample_weight=w))
    cmp(name, "macro_f1", r["macro_f1"], M.f1_score(y, pred, labels=lab, average="macro", sample_weight=w, zero_division=0))
    cmp(name, "micro_f1", r["micro_f1"], M.f1_score(y, pred, labels=lab, average="micro", sample_weight=w, zero_division=0))
    cmp(name, "logloss", r["logloss"], M.log_loss(y, P, labels=lab, sample_weight=w))
    cmp(name, "confusion", r["confusion"], M.confusion_matrix(y, pred, labels=lab, sample_weight=w).ravel())
    print(f"ok multiclass {name} (n={len(y)}, K={K}{', weighted' if w is not None else ''})")


def regression_case(name, y, p, w=None):
    path = f"{WORK}/{name}.csv"
    write(path, y, p, *([w] if w is not None else []))
    r = run("regression", path)
    cmp(name, "rmse", r["rmse"], M.mean_squared_error(y, p, sample_weight=w, squared=False))
    cmp(name, "mae", r["mae"], M.mean_absolute_error(y, p, sample_weight=w))
    cmp(name, "r2", r["r2"], M.r2_score(y, p, sample_weight=w))
    cmp(name, "mape", r["mape"], M.mean_absolute_percentage_error(y, p, sample_weight=w))
    cmp(name, "resid_q", r["resid_q"], np.quantile(y - p, [0, 0.05, 0.25, 0.5, 0.75, 0.95, 1]))
    print(f"ok regression {name} (n={len(y)}{', weighted' if w is not None else ''})")


rng = np.random.default_rng(20240611)
n = 3000
y = (rng.random(n) < 0.3).astype(float)
s = 1 / (1 + np.exp(-(rng.normal(size=n) + 1.2 * y)))
binary_case("continuous", y, s)
binary_case("continuous_thr03", y, s, thr=0.3)
binary_case("ties", y, np.round(s, 1))                       # 11 distinct scores
binary_case("ties_coarse", y, np.round(s * 3) / 3)           # 4 distinct scores
w = rng.integers(0, 5, n).astype(float) + rng.random(n) * (rng.random(n) < 0.5)
binary_case("weighted", y, s, w)
binary_case("weighted_ties", y, np.round(s, 1), w)
s01 = s.copy()
s01[:50] = 0.0
s01[50:100] = 1.0
s01[100:110] = -0.0
binary_case("extremes", y, s01)                              # clipping at 1e-15, -0.0 ties +0.0
binary_case("small", np.array([0, 0, 1, 1, 0, 1.0]), np.array([0.1, 0.4, 0.35, 0.8, 0.8, 0.8]))
binary_case("constant_score", y[:200], np.full(200, 0.5))
yb = (rng.random(n) < 0.02).astype(float)
yb[0] = 1
binary_case("rare_positive", yb, rng.random(n))

K = 4
ym = rng.integers(0, K, n).astype(float)
L = rng.normal(size=(n, K)) + 1.5 * np.eye(K)[ym.astype(int)]
P = np.exp(L) / np.exp(L).sum(axis=1, keepdims=True)
multiclass_case("mc", ym, P)
Pt = np.round(P, 1)                                           # argmax ties, zeros (clipping), rows not summing to 1
multiclass_case("mc_ties", ym, Pt)
multiclass_case("mc_weighted", ym, P, w)
ym3 = ym.copy()
ym3[ym3 == 3] = 2                                             # class 3 never true
multiclass_case("mc_absent_class", ym3, P)

yr = rng.normal(10, 3, n)
pr = yr + rng.normal(0, 1, n)
regression_case("reg", yr, pr)
regression_case("reg_weighted", yr, pr, w)
yz = yr.copy()
yz[:20] = 0.0                                                 # MAPE epsilon
regression_case("reg_zero_targets", yz, pr)
regression_case("reg_constant_target", np.full(100, 2.0), pr[:100])
regression_case("reg_perfect_constant", np.full(100, 2.0), np.full(100, 2.0))
print(f"sklearn oracle: {checks} values agree within {TOL}")
