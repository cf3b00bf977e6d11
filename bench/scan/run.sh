#!/usr/bin/env bash
# bench/scan: a full scan of the ingested dataset's 20 float64 columns into
# one float64 array per column (tests/tools/mr_scanbench), stored uncompressed
# (codec none, the target's case), against memcpy of the same bytes on this
# machine and against DuckDB reading the same Parquet shards. Validates the
# column sums against DuckDB first.
BENCH=scan
. "$(dirname "$0")/../lib.sh" "$@"
TOOL="$BUILD/tests/mr_scanbench"
[ -x "$TOOL" ] || bench_fail "mr_scanbench not built at $TOOL"
ensure_csv
ensure_duckdb
DS=$DATA/scan_ds
cols=$(seq -f 'f%02g' 0 19 | paste -sd, -)
if [ ! -f "$DS/manifest.json" ]; then
    "$MR" data ingest "$CSV" "$DS" --codec none --columns "$cols" --force >/dev/null || bench_fail "ingest failed"
fi
"$TOOL" "$DS" "${BENCH_REPS:-3}" >"$DATA/scan.json" || bench_fail "scan failed"
sums=$(seq -f 'sum(f%02g)' 0 19 | paste -sd, -)
duck "SELECT [$sums] AS s FROM read_parquet('$DS/*.parquet')" >"$DATA/scan_duck.json" || bench_fail "DuckDB failed"
"$PY" - "$DATA" <<'PY' || bench_fail "column sums differ from DuckDB's"
import json, sys, math
d = sys.argv[1]
m = json.load(open(d + "/scan.json"))
k = json.load(open(d + "/scan_duck.json"))[0]["s"]
assert len(m["sums"]) == len(k) == 20
for a, b in zip(m["sums"], k):
    assert math.isclose(a, float(b), rel_tol=1e-9, abs_tol=1e-6), (a, b)
print(f"validated: {m['rows']} rows x {m['float_columns']} float columns, sums equal to DuckDB's")
PY
best duckdb "${BENCH_REPS:-3}" node "$DUCK/duck.mjs" "SELECT $sums FROM read_parquet('$DS/*.parquet')"
dk_t=$T_WALL
"$PY" - "$DATA" "$dk_t" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/scan.json"))
dk = float(sys.argv[2])
gb = m["bytes"] / 1e9
print(f"{'what':36} {'seconds':>8} {'GB/s':>8}")
print(f"{'millrace scan into float arrays':36} {m['scan_s']:8.3f} {gb / m['scan_s']:8.2f}")
print(f"{'memcpy, same bytes, 1 thread':36} {m['memcpy_s']:8.3f} {gb / m['memcpy_s']:8.2f}")
print(f"{'DuckDB sum() of the 20 columns':36} {dk:8.3f} {gb / dk:8.2f}   (process start-up included)")
print(f"RESULT scan of_memcpy={m['memcpy_s'] / m['scan_s']:.3f} vs_duckdb={dk / m['scan_s']:.3f}")
PY
