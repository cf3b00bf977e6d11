#!/usr/bin/env bash
# bench/pushdown: the ingest CSV partitioned by i00 (100 values, so 100
# partitions); the filter `i00 = 42` selects 1% of them. Counts the bytes the
# scan actually reads (pread from shard files, footers included) against the
# dataset's total, from `millrace data inspect --explain --json`, reading
# every column of the selected rows. Validates the selected row count against
# DuckDB first.
BENCH=pushdown
. "$(dirname "$0")/../lib.sh" "$@"
ensure_csv
ensure_duckdb
DS=$DATA/pushdown_ds
if [ ! -f "$DS/manifest.json" ]; then
    "$MR" data ingest "$CSV" "$DS" --partition-by i00 --force >/dev/null || bench_fail "ingest failed"
fi
"$MR" data inspect "$DS" --explain "i00 = 42" --json >"$DATA/pushdown.json" || bench_fail "explain failed"
duck "SELECT count(*) AS n FROM read_csv_auto('$CSV') WHERE i00 = 42" >"$DATA/pushdown_duck.json" || bench_fail "DuckDB failed"
"$PY" - "$DATA" <<'PY'
import json, sys
d = sys.argv[1]
e = json.load(open(d + "/pushdown.json"))["explain"]
n = json.load(open(d + "/pushdown_duck.json"))[0]["n"]
if int(e["rows_selected"]) != int(n):
    sys.exit(f"bench/pushdown: FAIL: selected {e['rows_selected']} rows, DuckDB counts {n}")
print(f"validated: {n} rows selected, as DuckDB counts")
print(f"partitions {e['partitions_total']} (pruned {e['partitions_pruned']}), shards {e['shards_total']} "
      f"(pruned {e['shards_pruned_partition']} by partition), row groups read {e['row_groups_read']} of {e['row_groups_total']}")
print(f"bytes read {e['bytes_read']} of {e['bytes_total']}")
print(f"RESULT pushdown bytes_read_fraction={e['bytes_read'] / e['bytes_total']:.4f}")
PY
