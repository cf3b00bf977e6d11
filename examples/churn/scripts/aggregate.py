"""Aggregates the clickstream per customer and joins it with demographics."""
import csv, os, sys
from collections import defaultdict

raw, out = sys.argv[1], sys.argv[2]
agg = defaultdict(lambda: [0, 0.0, 0, set()])
with open(os.path.join(raw, "events.csv")) as f:
    for r in csv.DictReader(f):
        a = agg[r["customer_id"]]
        a[0] += 1
        a[1] += float(r["minutes"])
        a[2] += int(r["pages"])
        a[3].add(r["day"])
os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
with open(os.path.join(raw, "customers.csv")) as f, open(out, "w", newline="") as fo:
    w = csv.writer(fo)
    w.writerow(["customer_id", "age", "plan_basic", "plan_pro", "tenure_months", "support_tickets",
                "sessions", "minutes", "pages", "active_days", "churned"])
    for r in csv.DictReader(f):
        s, m, p, d = agg.get(r["customer_id"], [0, 0.0, 0, set()])
        w.writerow([r["customer_id"], r["age"], int(r["plan"] == "basic"), int(r["plan"] == "pro"), r["tenure_months"],
                    r["support_tickets"], s, round(m, 2), p, len(d), r["churned"]])
