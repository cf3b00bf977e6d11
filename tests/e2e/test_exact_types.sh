#!/usr/bin/env bash
# Exact types through `millrace data ingest` and `data export`, read back by
# DuckDB: a CSV timestamp without an offset stays a naive TIMESTAMP and one
# with an offset is TIMESTAMP WITH TIME ZONE; columns declared with --schema
# as decimal(P,S), int8/int16/int32/uint*, binary or timestamp_local come out
# as DuckDB's DECIMAL(P,S), TINYINT/SMALLINT/INTEGER/U*, BLOB and TIMESTAMP,
# with the values exact; the kinds survive a second ingest of the exported
# Parquet file and a CSV export writes decimals at their scale. Needs node +
# npm for DuckDB (see test_parquet_duckdb.sh); skipped without them.
. "$(dirname "$0")/lib.sh" "$@"

duckdb_setup "the exact-types check" describe.mjs
ws=$(new_ws types)
cd "$ws" || fail "cd $ws"
cat >in.csv <<'CSV'
id,naive,utc,price,small,mid,count,big,raw,local
1,2024-03-01 12:00:00,2024-03-01T12:00:00Z,12.5,-128,-32768,0,18446744073709551,abc,2024-03-01 12:00:00+02:00
2,2024-03-01 13:30:00.25,2024-03-01 14:00:00+02:00,-0.01,127,32767,4294967295,0,,2024-03-01 12:00:00
3,,,99999.99,,,,,xyz,
CSV
cat >schema.yaml <<'YAML'
price: decimal(7,2)
small: int8
mid: int16
count: uint32
big: uint64
raw: binary
local: timestamp_local
YAML
expect_exit 0 mr data ingest in.csv ds --schema schema.yaml
run_cmd mr data inspect ds
for want in "price                    decimal(7,2)" "small                    int8" "naive                    timestamp_local" \
    "utc                      timestamp "; do
    assert_contains "$T_OUT" "$want" "inspect shows the kind: $want"
done
expect_exit 0 mr data export ds out.parquet
run_cmd node "$DUCK/describe.mjs" "$ws/out.parquet"
assert_eq "$T_RC" 0 "DuckDB reads the export ($T_ERR)"
assert_eq "$T_OUT" "id BIGINT
naive TIMESTAMP
utc TIMESTAMP WITH TIME ZONE
price DECIMAL(7,2)
small TINYINT
mid SMALLINT
count UINTEGER
big UBIGINT
raw BLOB
local TIMESTAMP
1|2024-03-01 12:00:00|2024-03-01 12:00:00+00|12.50|-128|-32768|0|18446744073709551|abc|2024-03-01 10:00:00
2|2024-03-01 13:30:00.25|2024-03-01 12:00:00+00|-0.01|127|32767|4294967295|0|NULL|2024-03-01 12:00:00
3|NULL|NULL|99999.99|NULL|NULL|NULL|NULL|xyz|NULL" "DuckDB's types and values of the export"

# the kinds come back from Parquet, and a CSV export writes decimals at their scale
expect_exit 0 mr data ingest out.parquet ds2
expect_exit 0 mr data export ds2 again.parquet
run_cmd node "$DUCK/describe.mjs" "$ws/again.parquet"
assert_eq "$(printf '%s\n' "$T_OUT" | head -10 | tr '\n' ' ')" \
    "id BIGINT naive TIMESTAMP utc TIMESTAMP WITH TIME ZONE price DECIMAL(7,2) small TINYINT mid SMALLINT count UINTEGER big UBIGINT raw BLOB local TIMESTAMP " \
    "a second round trip keeps every type"
expect_exit 0 mr data export ds2 out.csv
assert_eq "$(cut -d, -f4 out.csv | tr '\n' ' ')" "price 12.50 -0.01 99999.99 " "decimals in CSV at their scale"

# values the declared kinds cannot hold are bad rows, named
printf 'id,price,small\n1,1.005,1\n2,1.00,300\n' >bad.csv
printf 'price: decimal(7,2)\nsmall: int8\n' >bad.yaml
expect_exit 1 mr data ingest bad.csv bad --schema bad.yaml
assert_contains "$T_ERR" "bad.csv:2" "a decimal with more fractional digits than its scale is a bad row, at its line"
expect_exit 0 mr data ingest bad.csv bad --schema bad.yaml --on-error skip --json
assert_contains "$T_OUT" '"rows_skipped": 2' "both rows misfit"
t_done
