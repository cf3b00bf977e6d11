#!/usr/bin/env bash
# bench/prep: the churn example's data preparation at 100,000 users /
# 5,000,000 clickstream rows. millrace's filter + aggregate + join (two
# transform stages of a fresh pipeline, `millrace run -j 2`) against DuckDB
# running the same SQL on the same Parquet shards at 2 threads, both writing
# their result to Parquet; results validated equal first. Then the cached
# re-run: examples/churn's prep stages (generate .. features) with only a
# training param changed.
BENCH=prep
. "$(dirname "$0")/../lib.sh" "$@"
ensure_duckdb
GEN=$BUILD/churn_gen
[ -x "$GEN" ] || bench_fail "no churn_gen next to $MR (build the churn_gen target)"
USERS=${BENCH_USERS:-100000}
EPU=${BENCH_EVENTS_PER_USER:-50}
REPS=${BENCH_REPS:-3}
PD=${MILLRACE_BENCH_PREP:-/tmp/millrace-bench-prep}
SINCE="2024-03-02 00:00:00"
END="2024-04-01 00:00:00"
DATA=$PD   # where lib.sh's timed() keeps its logs
WS=$PD/ws_${USERS}_${EPU}
mkdir -p "$WS/data"

# 1. Data: generated once; both tables ingested (unfiltered) into datasets.
RAW=$WS/data/raw
if [ ! -s "$RAW/events.csv" ]; then
    "$GEN" --users "$USERS" --events-per-user "$EPU" --seed 7 --out "$RAW.tmp" || bench_fail "churn_gen failed"
    rm -rf "$RAW" && mv "$RAW.tmp" "$RAW"
fi
printf 'user_id: int64\nsession_id: int64\nts: timestamp\npages: int64\nminutes: float64\n' >"$PD/events.schema.yaml"
printf 'user_id: int64\ntenure_months: int64\nchurned: int64\n' >"$PD/users.schema.yaml"
ingest() { # NAME: RAW/NAME.csv -> WS/data/NAME_ds
    if [ ! -f "$WS/data/$1_ds/manifest.json" ]; then
        timed "ingest_$1" "$MR" data ingest "$RAW/$1.csv" "$WS/data/$1_ds" --schema "$PD/$1.schema.yaml" -j 2 --force
        echo "ingested $1: ${T_WALL}s, ${T_RSS} MB (not part of the comparison)"
    fi
}
ingest users
ingest events
n_events=$(($(wc -l <"$RAW/events.csv") - 1))

# 2. The same query both ways.
cat >"$WS/millrace.yaml" <<YAML
stages:
  activity:
    op: transform
    input: data/events_ds
    resources: {cpus: 2}
    steps:
      - filter: "ts >= TIMESTAMP '$SINCE'"
      - derive:
          days_ago: "days_between(ts, TIMESTAMP '$END') - 1"
          mobile: "CASE WHEN device = 'mobile' THEN 1.0 ELSE 0.0 END"
      - aggregate:
          by: [user_id]
          events: "count()"
          sessions: "count_distinct(session_id)"
          pages: "sum(pages)"
          minutes: "sum(minutes)"
          active_days: "count_distinct(days_ago)"
          days_idle: "min(days_ago)"
          mobile_share: "mean(mobile)"
          countries: "count_distinct(country)"
  joined:
    op: transform
    input: data/users_ds
    resources: {cpus: 2}
    steps:
      - join: {with: "\${stages.activity}", on: [user_id], how: left}
      - derive:
          events: "coalesce(events, 0)"
          sessions: "coalesce(sessions, 0)"
          pages: "coalesce(pages, 0)"
          minutes: "coalesce(minutes, 0.0)"
          active_days: "coalesce(active_days, 0)"
          days_idle: "coalesce(days_idle, 30)"
          countries: "coalesce(countries, 0)"
YAML
SQL="COPY (
 WITH e AS (SELECT *, date_diff('day', ts, TIMESTAMPTZ '$END+00') - 1 AS days_ago,
                   CASE WHEN device = 'mobile' THEN 1.0 ELSE 0.0 END AS mobile
            FROM read_parquet('$WS/data/events_ds/*.parquet') WHERE ts >= TIMESTAMPTZ '$SINCE+00'),
      a AS (SELECT user_id, count(*) AS events, count(DISTINCT session_id) AS sessions, sum(pages)::BIGINT AS pages,
                   sum(minutes) AS minutes, count(DISTINCT days_ago) AS active_days, min(days_ago) AS days_idle,
                   avg(mobile) AS mobile_share, count(DISTINCT country) AS countries
            FROM e GROUP BY user_id)
 SELECT u.*, coalesce(a.events, 0) AS events, coalesce(a.sessions, 0) AS sessions, coalesce(a.pages, 0) AS pages,
        coalesce(a.minutes, 0.0) AS minutes, coalesce(a.active_days, 0) AS active_days,
        coalesce(a.days_idle, 30) AS days_idle, a.mobile_share, coalesce(a.countries, 0) AS countries
 FROM read_parquet('$WS/data/users_ds/*.parquet') u LEFT JOIN a USING (user_id)
) TO '$PD/duck_joined.parquet' (FORMAT parquet)"
run_mr() { (cd "$WS" && chmod -R u+w out 2>/dev/null; rm -rf .millrace out millrace.lock && taskset -c 0,1 "$MR" -q run -j 2 activity joined); }
run_duck() { DUCK_THREADS=2 taskset -c 0,1 node "$DUCK/duck.mjs" "SET TimeZone = 'UTC'" "$SQL"; }
export -f run_mr run_duck
export WS MR DUCK SQL

# 3. Validate: the same rows and sums from both results.
timed mr_check bash -c run_mr
timed duck_check bash -c run_duck
stats="SELECT count(*) AS n, sum(events) AS ev, sum(sessions) AS se, sum(pages)::BIGINT AS pg, round(sum(minutes), 2) AS mi,
       sum(active_days) AS ad, sum(days_idle) AS di, round(sum(mobile_share), 6) AS ms, sum(countries) AS co, sum(churned) AS ch"
mine=$(duck "$stats FROM read_parquet('$WS/out/joined/*.parquet')") || bench_fail "reading millrace's result"
theirs=$(duck "$stats FROM read_parquet('$PD/duck_joined.parquet')") || bench_fail "reading DuckDB's result"
[ "$mine" = "$theirs" ] || bench_fail "results differ: millrace $mine, DuckDB $theirs"
echo "validated: $USERS users, $n_events events; millrace and DuckDB agree on $mine"

# 4. Timed, best of REPS each: wall time and peak RSS (the largest process).
best mr "$REPS" bash -c run_mr
mr_wall=$T_WALL mr_rss=$T_RSS
best duck "$REPS" bash -c run_duck
duck_wall=$T_WALL duck_rss=$T_RSS

# 5. The cached re-run: examples/churn at this size, its prep stages run
#    once, then again with only a training param changed (all cache hits).
CW=$PD/churn_${USERS}_${EPU}
if [ ! -d "$CW/.millrace" ]; then
    rm -rf "$CW" && mkdir -p "$CW/bin"
    cp "$SRC/examples/churn/millrace.yaml" "$CW/" && cp "$GEN" "$CW/bin/churn_gen"
fi
cp "$GEN" "$CW/bin/churn_gen.new" && cmp -s "$CW/bin/churn_gen.new" "$CW/bin/churn_gen" || mv "$CW/bin/churn_gen.new" "$CW/bin/churn_gen"
rm -f "$CW/bin/churn_gen.new"
size=(-S "data.users=$USERS" -S "data.events_per_user=$EPU")
prep=(generate ingest_users ingest_events activity joined split features)
timed churn_first "$MR" -C "$CW" -q run -j 2 "${size[@]}" "${prep[@]}"
echo "churn prep, first run (or up to date): ${T_WALL}s, peak ${T_RSS} MB"
cached_ms=999999
for i in 1 2 3 4 5; do
    t0=$(date +%s%N)
    out=$("$MR" -C "$CW" run --json -j 2 "${size[@]}" -S "train.learning_rate=0.0$i" "${prep[@]}") || bench_fail "cached re-run failed"
    t1=$(date +%s%N)
    echo "$out" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["executed"] != 0)' ||
        bench_fail "a train-param change re-ran a prep stage: $out"
    ms=$(( (t1 - t0) / 1000000 ))
    [ "$ms" -lt "$cached_ms" ] && cached_ms=$ms
done

printf '\n%-44s %10s %10s\n' "filter + aggregate + join, 2 threads" "wall s" "peak MB"
printf '%-44s %10s %10s\n' "millrace run (activity, joined)" "$mr_wall" "$mr_rss"
printf '%-44s %10s %10s\n' "DuckDB (node, same SQL, same shards)" "$duck_wall" "$duck_rss"
printf '%-44s %10s\n' "churn prep re-run, train param changed (ms)" "$cached_ms"
echo "RESULT prep time_vs_duckdb=$(ratio "$mr_wall" "$duck_wall") rss_vs_duckdb=$(ratio "$mr_rss" "$duck_rss") cached_rerun_ms=$cached_ms"
