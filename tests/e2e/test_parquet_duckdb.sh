#!/usr/bin/env bash
# Round trip through DuckDB: millrace writes Parquet files (every type, nulls,
# dictionary strings, several row groups, each codec) with the mr_pqtool test
# helper, DuckDB reads them, and the values must match cell for cell.
# Needs node + npm; @duckdb/node-api comes from tests/fixtures/duckdb/node_modules
# or is installed into a cache next to the build (npm registry access). Without
# node/npm the test is skipped (passes with a note).
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$MR_BIN")
PQTOOL="$BUILD/tests/mr_pqtool"
[ -x "$PQTOOL" ] || fail "mr_pqtool not built at $PQTOOL"
duckdb_setup "DuckDB round trip" compare.mjs

for spec in "zstd 3000 1000" "snappy 2500 700" "gzip 1200 5000" "lz4_raw 2000 600" "none 900 256" "zstd 0 100"; do
    set -- $spec
    f="$T_ROOT/mr_$1_$2.parquet"
    run_cmd "$PQTOOL" gen "$f" "$2" "$1" "$3"
    assert_eq "$T_RC" 0 "mr_pqtool gen $spec"
    printf '%s\n' "$T_OUT" >"$f.csv"
    run_cmd node "$DUCK/compare.mjs" "$f" "$f.csv"
    assert_eq "$T_RC" 0 "DuckDB reads millrace's $1 file ($2 rows, row groups of $3) equal"
    run_cmd "$PQTOOL" dump "$f"
    assert_eq "$T_OUT" "$(cat "$f.csv")" "millrace reads its own $1 file back equal"
done
t_done
