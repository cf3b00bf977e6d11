#!/usr/bin/env bash
# bench/ingest: the shared 2M x 30 CSV (../shared/bench/gen_ingest_csv.py) to
# columnar storage. millrace: `data ingest` (CSV -> dataset, zstd); DuckDB:
# COPY (SELECT * FROM read_csv_auto(...)) TO '...parquet'; pandas:
# pandas.read_csv. Validates first (row counts and column sums equal across
# the three), then times each (best of BENCH_REPS, default 2, page cache
# warm), then prints the ratios.
BENCH=ingest
. "$(dirname "$0")/../lib.sh" "$@"
REPS=${BENCH_REPS:-2}
ensure_csv
ensure_duckdb
OUT=$DATA/ingest_out
rm -rf "$OUT" && mkdir -p "$OUT"
cat "$CSV" >/dev/null
size=$(stat -c %s "$CSV")

# ---- validate -------------------------------------------------------------
"$MR" data ingest "$CSV" "$OUT/mr" --json >"$OUT/mr.json" || bench_fail "millrace ingest failed"
"$MR" data stats "$OUT/mr" --columns f00,f07,i01,i03 --json >"$OUT/mr_stats.json" || bench_fail "millrace stats failed"
duck "COPY (SELECT * FROM read_csv_auto('$CSV')) TO '$OUT/duck.parquet' (FORMAT parquet)" \
     "SELECT count(*) AS n, sum(f00) AS f00, sum(f07) AS f07, sum(i01) AS i01, sum(i03::DOUBLE) AS i03 FROM read_parquet('$OUT/duck.parquet')" >"$OUT/duck.json" ||
    bench_fail "DuckDB failed"
duck "SELECT count(*) AS n, sum(f00) AS f00, sum(f07) AS f07, sum(i01) AS i01, sum(i03::DOUBLE) AS i03 FROM read_parquet('$OUT/mr/**/*.parquet')" >"$OUT/duck_on_mr.json" ||
    bench_fail "DuckDB cannot read millrace's dataset"
"$PY" - "$CSV" >"$OUT/pandas.json" <<'PY' || bench_fail "pandas failed"
import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1])
print(json.dumps({"n": len(df), "f00": float(df.f00.sum()), "f07": float(df.f07.sum()), "i01": float(df.i01.sum()), "i03": float(df.i03.astype("float64").sum())}))
PY
"$PY" - "$OUT" <<'PY' || bench_fail "results differ across tools"
import json, sys, math
o = sys.argv[1]
mr = json.load(open(o + "/mr_stats.json"))
m = {c["name"]: c["mean"] * c["rows"] for c in mr["columns"]}
m["n"] = mr["rows"]
ref = {"pandas": json.load(open(o + "/pandas.json")), "duckdb": json.load(open(o + "/duck.json"))[0],
       "duckdb reading millrace's dataset": json.load(open(o + "/duck_on_mr.json"))[0]}
for name, r in ref.items():
    for k in ("n", "f00", "f07", "i01", "i03"):
        a, b = float(m[k]), float(r[k])
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6):
            sys.exit(f"{k}: millrace {a!r} vs {name} {b!r}")
print(f"validated: {m['n']} rows; sums of f00, f07, i01, i03 equal in millrace, pandas, DuckDB and DuckDB reading millrace's shards")
PY

# ---- time -----------------------------------------------------------------
best millrace "$REPS" "$MR" data ingest "$CSV" "$OUT/mr" --force
mr_t=$T_WALL mr_rss=$T_RSS
best duckdb "$REPS" node "$DUCK/duck.mjs" "COPY (SELECT * FROM read_csv_auto('$CSV')) TO '$OUT/duck.parquet' (FORMAT parquet)"
dk_t=$T_WALL dk_rss=$T_RSS
best pandas "$REPS" "$PY" -c "import pandas, sys; pandas.read_csv(sys.argv[1])" "$CSV"
pd_t=$T_WALL pd_rss=$T_RSS
mb=$(awk "BEGIN{print $size / 1e6}")
printf '%-28s %8s %10s %12s\n' "tool ($(nproc) cores)" "wall s" "MB/s" "peak RSS MB"
for row in "millrace data ingest:$mr_t:$mr_rss" "DuckDB COPY to parquet:$dk_t:$dk_rss" "pandas.read_csv:$pd_t:$pd_rss"; do
    IFS=: read -r n t r <<<"$row"
    printf '%-28s %8.2f %10.0f %12.0f\n' "$n" "$t" "$(awk "BEGIN{print $mb / $t}")" "$r"
done
echo "RESULT ingest time_vs_duckdb=$(ratio "$mr_t" "$dk_t") time_vs_pandas=$(ratio "$mr_t" "$pd_t") rss_vs_duckdb=$(ratio "$mr_rss" "$dk_rss")"
