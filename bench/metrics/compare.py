"""Times sklearn on the bench arrays, checks millrace's values against it
(1e-9), prints the table and the RESULT line."""
import os
import json
import sys
import time

import numpy as np
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

path, n, reps, mr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
raw = np.fromfile(path, dtype=np.float64)
y, s = raw[:n], raw[n:]
best = float("inf")
for _ in range(reps):
    t0 = time.perf_counter()
    auc = roc_auc_score(y, s)
    ap = average_precision_score(y, s)
    ll = log_loss(y, s)
    best = min(best, time.perf_counter() - t0)
for name, got, want in (("roc_auc", mr["roc_auc"], auc), ("average_precision", mr["average_precision"], ap),
                        ("logloss", mr["logloss"], ll)):
    if abs(got - want) > 1e-9 * max(1.0, abs(want)):
        sys.exit(f"bench/metrics: FAIL: {name}: millrace {got!r} != sklearn {want!r}")
t_mr, t_sep = mr["seconds"], mr["seconds_separate"]
print(f"bench/metrics: values agree with sklearn to 1e-9 (auc={auc:.12f} ap={ap:.12f} logloss={ll:.12f})",
      file=sys.stderr)
print(f"{'measure':52} {'best s':>9}  vs sklearn")
print(f"{'sklearn roc_auc + average_precision + log_loss':52} {best:9.3f}")
print(f"{'millrace auc_ap (one sort) + logloss, ' + str(mr['threads']) + ' threads':52} {t_mr:9.3f}  {best / t_mr:7.1f}x  (target >= 20x)")
print(f"{'millrace roc_auc, average_precision, logloss apart':52} {t_sep:9.3f}  {best / t_sep:7.1f}x")
print(f"n={n}; in-process compute times on in-memory arrays (no file parsing), best of "
      f"{reps} (sklearn) and the tool's repetitions (millrace)")
print(f"RESULT metrics speedup_vs_sklearn={best / t_mr:.1f} fast_tier_fraction={os.environ.get('FAST_TIER_FRACTION', 'na')}")
