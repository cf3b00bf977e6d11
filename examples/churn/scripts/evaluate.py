"""Scores the test split with the trained model: ROC-AUC, logloss, accuracy."""
import csv, json, math, os, sys

model_path, test_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
m = json.load(open(model_path))
rows = list(csv.reader(open(test_path)))[1:]
scores, labels = [], []
for r in rows:
    x = [float(v) for v in r[1:-1]]
    s = m["bias"] + sum(w * (v - mu) / sd for w, v, mu, sd in zip(m["weights"], x, m["mean"], m["std"]))
    scores.append(1 / (1 + math.exp(-s)))
    labels.append(int(r[-1]))
pos = sum(labels)
neg = len(labels) - pos
ranked = sorted(zip(scores, labels))
rank_sum, i = 0.0, 0
while i < len(ranked):  # average ranks over ties
    j = i
    while j < len(ranked) and ranked[j][0] == ranked[i][0]:
        j += 1
    avg = (i + 1 + j) / 2
    rank_sum += avg * sum(l for _, l in ranked[i:j])
    i = j
auc = (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
logloss = -sum(math.log(max(s, 1e-12)) if l else math.log(max(1 - s, 1e-12)) for s, l in zip(scores, labels)) / len(labels)
acc = sum((s >= 0.5) == bool(l) for s, l in zip(scores, labels)) / len(labels)
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump({"auc": round(auc, 6), "logloss": round(logloss, 6), "accuracy": round(acc, 6), "rows": len(labels)},
          open(out, "w"), indent=1)
