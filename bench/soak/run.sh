#!/usr/bin/env bash
# Soak: serves the bench bundle (bench/serve's: 500 trees x 255 leaves on
# 200,000 Higgs-like rows, trained once and kept next to the generated data,
# or BENCH_BUNDLE) with `millrace serve` as its own process for a given
# duration, at SOAK_LOAD (0.8) of the capacity measured on that process,
# with 5% malformed and 1% slow requests mixed in, and samples the server's
# RSS every SOAK_RSS_EVERY (2) seconds.
#
#   bench/soak/run.sh BINARY [--duration S]      (default 600)
#
# Capacity: `millrace bench-serve --port` closed loop for SOAK_CAPACITY_SECONDS
# (10) over SOAK_CONNECTIONS (32) keep-alive connections. The soak runs in
# windows of SOAK_WINDOW (10) seconds, each two bench-serve processes at once:
#   - the main stream, open loop at 99% of the target rate over
#     SOAK_CONNECTIONS connections, 5/99 of it malformed (bench-serve
#     --malformed: truncated JSON, no "rows", rows that are not objects,
#     an unknown path, a wrong method, conflicting Content-Lengths; each
#     must get a 4xx); its p50/p99 are over the well-formed requests;
#   - the slow stream, 1% of the target rate, every request sent slowly
#     (--slow 1: the head, SOAK_SLOW_PAUSE/2 (0.25 s), half the body, as
#     long again, the rest), on connections of its own, so that a slow
#     request never delays a well-formed one behind it on the same
#     connection (which would measure the load generator, not the server).
# A server that dies is a crash: it is counted, its log tail printed, and a
# new one started for the remaining windows; so is an exit status other than
# 0 on the final SIGTERM, or a sanitizer report in its log.
# RSS slope: least squares over the samples after the first window (the
# allocator's warm-up), in KiB per minute. Fails (exit 1, after the RESULT
# line) on a crash, a malformed request not answered 4xx, a well-formed or
# slow one not answered 2xx, or a request left without an answer.
# Last line:
#   RESULT soak crashes=N bad_4xx_fraction=X rss_slope_kb_per_min=Y p99_ms_first=A p99_ms_last=B
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
usage() { echo "usage: $0 BINARY [--duration S]" >&2; exit 2; }
[ $# -ge 1 ] || usage
arg=$1
shift
DURATION=600
while [ $# -gt 0 ]; do
    case "$1" in
    --duration) [ $# -ge 2 ] || usage; DURATION=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$DURATION" in '' | *[!0-9]*) usage ;; esac
[ "$DURATION" -ge 1 ] || usage
mr=$arg
[ -d "$arg" ] && mr=$arg/millrace
[ -x "$mr" ] || { echo "bench/soak: no millrace at $mr" >&2; exit 2; }
mr=$(cd "$(dirname "$mr")" && pwd)/$(basename "$mr")
PY=${MR_PYTHON:-/usr/bin/python3}
shared=${MILLRACE_SHARED:-$repo/../shared}
WINDOW=${SOAK_WINDOW:-10}
CONN=${SOAK_CONNECTIONS:-32}
CAP_SECS=${SOAK_CAPACITY_SECONDS:-10}
LOAD=${SOAK_LOAD:-0.8}
RSS_EVERY=${SOAK_RSS_EVERY:-2}
PAUSE=${SOAK_SLOW_PAUSE:-0.5}
ws=$(mktemp -d /tmp/millrace-bench-soak.XXXXXX)
SPID=""
SAMPLER=""
cleanup() {
    [ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null
    [ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null && wait "$SPID" 2>/dev/null
    chmod -R u+w "$ws" 2>/dev/null
    rm -rf "$ws"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cd "$ws" || exit 1

# ---- the bundle: BENCH_BUNDLE, or bench/serve's model, trained once --------
bundle=${BENCH_BUNDLE:-}
if [ -z "$bundle" ]; then
    rows=${BENCH_ROWS:-200000}
    rounds=${BENCH_ROUNDS:-500}
    data=/tmp/millrace-bench-serve-data-$rows
    [ -f "$data/train.csv" ] || "$PY" "$shared/bench/gen_higgs_like.py" "$data" --n-train "$rows" --n-test 1000 >/dev/null || exit 1
    bundle=$data/soak-model-r$rounds.mrb
    if ! "$mr" bundle inspect "$bundle" >/dev/null 2>&1; then # absent, or from a build that reads it no more
        echo "# training the bench model ($rounds rounds on $rows rows)"
        mkdir -p train && cd train || exit 1
        "$mr" train "$data/train.csv" --label label -j 2 -p objective=binary -p num_iterations="$rounds" \
            -p learning_rate=0.1 -p num_leaves=255 -p max_bin=255 -p min_data_in_leaf=20 -o model.bin >train.log 2>&1 ||
            { tail -5 train.log >&2; exit 1; }
        printf 'stages:\n  pkg:\n    op: package\n    model: model.bin\n' >millrace.yaml
        "$mr" run >/dev/null 2>&1 || exit 1
        cp out/pkg/model.mrb "$bundle.tmp.$$" && mv "$bundle.tmp.$$" "$bundle" || exit 1
        cd "$ws" || exit 1
    fi
fi
echo "# bundle: $bundle"

# ---- the server -----------------------------------------------------------------
crashes=0
start_server() {
    rm -f port.txt
    "$mr" serve "$bundle" --port 0 --port-file port.txt >>serve.log 2>&1 &
    SPID=$!
    echo "$SPID" >spid
    for _ in $(seq 200); do [ -s port.txt ] && break; sleep 0.05; done
    [ -s port.txt ] || { echo "bench/soak: the server did not start" >&2; tail -5 serve.log >&2; exit 1; }
    PORT=$(cat port.txt)
}
check_server() { # a dead server is a crash: count it and start another
    kill -0 "$SPID" 2>/dev/null && return 0
    wait "$SPID"
    local rc=$?
    crashes=$((crashes + 1))
    echo "# CRASH: the server exited with status $rc; last lines of its log:"
    tail -20 serve.log | sed 's/^/#   /'
    start_server
}
start_server
# RSS of whichever server is current, every RSS_EVERY seconds: "t_seconds kib"
(
    while :; do
        p=$(cat spid 2>/dev/null)
        kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null)
        [ -n "$kb" ] && echo "$(date +%s.%N) $kb" >>rss.txt
        sleep "$RSS_EVERY"
    done
) &
SAMPLER=$!

j() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
"$mr" bench-serve "$bundle" --port "$PORT" --qps 0 --duration "$CAP_SECS" --connections "$CONN" --json >cap.json || exit 1
check_server
cap=$(j cap.json achieved_qps)
read -r main_qps slow_qps bad slow_conns < <("$PY" -c "
import math
t = $cap * $LOAD
slow = t * 0.01
print(round(t * 0.99, 1), round(slow, 2), round(0.05 / 0.99, 5), min(1024, max(4, math.ceil(slow * $PAUSE * 1.5))))")
echo "# capacity $(printf %.0f "$cap") req/s (closed loop, $CONN connections); soak at $LOAD of it for ${DURATION}s:" \
    "$main_qps req/s ($(printf %.1f "$("$PY" -c "print($bad*100)")")% malformed) + $slow_qps slow req/s on $slow_conns connections"
t_start=$(date +%s.%N)
echo "$t_start" >t_start
n=$(( (DURATION + WINDOW - 1) / WINDOW ))
left=$DURATION
printf '%-6s %10s %9s %9s %8s %10s %10s %9s\n' window qps p50_ms p99_ms errors bad_4xx slow_ok rss_mib
for i in $(seq "$n"); do
    w=$WINDOW
    [ "$left" -lt "$w" ] && w=$left
    left=$((left - w))
    [ "$i" = 2 ] && date +%s.%N >t_warm
    "$mr" bench-serve "$bundle" --port "$PORT" --qps "$main_qps" --duration "$w" --connections "$CONN" \
        --malformed "$bad" --json >"main$i.json" 2>"main$i.err" &
    m=$!
    "$mr" bench-serve "$bundle" --port "$PORT" --qps "$slow_qps" --duration "$w" --connections "$slow_conns" \
        --slow 1 --slow-pause "$PAUSE" --json >"slow$i.json" 2>"slow$i.err" &
    s=$!
    wait "$m"
    rm_=$?
    wait "$s"
    rs_=$?
    [ "$rm_" = 0 ] && [ "$rs_" = 0 ] || { echo "bench/soak: a load generator failed" >&2; cat "main$i.err" "slow$i.err" >&2; exit 1; }
    check_server
    "$PY" - "$i" <<'PY'
import json, sys
i = sys.argv[1]
m, s = json.load(open(f"main{i}.json")), json.load(open(f"slow{i}.json"))
rss = [l.split() for l in open("rss.txt")]
print(f"{i:<6} {m['achieved_qps']:10.0f} {m['p50_ms']:9.3f} {m['p99_ms']:9.3f} {m['errors'] + s['errors']:8d} "
      f"{m['malformed_4xx']:>4}/{m['malformed_sent']:<5} {s['slow_ok']:>4}/{s['slow_sent']:<5} "
      f"{int(rss[-1][1]) / 1024 if rss else 0:9.1f}")
PY
done
kill -TERM "$SPID"
wait "$SPID"
rc=$?
SPID=""
if [ "$rc" != 0 ]; then
    crashes=$((crashes + 1))
    echo "# CRASH: the server exited with status $rc on SIGTERM"
fi
if grep -qE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:' serve.log; then
    crashes=$((crashes + 1))
    echo "# CRASH: sanitizer report in the server's log"
fi
kill "$SAMPLER" 2>/dev/null
wait "$SAMPLER" 2>/dev/null
SAMPLER=""
"$PY" - "$n" "$crashes" <<'PY'
import json, sys
n, crashes = int(sys.argv[1]), int(sys.argv[2])
mains = [json.load(open(f"main{i}.json")) for i in range(1, n + 1)]
slows = [json.load(open(f"slow{i}.json")) for i in range(1, n + 1)]
bad_sent = sum(m["malformed_sent"] for m in mains)
bad_4xx = sum(m["malformed_4xx"] for m in mains)
good = sum(m["sent"] - m["malformed_sent"] for m in mains)
good_ok = sum(m["ok"] for m in mains)  # a malformed request answered 2xx would show in bad_4xx_fraction
errors = sum(m["errors"] for m in mains) + sum(s["errors"] for s in slows)
slow_sent = sum(s["slow_sent"] for s in slows)
slow_ok = sum(s["slow_ok"] for s in slows)
pts = [tuple(map(float, l.split())) for l in open("rss.txt")]
t0 = float(open("t_start").read())
try:
    warm = float(open("t_warm").read())
except FileNotFoundError:
    warm = t0
use = [p for p in pts if p[0] >= warm] if len([p for p in pts if p[0] >= warm]) >= 3 else [p for p in pts if p[0] >= t0]
slope = 0.0
if len(use) >= 2:
    xs = [(p[0] - t0) / 60 for p in use]
    ys = [p[1] for p in use]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
rss = [p[1] for p in pts if p[0] >= t0]
print(f"# well-formed: {good_ok}/{good} got 2xx; malformed: {bad_4xx}/{bad_sent} got 4xx; "
      f"slow: {slow_ok}/{slow_sent} got 2xx; load generator errors (no answer): {errors}")
if rss:
    print(f"# RSS over the soak: first {rss[0] / 1024:.1f} MiB, last {rss[-1] / 1024:.1f} MiB, "
          f"max {max(rss) / 1024:.1f} MiB ({len(pts)} samples)")
frac = bad_4xx / bad_sent if bad_sent else float("nan")
print(f"RESULT soak crashes={crashes} bad_4xx_fraction={frac:.4f} rss_slope_kb_per_min={slope:.1f} "
      f"p99_ms_first={mains[0]['p99_ms']:.3f} p99_ms_last={mains[-1]['p99_ms']:.3f}")
wrong = []
if crashes: wrong.append(f"{crashes} crash(es)")
if bad_4xx != bad_sent: wrong.append(f"{bad_sent - bad_4xx} malformed requests not answered 4xx")
if good_ok != good: wrong.append(f"{good - good_ok} well-formed requests not answered 2xx")
if slow_ok != slow_sent: wrong.append(f"{slow_sent - slow_ok} slow requests not answered 2xx")
if errors: wrong.append(f"{errors} requests without an answer")
if wrong:
    print("bench/soak: FAIL: " + "; ".join(wrong), file=sys.stderr)
    sys.exit(1)
PY
