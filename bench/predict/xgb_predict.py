"""XGBoost peer for bench/predict: trains the equivalent model (hist,
lossguide, max_leaves, max_bin 255, same rounds and learning rate) on the
same CSV, then times batch prediction on the test CSV (best of 3, nthread
threads). Prints key=value lines and writes the predictions to --out."""
import argparse, time
import numpy as np
import xgboost as xgb

ap = argparse.ArgumentParser()
ap.add_argument("--train"); ap.add_argument("--test"); ap.add_argument("--out")
ap.add_argument("--threads", type=int, default=2); ap.add_argument("--rounds", type=int, default=500)
ap.add_argument("--leaves", type=int, default=255)
a = ap.parse_args()
tr = np.loadtxt(a.train, delimiter=",", skiprows=1, dtype=np.float32)
te = np.loadtxt(a.test, delimiter=",", skiprows=1, dtype=np.float32)
d = xgb.DMatrix(tr[:, 1:], label=tr[:, 0], nthread=a.threads)
p = {"objective": "binary:logistic", "tree_method": "hist", "grow_policy": "lossguide", "max_depth": 0,
     "max_leaves": a.leaves, "max_bin": 255, "eta": 0.1, "min_child_weight": 1e-3, "nthread": a.threads}
t = time.time(); bst = xgb.train(p, d, a.rounds); print(f"train_s={time.time() - t:.3f}")
X = np.ascontiguousarray(te[:, 1:])
best = 1e9
for _ in range(3):
    t = time.perf_counter(); pred = bst.inplace_predict(X); best = min(best, time.perf_counter() - t)
print(f"predict_s={best:.6f}")
print(f"rows={X.shape[0]}")
np.savetxt(a.out, pred, fmt="%.9g")
