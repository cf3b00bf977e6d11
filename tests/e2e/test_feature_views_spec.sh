#!/usr/bin/env bash
# Feature views declared once (docs/featurestore.md, "Views defined once"):
# entities:, feature_views: and feature_services: at the top of
# millrace.yaml, named by pit_join and materialize_online stages (views:
# [names], mixed with inline views, or service:). The joins equal the same
# views written inline, byte for byte; a stage's keys default to its views'
# entity's; every mistake is reported at the definition's own
# millrace.yaml:LINE:COL with what was expected.
. "$(dirname "$0")/lib.sh" "$@"
ws=$(new_ws fviews)
cd "$ws" || fail "cd"
awk 'BEGIN { srand(3); print "user,ts,label";
  for (i = 0; i < 500; i++) printf "u%02d,%s,%d\n", int(rand() * 30), strftime("%Y-%m-%d %H:%M:%S", 1709251200 + int(rand() * 200000), 1), i % 2 }' >labels.csv
awk 'BEGIN { srand(4); print "uid,event_ts,clicks";
  for (i = 0; i < 3000; i++) printf "u%02d,%s,%d\n", int(rand() * 30), strftime("%Y-%m-%d %H:%M:%S", 1709251200 + int(rand() * 200000), 1), i }' >clicks.csv
awk 'BEGIN { srand(5); print "user,day,plan";
  for (i = 0; i < 90; i++) printf "u%02d,2024-0%d-%02d,p%d\n", int(rand() * 30), 1 + int(rand() * 3), 1 + int(rand() * 28), i % 4 }' >plans.csv
cat >millrace.yaml <<'EOF'
entities:
  user:
    keys: [user]
    description: a customer
feature_views:
  clicks:
    entity: user
    source: clicks.csv
    keys: [uid]
    timestamp: event_ts
    ttl: 6h
    features: [clicks]
  plans:
    entity: user
    source: plans.csv
    timestamp: day
    features: [plan]
    prefix: plan_
feature_services:
  everything:
    views: [clicks, plans]
    description: all of them
stages:
  by_service:
    op: pit_join
    entities: labels.csv
    timestamp: ts
    service: everything
  by_names:
    op: pit_join
    entities: labels.csv
    keys: [user]
    timestamp: ts
    views:
      - clicks
      - {name: plans, source: plans.csv, timestamp: day, features: [plan], prefix: plan_}
  inline:
    op: pit_join
    entities: labels.csv
    keys: [user]
    timestamp: ts
    views:
      - {name: clicks, source: clicks.csv, keys: [uid], timestamp: event_ts, ttl: 6h, features: [clicks]}
      - {name: plans, source: plans.csv, timestamp: day, features: [plan], prefix: plan_}
  online:
    op: materialize_online
    service: everything
EOF
expect_exit 0 mr run
for s in by_service by_names inline; do expect_exit 0 mr data export "out/$s" "$s.csv"; done
assert_eq "$(cmp by_service.csv inline.csv && cmp by_names.csv inline.csv && echo same)" same \
    "named views and a service join exactly as the views written inline"
assert_eq "$(awk -F, 'NR > 1 && $4 != ""' inline.csv | wc -l | awk '{ print ($1 > 50) }')" 1 "the join found clicks"
expect_exit 0 mr features show online --json
assert_eq "$(json '[f["name"] for v in d["views"] for f in v["features"]]')" "$(printf 'clicks\nplan_plan')" \
    "the store serves the service's views"

# mistakes, each at its own line and column
check_error() { # WHAT EXPECTED-FRAGMENT...
    local what=$1
    shift
    expect_exit 2 mr run --dry-run
    for frag in "$@"; do assert_contains "$T_ERR" "$frag" "$what"; done
}
cp millrace.yaml good.yaml
sed -i 's/^    ttl: 6h/    tll: 6h/' millrace.yaml
check_error "an unknown view key" "millrace.yaml:11:5: feature view 'clicks': unknown key 'tll'" "did you mean 'ttl'?"
cp good.yaml millrace.yaml
sed -i '0,/^    timestamp: event_ts/{/^    timestamp: event_ts/d}' millrace.yaml
check_error "a view without an event time" "feature view 'clicks' has no timestamp" "timestamp: event_ts"
cp good.yaml millrace.yaml
sed -i '0,/^    entity: user/s//    entity: usr/' millrace.yaml
check_error "an unknown entity" "millrace.yaml:7:13: feature view 'clicks': unknown entity 'usr'" "did you mean 'user'?"
cp good.yaml millrace.yaml
sed -i 's/^      - clicks$/      - clickz/' millrace.yaml
check_error "an unknown view" "stage 'by_names': unknown feature view 'clickz'" "did you mean 'clicks'?"
cp good.yaml millrace.yaml
sed -i '0,/^    service: everything/s//    service: everythin/' millrace.yaml
check_error "an unknown service" "stage 'by_service': unknown feature service 'everythin'" "did you mean 'everything'?"
cp good.yaml millrace.yaml
sed -i 's/^    views: \[clicks, plans\]/    views: [clicks, plans, ghost]/' millrace.yaml
check_error "a service naming an unknown view" "feature service 'everything': unknown feature view 'ghost'"
cp good.yaml millrace.yaml
sed -i 's/^    keys: \[user\]$/    keys: user/; s/^  user:$/  user:/' millrace.yaml
printf '  item: {keys: [item]}\n' >tail.txt
awk '{ print } /^    description: a customer$/ { while ((getline l < "tail.txt") > 0) print l }' millrace.yaml >m.tmp && mv m.tmp millrace.yaml
sed -i '0,/^    entity: user/!{0,/^    entity: user/s//    entity: item/}' millrace.yaml
check_error "views of two entities in one join" "views of two entities in one join: 'clicks' (entity user) and 'plans' (entity item)" \
    "chain the stages"
cp good.yaml millrace.yaml
sed -i 's/^    service: everything$/    service: everything\n    views: [clicks]/' millrace.yaml
check_error "service and views both" "stage 'by_service': service and views: name the views one way"
cp good.yaml millrace.yaml
sed -i 's/^feature_views:$/feature_view:/' millrace.yaml
check_error "a misspelt section" "unknown top-level key 'feature_view'" "did you mean 'feature_views'?"
cp good.yaml millrace.yaml
sed -i 's/^entities:$/entities: [user]/; /^  user:$/,/^    description: a customer$/d' millrace.yaml
check_error "a section that is not a mapping" "'entities' must be a mapping of name to definition"
cp good.yaml millrace.yaml
t_done
