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
#
# Ends with exactly one line:
#   RESULT metrics speedup_vs_sklearn=X.X fast_tier_fraction=na
# fast_tier_fraction needs the GBDT trainer (another branch): "na" for now.
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

mr_json=$("$TOOL" bench "$DATA" "$N" "$REPS") || { echo "bench/metrics: FAIL: mr_metrictool bench failed" >&2; exit 1; }
"$PY" "$HERE/compare.py" "$DATA" "$N" "$REPS_SK" "$mr_json"
