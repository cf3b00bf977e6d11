#!/usr/bin/env bash
# examples/churn at 3,000 users: a training-param change re-runs none of the
# data-preparation stages (all cache hits); a new filter cut-off re-runs the
# event ingest and every preparation stage after it (the users table and the
# generator stay cached). Then, in a tiny pipeline of its own, the features
# op is fitted on train only: changing only the applied (test) rows re-runs
# the stage but leaves the fitted transform byte-identical.
. "$(dirname "$0")/lib.sh" "$@"

src=$(cd "$(dirname "$0")/../.." && pwd)/examples/churn
gen=$(dirname "$MR_BIN")/churn_gen
[ -x "$gen" ] || fail "churn_gen not built next to millrace"

ws=$(new_ws churn)
mkdir -p "$ws/bin" && cp "$src/millrace.yaml" "$ws/" && cp "$gen" "$ws/bin/churn_gen" || fail "workspace setup"
cd "$ws" || fail "cd"
small=(-S data.users=3000 -S data.events_per_user=30)
prep="ingest_users ingest_events activity joined split features"
statuses() { # STAGE...: "name=status ..." from the run --json in T_OUT
    json "' '.join(s['stage'] + '=' + s['status'] for s in d['stages'] if s['stage'] in '$*'.split())"
}

expect_exit 0 mr run --json "${small[@]}"
assert_eq "$(json 'd["executed"]')" 12 "first run executes all twelve stages"
expect_exit 0 mr run --json "${small[@]}" -S train.learning_rate=0.05
assert_eq "$(statuses $prep)" "ingest_users=cached ingest_events=cached activity=cached joined=cached split=cached features=cached" \
    "a learning-rate change re-runs none of the preparation stages"
assert_eq "$(statuses generate model eval package)" "generate=cached model=executed eval=executed package=executed" "... but re-trains, re-evaluates and re-packages"

expect_exit 0 mr run --json "${small[@]}" -S "window.since=2024-03-09 00:00:00"
assert_eq "$(statuses $prep)" "ingest_users=cached ingest_events=executed activity=executed joined=executed split=executed features=executed" \
    "a new filter cut-off re-runs the event ingest and every preparation stage after it"
assert_eq "$(statuses generate)" "generate=cached" "... but not the generator"
expect_exit 0 mr show --json
rows() { json "[m['value'] for m in d['metrics'] if m['stage']=='ingest_events' and m['name']=='$1'][0]"; }
assert_ne "$(rows rows_filtered)" 0.0 "the cut-off filters rows at ingest"

# Features fitted on train only.
fw=$(new_ws features)
cd "$fw" || fail "cd"
python3 - <<'PY'
import random
r = random.Random(5)
for name, n in (("train.csv", 300), ("test.csv", 100)):
    with open(name, "w") as f:
        f.write("id,plan,x,y\n")
        for i in range(n):
            f.write(f"{i},{r.choice(['a', 'b', 'c'])},{r.gauss(10, 3):.4f},{r.randint(0, 1)}\n")
PY
cat >millrace.yaml <<'YAML'
stages:
  features:
    op: features
    fit: train.csv
    apply: {test: test.csv}
    label: y
    keep: [id]
    steps:
      - drop: {columns: [id]}
      - onehot: {columns: [plan]}
      - impute: {columns: [x], strategy: median}
      - standardize: {columns: [x]}
YAML
expect_exit 0 mr run --json
cp out/features/transform/features.mrft first.mrft || fail "no features.mrft"
test_hash() { cat $(find out/features/test -name '*.parquet' | sort) | cksum; }
h1=$(test_hash)
python3 - <<'PY'
import random
r = random.Random(9)
with open("test.csv", "w") as f:
    f.write("id,plan,x,y\n")
    for i in range(100):
        f.write(f"{i},{r.choice(['a', 'b', 'zzz'])},{r.gauss(500, 90):.4f},{r.randint(0, 1)}\n")
PY
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 1 "changing the test rows re-runs the features stage"
cmp -s first.mrft out/features/transform/features.mrft || fail "features.mrft changed when only the test rows did"
pass "the fitted transform is byte-identical: fitted on train only"
assert_ne "$(test_hash)" "$h1" "the transformed test part did change"
sed -i '2s/,[0-9.-]*,\([01]\)$/,9999,\1/' train.csv
expect_exit 0 mr run --json
cmp -s first.mrft out/features/transform/features.mrft && fail "features.mrft did not change with a training row"
pass "a changed training row does change the fitted transform"
t_done
