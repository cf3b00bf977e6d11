# Shared helpers of the data benchmarks (bench/ingest, bench/scan,
# bench/pushdown): the binary, the generated CSV, DuckDB via node, timing.
set -euo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 /path/to/millrace" >&2; exit 2; }
MR=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
BUILD=$(dirname "$MR")
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA=${MILLRACE_BENCH_DATA:-/tmp/millrace-bench-data}
ROWS=${BENCH_ROWS:-2000000}
CSV=$DATA/ingest_${ROWS}.csv
PY=/usr/bin/python3   # Debian's python3 with python3-numpy and python3-pandas
export NO_COLOR=1

bench_fail() { echo "bench/$BENCH: FAIL: $*" >&2; exit 1; }

# The generated CSV, made once and reused.
ensure_csv() {
    mkdir -p "$DATA"
    if [ ! -s "$CSV" ]; then
        echo "generating $CSV ($ROWS rows) ..." >&2
        "$PY" "$SRC/../shared/bench/gen_ingest_csv.py" --rows "$ROWS" --out "$CSV.tmp" >&2 || bench_fail "generator failed"
        mv "$CSV.tmp" "$CSV"
    fi
}

# DuckDB through node (@duckdb/node-api), installed once next to the build
# as tests/e2e/test_parquet_duckdb.sh does.
ensure_duckdb() {
    DUCK="$BUILD/duckdb-node"
    if [ ! -d "$DUCK/node_modules/@duckdb/node-api" ]; then
        mkdir -p "$DUCK"
        cp "$SRC/tests/fixtures/duckdb/package.json" "$SRC/tests/fixtures/duckdb/package-lock.json" "$DUCK/"
        (cd "$DUCK" && npm install --no-audit --no-fund >/dev/null 2>&1) || bench_fail "npm install @duckdb/node-api failed"
    fi
    cp "$SRC/bench/duck.mjs" "$DUCK/"
}
# duck SQL...: runs statements in one in-memory DuckDB, prints the last result as JSON rows.
duck() { node "$DUCK/duck.mjs" "$@"; }

# timed NAME CMD...: runs CMD under /usr/bin/time -v; sets T_WALL (s) and T_RSS (MB).
timed() {
    local name=$1
    shift
    local log="$DATA/.time.$name"
    /usr/bin/time -v "$@" >"$DATA/.out.$name" 2>"$log" || { cat "$log" >&2; bench_fail "$name failed"; }
    T_WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$log")
    T_RSS=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2/1024}' "$log")
}

# best NAME REPS CMD...: best wall time of REPS runs (and the peak RSS of that run).
best() {
    local name=$1 reps=$2 bw=999999 br=0
    shift 2
    for _ in $(seq "$reps"); do
        timed "$name" "$@"
        if awk "BEGIN{exit !($T_WALL < $bw)}"; then bw=$T_WALL; br=$T_RSS; fi
    done
    T_WALL=$bw
    T_RSS=$br
}
ratio() { awk "BEGIN{printf \"%.3f\", $1 / $2}"; }
