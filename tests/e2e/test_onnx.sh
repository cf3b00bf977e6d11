#!/usr/bin/env bash
# ONNX export: `millrace bundle export-onnx` on numeric-only bundles (gbdt
# binary and regression with missing values, linear logistic), scored by
# ONNX Runtime (onnxruntime-node, installed into a cache next to the build
# from the npm registry) and compared with `millrace predict` to 1e-5;
# categorical encodings (onehot, ordinal, target_encode, categorical impute)
# and the gbdt's categorical splits likewise; a hash encoding is refused
# naming the column and step. Without
# node/npm, or when onnxruntime-node cannot be installed, only the refusal
# and the file's header bytes are checked (with a note). Bundles whose
# features transform is numeric steps are exported with the transform as ONNX
# ops and compared the same way.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$E2E_DIR/../.." && pwd)
BUILD=$(dirname "$MR_BIN")
ws=$(new_ws onnx)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random, math
r = random.Random(5)
with open("train.csv", "w") as f, open("test.csv", "w") as g:
    for h in (f, g): h.write("x1,x2,x3,label,y\n")
    for i in range(3000):
        x1, x2, x3 = r.gauss(0, 1), r.gauss(0, 1), r.randint(0, 9)
        z = 1.5 * x1 * x2 - x1 + 0.2 * x3
        lab = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        y = z + r.gauss(0, 0.3)
        x1s = "" if r.random() < 0.08 else f"{x1:.6f}"
        (f if i < 2400 else g).write(f"{x1s},{x2:.6f},{x3},{lab},{y:.6f}\n")
PY
cut -d, -f1-3 test.csv >test_x.csv
cut -d, -f1-4 train.csv >train_bin.csv
cut -d, -f1-3,5 train.csv >train_reg.csv
mr train train_bin.csv --label label -p objective=binary -p num_iterations=30 -p num_leaves=15 -o bin.bin >/dev/null || fail "train binary"
mr train train_reg.csv --label y -p objective=regression -p num_iterations=30 -p num_leaves=15 -o reg.bin >/dev/null || fail "train regression"
mr train train_bin.csv --label label --model linear -p objective=binary -o lin.bin >/dev/null || fail "train linear"
cat >millrace.yaml <<'Y'
stages:
  pbin: {op: package, model: bin.bin}
  preg: {op: package, model: reg.bin}
  plin: {op: package, model: lin.bin}
Y
expect_exit 0 mr run --json

ORT=""
if command -v node >/dev/null && command -v npm >/dev/null; then
    ORT="$BUILD/ort-node"
    if [ ! -d "$ORT/node_modules/onnxruntime-node" ]; then
        mkdir -p "$ORT"
        (cd "$ORT" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node >"$T_ROOT/npm.out" 2>&1) || {
            echo "NOTE [$T_NAME] npm install of onnxruntime-node failed: structural checks only"
            ORT=""
        }
    fi
    [ -n "$ORT" ] && cp "$SRC/tests/fixtures/onnx/score.js" "$ORT/"
else
    echo "NOTE [$T_NAME] node/npm not found: structural checks only"
fi

for b in pbin preg plin; do
    expect_exit 0 mr bundle export-onnx out/$b/model.mrb -o $b.onnx
    assert_contains "$T_OUT" "wrote $b.onnx" "$b: export reports the file"
    assert_file $b.onnx "$b: ONNX file written"
    # ModelProto field 1 (ir_version) = 8 comes first
    assert_eq "$(head -c 2 $b.onnx | od -An -tx1 | tr -d ' ')" "0808" "$b: ir_version 8 header"
    expect_exit 0 mr predict out/$b/model.mrb test.csv -o $b.pred.csv
    if [ -n "$ORT" ]; then
        run_cmd node "$ORT/score.js" "$ws/$b.onnx" "$ws/test_x.csv" "$ws/$b.pred.csv" 1e-5
        assert_eq "$T_RC" 0 "$b: ONNX Runtime scores == millrace predict to 1e-5 ($T_OUT)"
    fi
done

# Multiclass: TreeEnsembleRegressor with one target per class, then Softmax
# over axis 1; score is [N, K] and matches predict's prediction_0..K-1.
python3 -c '
import csv
rows = list(csv.reader(open("train.csv")))
with open("train_mc.csv", "w") as f:
    f.write("x1,x2,x3,cls\n")
    for r in rows[1:]:
        y = float(r[4]); f.write(",".join(r[:3]) + "," + str(0 if y < -0.5 else 1 if y < 0.5 else 2) + "\n")'
mr train train_mc.csv --label cls -p objective=multiclass -p num_class=3 -p num_iterations=20 -p num_leaves=15 -o mc.bin >/dev/null ||
    fail "train multiclass"
printf 'stages:\n  pmc: {op: package, model: mc.bin}\n' >millrace.yaml
expect_exit 0 mr run --json
expect_exit 0 mr bundle export-onnx out/pmc/model.mrb -o pmc.onnx
expect_exit 0 mr predict out/pmc/model.mrb test.csv -o pmc.pred.csv
assert_contains "$(head -1 pmc.pred.csv)" "prediction_2" "multiclass predict writes one column per class"
if [ -n "$ORT" ]; then
    run_cmd node "$ORT/score.js" "$ws/pmc.onnx" "$ws/test_x.csv" "$ws/pmc.pred.csv" 1e-5
    assert_eq "$T_RC" 0 "multiclass: ONNX Runtime class probabilities == millrace predict to 1e-5 ($T_OUT)"
    assert_contains "$T_OUT" "dims 600,3" "multiclass: score is [N, 3]"
fi

# A bundle whose features transform is numeric steps (impute with indicator,
# standardize, minmax, log1p, clip, bucketize): exported as ONNX ops in front
# of the trees; the graph input is the raw columns x1,x2,x3.
TOOLS=$BUILD/tests
cat >feat.yaml <<'Y'
- impute: {columns: [x1], strategy: mean, indicator: true}
- standardize: {columns: [x1]}
- impute: {columns: [x2], strategy: constant, value: 0.25}
- clip: {columns: [x2], lo: -1.5, hi: 1.2}
- minmax: {columns: [x2]}
- log1p: {columns: [x3]}
- bucketize: {columns: [x3], n_bins: 4}
Y
"$TOOLS/mr_feattool" fit feat.yaml train_bin.csv test_x.csv label feat.mrft >/dev/null || fail "mr_feattool fit"
"$TOOLS/mr_feattool" apply feat.mrft train_bin.csv >tx.csv || fail "mr_feattool apply"
cut -d, -f4 train_bin.csv | paste -d, tx.csv - >train_fx.csv
mr train train_fx.csv --label label -p objective=binary -p num_iterations=30 -p num_leaves=15 -o fxbin.bin >/dev/null ||
    fail "train on transformed rows"
mr train train_fx.csv --label label --model linear -p objective=binary -o fxlin.bin >/dev/null || fail "train linear fx"
cat >millrace.yaml <<'Y'
stages:
  pfx: {op: package, model: fxbin.bin, features: feat.mrft}
  pfxlin: {op: package, model: fxlin.bin, features: feat.mrft}
Y
expect_exit 0 mr run --json
for b in pfx pfxlin; do
    expect_exit 0 mr bundle export-onnx out/$b/model.mrb -o $b.onnx
    assert_file $b.onnx "$b: ONNX file written (features transform as ONNX ops)"
    expect_exit 0 mr predict out/$b/model.mrb test.csv -o $b.pred.csv
    if [ -n "$ORT" ]; then
        run_cmd node "$ORT/score.js" "$ws/$b.onnx" "$ws/test_x.csv" "$ws/$b.pred.csv" 1e-5
        assert_eq "$T_RC" 0 "$b: ONNX Runtime (transform + model) == millrace predict to 1e-5 ($T_OUT)"
    fi
done

# Categorical encodings become ai.onnx.ml LabelEncoders over a second graph
# input "input_cat" (the categorical inputs as strings, "" = missing):
# onehot in the bundle fixture, then ordinal codes split as categories by
# the gbdt (each categorical split a 0/1 LabelEncoder column), a categorical
# impute with indicator, onehot with top_k + other, target_encode; the test
# rows hold unseen and missing categories.
mkdir fx && cd fx || fail "cd fx"
. "$E2E_DIR/bundle_fixture.sh"
expect_exit 0 mr run --json
expect_exit 0 mr bundle export-onnx out/pkg/model.mrb -o m.onnx
expect_exit 0 mr predict out/pkg/model.mrb test.csv -o m.pred.csv
cut -d, -f2-5 test.csv >m_x.csv
if [ -n "$ORT" ]; then
    run_cmd node "$ORT/score.js" "$ws/fx/m.onnx" "$ws/fx/m_x.csv" "$ws/fx/m.pred.csv" 1e-5 plan
    assert_eq "$T_RC" 0 "onehot: ONNX Runtime == millrace predict to 1e-5 ($T_OUT)"
fi
cd "$ws" && mkdir cat && cd cat || fail "cd cat"
python3 - <<'PY'
import random, math
r = random.Random(21)
cities = [f"c{i:02d}" for i in range(12)]
plans = ["free", "basic", "pro", "max", "team", "edu"]
zips = [f"z{i}" for i in range(30)]
with open("train.csv", "w") as f, open("test.csv", "w") as g:
    for h in (f, g): h.write("x1,city,plan,zip,region,label\n")
    for i in range(5000):
        test = i >= 4000
        x1 = r.gauss(0, 1)
        c = r.choice(cities + (["c99"] if test else []))
        p = r.choice(plans + (["vip"] if test else []))
        z = r.choice(zips + (["z_new"] if test else []))
        zi = int(z[1:]) if z[1:].isdigit() else 15
        reg = r.choice(["n", "s", "e", "w", "x"])
        t = x1 + (1.5 if c in ("c03", "c07", "c08", "c11") else -0.5) + 0.05 * zi - (p == "free")
        if r.random() < 0.1: reg = ""; t += 1.5  # a missing region (NaN code) matters
        t += {"n": 0.8, "s": -0.8, "e": 0.3, "w": -0.3, "x": 0.0, "": 0.0}[reg]
        y = 1 if r.random() < 1 / (1 + math.exp(-t)) else 0
        if r.random() < 0.06: c = ""
        if r.random() < 0.04: p = ""
        if r.random() < 0.04: z = ""
        (g if test else f).write(f"{x1:.6f},{c},{p},{z},{reg},{y}\n")
PY
cat >feat.yaml <<'Y'
- impute: {columns: [city], strategy: most_frequent, indicator: true}
- ordinal: {columns: [city]}
- onehot: {columns: [plan], top_k: 3, other: true}
- target_encode: {columns: [zip], folds: 3, smoothing: 5}
- ordinal: {columns: [region]}
Y
"$TOOLS/mr_feattool" fit feat.yaml train.csv test.csv label feat.mrft >/dev/null || fail "mr_feattool fit (categorical)"
"$TOOLS/mr_feattool" apply feat.mrft train.csv >tx.csv || fail "mr_feattool apply (categorical)"
cut -d, -f6 train.csv | paste -d, tx.csv - >train_fx.csv
mr train train_fx.csv --label label --categorical city,region -p objective=binary -p num_iterations=40 -p num_leaves=15 \
    -p min_data_per_group=20 -o cat.bin >/dev/null || fail "train with a categorical feature"
mr model dump cat.bin >dump.json || fail "model dump"
assert_contains "$(cat dump.json)" "\"decision\":\"in\"" "the gbdt has categorical splits"
python3 -c 'import json,sys; d=json.load(open("dump.json")); s=set()
def walk(n):
    if "decision" in n:
        if n["decision"] == "in": s.add(n["default_left"])
        walk(n["left"]); walk(n["right"])
for t in d["trees"]: walk(t["root"])
print("default sides of categorical splits:", s); sys.exit(0 if s == {True, False} else 1)' || fail "categorical splits with both default sides (missing codes exercise them)"
cat >millrace.yaml <<'Y'
stages:
  pcat: {op: package, model: cat.bin, features: feat.mrft}
Y
expect_exit 0 mr run --json
expect_exit 0 mr bundle export-onnx out/pcat/model.mrb -o cat.onnx
expect_exit 0 mr predict out/pcat/model.mrb test.csv -o cat.pred.csv
cut -d, -f1-5 test.csv >cat_x.csv
if [ -n "$ORT" ]; then
    run_cmd node "$ORT/score.js" "$ws/cat/cat.onnx" "$ws/cat/cat_x.csv" "$ws/cat/cat.pred.csv" 1e-5 city,plan,zip,region
    assert_eq "$T_RC" 0 "ordinal + categorical splits, impute, onehot/other, target_encode: ONNX Runtime == millrace to 1e-5 ($T_OUT)"
fi

# A hash encoding cannot be expressed (the hash is not an ONNX op): refused
# naming the column and step, nothing written.
printf -- '- hash: {columns: [zip], n_features: 8}\n- ordinal: {columns: [city, plan]}\n- drop: {columns: [region]}\n' >hfeat.yaml
"$TOOLS/mr_feattool" fit hfeat.yaml train.csv test.csv label h.mrft >/dev/null || fail "mr_feattool fit (hash)"
"$TOOLS/mr_feattool" apply h.mrft train.csv >htx.csv || fail "mr_feattool apply (hash)"
cut -d, -f6 train.csv | paste -d, htx.csv - >train_h.csv
mr train train_h.csv --label label -p objective=binary -p num_iterations=10 -o h.bin >/dev/null || fail "train (hash)"
printf 'stages:\n  ph: {op: package, model: h.bin, features: h.mrft}\n' >millrace.yaml
expect_exit 0 mr run --json
expect_exit 1 mr bundle export-onnx out/ph/model.mrb -o h.onnx
assert_contains "$T_ERR" "column 'zip' (hash) cannot be expressed in ONNX" "hash step refused naming column and step"
assert_no_file h.onnx "nothing written on refusal"
expect_exit 2 mr bundle export-onnx out/ph/model.mrb
t_done
