#!/usr/bin/env bash
# DuckDB oracle for the transform engine: the same query runs as millrace
# transform steps (through the mr_xftool test helper) and as DuckDB SQL over
# the same generated CSV files, and the results must be equal as multisets
# (floats within 1e-9 relative). Covers filter, derive (CASE, clip,
# days_between, dayofweek, coalesce), every join kind with NULL and duplicate
# keys, grouped aggregation with every order-independent function, sort+limit.
# Needs node + npm (see test_parquet_duckdb.sh); skipped without them.
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$MR_BIN")
XFTOOL="$BUILD/tests/mr_xftool"
[ -x "$XFTOOL" ] || fail "mr_xftool not built at $XFTOOL"
duckdb_setup "DuckDB oracle" xf_compare.mjs

# deterministic data: 30000 events over 60 customers (some NULL), customers
# with duplicate and NULL keys
awk 'BEGIN {
    srand(7); print "id,cust,day,minutes,pages";
    for (i = 1; i <= 30000; i++) {
        c = int(rand() * 60); cust = (rand() < 0.05) ? "NULL" : sprintf("c%02d", c);
        d = int(rand() * 500); day = (rand() < 0.03) ? "NULL" : strftime("%Y-%m-%d", 1698796800 + d * 86400, 1);
        m = (rand() < 0.08) ? "NULL" : sprintf("%.2f", rand() * 120);
        p = (rand() < 0.05) ? "NULL" : int(rand() * 12);
        print i "," cust "," day "," m "," p;
    } }' >"$T_ROOT/events.csv"
awk 'BEGIN {
    srand(11); print "cust,name,tier";
    for (c = 0; c < 70; c += 1) {
        if (c % 7 == 3) continue;                       # some customers unknown
        printf "c%02d,name%d,%d\n", c, c, c % 4;
        if (c % 10 == 0) printf "c%02d,alias%d,%d\n", c, c, 9;   # duplicate keys
    }
    print "NULL,nobody,0";
    }' >"$T_ROOT/customers.csv"

check() { # NAME STEPS-YAML SQL
    printf '%s\n' "$2" >"$T_ROOT/$1.yaml"
    for th in 1 3; do
        MILLRACE_THREADS=$th "$XFTOOL" "$T_ROOT/$1.yaml" "$T_ROOT/events.csv" "customers=$T_ROOT/customers.csv" \
            >"$T_ROOT/$1.$th.csv" 2>"$T_ROOT/$1.err"
        assert_eq "$?" 0 "$1: mr_xftool runs ($(head -c 300 "$T_ROOT/$1.err"))"
    done
    assert_eq "$(cmp -s "$T_ROOT/$1.1.csv" "$T_ROOT/$1.3.csv" && echo same)" same "$1: same bytes at 1 and 3 threads"
    run_cmd node "$DUCK/xf_compare.mjs" "$T_ROOT/$1.1.csv" "$3" "events=$T_ROOT/events.csv" "customers=$T_ROOT/customers.csv"
    assert_eq "$T_RC" 0 "$1: millrace equals DuckDB ($T_OUT)"
}

check agg "
- filter: \"day >= DATE '2024-01-01'\"
- derive: {mpp: \"minutes / pages\"}
- aggregate: {by: [cust], n: \"count()\", nm: \"count(minutes)\", total: \"sum(minutes)\", avg: \"mean(mpp)\",
              mx: \"max(pages)\", mn: \"min(day)\", sd: \"std(minutes)\", nd: \"count_distinct(pages)\", sp: \"sum(pages)\"}" \
"SELECT cust, count(*) AS n, count(minutes) AS nm, sum(minutes) AS total,
        avg(CASE WHEN pages = 0 THEN NULL ELSE minutes / pages END) AS avg, max(pages) AS mx, min(day) AS mn,
        stddev_samp(minutes) AS sd, count(DISTINCT pages) AS nd, sum(pages) AS sp
 FROM events WHERE day >= DATE '2024-01-01' GROUP BY cust"

check agg2 "
- aggregate: {by: [cust, pages], n: \"count()\", lo: \"min(minutes)\", hi: \"max(cust)\"}" \
"SELECT cust, pages, count(*) AS n, min(minutes) AS lo, max(cust) AS hi FROM events GROUP BY cust, pages"

check global "
- aggregate: {n: \"count()\", s: \"sum(minutes)\", nd: \"count_distinct(cust)\"}" \
"SELECT count(*) AS n, sum(minutes) AS s, count(DISTINCT cust) AS nd FROM events"

check inner "
- join: {with: customers, on: [cust]}
- select: [id, cust, name, tier]" \
"SELECT e.id, e.cust, c.name, c.tier FROM events e JOIN customers c ON e.cust = c.cust"

check left "
- join: {with: customers, on: [cust], how: left}
- select: [id, name, tier]" \
"SELECT e.id, c.name, c.tier FROM events e LEFT JOIN customers c ON e.cust = c.cust"

check semi "
- join: {with: customers, on: cust, how: semi}
- select: [id]" \
"SELECT e.id FROM events e WHERE EXISTS (SELECT 1 FROM customers c WHERE c.cust = e.cust)"

check anti "
- join: {with: customers, on: cust, how: anti}
- select: [id, cust]" \
"SELECT e.id, e.cust FROM events e WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.cust = e.cust)"

check join_agg "
- filter: \"pages > 2\"
- join: {with: customers, on: [cust], how: left}
- aggregate: {by: [tier], n: \"count()\", m: \"mean(minutes)\"}" \
"SELECT c.tier, count(*) AS n, avg(e.minutes) AS m FROM events e LEFT JOIN customers c ON e.cust = c.cust
 WHERE e.pages > 2 GROUP BY c.tier"

check derive "
- derive: {c: \"clip(minutes, 10, 100)\", db: \"days_between(day, DATE '2024-06-30')\", dow: \"dayofweek(day)\",
           k: \"CASE WHEN pages > 8 THEN 'deep' WHEN pages > 1 THEN 'browse' ELSE 'bounce' END\",
           p: \"coalesce(pages, -1) * 2\", y: \"if(year(day) = 2024, 'y24', 'other')\"}
- select: [id, c, db, dow, k, p, y]" \
"SELECT id, CASE WHEN minutes IS NULL THEN NULL ELSE least(greatest(minutes, 10), 100) END AS c, date_diff('day', day, DATE '2024-06-30') AS db,
        dayofweek(day) AS dow,
        CASE WHEN pages > 8 THEN 'deep' WHEN pages > 1 THEN 'browse' ELSE 'bounce' END AS k,
        coalesce(pages, -1) * 2 AS p, CASE WHEN year(day) = 2024 THEN 'y24' ELSE 'other' END AS y
 FROM events"

check sort_limit "
- filter: \"minutes IS NOT NULL\"
- sort: [\"minutes desc\", id]
- limit: 25
- select: [id, minutes]" \
"SELECT id, minutes FROM events WHERE minutes IS NOT NULL ORDER BY minutes DESC, id LIMIT 25"
t_done
