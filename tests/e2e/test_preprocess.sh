#!/usr/bin/env bash
# The preprocessing ops in a pipeline: transform (aggregate + join + derive),
# split (stratified, named outputs), features (fitted on train only, applied
# to the other parts), then train. A training-param change re-runs only the
# model; the parts hold every row once with class proportions kept; the
# standardisation applied to `test` uses the train part's statistics.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws prep)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random
r = random.Random(3)
with open("customers.csv", "w") as f:
    f.write("customer_id,age,plan,churned\n")
    for i in range(2000):
        f.write(f"{i},{r.randint(18, 80)},{r.choice(['basic', 'plus', 'pro'])},{1 if r.random() < 0.3 else 0}\n")
with open("events.csv", "w") as f:
    f.write("customer_id,minutes\n")
    for i in range(2000):
        for _ in range(r.randint(0, 5)):
            f.write(f"{i},{r.expovariate(0.1):.3f}\n")
PY
cat >millrace.yaml <<'YAML'
params:
  lr: 0.1
stages:
  activity:
    op: transform
    input: events.csv
    steps:
      - aggregate: {by: [customer_id], n: "count()", total: "sum(minutes)"}
  joined:
    op: transform
    input: customers.csv
    steps:
      - join: {with: "${stages.activity}", on: [customer_id], how: left}
      - derive: {n: "coalesce(n, 0)", total: "coalesce(total, 0.0)"}
  split:
    op: split
    input: ${stages.joined}
    method: stratified
    label: churned
    parts: {train: 0.6, test: 0.4}
    seed: 5
  features:
    op: features
    fit: ${stages.split.train}
    apply: {test: "${stages.split.test}"}
    label: churned
    keep: [customer_id]
    steps:
      - drop: {columns: [customer_id]}
      - onehot: {columns: [plan]}
      - standardize: {columns: [age, n, total]}
  model:
    op: train
    train: ${stages.features.train}
    valid: ${stages.features.test}
    label: churned
    exclude: [customer_id]
    params: {objective: binary, num_iterations: 20, learning_rate: "${params.lr}"}
YAML
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 5 "all five built-in stages execute"
expect_exit 0 mr show --json
metric() { json "[m['value'] for m in d['metrics'] if m['stage']=='$1' and m['name']=='$2'][0]"; }
assert_eq "$(metric activity rows_out)" "$(python3 -c "import csv; print(float(len({r['customer_id'] for r in csv.DictReader(open('events.csv'))})))")" "aggregate yields one row per customer with events"
assert_eq "$(metric joined rows_out)" 2000.0 "a left join keeps every customer"
assert_eq "$(metric split rows.train)" 1200.0 "train part holds 60% of the rows"
assert_eq "$(metric split rows.test)" 800.0 "test part holds 40%"
# Read the published parts back with the Parquet test tool (build/tests/).
pq=$(dirname "$MR_BIN")/tests/mr_pqtool
[ -x "$pq" ] || fail "mr_pqtool not built next to millrace"
dump() { for f in $(find "$1" -name '*.parquet' | sort); do "$pq" dump "$f"; done; }
dump out/split/train >train.csv
dump out/split/test >test.csv
dump out/features/train >ftrain.csv
dump out/features/test >ftest.csv
check=$(python3 - <<'PY'
import csv, statistics
def rows(p):
    out, header = [], None
    for r in csv.reader(open(p)):
        if header is None or r == header:
            header = r
            continue
        out.append(dict(zip(header, r)))
    return out
src = list(csv.DictReader(open("customers.csv")))
tr, te = rows("train.csv"), rows("test.csv")
ids = sorted(int(r["customer_id"]) for r in tr + te)
assert ids == list(range(2000)), "every customer lands in exactly one part"
for label in ("0", "1"):
    n = sum(r["churned"] == label for r in src)
    want = n * 0.6
    got = sum(r["churned"] == label for r in tr)
    assert abs(got - want) <= 1, f"class {label}: {got} in train, want {want} +- 1"
ftr, fte = rows("ftrain.csv"), rows("ftest.csv")
age_tr = [float(r["age"]) for r in ftr]
assert abs(statistics.fmean(age_tr)) < 1e-9, "standardized train age has mean 0"
mu = statistics.fmean(float(r["age"]) for r in tr)
sd = statistics.pstdev(float(r["age"]) for r in tr)
by_id = {r["customer_id"]: r for r in te}
for r in fte[:50]:
    raw = float(by_id[r["customer_id"]]["age"])
    assert abs(float(r["age"]) - (raw - mu) / sd) < 1e-9, "test age standardized with the train mean and sd"
assert "plan=basic" in fte[0] and "churned" in fte[0] and "customer_id" in fte[0]
print("ok")
PY
)
assert_eq "$check" ok "parts are disjoint and complete, class proportions kept within one row, test standardized with train statistics"
expect_exit 0 mr run --json -S lr=0.2
assert_eq "$(json '[s["status"] for s in d["stages"]]' | tr '\n' ' ')" "cached cached cached cached executed " "a learning-rate change re-runs only the model"
t_done
