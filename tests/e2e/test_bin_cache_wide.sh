# The binned-matrix cache key covers every feature column: a table of 1,100
# features whose only change is in column 1,050 is binned again, never served
# the old matrix (the key used to stop at 1,023 columns).
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws binwide)
cd "$ws" || fail "cd"
gen() { # SHIFT: writes data.csv, column f1050 shifted by SHIFT and carrying the label
    python3 - "$1" <<'PY'
import random, sys
shift = float(sys.argv[1]); r = random.Random(1)
cols = ["f%d" % j for j in range(1100)]
with open("data.csv", "w") as f:
    f.write(",".join(cols + ["y"]) + "\n")
    for i in range(300):
        y = i % 2
        row = [r.random() for _ in range(1100)]
        row[1050] = y * shift + r.random() * 0.1
        f.write(",".join("%.6f" % v for v in row) + ",%d\n" % y)
PY
}
cat >millrace.yaml <<'YAML'
stages:
  model:
    op: train
    train: data.csv
    label: y
    params: {objective: binary, num_iterations: 3, min_data_in_leaf: 5}
YAML
gen 0
expect_exit 0 mr run
expect_exit 0 mr run --force model
assert_contains "$(cat .millrace/logs/run-2/model.log)" "binned matrix reused from the cache" "same data: the binned matrix comes from the cache"
gen 5
expect_exit 0 mr run
assert_not_contains "$(cat .millrace/logs/run-3/model.log)" "binned matrix reused" "a change in column 1,050 of 1,100 bins again"
t_done
