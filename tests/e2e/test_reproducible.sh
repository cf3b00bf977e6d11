#!/usr/bin/env bash
# The same inputs give the same artifacts: one pipeline (ingest -> split ->
# features -> train -> evaluate -> report) run in two fresh workspaces with
# different histories (B first runs an override, so its run ids differ and
# its final run serves the preparation stages from the cache) gives the
# same output id for every stage in millrace.lock; forcing evaluate and
# report to execute again gives the same ids once more. A timing, run id,
# time or path in any artifact would change an id.
. "$(dirname "$0")/lib.sh" "$@"

write_ws() { # DIR
    mkdir -p "$1" || fail "mkdir $1"
    cat >"$1/gen.py" <<'PY'
import math, os, random
r = random.Random(23)
os.makedirs("data", exist_ok=True)
with open("data/raw.csv", "w") as f:
    f.write("id,age,income,plan,label\n")
    for i in range(2000):
        age = r.randint(18, 80); inc = round(r.lognormvariate(10, 0.5), 2); plan = r.choice(["basic", "pro", "team"])
        z = 0.05 * (age - 45) - 0.00002 * (inc - 22000) + (0.7 if plan == "pro" else 0)
        f.write(f"{i},{age},{inc},{plan},{1 if r.random() < 1 / (1 + math.exp(-z)) else 0}\n")
PY
    cat >"$1/millrace.yaml" <<'YAML'
params:
  train: {learning_rate: 0.1}
stages:
  ingest: {op: ingest, source: data/raw.csv}
  split:
    op: split
    input: ${stages.ingest}
    method: stratified
    label: label
    parts: {train: 0.7, valid: 0.15, test: 0.15}
    seed: 5
  features:
    op: features
    fit: ${stages.split.train}
    apply: {valid: "${stages.split.valid}", test: "${stages.split.test}"}
    label: label
    steps:
      - onehot: {columns: [plan]}
      - standardize: {columns: [age, income]}
  model:
    op: train
    train: ${stages.features.train}
    valid: ${stages.features.valid}
    label: label
    exclude: [id]
    params: {objective: binary, learning_rate: "${params.train.learning_rate}", num_iterations: 40}
  eval:
    op: evaluate
    model: ${stages.model}
    data: ${stages.features.test}
    raw: ${stages.split.test}
    label: label
    id: id
    slices: {numeric: [age], categorical: [plan]}
    bootstrap: {n: 50, seed: 2}
  report: {op: report, evaluate: "${stages.eval}", model: "${stages.model}"}
  tune:
    op: tune
    train: ${stages.features.train}
    valid: ${stages.features.valid}
    label: label
    exclude: [id]
    params: {objective: binary, num_iterations: 20, metric: auc}
    space: {num_leaves: {int: [4, 16]}, learning_rate: {loguniform: [0.05, 0.3]}}
    n_trials: 3
    seed: 4
  package: {op: package, model: "${stages.model}", features: "${stages.features}", metrics: "${stages.eval}"}
YAML
    (cd "$1" && python3 gen.py) || fail "gen.py in $1"
}

a=$(new_ws a)
b=$(new_ws workspace-b)
write_ws "$a"
write_ws "$b"
expect_exit 0 mr -C "$a" run --json
assert_eq "$(json 'd["executed"]')" 8 "workspace A: every stage executes"
expect_exit 0 mr -C "$b" run -S train.learning_rate=0.3
expect_exit 0 mr -C "$b" run --json
assert_eq "$(json '" ".join(s["stage"] + "=" + s["status"] for s in d["stages"])')" \
    "ingest=cached split=cached features=cached model=executed eval=executed report=executed tune=cached package=executed" \
    "workspace B's second run serves the preparation from the cache"
oa=$(lock_outputs "$a/millrace.lock")
ob=$(lock_outputs "$b/millrace.lock")
assert_eq "$(printf '%s\n' "$oa" | cut -d= -f1 | tr '\n' ' ')" \
    "eval.out features.test features.train features.transform features.valid ingest.out model.out package.out report.out split.test split.train split.valid tune.out " \
    "the lock lists every output of every stage"
for stage in ingest split features model eval report tune package; do
    assert_contains "$oa" "$stage." "the lock of A has outputs of $stage"
done
assert_eq "$ob" "$oa" "two fresh workspaces give the same output id for every stage"

# Recomputing evaluate, report and tune (forced; the study's trials now come
# from its trial cache) publishes the same bytes.
expect_exit 0 mr -C "$a" run -f eval -f report -f tune -f package --json
assert_eq "$(json '[s["status"] for s in d["stages"] if s["stage"] in ("eval", "report", "tune", "package")]' | tr '\n' ' ')" \
    "executed executed executed executed " "forced: evaluate, report, tune and package execute again"
assert_eq "$(lock_outputs "$a/millrace.lock")" "$oa" "and their outputs keep their ids"
assert_not_contains "$(cat "$a/out/eval/metrics.json")" "seconds" "metrics.json holds no timing"
expect_exit 0 mr -C "$a" show --json
assert_eq "$(json '[m["name"] for m in d["metrics"] if m["stage"] == "eval" and m["name"] == "predict_seconds"]')" \
    "predict_seconds" "the prediction time is a run-store metric"
t_done
