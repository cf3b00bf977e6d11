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
# Capacity: the highest open-loop rate of the soak's mix that the server
# sustains, found by bisection below the closed-loop throughput of
# `millrace bench-serve --port` over SOAK_CONNECTIONS (32) keep-alive
# connections (the comment above the capacity search has why). The soak runs in
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
# CPUs: with SOAK_PIN=1 (the default where there are at least 2) the server
# runs on the first half of the CPUs and the load generators on the rest
# (taskset), so capacity and latency are the server's, not what is left of
# a core a load generator shares with it; SOAK_PIN=0 lets them mix.
# A server that dies is a crash: it is counted, its log tail printed, and a
# new one started for the remaining windows; so is an exit status other than
# 0 on the final SIGTERM, or a sanitizer report in its log.
# Each window's row has the server's CPU share and the load generators'
# (100% = one core), to tell which side a slow window waited on.
# RSS slope: least squares over the samples after the first window (the
# allocator's warm-up), in KiB per minute. Fails (exit 1, after the RESULT
# line) on a crash, a malformed request not answered 4xx, a well-formed or
# slow one not answered 2xx, or a request left without an answer.
# p99 stability: the first and last window's p99, their median and the
# largest over the windows after the first, and the fraction of those
# windows whose p99 is within 2x the median.
# Last line:
#   RESULT soak crashes=N bad_4xx_fraction=X rss_slope_kb_per_min=Y p99_ms_first=A p99_ms_last=B
#          p99_ms_median=M p99_ms_max=X p99_windows_within_2x=F   (one line)
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
CAP_SECS=${SOAK_CAPACITY_SECONDS:-4}
LOAD=${SOAK_LOAD:-0.8}
RSS_EVERY=${SOAK_RSS_EVERY:-2}
PAUSE=${SOAK_SLOW_PAUSE:-0.5}
ncpu=$(nproc)
PIN=${SOAK_PIN:-$([ "$ncpu" -ge 2 ] && echo 1 || echo 0)}
SERVER_CPUS="" LOAD_CPUS=""
if [ "$PIN" = 1 ]; then
    command -v taskset >/dev/null || { echo "bench/soak: SOAK_PIN=1 needs taskset (util-linux)" >&2; exit 2; }
    half=$((ncpu / 2))
    SERVER_CPUS=0-$((half - 1))
    LOAD_CPUS=$half-$((ncpu - 1))
fi
on() { # on CPUS CMD...: CMD pinned to CPUS, or unpinned when CPUS is empty
    local c=$1
    shift
    if [ -n "$c" ]; then taskset -c "$c" "$@"; else "$@"; fi
}
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
    # not through on(): $! must be the server itself (its RSS, its exit status)
    if [ -n "$SERVER_CPUS" ]; then
        taskset -c "$SERVER_CPUS" "$mr" serve "$bundle" --port 0 --port-file port.txt >>serve.log 2>&1 &
    else
        "$mr" serve "$bundle" --port 0 --port-file port.txt >>serve.log 2>&1 &
    fi
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
# Capacity for the soak's own traffic. A closed loop (32 connections, so
# batches of up to 32 rows) gives the server's peak throughput, CLOSED; an
# open loop at the same mean rate keeps far fewer requests in flight, so
# smaller batches and more wake-ups per request: measured here, 80% of
# CLOSED kept one core 92-96% busy and its p99 swung 10-400 ms from window
# to window. The capacity is therefore the highest open-loop rate of the
# soak's mix (main stream with its malformed share, slow stream beside it)
# that the server sustains: SOAK_CAPACITY_STEPS (5) bisection steps of
# SOAK_CAPACITY_SECONDS (4) each between CLOSED/2 and CLOSED, a rate
# counting as sustained when the main stream achieves 99% of it and its
# p50 stays within 3x (at least 2 ms) of the p50 at CLOSED/2.
slow_plan() { # RATE -> "slow_qps slow_conns" for a total rate RATE
    "$PY" -c "import math; s = $1 * 0.01; print(round(s, 2), min(1024, max(4, math.ceil(s * $PAUSE * 1.5))))"
}
bad=$("$PY" -c "print(round(0.05 / 0.99, 5))")
STEPS=${SOAK_CAPACITY_STEPS:-5}
# open_run RATE NAME: the soak's mix at total rate RATE for CAP_SECS; NAME.json, NAME_slow.json
open_run() {
    local sq sc
    read -r sq sc < <(slow_plan "$1")
    on "$LOAD_CPUS" "$mr" bench-serve "$bundle" --port "$PORT" --qps "$("$PY" -c "print(round($1 * 0.99, 1))")" \
        --duration "$CAP_SECS" --connections "$CONN" --malformed "$bad" --json >"$2.json" &
    local m=$!
    on "$LOAD_CPUS" "$mr" bench-serve "$bundle" --port "$PORT" --qps "$sq" --duration "$CAP_SECS" \
        --connections "$sc" --slow 1 --slow-pause "$PAUSE" --json >"$2_slow.json" &
    local s=$!
    wait "$m" && wait "$s" || { echo "bench/soak: a capacity run failed" >&2; exit 1; }
    check_server
}
on "$LOAD_CPUS" "$mr" bench-serve "$bundle" --port "$PORT" --qps 0 --duration "$CAP_SECS" --connections "$CONN" --json >cap0.json || exit 1
check_server
closed=$(j cap0.json achieved_qps)
lo=$("$PY" -c "print($closed / 2)") hi=$closed
open_run "$lo" cap_lo
p50_ref=$(j cap_lo.json p50_ms)
echo "# capacity search: closed loop $(printf %.0f "$closed") req/s; open loop at $(printf %.0f "$lo"): p50 $p50_ref ms"
for k in $(seq "$STEPS"); do
    mid=$("$PY" -c "print(($lo + $hi) / 2)")
    open_run "$mid" "cap$k"
    ok=$("$PY" -c "
import json
m = json.load(open('cap$k.json'))
print(1 if m['achieved_qps'] >= 0.99 * $mid * 0.99 and m['p50_ms'] <= max(3 * $p50_ref, 2.0) else 0)")
    echo "#   $(printf %.0f "$mid") req/s: achieved $(printf %.0f "$(j "cap$k.json" achieved_qps)") (main stream)," \
        "p50 $(j "cap$k.json" p50_ms) ms, p99 $(j "cap$k.json" p99_ms) ms: $([ "$ok" = 1 ] && echo sustained || echo not sustained)"
    if [ "$ok" = 1 ]; then lo=$mid; else hi=$mid; fi
done
cap=$lo
main_qps=$("$PY" -c "print(round($cap * $LOAD * 0.99, 1))")
read -r slow_qps slow_conns < <(slow_plan "$("$PY" -c "print($cap * $LOAD)")")
if [ -n "$SERVER_CPUS" ]; then
    echo "# CPUs: server on $SERVER_CPUS, load generators on $LOAD_CPUS ($ncpu online)"
else
    echo "# CPUs: server and load generators unpinned ($ncpu online)"
fi
echo "# capacity $(printf %.0f "$cap") req/s (open loop, the soak's mix; $(printf %.0f "$closed") req/s closed loop);" \
    "soak at $LOAD of it for ${DURATION}s:" \
    "$main_qps req/s ($(printf %.1f "$("$PY" -c "print($bad*100)")")% malformed) + $slow_qps slow req/s on $slow_conns connections"
t_start=$(date +%s.%N)
echo "$t_start" >t_start
n=$(( (DURATION + WINDOW - 1) / WINDOW ))
left=$DURATION
# CPU ticks: the server's (utime + stime), and the waited-for children of
# this script's (cutime + cstime: the load generators), for the per-window
# CPU share that tells a busy server from a busy load generator
ticks_server() { awk '{print $14 + $15}' "/proc/$SPID/stat" 2>/dev/null || echo 0; }
ticks_children() { awk '{print $16 + $17}' "/proc/$$/stat"; }
HZ=$(getconf CLK_TCK)
printf '%-6s %10s %9s %9s %8s %10s %10s %9s %8s %8s\n' window qps p50_ms p99_ms errors bad_4xx slow_ok rss_mib srv_cpu gen_cpu
for i in $(seq "$n"); do
    w=$WINDOW
    [ "$left" -lt "$w" ] && w=$left
    left=$((left - w))
    [ "$i" = 2 ] && date +%s.%N >t_warm
    s0=$(ticks_server) g0=$(ticks_children) w0=$(date +%s.%N)
    on "$LOAD_CPUS" "$mr" bench-serve "$bundle" --port "$PORT" --qps "$main_qps" --duration "$w" --connections "$CONN" \
        --malformed "$bad" --json >"main$i.json" 2>"main$i.err" &
    m=$!
    on "$LOAD_CPUS" "$mr" bench-serve "$bundle" --port "$PORT" --qps "$slow_qps" --duration "$w" --connections "$slow_conns" \
        --slow 1 --slow-pause "$PAUSE" --json >"slow$i.json" 2>"slow$i.err" &
    s=$!
    wait "$m"
    rm_=$?
    wait "$s"
    rs_=$?
    [ "$rm_" = 0 ] && [ "$rs_" = 0 ] || { echo "bench/soak: a load generator failed" >&2; cat "main$i.err" "slow$i.err" >&2; exit 1; }
    s1=$(ticks_server) g1=$(ticks_children) w1=$(date +%s.%N)
    check_server
    "$PY" - "$i" "$s0" "$s1" "$g0" "$g1" "$w0" "$w1" "$HZ" <<'PY'
import json, sys
i = sys.argv[1]
s0, s1, g0, g1, w0, w1, hz = map(float, sys.argv[2:])
srv = (s1 - s0) / hz / (w1 - w0) * 100 if s1 >= s0 else float("nan")  # a restarted server: unknown
gen = (g1 - g0) / hz / (w1 - w0) * 100
m, s = json.load(open(f"main{i}.json")), json.load(open(f"slow{i}.json"))
rss = [l.split() for l in open("rss.txt")]
print(f"{i:<6} {m['achieved_qps']:10.0f} {m['p50_ms']:9.3f} {m['p99_ms']:9.3f} {m['errors'] + s['errors']:8d} "
      f"{m['malformed_4xx']:>4}/{m['malformed_sent']:<5} {s['slow_ok']:>4}/{s['slow_sent']:<5} "
      f"{int(rss[-1][1]) / 1024 if rss else 0:9.1f} {srv:7.0f}% {gen:7.0f}%")
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
p99s = [m["p99_ms"] for m in (mains[1:] if len(mains) > 1 else mains)]  # the first window warms up
srt = sorted(p99s)
med = srt[len(srt) // 2] if len(srt) % 2 else (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2
within = sum(1 for v in p99s if v <= 2 * med) / len(p99s)
print(f"# p99 over windows {2 if len(mains) > 1 else 1}..{len(mains)}: median {med:.3f} ms, "
      f"max {max(p99s):.3f} ms, {within * 100:.0f}% of windows within 2x the median")
print(f"RESULT soak crashes={crashes} bad_4xx_fraction={frac:.4f} rss_slope_kb_per_min={slope:.1f} "
      f"p99_ms_first={mains[0]['p99_ms']:.3f} p99_ms_last={mains[-1]['p99_ms']:.3f} "
      f"p99_ms_median={med:.3f} p99_ms_max={max(p99s):.3f} p99_windows_within_2x={within:.2f}")
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
