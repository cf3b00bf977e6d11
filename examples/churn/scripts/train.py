"""Logistic regression by full-batch gradient descent on standardized
features (standard library only). Appends one metrics line per epoch."""
import csv, json, math, os, sys

p = json.load(open(os.environ["MILLRACE_PARAMS_FILE"]))["train"]
src, out = sys.argv[1], sys.argv[2]
rows = list(csv.reader(open(src)))
header, rows = rows[0], rows[1:]
feats = header[1:-1]
X = [[float(v) for v in r[1:-1]] for r in rows]
y = [int(r[-1]) for r in rows]
n, d = len(X), len(feats)
mean = [sum(x[j] for x in X) / n for j in range(d)]
std = [max(1e-9, math.sqrt(sum((x[j] - mean[j]) ** 2 for x in X) / n)) for j in range(d)]
Z = [[(x[j] - mean[j]) / std[j] for j in range(d)] for x in X]
w, b = [0.0] * d, 0.0
os.makedirs("metrics", exist_ok=True)
with open("metrics/train_curve.jsonl", "w") as curve:
    for epoch in range(p["epochs"]):
        gw, gb, loss = [0.0] * d, 0.0, 0.0
        for z, t in zip(Z, y):
            s = b + sum(wj * zj for wj, zj in zip(w, z))
            q = 1 / (1 + math.exp(-s)) if s > -30 else 0.0
            loss -= math.log(max(q, 1e-12)) if t else math.log(max(1 - q, 1e-12))
            g = q - t
            gb += g
            for j in range(d):
                gw[j] += g * z[j]
        w = [wj - p["learning_rate"] * (gj / n + p["l2"] * wj) for wj, gj in zip(w, gw)]
        b -= p["learning_rate"] * gb / n
        curve.write(json.dumps({"step": epoch, "train_logloss": round(loss / n, 6)}) + "\n")
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump({"features": feats, "mean": mean, "std": std, "weights": w, "bias": b}, open(out, "w"), indent=1)
