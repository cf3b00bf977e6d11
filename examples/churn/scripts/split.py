"""Stratified train/test split; fraction and seed come from millrace params."""
import csv, json, os, random, sys

params = json.load(open(os.environ["MILLRACE_PARAMS_FILE"]))["split"]
src, out = sys.argv[1], sys.argv[2]
rows = list(csv.reader(open(src)))
header, rows = rows[0], rows[1:]
rng = random.Random(params["seed"])
by_label = {}
for r in rows:
    by_label.setdefault(r[-1], []).append(r)
train, test = [], []
for label in sorted(by_label):
    group = by_label[label]
    rng.shuffle(group)
    k = round(len(group) * params["test_fraction"])
    test += group[:k]
    train += group[k:]
os.makedirs(out, exist_ok=True)
for name, part in (("train.csv", train), ("test.csv", test)):
    with open(os.path.join(out, name), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(sorted(part, key=lambda r: int(r[0])))
