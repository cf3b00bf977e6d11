#!/usr/bin/env bash
# Feature views as stages (docs/featurestore.md, "Feature views as stages"):
# every top-level feature view is a stage of its name (op feature_view) that
# materialises it once, sorted by keys and time, with its computed features
# ({name: expression}); the joins read it. When the source only grew, the
# view takes the new rows only and merges them into its previous output, and
# the result equals a build from scratch byte for byte, round after round; a
# changed past row rebuilds it whole. Mistakes are reported at the view's own
# line and column.
. "$(dirname "$0")/lib.sh" "$@"
ws=$(new_ws fvstage)
cd "$ws" || fail "cd"

# the event log, grown in rounds: random users (a few without a key), ties
# on the event time corrected by later created times
gen_clicks() { # SEED ROWS
    awk -v seed="$1" -v n="$2" 'BEGIN { srand(seed);
      for (i = 0; i < n; i++) {
        u = int(rand() * 25); t = 1709251200 + 60 * int(rand() * 500);
        key = (rand() < 0.02) ? "" : sprintf("u%02d", u)
        printf "%s,%s,%s,%d,%d\n", key, strftime("%Y-%m-%d %H:%M:%S", t, 1),
               strftime("%Y-%m-%d %H:%M:%S", t + int(rand() * 3) * 30, 1), int(rand() * 20), 1 + int(rand() * 40) } }'
}
echo "uid,event_ts,created_ts,clicks,views" >clicks.csv
gen_clicks 1 2000 >>clicks.csv
awk 'BEGIN { srand(9); print "user,ts,label";
  for (i = 0; i < 400; i++) printf "u%02d,%s,%d\n", int(rand() * 25), strftime("%Y-%m-%d %H:%M:%S", 1709251200 + int(rand() * 40000), 1), i % 2 }' >labels.csv
cat >millrace.yaml <<'EOF'
entities:
  user: {keys: [user]}
feature_views:
  clicks:
    entity: user
    source: clicks.csv
    keys: [uid]
    timestamp: event_ts
    created: created_ts
    ttl: 2h
    features:
      - clicks
      - ctr: "clicks / views"
      - busy: "clicks >= 10"
stages:
  training_set:
    op: pit_join
    entities: labels.csv
    timestamp: ts
    views: [clicks]
  limited:
    op: pit_join
    entities: labels_limited.csv
    timestamp: ts
    views: [clicks]
    resources: {mem: 64M}
EOF
cp labels.csv labels_limited.csv # the same rows under another name: its own key (resources are not in a key)
expect_exit 0 mr run
assert_contains "$T_ERR" "3 executed" "the view is a stage of its own, run before the joins"
assert_contains "$(cat .millrace/logs/run-1/limited.log)" "1 of 1 views streamed from their sorted datasets" \
    "under a memory limit the join streams the view's sorted dataset"
assert_eq "$(cmp out/limited/part-00000.parquet out/training_set/part-00000.parquet && echo same)" same \
    "the streamed join writes the same bytes as the join in memory"
# lineage in the run store: the join read the view's output, the view its source
expect_exit 0 mr show --json
assert_eq "$(json '" ".join(sorted(l["stage"] + ":" + l["name"] for l in d["lineage"] if l["role"] == "in" and l["stage"] in ("clicks", "training_set")))')" \
    "clicks:clicks.csv training_set:labels.csv training_set:stages.clicks.out" "the join's inputs lead to the view, the view's to its source"
assert_eq "$(json 'len({l["artifact"] for l in d["lineage"] if (l["stage"], l["role"]) in (("clicks", "out"), ("training_set", "in")) and l["name"] in ("out", "stages.clicks.out")})')" 1 \
    "the join read exactly the artifact the view wrote"
expect_exit 0 mr data export out/clicks view.csv
# sorted by key, event time, created time; keyless rows left out; the computed features per row
assert_eq "$(tail -n +2 view.csv | sort -t, -s -k1,1 -k2,2 -k3,3 -c && echo sorted)" sorted "the view is written sorted by keys and time"
assert_eq "$(head -1 view.csv)" "uid,event_ts,created_ts,clicks,ctr,busy" "keys, times, then the features in order"
assert_eq "$(awk -F, 'NR > 1 && $1 == ""' view.csv | wc -l)" 0 "rows without a key are not in the view"
# each view row's ctr is clicks / views of a source row of its key, times and clicks; busy is clicks >= 10
assert_eq "$(awk -F, 'NR == FNR { if (FNR > 1) ok[$1 "," $2 "," $3 "," $4 "," sprintf("%.9f", $4 / $5)] = 1; next }
    FNR > 1 && (!(($1 "," $2 "," $3 "," $4 "," sprintf("%.9f", $5)) in ok) || ($6 == "true") != ($4 >= 10)) { bad++ }
    END { print bad + 0 }' clicks.csv view.csv)" 0 "ctr and busy are computed per row"
expect_exit 0 mr data export out/training_set ts.csv
assert_eq "$(head -1 ts.csv)" "user,ts,label,clicks,ctr,busy" "the join reads the view's features, computed ones included"

# the same join over the raw log written inline: the same values
cat >inline.yaml <<'EOF'
stages:
  inline:
    op: pit_join
    entities: labels.csv
    keys: [user]
    timestamp: ts
    views:
      - {name: clicks, source: clicks.csv, keys: [uid], timestamp: event_ts, created: created_ts, ttl: 2h, features: [clicks]}
EOF

fresh_equal() { # WHAT: a workspace built from scratch on today's clicks.csv gives the same bytes
    local f
    f=$(mktemp -d "$T_ROOT/fresh.XXXXXX")
    cp clicks.csv labels.csv labels_limited.csv millrace.yaml "$f/"
    (cd "$f" && "$MR_BIN" run >/dev/null 2>&1) || fail "$1: the fresh build failed"
    assert_eq "$(cmp -s "$f/out/clicks/part-00000.parquet" out/clicks/part-00000.parquet && cmp -s \
        "$f/out/clicks/manifest.json" out/clicks/manifest.json && cmp -s "$f/out/training_set/part-00000.parquet" \
        out/training_set/part-00000.parquet && echo same)" same "$1"
}

for round in 1 2 3 4; do
    gen_clicks $((round + 10)) $((150 * round)) >>clicks.csv
    expect_exit 0 mr run
    log=$(ls -t .millrace/logs/run-*/clicks.log | head -1)
    assert_contains "$(cat "$log")" "$((150 * round)) new source rows" "round $round: only the new rows are computed"
    fresh_equal "round $round: the incremental view equals a build from scratch, byte for byte"
done

# nothing changed: a cache hit, no build at all
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed" "an unchanged source is a cache hit"

# a past row changed: rebuilt whole, and still the same as from scratch
sed -i '5s/,[0-9]*,\([0-9]*\)$/,99,\1/' clicks.csv
expect_exit 0 mr run
log=$(ls -t .millrace/logs/run-*/clicks.log | head -1)
assert_contains "$(cat "$log")" "a row before the watermark changed" "an edited past row forces a full rebuild"
fresh_equal "the rebuilt view equals a build from scratch"

# a source that shrank: rebuilt whole
head -n 1500 clicks.csv >c.tmp && mv c.tmp clicks.csv
expect_exit 0 mr run
log=$(ls -t .millrace/logs/run-*/clicks.log | head -1)
assert_contains "$(cat "$log")" "fewer rows than the watermark" "a source that shrank forces a full rebuild"
fresh_equal "the view of a shrunk source equals a build from scratch"

# a view's output removed from the store (gc): rebuilt whole
gen_clicks 77 100 >>clicks.csv
rm -rf .millrace/objects
expect_exit 0 mr run --force-all
log=$(ls -t .millrace/logs/run-*/clicks.log | head -1)
assert_contains "$(cat "$log")" "built from all" "a previous output that is gone forces a full rebuild"
fresh_equal "the view rebuilt without its previous output equals a build from scratch"

# the inline join over the raw log gives the same clicks column
cp millrace.yaml views.yaml && cp inline.yaml millrace.yaml
expect_exit 0 mr run
expect_exit 0 mr data export out/inline inline.csv
cp views.yaml millrace.yaml
expect_exit 0 mr run
expect_exit 0 mr data export out/training_set ts.csv
assert_eq "$(cut -d, -f1-4 ts.csv | md5sum)" "$(md5sum <inline.csv)" "joining the view stage equals joining the raw log"

# mistakes, each at the view's own line and column
check_error() { # WHAT FRAGMENT...
    local what=$1
    shift
    expect_exit 2 mr run --dry-run
    for f in "$@"; do assert_contains "$T_ERR" "$f" "$what"; done
}
cp views.yaml good.yaml
printf '  clicks:\n    op: transform\n    source: labels.csv\n' >>millrace.yaml
check_error "a stage named as a view is an error" "millrace.yaml:4:3" "feature view 'clicks' and a stage share the name"
sed 's|ctr: "clicks / views"|ctr: "clicks / / views"|' good.yaml >millrace.yaml
check_error "a feature expression that does not parse" "millrace.yaml:13:" "feature 'ctr': column 10: expected an expression"
sed 's|busy: "clicks >= 10"|clicks: "clicks + 1"|' good.yaml >millrace.yaml
check_error "two features of one name" "two are named 'clicks'"
sed 's|busy: "clicks >= 10"|busy: "clickz >= 10"|' good.yaml >millrace.yaml
expect_exit 1 mr run
assert_contains "$T_ERR" "clickz" "an expression naming an unknown column fails the view, naming it"
t_done
