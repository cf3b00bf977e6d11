# Shared by test_bundle.sh and test_serve.sh (sourced after lib.sh): writes
# train.csv/test.csv (id, x1 with 5% blanks, x2, plan, n, label), fits a
# features transform with tests/tools' mr_feattool, trains a gbdt on the
# transformed rows, and packages model + features + metrics with the package
# op. Leaves the bundle at $ws/out/pkg/model.mrb. Needs $ws and cwd = $ws.
TOOLS=$(dirname "$MR_BIN")/tests
python3 - <<'PY'
import random, math
r = random.Random(11)
plans = ["basic", "pro", "max", "free"]
with open("train.csv", "w") as f, open("test.csv", "w") as g:
    for h in (f, g): h.write("id,x1,x2,plan,n,label\n")
    for i in range(4000):
        x1, x2 = r.gauss(0, 1), r.gauss(0, 1)
        p = r.choice(plans); n = r.randint(0, 20)
        z = 2.0 * x1 * x2 - x1 + (p == "pro") + 0.05 * n
        y = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        x1s = "" if r.random() < 0.05 else f"{x1:.6f}"
        (f if i < 3200 else g).write(f"{i},{x1s},{x2:.6f},{p},{n},{y}\n")
PY
cat >feat.yaml <<'Y'
- impute: {columns: [x1], strategy: median, indicator: true}
- onehot: {columns: [plan]}
- drop: {columns: [id]}
Y
"$TOOLS/mr_feattool" fit feat.yaml train.csv test.csv label feat.mrft >/dev/null || fail "mr_feattool fit"
"$TOOLS/mr_feattool" apply feat.mrft train.csv >tx.csv || fail "mr_feattool apply"
cut -d, -f6 train.csv | paste -d, tx.csv - >train_x.csv
mr train train_x.csv --label label -p objective=binary -p num_iterations=40 -p num_leaves=15 -o gb.bin >/dev/null ||
    fail "train"
mkdir -p evalout && echo '{"auc": 0.81, "logloss": 0.5}' >evalout/metrics.json
cat >millrace.yaml <<'Y'
stages:
  pkg:
    op: package
    model: gb.bin
    features: feat.mrft
    metrics: evalout
    name: e2e
Y
