#!/usr/bin/env bash
# Run browser benchmark (issue 17): `millrace ui` over generated run stores
# of 1,000 and 10,000 runs x 50 params x 20 metrics (tests/e2e/ui_gen.py),
# the newest three with a 100,000-step curve, timed in headless Chromium
# through puppeteer-core (tests/fixtures/ui/ui_check.mjs time): from
# navigation to the first render of the page, to the runs table interactive
# (its first page drawn from /api/runs), and the 3-run overlay of the
# 100,000-step curves (downsampled on the server). Each BENCH_REPEATS times
# (default 3), medians kept. Then the serving protocols' cost against
# /v1/predict, from bench/serve with a small model and short runs.
# Last line: RESULT ui table_ms_1k=<ms> table_ms_10k=<ms> first_render_ms_10k=<ms>
#   overlay_ms=<ms> invocations_vs_v1=<ratio> v2_vs_v1=<ratio> (max req/s)
#   invocations_cost_vs_v1=<ratio> v2_cost_vs_v1=<ratio> (instructions per request)
# (targets: under 1,000 ms each at 10,000 runs; protocols within 10% of /v1).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
mr=$arg
[ -d "$arg" ] && mr=$arg/millrace
[ -x "$mr" ] || { echo "bench/ui: no millrace at $mr" >&2; exit 2; }
mr=$(cd "$(dirname "$mr")" && pwd)/$(basename "$mr")
build=$(dirname "$mr")
PY=/usr/bin/python3
REP=${BENCH_REPEATS:-3}
NODEDIR=$build/ui-node
if [ ! -d "$NODEDIR/node_modules/puppeteer-core" ]; then
    mkdir -p "$NODEDIR"
    cp "$repo/tests/fixtures/ui/package.json" "$repo/tests/fixtures/ui/package-lock.json" "$NODEDIR/"
    (cd "$NODEDIR" && npm ci --no-audit --no-fund >/dev/null 2>&1) || { echo "bench/ui: npm ci puppeteer-core failed" >&2; exit 1; }
fi
cp "$repo/tests/fixtures/ui/ui_check.mjs" "$NODEDIR/"
tmp=$(mktemp -d /tmp/millrace-bench-ui.XXXXXX)
pids=()
trap 'for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
median() { "$PY" -c 'import statistics, sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 1))' "$@"; }
declare -A table first overlay
for n in 1000 10000; do
    ws=$tmp/ws$n
    mkdir -p "$ws" && cd "$ws" || exit 1
    printf 'stages: {}\n' >millrace.yaml
    "$mr" runs >/dev/null 2>&1
    curves=0:0
    [ "$n" = 10000 ] && curves=3:100000
    "$PY" "$repo/tests/e2e/ui_gen.py" .millrace/runs.db "$n" --curves "$curves" >gen.json || exit 1
    rm -f port.txt
    "$mr" ui --port 0 --port-file port.txt >ui.log 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [ -s port.txt ] && break; sleep 0.1; done
    port=$(cat port.txt)
    runs=$("$PY" -c 'import json; print(",".join(map(str, json.load(open("gen.json"))["curve_runs"])))')
    t=() f=() o=()
    for ((r = 1; r <= REP; r++)); do
        out=$(OVERLAY="runs=$([ "$n" = 10000 ] && echo "$runs")" node "$NODEDIR/ui_check.mjs" time "http://127.0.0.1:$port/#/runs") || {
            echo "bench/ui: the browser run failed: $out" >&2; exit 1; }
        echo "# $n runs, repeat $r: $out"
        t+=("$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["interactive_ms"])' "$out")")
        f+=("$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["first_render_ms"])' "$out")")
        [ "$n" = 10000 ] && o+=("$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["overlay_ms"])' "$out")")
    done
    table[$n]=$(median "${t[@]}")
    first[$n]=$(median "${f[@]}")
    [ "$n" = 10000 ] && overlay[$n]=$(median "${o[@]}")
    # the API alone: the first page of the runs table, sorted by a metric
    api=$("$PY" -c '
import sys, time, urllib.request
u = "http://127.0.0.1:%s/api/runs?sort=-metrics.eval.m3&columns=params.train.p1,metrics.eval.m3&limit=100" % sys.argv[1]
urllib.request.urlopen(u).read()
ts = []
for _ in range(5):
    t0 = time.perf_counter(); urllib.request.urlopen(u).read(); ts.append((time.perf_counter() - t0) * 1e3)
print(round(sorted(ts)[2], 1))' "$port")
    echo "# $n runs: /api/runs sorted by a metric, median of 5: $api ms"
    kill "${pids[-1]}" 2>/dev/null
done
echo "# the serving protocols against /v1/predict (bench/serve, 100 trees on 20,000 rows, 3 s runs)"
sres=$(BENCH_ROUNDS=100 BENCH_ROWS=20000 BENCH_SECONDS=3 BENCH_REPEATS=1 "$repo/bench/serve/run.sh" "$mr" | tail -1)
echo "# $sres"
inv=$(printf '%s\n' "$sres" | tr ' ' '\n' | sed -n 's/^invocations_vs_v1=//p')
v2=$(printf '%s\n' "$sres" | tr ' ' '\n' | sed -n 's/^v2_vs_v1=//p')
invc=$(printf '%s\n' "$sres" | tr ' ' '\n' | sed -n 's/^invocations_cost_vs_v1=//p')
v2c=$(printf '%s\n' "$sres" | tr ' ' '\n' | sed -n 's/^v2_cost_vs_v1=//p')
echo "RESULT ui table_ms_1k=${table[1000]} table_ms_10k=${table[10000]} first_render_ms_10k=${first[10000]} overlay_ms=${overlay[10000]} invocations_vs_v1=${inv:-NA} v2_vs_v1=${v2:-NA} invocations_cost_vs_v1=${invc:-NA} v2_cost_vs_v1=${v2c:-NA}"
