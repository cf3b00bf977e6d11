#!/usr/bin/env bash
# millrace train / model and the train op: a model trained from a CSV beats
# chance clearly on a nonlinear synthetic problem, predictions come back in
# row order with ids, the pipeline op records the validation curve, a param
# change re-trains only the model, smoke mode trains a handful of rounds, the
# same data as Parquet (also with exact decimal features) trains the same
# model byte for byte, binning while reading (CSV, Parquet, datasets) trains
# the model the table read whole does, and
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
# Binning while reading: a CSV, a Parquet file and a dataset are binned from
# batches read twice (the table never whole), with a bin sample smaller than
# the data so the sample rows fall across batches; each model equals the one
# trained from the table read whole (a glob path takes that route), byte for
# byte. So does a CSV with quoted newlines, CRLF ends and blank lines (the
# row count taken first must match the reader's), and a CSV whose column the
# streaming reader typed from its first 10,000 rows and a later value does
# not fit, which falls back to the table (compared with the same values as
# JSON lines read whole). JSON lines are binned while read in windows of
# whole lines (two windows for a 9 MB file): the table's model, and the
# CSV's; windows that type a column differently fall back.
sp="-p objective=binary -p num_iterations=20 -p bin_construct_sample_cnt=700"
expect_exit 0 mr train 'train.c[s]v' --label label --exclude id $sp --json -o s_table.bin
assert_eq "$(json 'd["binned_while_reading"]')" false "a glob reads the table whole"
for src in train.csv train.parquet train_ds; do
    expect_exit 0 mr train $src --label label --exclude id $sp --json -o s_$src.bin
    assert_eq "$(json 'd["binned_while_reading"]')" true "$src is binned while it is read"
    cmp -s s_table.bin s_$src.bin || fail "the model binned while reading $src differs from the table's"
done
pass "CSV, Parquet and a dataset binned while read train the table's model, byte for byte"
python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("train.csv")))
with open("quoted.csv", "w", newline="") as f:
    f.write('id,note,x1,x2,x3,label\r\n')
    for i, r in enumerate(rows):
        note = f'"line one\nline ""two"", {i}"' if i % 3 == 0 else "plain"
        f.write(f'{r["id"]},{note},{r["x1"]},{r["x2"]},{r["x3"]},{r["label"]}\r\n')
        if i % 500 == 0: f.write("\r\n" if i % 1000 else "\n")
import json
with open("late_float.csv", "w") as f, open("late_float.jsonl", "w") as g:
    f.write("id,x1,x2,x3,k,label\n")
    for i in range(12000):
        r = rows[i % len(rows)]
        k = "2.5" if i == 11000 else str(i % 7)
        f.write(f'{i},{r["x1"]},{r["x2"]},{r["x3"]},{k},{r["label"]}\n')
        g.write(json.dumps({"id": i, "x1": float(r["x1"]), "x2": float(r["x2"]), "x3": float(r["x3"]),
                            "k": float(k) if "." in k else int(k), "label": int(r["label"])}) + "\n")
PY
expect_exit 0 mr train quoted.csv --label label --exclude id,note $sp --json -o q_stream.bin
assert_eq "$(json 'd["binned_while_reading"]')" true "a CSV with quoted newlines is binned while read"
assert_eq "$(json 'd["rows"]')" 5000 "quoted newlines and blank lines are not rows"
expect_exit 0 mr train 'quoted.c[s]v' --label label --exclude id,note $sp -o q_table.bin
cmp -s q_stream.bin q_table.bin || fail "quoted.csv binned while read differs from its table"
expect_exit 0 mr train late_float.csv --label label --exclude id $sp --json -o lf_stream.bin
assert_eq "$(json 'd["binned_while_reading"]')" false "a column the streaming reader mistyped falls back to the table"
expect_exit 0 mr train 'late_float.json[l]' --label label --exclude id $sp -o lf_table.bin
cmp -s lf_stream.bin lf_table.bin || fail "the fallback model differs from the table's"
python3 - <<'PY'
import csv, json
rows = list(csv.DictReader(open("train.csv")))
with open("train.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps({"id": int(r["id"]), "x1": float(r["x1"]), "x2": float(r["x2"]), "x3": float(r["x3"]),
                            "label": int(r["label"])}) + "\n")
with open("big.jsonl", "w") as f, open("mixed.jsonl", "w") as g:
    for i in range(150000):
        r = rows[i % len(rows)]
        line = json.dumps({"x1": float(r["x1"]), "x2": float(r["x2"]), "pad": "p" * 20, "label": int(r["label"])})
        f.write(line + "\n")
        if i == 140000: line = json.dumps({"x1": True, "x2": float(r["x2"]), "pad": "", "label": 0})
        g.write(line + "\n")
PY
expect_exit 0 mr train train.jsonl --label label --exclude id $sp --json -o j_stream.bin
assert_eq "$(json 'd["binned_while_reading"]')" true "JSON lines are binned while read"
cmp -s j_stream.bin s_table.bin || fail "JSON lines binned while read differ from the CSV's model"
expect_exit 0 mr train big.jsonl --label label --exclude pad $sp --json -o big_stream.bin
assert_eq "$(json 'd["binned_while_reading"]') $(json 'd["rows"]')" "true 150000" "a 9 MB JSON-lines file, two windows"
expect_exit 0 mr train 'big.json[l]' --label label --exclude pad $sp -o big_table.bin
cmp -s big_stream.bin big_table.bin || fail "big.jsonl binned in windows differs from its table"
expect_exit 2 mr train mixed.jsonl --label label --exclude pad $sp --json -o mixed.bin
assert_contains "$T_ERR" "feature column 'x1' has type string" "a bool in a later window: the whole file's error, not a model"
pass "JSON lines binned while read: the table's model, and a later window's misfit gives the table's error"
expect_exit 0 mr train train.csv --label label --exclude id $sp --smoke --json -o sm_stream.bin
assert_eq "$(json 'd["rows"]')" 5000 "smoke keeps at most 10,000 rows"
expect_exit 0 mr train 'train.c[s]v' --label label --exclude id $sp --smoke -o sm_table.bin
cmp -s sm_stream.bin sm_table.bin || fail "smoke binned while read differs from smoke on the table"
pass "quoted newlines, CRLF, blank lines, a late misfit and smoke: the table's model every time"
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
