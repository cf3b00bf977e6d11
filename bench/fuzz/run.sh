#!/usr/bin/env bash
# bench/fuzz: runs each libFuzzer target of tests/fuzz (built by `make fuzz`
# into build-fuzz/) for a given time, one after another, and reports its
# executions, execs/s, the coverage it started from and reached, and crashes.
#
# usage: bench/fuzz/run.sh [BUILD_FUZZ_DIR | BUILD_FUZZ_DIR/millrace]   (default build-fuzz)
#
# environment:
#   FUZZ_SECONDS   seconds per target (default 60; -max_total_time)
#   FUZZ_RUNS      stop a target after this many executions (-runs; default: no cap)
#   FUZZ_TARGETS   the targets, in order (default: csv expr http parquet spec jsonl bundle job image webdataset online)
#   FUZZ_WORK      working directory, kept between runs (default /tmp/millrace-fuzz):
#                  corpus/NAME the grown corpus (seeded from tests/fuzz/corpus/NAME;
#                  never in git), crashes/NAME the crash/leak/timeout reproducers
#   FUZZ_LOGS      the per-target libFuzzer logs, NAME.log (default $FUZZ_WORK/logs)
#   FUZZ_MAX_LEN_NAME  -max_len for target NAME (defaults below: sized to the format's seeds)
#   FUZZ_RSS_MB    -rss_limit_mb (default 2048)
#   FUZZ_TIMEOUT   -timeout: seconds one input may take before it counts as a crash (default 10)
#   FUZZ_FLAGS     extra libFuzzer flags for every target
#   ASAN_OPTIONS   default malloc_context_size=5: allocation stacks of 5 frames, not 30
#                  (recording them was a tenth of the CSV target's time); replay a
#                  reproducer with ASAN_OPTIONS= for whole ones
#
# A crash (sanitizer report, broken property, leak, timeout, out-of-memory) stops
# that target; its reproducer is named in the table, and the run ends with
#   bench/fuzz: FAIL: ...
# after the RESULT line. Ends with exactly one machine-readable line:
#   RESULT fuzz targets=N execs=TOTAL crashes=C min_execs_per_s=R new_cov=D
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=${1:-$SRC/build-fuzz}
case "$B" in */millrace) B=$(dirname "$B") ;; esac # the bench convention: the binary's path
[ -d "$B/tests" ] || { echo "bench/fuzz: no $B/tests (build the targets with make fuzz)" >&2; exit 2; }
B=$(cd "$B" && pwd)
SECONDS_PER=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-csv expr http parquet spec jsonl bundle job image webdataset online}
WORK=${FUZZ_WORK:-/tmp/millrace-fuzz}
LOGS=${FUZZ_LOGS:-$WORK/logs}
RSS=${FUZZ_RSS_MB:-2048}
mkdir -p "$WORK" "$LOGS"
export ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=5}

# The seed corpus directory of a target (tests/CMakeLists.txt, MR_FUZZ_CORPUS_*).
corpus_of() { if [ "$1" = http ]; then echo serve; else echo "$1"; fi; }
# Default -max_len: a little over the largest seed of the format, so the
# mutator stays on inputs the size of real ones and execs/s stay high.
max_len_of() {
    case "$1" in
    csv | jsonl | http) echo 4096 ;;
    expr) echo 1024 ;;
    spec | job | webdataset | online) echo 8192 ;;
    parquet | bundle | image) echo 16384 ;;
    *) echo 4096 ;;
    esac
}
# field LOG PATTERN KEY: the value after "KEY: " on the last line matching PATTERN.
field() { { grep -a -E "$2" "$1" || true; } | tail -1 | sed -n "s/.* $3: \([0-9]*\).*/\1/p"; }

total=0 crashes=0 min_eps="" new_cov=0 failed=""
printf '%-8s %6s %12s %9s %14s %16s %7s %s\n' target secs execs execs/s cov ft corpus result
for t in $TARGETS; do
    bin=$B/tests/fuzz_$t
    [ -x "$bin" ] || { echo "bench/fuzz: no $bin (make fuzz)" >&2; exit 2; }
    seeds=$SRC/tests/fuzz/corpus/$(corpus_of "$t")
    corp=$WORK/corpus/$t
    art=$WORK/crashes/$t
    mkdir -p "$corp" "$art"
    var=FUZZ_MAX_LEN_$t
    ml=${!var:-$(max_len_of "$t")}
    log=$LOGS/$t.log
    runs=()
    [ -n "${FUZZ_RUNS:-}" ] && runs=("-runs=$FUZZ_RUNS")
    start=$(date +%s)
    set +e
    # shellcheck disable=SC2086
    "$bin" -max_len="$ml" -rss_limit_mb="$RSS" -timeout="${FUZZ_TIMEOUT:-10}" -max_total_time="$SECONDS_PER" "${runs[@]}" \
        -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_FLAGS:-} "$corp" "$seeds" >"$log" 2>&1
    rc=$?
    set -e
    secs=$(($(date +%s) - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov0=$(field "$log" 'INITED' cov)
    ft0=$(field "$log" 'INITED' ft)
    cov1=$(field "$log" '^#[0-9]+' cov)
    ft1=$(field "$log" '^#[0-9]+' ft)
    n_corp=$(find "$corp" -type f | wc -l)
    # slow-unit-* files (an input past 10 s, or a paused process) are not
    # failures: libFuzzer goes on, and rc stays 0
    repro=$({ grep -a -o 'Test unit written to .*' "$log" || true; } | { grep -v '/slow-unit-' || true; } | tail -1 |
        sed 's/Test unit written to //')
    n_slow=$({ grep -a -o 'Test unit written to .*/slow-unit-' "$log" || true; } | wc -l)
    if [ "$rc" = 0 ] && [ -z "$repro" ]; then
        res=ok
        [ "$n_slow" -gt 0 ] && res="ok ($n_slow slow-unit files: replay them to see if they are slow or the run was paused)"
    else
        res="CRASH rc=$rc ${repro:-(no reproducer written; see $log)}"
        crashes=$((crashes + 1))
        failed="$failed $t"
    fi
    printf '%-8s %6s %12s %9s %14s %16s %7s %s\n' "$t" "$secs" "${execs:-?}" "${eps:-?}" \
        "${cov0:-?}->${cov1:-?}" "${ft0:-?}->${ft1:-?}" "$n_corp" "$res"
    total=$((total + ${execs:-0}))
    new_cov=$((new_cov + ${cov1:-0} - ${cov0:-0}))
    if [ -n "$eps" ] && { [ -z "$min_eps" ] || [ "$eps" -lt "$min_eps" ]; }; then min_eps=$eps; fi
done
n=$(echo "$TARGETS" | wc -w)
echo "logs: $LOGS/NAME.log; grown corpora: $WORK/corpus; reproducers: $WORK/crashes"
echo "RESULT fuzz targets=$n execs=$total crashes=$crashes min_execs_per_s=${min_eps:-0} new_cov=$new_cov"
if [ "$crashes" -gt 0 ]; then
    echo "bench/fuzz: FAIL: crashes in:$failed (reproducers under $WORK/crashes; add them to tests/fuzz/corpus)" >&2
    exit 1
fi
