#!/usr/bin/env bash
# The features op never loses a column without saying so, and keeps ids in
# one obvious way: a numeric column that became strings through one stray
# token fails the features stage before training (exit 1, the column and the
# encodings named, the model never trained); `keep: [customer_id]` alone
# passes the id through unchanged, is no feature, and fits the very
# transform the older drop + keep spelling fits; a step that would make a
# kept id a feature of its own name is refused at load, saying which to
# remove.
. "$(dirname "$0")/lib.sh" "$@"
TOOLS=$(dirname "$MR_BIN")/tests

ws=$(new_ws features)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random
r = random.Random(5)
rows = []
for i in range(1200):
    age = r.randint(18, 80)
    plan = r.choice(["basic", "plus", "pro"])
    y = 1 if r.random() < (0.5 if age < 30 else 0.2) + (0.1 if plan == "basic" else 0) else 0
    rows.append([1000 + i, age, r.gauss(50, 10), plan, y])
def write(path, stray):
    with open(path, "w") as f:
        f.write("customer_id,age,score,plan,churned\n")
        for i, (cid, age, score, plan, y) in enumerate(rows):
            a = "unknown" if stray and i == 700 else str(age)
            f.write(f"{cid},{a},{score:.4f},{plan},{y}\n")
write("clean.csv", False)
write("stray.csv", True)
PY

pipeline() { # DATA KEEP STEPS: writes millrace.yaml
    cat >millrace.yaml <<YAML
stages:
  customers: {op: ingest, source: $1}
  split:
    op: split
    input: \${stages.customers}
    method: stratified
    label: churned
    parts: {train: 0.7, test: 0.3}
    seed: 2
  features:
    op: features
    fit: \${stages.split.train}
    apply: {test: "\${stages.split.test}"}
    label: churned
$2
    steps:
$3
  model:
    op: train
    train: \${stages.features.train}
    valid: \${stages.features.test}
    label: churned
    exclude: [customer_id]
    params: {objective: binary, num_iterations: 10}
YAML
}
STEPS='      - standardize: {columns: numeric}
      - onehot: {columns: [plan]}'

# 1. one stray token: age is a string column that no step encodes
pipeline stray.csv "    keep: [customer_id]" "$STEPS"
expect_exit 1 mr run
all="$T_OUT$T_ERR"
assert_contains "$all" "column 'age' is a string column that no step encodes" "the lost column is named"
assert_contains "$all" "onehot, ordinal, hash or target_encode" "the encodings that fit are named"
assert_contains "$all" "of its" "it says most values are numbers"
assert_contains "$all" "holds \"unknown\"" "it shows the stray value"
assert_contains "$all" "drop: {columns: [age]}" "the hint says how to exclude it deliberately"
assert_no_file out/model "the model is never trained"
assert_no_file out/features/train "no features output is published"

# 2. clean data, an id under keep only: passed through unchanged, not a feature
pipeline clean.csv "    keep: [customer_id]" "$STEPS"
expect_exit 0 mr run
assert_file out/model/model.bin "the model trains"
"$TOOLS/mr_feattool" meta out/features/transform/features.mrft >meta.txt || fail "mr_feattool meta"
assert_not_contains "$(cat meta.txt)" "customer_id" "the kept id is no input or output of the transform"
assert_contains "$(cat meta.txt)" "age,age" "age is a feature"
ids() { # DATASET: its customer_id column
    "$TOOLS/mr_pqtool" dump "$1"/part-*.parquet | python3 -c '
import csv, sys
r = csv.DictReader(sys.stdin)
print("\n".join(row["customer_id"] for row in r))'
}
assert_ne "$(ids out/features/train | wc -l)" 0 "the train output holds the ids"
assert_eq "$(ids out/features/train | md5sum)" "$(ids out/split/train | md5sum)" "train: customer_id passed through unchanged"
assert_eq "$(ids out/features/test | md5sum)" "$(ids out/split/test | md5sum)" "test: customer_id passed through unchanged"
cp out/features/transform/features.mrft keep_only.mrft

# ... the very transform the older drop + keep spelling fits
pipeline clean.csv "    keep: [customer_id]" "      - drop: {columns: [customer_id]}
$STEPS"
expect_exit 0 mr run
cmp -s keep_only.mrft out/features/transform/features.mrft || fail "keep alone and drop + keep fit different transforms"
pass "keep alone and drop + keep fit the same bytes"

# 3. the conflicting case says how, when millrace.yaml is loaded (exit 2, at
# the name in the step's list), before any stage runs
pipeline clean.csv "    keep: [customer_id]" "      - standardize: {columns: [age, customer_id]}
      - onehot: {columns: [plan]}"
expect_exit 2 mr run
all="$T_OUT$T_ERR"
assert_contains "$all" "millrace.yaml:17:38: stage 'features': features: standardize: column 'customer_id' is under keep" "the conflict is named at its line:col"
assert_contains "$all" "take it out of this step's columns" "the hint says how to keep it as an id"
assert_contains "$all" "take it out of keep" "the hint says how to use it as a feature"
t_done
