"""Writes a synthetic churn dataset: customers.csv (demographics, churn label)
and events.csv (one row per session). Deterministic for a given seed."""
import argparse, csv, math, os, random

ap = argparse.ArgumentParser()
ap.add_argument("--customers", type=int, required=True)
ap.add_argument("--days", type=int, required=True)
ap.add_argument("--seed", type=int, required=True)
ap.add_argument("--out", required=True)
a = ap.parse_args()
rng = random.Random(a.seed)
os.makedirs(a.out, exist_ok=True)
plans = ["basic", "plus", "pro"]
with open(os.path.join(a.out, "customers.csv"), "w", newline="") as fc, \
     open(os.path.join(a.out, "events.csv"), "w", newline="") as fe:
    wc, we = csv.writer(fc), csv.writer(fe)
    wc.writerow(["customer_id", "age", "plan", "tenure_months", "support_tickets", "churned"])
    we.writerow(["customer_id", "day", "minutes", "pages"])
    for cid in range(a.customers):
        age = rng.randint(18, 75)
        plan = rng.choice(plans)
        tenure = rng.randint(1, 72)
        tickets = min(int(rng.expovariate(0.8)), 12)
        engagement = rng.random()
        sessions = int(engagement * a.days * 0.8) + rng.randint(0, 3)
        for _ in range(sessions):
            we.writerow([cid, rng.randint(1, a.days), round(rng.expovariate(1 / (5 + 20 * engagement)), 2),
                         rng.randint(1, 10 + int(30 * engagement))])
        z = 1.2 - 3.0 * engagement - 0.03 * tenure + 0.45 * tickets + {"basic": 0.4, "plus": 0.0, "pro": -0.5}[plan]
        churned = 1 if rng.random() < 1 / (1 + math.exp(-z)) else 0
        wc.writerow([cid, age, plan, tenure, tickets, churned])
