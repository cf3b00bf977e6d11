#!/usr/bin/env bash
# bench/metrics: ROC-AUC + average precision + logloss on 10,000,000 binary
# predictions, millrace (in-process, via the mr_metrictool helper) against
# sklearn.metrics.roc_auc_score + average_precision_score + log_loss on the
# same arrays. Correctness first (values agree to 1e-9), then timing.
#
# usage: bench/metrics/run.sh PATH/TO/millrace    (mr_metrictool is found in
#        the same build directory: BUILD/tests/mr_metrictool)
#
# environment:
#   MILLRACE_BENCH_DIR  work directory, reused (default /tmp/millrace-bench-metrics)
#   BENCH_N             predictions (default 10000000)
#   BENCH_REPS          millrace repetitions, best taken (default 5)
#   BENCH_REPS_SK       sklearn repetitions, best taken (default 2)
#   BENCH_ROWS          GBDT train rows when /tmp/millrace-bench-gbdt is absent
#                       (generated with ../shared/bench/gen_higgs_like.py; default 200000)
#   BENCH_THREADS       training threads for the fast-tier run (default 2)
#
# fast_tier_fraction: `millrace train --json` on the GBDT bench data
# (/tmp/millrace-bench-gbdt, 1M train rows, test.csv as validation set),
# 100 rounds, 63 leaves, --valid-sample 10000: the seconds spent computing the
# fast-tier metrics (fast.auc + fast.logloss every round) over the seconds of
# mr_model_train (binning + boosting). Target: under 0.05.
#
# Ends with exactly one line:
#   RESULT metrics speedup_vs_sklearn=X.X fast_tier_fraction=0.0XXX
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 PATH/TO/millrace" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$(dirname "$1")" && pwd)
TOOL="$BUILD/tests/mr_metrictool"
[ -x "$TOOL" ] || { echo "bench/metrics: $TOOL not built (cmake --build $BUILD)" >&2; exit 2; }
WORK=${MILLRACE_BENCH_DIR:-/tmp/millrace-bench-metrics}
N=${BENCH_N:-10000000}
REPS=${BENCH_REPS:-5}
REPS_SK=${BENCH_REPS_SK:-2}

PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import sklearn, numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "bench/metrics: FAIL: needs python3 with numpy + scikit-learn (apt-get install python3-sklearn)" >&2; exit 1; }

mkdir -p "$WORK"
DATA="$WORK/pred_$N.bin"
"$PY" "$HERE/gen.py" "$DATA" "$N"
echo "bench/metrics: $N predictions in $DATA ($(nproc) cores)" >&2

# ---- fast tier during training -----------------------------------------
GB=/tmp/millrace-bench-gbdt
if [ ! -f "$GB/train.csv" ] || [ ! -f "$GB/test.csv" ]; then
    ROWS=${BENCH_ROWS:-200000}
    GB="$WORK/gbdt_$ROWS"
    GEN=""
    for g in "$HERE/../../../shared/bench/gen_higgs_like.py" /work/shared/bench/gen_higgs_like.py; do
        [ -f "$g" ] && { GEN=$g; break; }
    done
    [ -n "$GEN" ] || { echo "bench/metrics: FAIL: gen_higgs_like.py not found (../shared is absent)" >&2; exit 1; }
    [ -f "$GB/train.csv" ] || "$PY" "$GEN" "$GB" --n-train "$ROWS" --n-test $((ROWS / 5)) >/dev/null
fi
echo "bench/metrics: fast tier: training on $GB/train.csv, validation $GB/test.csv" >&2
tr_json=$("$1" train "$GB/train.csv" --label label --valid "$GB/test.csv" --valid-sample 10000 \
    -p objective=binary -p num_iterations=100 -p num_leaves=63 -p metric=auc -j "${BENCH_THREADS:-2}" \
    -o "$WORK/fast_tier_model.bin" --json) || { echo "bench/metrics: FAIL: millrace train failed" >&2; exit 1; }
FAST_TIER_FRACTION=$(printf '%s' "$tr_json" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
n = sum(1 for c in d["curve"] if c["metric"] == "fast.auc")
f, s, v = d["fast_tier_seconds"], d["seconds"], d["valid_rows"]
print(f"bench/metrics: fast tier {f:.3f}s of {s:.2f}s training, {n} rounds, {v} validation rows", file=sys.stderr)
print(f"{f / s:.4f}")')
export FAST_TIER_FRACTION

mr_json=$("$TOOL" bench "$DATA" "$N" "$REPS") || { echo "bench/metrics: FAIL: mr_metrictool bench failed" >&2; exit 1; }
"$PY" "$HERE/compare.py" "$DATA" "$N" "$REPS_SK" "$mr_json"
