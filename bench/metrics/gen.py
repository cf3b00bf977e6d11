"""Writes N seeded binary predictions: N float64 labels then N float64 scores
(raw native little-endian), reusing the file when it already has the right
size. Scores are logistic of a noisy margin, rounded to 1e-6 so ties occur."""
import os
import sys

import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
if os.path.exists(path) and os.path.getsize(path) == 16 * n:
    sys.exit(0)
rng = np.random.default_rng(12345)
y = (rng.random(n) < 0.25).astype(np.float64)
s = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + 1.5 * y - 1.0)))
s = np.round(s, 6)
with open(path + ".tmp", "wb") as f:
    f.write(y.tobytes())
    f.write(s.tobytes())
os.replace(path + ".tmp", path)
