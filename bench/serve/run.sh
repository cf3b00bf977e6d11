#!/usr/bin/env bash
# Serving benchmark: single-row requests over keep-alive loopback connections
# with `millrace bench-serve` (in-process server on 127.0.0.1, built-in load
# generator). Model: the bench model of bench/predict — 500 trees x 255
# leaves (learning rate 0.1) trained here on 200,000 Higgs-like rows, about
# 15 s — or the bundle at BENCH_BUNDLE (BENCH_ROUNDS / BENCH_ROWS shrink the
# trained one). Measures
#   1. p50/p99 at 5,000 req/s open loop (micro-batching on: max batch 256, 200 us)
#   2. max sustained QPS, closed loop, batching on vs --max-batch 1
# Every run is bounded (BENCH_SECONDS each, default 5).
# Last line: RESULT serve p99_ms_at_5000=<ms> batching_qps_gain=<ratio>
# (targets: p99 < 1 ms; gain >= 3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
mr=$arg
[ -d "$arg" ] && mr=$arg/millrace
[ -x "$mr" ] || { echo "bench/serve: no millrace at $mr" >&2; exit 2; }
mr=$(cd "$(dirname "$mr")" && pwd)/$(basename "$mr")
PY=${MR_PYTHON:-/usr/bin/python3}
shared=${MILLRACE_SHARED:-$repo/../shared}
SECS=${BENCH_SECONDS:-5}
CONN=${BENCH_CONNECTIONS:-32}
ws=$(mktemp -d /tmp/millrace-bench-serve.XXXXXX)
trap 'chmod -R u+w "$ws"; rm -rf "$ws"' EXIT
cd "$ws" || exit 1
bundle=${BENCH_BUNDLE:-}
if [ -z "$bundle" ]; then
    rows=${BENCH_ROWS:-200000}
    data=/tmp/millrace-bench-serve-data-$rows
    [ -f "$data/train.csv" ] || "$PY" "$shared/bench/gen_higgs_like.py" "$data" --n-train "$rows" --n-test 1000 >/dev/null || exit 1
    "$mr" train "$data/train.csv" --label label -j 2 -p objective=binary -p num_iterations=${BENCH_ROUNDS:-500} \
        -p learning_rate=0.1 -p num_leaves=255 -p max_bin=255 -p min_data_in_leaf=20 -o model.bin >/dev/null || exit 1
    printf 'stages:\n  pkg:\n    op: package\n    model: model.bin\n' >millrace.yaml
    "$mr" run >/dev/null 2>&1 || exit 1
    bundle=$ws/out/pkg/model.mrb
fi
echo "# bundle: $bundle ($("$mr" bundle inspect "$bundle" --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["model"]["kind"], d["model"].get("trees"), "trees")'))"
j() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
"$mr" bench-serve "$bundle" --qps 5000 --duration "$SECS" --connections "$CONN" --json >open.json || exit 1
"$mr" bench-serve "$bundle" --qps 0 --duration "$SECS" --connections "$CONN" --json >on.json || exit 1
"$mr" bench-serve "$bundle" --qps 0 --duration "$SECS" --connections "$CONN" --max-batch 1 --json >off.json || exit 1
printf '%-28s %10s %9s %9s %9s %9s %8s\n' run achieved_qps p50_ms p90_ms p99_ms max_ms errors
for r in open on off; do
    case $r in open) name="5000 req/s, batching on" ;; on) name="max qps, batching on" ;; off) name="max qps, max-batch 1" ;; esac
    printf '%-28s %10.0f %9.3f %9.3f %9.3f %9.3f %8s\n' "$name" "$(j $r.json achieved_qps)" "$(j $r.json p50_ms)" \
        "$(j $r.json p90_ms)" "$(j $r.json p99_ms)" "$(j $r.json max_ms)" "$("$PY" -c "import json; d=json.load(open('$r.json')); print(d['non_2xx']+d['errors'])")"
done
echo "RESULT serve p99_ms_at_5000=$(j open.json p99_ms) batching_qps_gain=$("$PY" -c "print(round($(j on.json achieved_qps)/$(j off.json achieved_qps),2))")"
