#!/usr/bin/env bash
# Real-data tier: a pipeline of exec stages over the public Telco churn CSV in
# ../shared/data (present in CI). It checks that millrace's recorded metrics
# equal an independent computation (the sqlite3 CLI over the same file), that
# a re-run is served from the cache, and that a param change re-runs only the
# stage that reads it. Without ../shared/data it says so and checks nothing.
. "$(dirname "$0")/lib.sh" "$@"

repo=$(cd "$(dirname "$0")/../.." && pwd)
shared=${MILLRACE_SHARED:-$repo/../shared}
csv="$shared/data/churn/WA_Fn-UseC_-Telco-Customer-Churn.csv"
if [ ! -f "$csv" ]; then
    echo "real-data tier NOT RUN: $csv not found (it is there in CI, under ../shared/data)"
    echo "PASS [$T_NAME] 0 checks (no shared data)"
    exit 0
fi

ws=$(new_ws churn)
ln -s "$csv" "$ws/telco.csv"
cat >"$ws/rates.py" <<'PY'
import csv, json, os, sys
p = json.load(open(os.environ["MILLRACE_PARAMS_FILE"]))["rates"]
rows = list(csv.DictReader(open("telco.csv")))
by = {}
for r in rows:
    by.setdefault(r[p["by"]], []).append(r["Churn"] == "Yes")
out = {"rows": len(rows), "churn_rate": sum(r["Churn"] == "Yes" for r in rows) / len(rows),
       "groups": {k.replace(" ", "_").replace("-", "_"): sum(v) / len(v) for k, v in sorted(by.items())}}
os.makedirs("out", exist_ok=True)
json.dump(out, open("out/rates.json", "w"), indent=1)
PY
cat >"$ws/millrace.yaml" <<'YAML'
params:
  rates: {by: Contract}
stages:
  rates:
    op: exec
    cmd: python3 rates.py
    params: [rates.by]
    deps: [rates.py, telco.csv]
    metrics: [out/rates.json]
YAML

expect_exit 0 mr -C "$ws" run --json
assert_eq "$(json 'd["executed"]')" 1 "first run executes the stage"
expect_exit 0 mr -C "$ws" show --json
rows=$(json '[m["value"] for m in d["metrics"] if m["name"]=="rows"][0]')
rate=$(json '[m["value"] for m in d["metrics"] if m["name"]=="churn_rate"][0]')
m2m=$(json '[m["value"] for m in d["metrics"] if m["name"]=="groups.Month_to_month"][0]')

# Oracle: the sqlite3 CLI over the same CSV.
db="$T_ROOT/oracle.db"
sqlite3 "$db" ".import --csv $csv telco" || fail "sqlite3 import"
want_rows=$(sqlite3 "$db" "SELECT count(*) FROM telco")
want_rate=$(sqlite3 "$db" "SELECT avg(Churn = 'Yes') FROM telco")
want_m2m=$(sqlite3 "$db" "SELECT avg(Churn = 'Yes') FROM telco WHERE Contract = 'Month-to-month'")
assert_eq "${rows%.0}" "$want_rows" "row count recorded by millrace equals sqlite3's ($want_rows)"
close() { python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-9 else 1)' "$1" "$2"; }
close "$rate" "$want_rate" || fail "churn rate $rate != sqlite3 $want_rate"
pass "overall churn rate equals sqlite3's ($want_rate)"
close "$m2m" "$want_m2m" || fail "month-to-month churn rate $m2m != sqlite3 $want_m2m"
pass "month-to-month churn rate equals sqlite3's ($want_m2m)"

expect_exit 0 mr -C "$ws" run --json
assert_eq "$(json 'd["cached"]')" 1 "unchanged re-run is served from the cache"
expect_exit 0 mr -C "$ws" status -S rates.by=PaymentMethod
assert_contains "$T_OUT" "param 'rates.by' changed" "status names the changed param"
expect_exit 0 mr -C "$ws" run --json -S rates.by=PaymentMethod
assert_eq "$(json 'd["executed"]')" 1 "a param change re-runs the stage"
expect_exit 0 mr -C "$ws" verify
t_done
