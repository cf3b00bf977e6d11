#!/usr/bin/env bash
# evaluate's raw input: the model reads standardised features, but slices,
# error lists and passthrough columns show the rows before the features
# stage (raw: ${stages.split.test}), in the data's own units; the report
# says so. Without raw they show the standardised values. A raw table that
# is not the same rows is an error naming both row counts.
. "$(dirname "$0")/lib.sh" "$@"

PQTOOL="$(dirname "$MR_BIN")/tests/mr_pqtool"
ws=$(new_ws raw)
cd "$ws" || fail "cd"
cat >gen.py <<'PY'
import math, os, random
r = random.Random(3)
os.makedirs("data", exist_ok=True)
with open("data/raw.csv", "w") as f:
    f.write("id,age,income,plan,label\n")
    for i in range(2000):
        age = r.randint(18, 80); inc = round(r.uniform(20000, 90000), 2); plan = r.choice(["basic", "pro"])
        z = 0.06 * (age - 45) - 0.00003 * (inc - 55000) + (0.9 if plan == "pro" else 0)
        f.write(f"{i},{age},{inc},{plan},{1 if r.random() < 1 / (1 + math.exp(-z)) else 0}\n")
PY
python3 gen.py || fail "gen.py"
cat >millrace.yaml <<'YAML'
stages:
  ingest: {op: ingest, source: data/raw.csv}
  split:
    op: split
    input: ${stages.ingest}
    method: stratified
    label: label
    parts: {train: 0.7, valid: 0.1, test: 0.2}
    seed: 1
  features:
    op: features
    fit: ${stages.split.train}
    apply: {test: "${stages.split.test}"}
    label: label
    steps:
      - onehot: {columns: [plan]}
      - standardize: {columns: [age, income]}
  model:
    op: train
    train: ${stages.features.train}
    label: label
    exclude: [id]
    params: {objective: binary, num_iterations: 30}
  eval:
    op: evaluate
    model: ${stages.model}
    data: ${stages.features.test}
    raw: ${stages.split.test}
    label: label
    id: id
    passthrough: [income]
    slices: {numeric: [age], categorical: [plan], buckets: 3}
    top_k_wrong: 5
  eval_std:
    op: evaluate
    model: ${stages.model}
    data: ${stages.features.test}
    label: label
    slices: {numeric: [age], buckets: 3}
    top_k_wrong: 5
  eval_fx:
    op: evaluate
    model: ${stages.model}
    data: ${stages.split.test}
    features: ${stages.features.transform}
    label: label
  report: {op: report, evaluate: "${stages.eval}", model: "${stages.model}"}
YAML

expect_exit 0 mr run
T_OUT=$(cat out/eval/slices.json)
assert_eq "$(json 'd["raw"]')" true "slices.json says its values are the raw data's"
assert_match "$(json '[s["label"] for s in d["slices"] if s["column"] == "age"]')" '^age in \[18, [2-7][0-9]\)$' \
    "numeric slice bounds are ages (the youngest is 18), not standardised values"
assert_match "$(json '[s["label"] for s in d["slices"] if s["column"] == "age"]')" '^age in \[[2-7][0-9], 80\]$' \
    "up to the oldest, 80"
assert_eq "$(json 'sorted(s["label"] for s in d["slices"] if s["column"] == "plan")' | tr '\n' ' ')" "plan=basic plan=pro " \
    "a column the features stage one-hot encoded still slices by category"
T_OUT=$(cat out/eval/errors.json)
assert_eq "$(json 'all(18 <= int(r["features"]["age"]) <= 80 for r in d["most_confident_wrong"])')" true \
    "error lists show raw ages"
assert_eq "$(json 'all(float(r["features"]["income"]) >= 20000 for r in d["most_confident_wrong"])')" true "and raw incomes"
assert_eq "$(json 'sorted(d["most_confident_wrong"][0]["features"])' | tr '\n' ' ')" "age income plan=basic plan=other plan=pro " \
    "derived features keep the model's own values"
T_OUT=$(cat out/eval_std/errors.json)
assert_eq "$(json 'd["raw"]')" false "without raw the lists say so"
assert_eq "$(json 'any(float(r["features"]["age"]) < 0 for r in d["most_confident_wrong"])')" true \
    "and show the standardised values the model read"
[ -x "$PQTOOL" ] || fail "mr_pqtool not built at $PQTOOL"
run_cmd "$PQTOOL" dump out/eval/predictions.parquet
[ "$T_RC" = 0 ] || fail "cannot dump predictions.parquet"
assert_eq "$(printf '%s\n' "$T_OUT" | head -1)" "row,id,label,score,income,plan,age" "predictions: passthrough and slice columns"
assert_eq "$(printf '%s\n' "$T_OUT" | sed 1d | awk -F, '$5 < 20000 || $7 < 18 { bad++ } END { print bad + 0 }')" 0 \
    "passthrough and slice columns hold raw values"
assert_contains "$(cat out/report/report.md)" "raw data's (before the features stage)" "the report says the values are raw"

# features: a features stage's transform output, applied by evaluate to the
# raw rows, scores them as the features stage's own output would.
run_cmd "$PQTOOL" dump out/eval_fx/predictions.parquet
[ "$T_RC" = 0 ] || fail "cannot dump eval_fx predictions"
fx_scores=$(printf '%s\n' "$T_OUT" | sed 1d | cut -d, -f3 | md5sum)
run_cmd "$PQTOOL" dump out/eval_std/predictions.parquet
assert_eq "$fx_scores" "$(printf '%s\n' "$T_OUT" | sed 1d | cut -d, -f3 | md5sum)" \
    "evaluate with features: \${stages.features.transform} gives the same scores as on the transformed rows"

# raw must be the same rows.
sed -i 's|raw: ${stages.split.test}|raw: ${stages.split.train}|' millrace.yaml
expect_exit 1 mr run
assert_match "$T_ERR" "raw has [0-9]+ rows but data has 400" "a raw table of other rows is refused, naming both counts"
t_done
