#!/usr/bin/env bash
# millrace train / model and the train op: a model trained from a CSV beats
# chance clearly on a nonlinear synthetic problem, predictions come back in
# row order with ids, the pipeline op records the validation curve, a param
# change re-trains only the model, smoke mode trains a handful of rounds, the
# same data as Parquet (also with exact decimal features) trains the same
# model byte for byte, and
# bad labels or params are errors naming them.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws train)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random, math
r = random.Random(7)
with open("train.csv", "w") as f, open("test.csv", "w") as g:
    f.write("id,x1,x2,x3,label\n"); g.write("id,x1,x2,x3,label\n")
    for i in range(6000):
        x1, x2, x3 = r.gauss(0, 1), r.gauss(0, 1), r.random()
        z = 2.0 * x1 * x2 - x1 + 2 * (x3 > 0.5) - 1
        y = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        (f if i < 5000 else g).write(f"{i},{x1:.6f},{x2:.6f},{x3:.6f},{y}\n")
PY
auc() { # PRED_CSV: ROC-AUC of column 'prediction' against test.csv labels (rank formula)
    python3 - "$1" <<'PY'
import csv, sys
y = [int(r["label"]) for r in csv.DictReader(open("test.csv"))]
p = [float(r["prediction"]) for r in csv.DictReader(open(sys.argv[1]))]
pairs = sorted(zip(p, y))
rank = {}
i = 0
while i < len(pairs):
    j = i
    while j < len(pairs) and pairs[j][0] == pairs[i][0]: j += 1
    for k in range(i, j): rank[k] = (i + j + 1) / 2
    i = j
pos = sum(y); neg = len(y) - pos
s = sum(rank[k] for k in range(len(pairs)) if pairs[k][1] == 1)
print(round((s - pos * (pos + 1) / 2) / (pos * neg), 4))
PY
}
expect_exit 0 mr train train.csv --label label --exclude id -p objective=binary -p num_iterations=60 --valid test.csv -o gb.bin
assert_contains "$T_OUT" "trained gbdt (binary) on 5000 rows x 3 features" "train prints a one-line summary"
expect_exit 0 mr model predict gb.bin test.csv -o pred.csv --id id
assert_eq "$(head -1 pred.csv)" "id,prediction" "predictions carry the id column then 'prediction'"
assert_eq "$(sed -n 2p pred.csv | cut -d, -f1)" 5000 "predictions keep input row order"
gb_auc=$(auc pred.csv)
expect_exit 0 mr train train.csv --label label --exclude id --model linear -p objective=binary -o lin.bin
expect_exit 0 mr model predict lin.bin test.csv -o lpred.csv
lin_auc=$(auc lpred.csv)
python3 -c "import sys; sys.exit(0 if $gb_auc > 0.75 and $gb_auc > $lin_auc + 0.05 else 1)" ||
    fail "gbdt AUC $gb_auc should be > 0.75 and clearly above linear $lin_auc on an interaction problem"
pass "gbdt AUC $gb_auc beats linear $lin_auc on an interaction problem"
expect_exit 0 mr model inspect gb.bin --json
assert_eq "$(json 'd["kind"]')" gbdt "inspect --json names the kind"
assert_eq "$(json '[f["name"] for f in d["features"]]' | tr '\n' ' ')" "x1 x2 x3 " "features listed, id excluded"
expect_exit 0 mr model predict gb.bin test.csv -o pred.parquet --raw
assert_file pred.parquet "predictions can be written as Parquet"
# the same data as a dataset, as Parquet, and with x1..x3 declared exact
# decimals, trains the same model, byte for byte
expect_exit 0 mr data ingest train.csv train_ds
expect_exit 0 mr data export train_ds train.parquet
expect_exit 0 mr train train.parquet --label label --exclude id -p objective=binary -p num_iterations=60 --valid test.csv -o gb_pq.bin
cmp -s gb.bin gb_pq.bin || fail "a model trained from Parquet differs from the one trained from the CSV"
pass "the model trained from the Parquet export equals the one from the CSV, byte for byte"
printf 'x1: decimal(9,6)\nx2: decimal(9,6)\nx3: decimal(7,6)\n' >dec.yaml
expect_exit 0 mr data ingest train.csv dec_ds --schema dec.yaml
expect_exit 0 mr data export dec_ds train_dec.parquet
expect_exit 0 mr train train_dec.parquet --label label --exclude id -p objective=binary -p num_iterations=60 --valid test.csv -o gb_dec.bin
cmp -s gb.bin gb_dec.bin || fail "a model trained on decimal columns differs from the one on their float64 values"
pass "decimal feature columns train the model their float64 values do, byte for byte"
expect_exit 2 mr train train.csv --label lable -o x.bin
assert_contains "$T_ERR" "did you mean 'label'" "an unknown label column gets a did-you-mean"
expect_exit 2 mr train train.csv --label label -p num_iteratons=5 -o x.bin
assert_contains "$T_ERR" "num_iterations" "an unknown param gets a did-you-mean"

cat >millrace.yaml <<'YAML'
params:
  train: {lr: 0.1, rounds: 30}
stages:
  prep:
    op: exec
    cmd: mkdir -p data && cp train.csv data/train.csv && cp test.csv data/test.csv
    deps: [train.csv, test.csv]
    outs: [data]
  model:
    op: train
    train: data/train.csv
    valid: data/test.csv
    label: label
    exclude: [id]
    params: {objective: binary, num_iterations: "${params.train.rounds}", learning_rate: "${params.train.lr}", metric: auc}
YAML
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 2 "the pipeline runs prep and the train op"
assert_file out/model/model.bin "the model is published under out/<stage>/"
expect_exit 0 mr show --json
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"]=="valid.auc"])')" 30 "the validation AUC is recorded for every round"
expect_exit 0 mr run --json -S train.lr=0.2
assert_eq "$(json '[s["status"] for s in d["stages"]]' | tr '\n' ' ')" "cached executed " "a learning-rate change re-trains only the model"
expect_exit 0 mr show --json
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"]=="binned_from_cache"][0]')" 1.0 "the re-training reuses the cached binned matrix"
expect_exit 0 mr show 1 --json
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"]=="binned_from_cache"][0]')" 0.0 "the first training binned the data itself"
expect_exit 0 mr run --smoke --json
expect_exit 0 mr show --json
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"]=="valid.auc"])')" 5 "smoke mode trains a handful of rounds"
expect_exit 0 mr model predict out/model/model.bin test.csv -o p2.csv
t_done
