#!/usr/bin/env bash
# The pit_join op (docs/featurestore.md) against DuckDB's ASOF JOIN over the same
# generated CSV files: entity rows with null keys and times, rows before any
# event, exact-timestamp matches (every time is on a one-minute grid), ties
# on event time broken by the created time (the latest correction; a null
# one is the oldest) and then by the view's row order, a one-hour ttl, and a
# DATE-stamped view joined to TIMESTAMP rows. Also: the same artifact at 1
# and 2 threads, the stage cached on a rerun, and bad definitions refused
# with millrace.yaml's line and column. Needs node + npm for the oracle.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws pit)
awk 'BEGIN { srand(3); print "user,ts,label";
  for (i = 1; i <= 4000; i++) { u = (rand() < 0.03) ? "NULL" : sprintf("u%02d", int(rand() * 50));
    t = (rand() < 0.02) ? "NULL" : strftime("%Y-%m-%d %H:%M:%S", 1704067200 + int(rand() * 2000) * 60, 1);
    print u "," t "," i } }' >"$ws/entities.csv"
awk 'BEGIN { srand(5); print "id,user,event_ts,created_ts,clicks";
  for (i = 1; i <= 6000; i++) { u = (rand() < 0.02) ? "NULL" : sprintf("u%02d", int(rand() * 55));
    e = 1704067200 + int(rand() * 2000) * 60; t = (rand() < 0.02) ? "NULL" : strftime("%Y-%m-%d %H:%M:%S", e, 1);
    c = (rand() < 0.2) ? "NULL" : strftime("%Y-%m-%d %H:%M:%S", e + int(rand() * 3) * 10, 1);
    print i "," u "," t "," c "," int(rand() * 1000) } }' >"$ws/clicks.csv"
awk 'BEGIN { srand(9); print "id,user,day,tier";
  for (i = 1; i <= 300; i++) printf "%d,u%02d,%s,t%d\n", i, int(rand() * 50), strftime("%Y-%m-%d", 1703980800 + int(rand() * 3) * 86400, 1), i }' \
    >"$ws/profile.csv"
write_spec() { # CPUS [MEM]
    cat >"$ws/millrace.yaml" <<EOF
stages:
  train_set:
    op: pit_join
    resources: {cpus: $1${2:+, mem: $2}}
    entities: entities.csv
    keys: [user]
    timestamp: ts
    views:
      - name: clicks
        source: clicks.csv
        timestamp: event_ts
        created: created_ts
        ttl: 1h
        features: [clicks]
      - name: profile
        source: profile.csv
        timestamp: day
        features: [tier]
        prefix: p_
EOF
}
write_spec 2
expect_exit 0 mr -C "$ws" run
assert_contains "$(cat "$ws"/.millrace/logs/run-1/train_set.log)" "pit_join: 4000 rows, 5 columns" "the join's rows and columns"
expect_exit 0 mr -C "$ws" run
assert_contains "$T_ERR" "1 cached" "a rerun is a cache hit"
expect_exit 0 mr -C "$ws" data export out/train_set "$ws/got.raw.csv"
# nulls as DuckDB prints them (no value here is an empty string)
awk -F, -v OFS=, '{ for (i = 1; i <= NF; i++) if ($i == "") $i = "NULL"; print }' "$ws/got.raw.csv" >"$ws/got.csv"
sum2=$(cat "$ws"/out/train_set/*.parquet | sha256sum)
write_spec 1
expect_exit 0 mr -C "$ws" run --force train_set
assert_contains "$T_ERR" "1 executed" "forced on one thread"
assert_eq "$(cat "$ws"/out/train_set/*.parquet | sha256sum)" "$sum2" "the same bytes at 1 and 2 threads"
# with a memory limit, the joined columns wait in the scratch directory and
# the output is written in batches (two here): the same bytes
write_spec 2 1M
expect_exit 0 mr -C "$ws" run --force train_set
log=$(cat "$ws"/.millrace/logs/run-4/train_set.log)
assert_contains "$log" "pit_join: 2 of 2 views through the scratch directory, batches of" "a limit spills"
batch=$(sed -n 's/.*batches of \([0-9]*\) rows.*/\1/p' <<<"$log")
[ "$batch" -lt 4000 ] || fail "one batch of $batch rows for 4000 entity rows under mem: 1M"
assert_eq "$(cat "$ws"/out/train_set/*.parquet | sha256sum)" "$sum2" "the same bytes under a memory limit"

# bad definitions: file:line:col and the key
bad() { # WHAT YAML-OF-THE-VIEWS NEEDLE
    cat >"$ws/bad.yaml" <<EOF
stages:
  train_set:
    op: pit_join
    entities: entities.csv
    keys: [user]
    timestamp: ts
    views:
$2
EOF
    cp "$ws/bad.yaml" "$ws/millrace.yaml"
    expect_exit 2 mr -C "$ws" run
    assert_contains "$T_ERR" "$3" "$1"
}
bad "a ttl that does not parse" "      - {name: c, source: clicks.csv, timestamp: event_ts, features: [clicks], ttl: 3 days}" \
    "millrace.yaml:8:"
assert_contains "$T_ERR" "ttl: expected a duration such as 30d" "the ttl's message"
bad "a view without an event timestamp" "      - {name: c, source: clicks.csv, features: [clicks]}" "view 'c' has no 'timestamp'"
bad "an unknown key" "      - {name: c, source: clicks.csv, timestamp: event_ts, features: [clicks], tll: 1h}" "did you mean 'ttl'?"
bad "two views of one name" "      - {name: c, source: clicks.csv, timestamp: event_ts, features: [clicks]}
      - {name: c, source: profile.csv, timestamp: day, features: [tier]}" "two views are named 'c'"
# an unknown entity column is known only with the data: the stage fails naming it
cat >"$ws/millrace.yaml" <<EOF
stages:
  train_set:
    op: pit_join
    entities: entities.csv
    keys: [usr]
    timestamp: ts
    views:
      - {name: c, source: clicks.csv, timestamp: event_ts, features: [clicks]}
EOF
expect_exit 1 mr -C "$ws" run
assert_contains "$T_ERR$T_OUT$(cat "$ws"/.millrace/logs/run-*/train_set.log)" "the entity table has no key column 'usr'" \
    "an unknown entity column"
assert_contains "$T_ERR$T_OUT$(cat "$ws"/.millrace/logs/run-*/train_set.log)" "did you mean 'user'?" "its hint"

duckdb_setup "the DuckDB ASOF JOIN oracle" xf_compare.mjs
run_cmd node "$DUCK/xf_compare.mjs" "$ws/got.csv" "
WITH c AS (SELECT * FROM clicks WHERE \"user\" IS NOT NULL AND event_ts IS NOT NULL
           QUALIFY row_number() OVER (PARTITION BY \"user\", event_ts ORDER BY created_ts DESC NULLS LAST, id DESC) = 1),
     p AS (SELECT \"user\", day::TIMESTAMP AS t, tier FROM profile
           QUALIFY row_number() OVER (PARTITION BY \"user\", day ORDER BY id DESC) = 1),
     j AS (SELECT e.*, CASE WHEN e.ts - c.event_ts <= INTERVAL 1 HOUR THEN c.clicks END AS clicks
           FROM entities e ASOF LEFT JOIN c ON e.\"user\" = c.\"user\" AND e.ts >= c.event_ts)
SELECT j.\"user\", j.ts, j.label, j.clicks, CASE WHEN j.ts IS NOT NULL THEN p.tier END AS p_tier
FROM j ASOF LEFT JOIN p ON j.\"user\" = p.\"user\" AND j.ts >= p.t" \
    "entities=$ws/entities.csv" "clicks=$ws/clicks.csv" "profile=$ws/profile.csv"
assert_eq "$T_RC" 0 "pit_join equals DuckDB's ASOF JOIN ($T_OUT)"
t_done
