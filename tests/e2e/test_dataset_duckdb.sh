#!/usr/bin/env bash
# Datasets through DuckDB: a CSV becomes a millrace dataset (mr_dstool, plain
# and hive-partitioned, several shards and row groups), DuckDB reads the shards
# with read_parquet('DIR/**/*.parquet', hive_partitioning = true) and must see
# the CSV's values; millrace's own filtered scans must equal DuckDB's WHERE.
# Needs node + npm (see test_parquet_duckdb.sh); skipped without them.
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$MR_BIN")
DSTOOL="$BUILD/tests/mr_dstool"
[ -x "$DSTOOL" ] || fail "mr_dstool not built at $DSTOOL"
duckdb_setup "DuckDB round trip" compare_dataset.mjs
CMP="$DUCK/compare_dataset.mjs"

# 5000 rows: id, city (6 values, some with spaces), day (40 dates), amount
# (2 decimals, some empty = null), flag, note (strings with commas/quotes, nulls)
CSV="$T_ROOT/in.csv"
awk 'BEGIN {
    print "id,city,day,amount,flag,note";
    split("Paris,Lyon,New York,Sao Paulo,Oslo,Kyiv", c, ",");
    for (i = 0; i < 5000; i++) {
        d = 1 + (i * 40 / 5000);
        day = sprintf("2024-%02d-%02d", 1 + int((d - 1) / 28), 1 + (int(d) - 1) % 28);
        amt = (i % 17 == 0) ? "" : sprintf("%.2f", ((i * 7919) % 100000) / 100.0);
        note = (i % 11 == 0) ? "" : (i % 7 == 0 ? sprintf("\"say \"\"hi\"\", %d\"", i) : sprintf("n%d", i % 97));
        printf "%d,%s,%s,%s,%s,%s\n", i, c[1 + i % 6], day, amt, (i % 3 == 0) ? "true" : "false", note;
    }
}' >"$CSV"

run_cmd "$DSTOOL" write "$CSV" "$T_ROOT/flat" -s 1200 -g 250
assert_eq "$T_RC" 0 "write a plain dataset ($T_ERR)"
run_cmd node "$CMP" "$T_ROOT/flat" "$CSV"
assert_eq "$T_RC" 0 "DuckDB reads the plain dataset equal to the CSV ($T_OUT $T_ERR)"

run_cmd "$DSTOOL" write "$CSV" "$T_ROOT/hive" -p city,day -g 50 -c snappy
assert_eq "$T_RC" 0 "write a hive-partitioned dataset ($T_ERR)"
[ -d "$T_ROOT/hive/city=New York/day=2024-01-01" ] || fail "expected hive directory city=New York/day=2024-01-01"
run_cmd node "$CMP" "$T_ROOT/hive" "$CSV"
assert_eq "$T_RC" 0 "DuckDB reads the partitioned dataset equal to the CSV ($T_OUT $T_ERR)"

for f in "amount > 500|amount > 500" \
         "day >= DATE '2024-02-01' AND city IN ('Oslo', 'Kyiv')|day >= DATE '2024-02-01' AND city IN ('Oslo', 'Kyiv')" \
         "note IS NULL OR flag|note IS NULL OR flag"; do
    mf=${f%%|*}
    dw=${f#*|}
    run_cmd "$DSTOOL" dump "$T_ROOT/hive" -f "$mf" -k id,city,day,amount,flag,note
    assert_eq "$T_RC" 0 "millrace scan with filter $mf"
    printf '%s\n' "$T_OUT" >"$T_ROOT/sel.csv"
    run_cmd node "$CMP" "$T_ROOT/hive" "$T_ROOT/sel.csv" "$dw"
    assert_eq "$T_RC" 0 "millrace's filtered scan equals DuckDB's WHERE $dw ($T_OUT $T_ERR)"
done

run_cmd "$DSTOOL" explain "$T_ROOT/hive" "day = DATE '2024-01-03'"
assert_eq "$T_RC" 0 "explain"
assert_contains "$T_OUT" "partitions: 6 of 240 kept" "explain: partition pruning keeps one day of six cities"
t_done
