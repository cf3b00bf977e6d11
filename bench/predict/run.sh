#!/usr/bin/env bash
# Batch prediction benchmark: a 500-tree, 255-leaf binary model trained with
# `millrace train` on the shared Higgs-like data, packaged by the package op,
# scores 200,000 test rows with `millrace predict -j 2` (time inside the
# prediction path: features + compiled predictor, best of 3), against
# XGBoost's inplace_predict of the equivalent model on the same rows with 2
# threads, measured in the same run, and against ONNX Runtime (onnxruntime-node,
# intraOpNumThreads 2) scoring millrace's own `bundle export-onnx` of the same
# bundle on the same rows (bench/predict/ort_predict.js: the whole batch as one
# float32 tensor, best of 3 after a warm-up run). The bench bundle has no
# features transform, so the ONNX graph is the tree ensemble + Sigmoid.
# onnxruntime-node is taken from $ORT_NODE (default BUILD_DIR/ort-node, where
# tests/e2e/test_onnx.sh installs it; installed there with npm if absent);
# without node or onnxruntime-node, vs_onnxruntime=NA.
#
#   bench/predict/run.sh BUILD_DIR|MILLRACE    (BENCH_ROWS=N train rows, default 200000;
#                                               BENCH_TEST_ROWS, default 200000)
# Validation first: millrace's and XGBoost's probabilities must agree on AUC
# within 0.01 (different trainers, same data), and ONNX Runtime's scores must
# equal millrace's to 1e-5 (same model), else the run says so and the ratio
# is NA.
# Last line: RESULT predict vs_xgboost=<ratio> vs_onnxruntime=<ratio> (targets >= 2, >= 3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
mr=$arg
[ -d "$arg" ] && mr=$arg/millrace
[ -x "$mr" ] || { echo "bench/predict: no millrace at $mr" >&2; exit 2; }
mr=$(cd "$(dirname "$mr")" && pwd)/$(basename "$mr")
ORT=${ORT_NODE:-$(dirname "$mr")/ort-node}
PY=${MR_PYTHON:-/usr/bin/python3}
"$PY" -c 'import xgboost, numpy' 2>/dev/null || { echo "bench/predict: needs python3-xgboost and python3-numpy" >&2; exit 2; }
shared=${MILLRACE_SHARED:-$repo/../shared}
gen=$shared/bench/gen_higgs_like.py
THREADS=${BENCH_THREADS:-2}
rows=${BENCH_ROWS:-200000}
test_rows=${BENCH_TEST_ROWS:-200000}
ROUNDS=${BENCH_ROUNDS:-500}
data=/tmp/millrace-bench-predict-$rows-$test_rows
if [ ! -f "$data/test.csv" ]; then
    echo "# generating $rows + $test_rows rows into $data"
    "$PY" "$gen" "$data" --n-train "$rows" --n-test "$test_rows" >/dev/null || exit 1
fi
ws=$(mktemp -d /tmp/millrace-bench-predict.XXXXXX)
trap 'chmod -R u+w "$ws"; rm -rf "$ws"' EXIT
cd "$ws" || exit 1
echo "# millrace: $mr; xgboost $("$PY" -c 'import xgboost; print(xgboost.__version__)'); threads $THREADS; train $rows, test $test_rows rows; $ROUNDS rounds, 255 leaves"
t0=$(date +%s.%N)
"$mr" train "$data/train.csv" --label label -j "$THREADS" -p objective=binary -p num_iterations="$ROUNDS" \
    -p learning_rate=0.1 -p num_leaves=255 -p max_bin=255 -p min_data_in_leaf=20 -o model.bin >train.log 2>&1 ||
    { cat train.log; exit 1; }
echo "# millrace train: $(tail -1 train.log | cut -c1-120)"
printf 'stages:\n  pkg:\n    op: package\n    model: model.bin\n' >millrace.yaml
"$mr" run >/dev/null 2>&1 || { "$mr" run; exit 1; }
"$mr" bundle verify out/pkg/model.mrb >/dev/null || exit 1
best=""
for i in 1 2 3; do
    "$mr" predict out/pkg/model.mrb "$data/test.csv" -o mr.csv -j "$THREADS" --batch-rows 1000000 --json >p.json || exit 1
    s=$("$PY" -c 'import json; print(json.load(open("p.json"))["predict_seconds"])')
    best=$("$PY" -c "print(min(float('$s'), float('${best:-1e9}')))")
done
"$PY" "$here/xgb_predict.py" --train "$data/train.csv" --test "$data/test.csv" --out xgb.txt --threads "$THREADS" \
    --rounds "$ROUNDS" --leaves 255 >xgb.out || exit 1
xs=$(sed -n 's/^predict_s=//p' xgb.out)
"$PY" - "$data/test.csv" mr.csv xgb.txt <<'PY'
import sys, numpy as np
y = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1, usecols=[0])
m = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1)
x = np.loadtxt(sys.argv[3])
def auc(s):
    o = np.argsort(s, kind="mergesort"); r = np.empty(len(s)); r[o] = np.arange(1, len(s) + 1)
    p = y == 1; return (r[p].sum() - p.sum() * (p.sum() + 1) / 2) / (p.sum() * (~p).sum())
a, b = auc(m), auc(x)
print(f"# validation: AUC millrace {a:.4f}, xgboost {b:.4f} ({'ok' if abs(a - b) < 0.01 else 'MODELS DISAGREE'})")
PY
mr_rps=$("$PY" -c "print(round($test_rows/$best))")
x_rps=$("$PY" -c "print(round($test_rows/$xs))")
printf '%-10s %12s %14s\n' system predict_s rows_per_s
printf '%-10s %12.4f %14s\n' millrace "$best" "$mr_rps"
printf '%-10s %12.4f %14s\n' xgboost "$xs" "$x_rps"
ort_ratio=NA
if command -v node >/dev/null; then
    if [ ! -d "$ORT/node_modules/onnxruntime-node" ] && command -v npm >/dev/null; then
        mkdir -p "$ORT" && (cd "$ORT" && npm install --ignore-scripts --no-audit --no-fund onnxruntime-node >/dev/null 2>&1)
    fi
    if [ -d "$ORT/node_modules/onnxruntime-node" ]; then
        "$mr" bundle export-onnx out/pkg/model.mrb -o model.onnx >/dev/null || exit 1
        if NODE_PATH="$ORT/node_modules" node "$here/ort_predict.js" model.onnx "$data/test.csv" ort.txt "$THREADS" >ort.out; then
            os=$(sed -n 's/^predict_s=//p' ort.out)
            if "$PY" - mr.csv ort.txt <<'PY'
import sys, numpy as np
m = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
m = m if m.ndim == 1 else m[:, -1]
o = np.loadtxt(sys.argv[2])
d = float(np.max(np.abs(m - o))) if len(m) == len(o) else float("inf")
print(f"# validation: ONNX Runtime vs millrace max |diff| {d:.3g} ({'ok' if d <= 1e-5 else 'SCORES DISAGREE'})")
sys.exit(0 if d <= 1e-5 else 1)
PY
            then
                ort_ratio=$("$PY" -c "print(round($os/$best,2))")
                printf '%-10s %12.4f %14s\n' onnxrt "$os" "$("$PY" -c "print(round($test_rows/$os))")"
            fi
        else
            echo "# onnxruntime: scoring failed: $(tail -1 ort.out)"
        fi
    else
        echo "# onnxruntime: skipped (onnxruntime-node not installed in $ORT)"
    fi
else
    echo "# onnxruntime: skipped (no node)"
fi
echo "RESULT predict vs_xgboost=$("$PY" -c "print(round($xs/$best,2))") vs_onnxruntime=$ort_ratio"
