#!/usr/bin/env bash
# Serving by entity id (docs/featurestore.md, "Serving by entity"): a model
# trained on a pit_join training set and packaged with `online:` is served
# from the materialize_online store. Train-serve consistency: for 1,000
# random (entity, now) pairs, the features serve looks up equal pit_join's
# for the same entity as of now, value for value, and the scores equal
# `millrace predict` on the joined rows, bit for bit. Also: GET /v1/features
# equals `millrace features get`; the missing policy (defaults, reject with
# 422); a request that sends a stored feature, lacks the key or has a bad
# as_of; --store for a bundle without a service; a store whose schema
# differs refused at start; a rematerialised store picked up while serving;
# spec errors with file:line:col.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ws=$(new_ws entity)
cd "$ws" || fail "cd"
# the Redis store's server (scripts/redis-server.sh: 127.0.0.1 only), stopped by its pid at the end
rport=$("$E2E_DIR/../../scripts/redis-server.sh" start "$T_ROOT/redis") || fail "redis-server did not start"
bg_track "$(cat "$T_ROOT/redis/redis.pid")"

# events of users u00..u39 over two days; a plan history; labels that follow the click count and the plan
awk 'BEGIN { srand(21); print "user,event_ts,created_ts,clicks,spend";
  for (i = 1; i <= 4000; i++) { u = int(rand() * 40); e = 1709251200 + int(rand() * 2880) * 60;
    printf "u%02d,%s,%s,%d,%.3f\n", u, strftime("%Y-%m-%d %H:%M:%S", e, 1), strftime("%Y-%m-%d %H:%M:%S", e + 5, 1),
      int(rand() * 20) + u % 7, rand() * 100 } }' >clicks.csv
awk 'BEGIN { srand(22); print "user,day,plan"; split("basic pro team", p, " ");
  for (i = 1; i <= 90; i++) printf "u%02d,2024-0%d-%02d,%s\n", int(rand() * 40), 1 + int(rand() * 2), 1 + int(rand() * 28), p[1 + int(rand() * 3)] }' >plans.csv
awk 'BEGIN { srand(23); print "user,ts,label";
  for (i = 1; i <= 3000; i++) { u = int(rand() * 40);
    printf "u%02d,%s,%d\n", u, strftime("%Y-%m-%d %H:%M:%S", 1709280000 + int(rand() * 150000), 1), (u % 7 > 3) != (rand() < 0.1) } }' >labels.csv
# (entity, now) pairs: users u00..u44 (u40.. are in no view), now within the three hours after the last event
awk 'BEGIN { srand(24); print "user,now";
  for (i = 1; i <= 1000; i++) printf "u%02d,%s\n", int(rand() * 45), strftime("%Y-%m-%d %H:%M:%S", 1709424000 + int(rand() * 1080) * 10, 1) }' >pairs.csv
# two entities: items too (a price history and a category), labels and pairs by (user, item)
awk 'BEGIN { srand(25); print "item,at,price,category"; split("books games music", c, " ");
  for (i = 1; i <= 600; i++) printf "i%02d,%s,%.2f,%s\n", int(rand() * 20), strftime("%Y-%m-%d %H:%M:%S", 1709251200 + int(rand() * 2880) * 60, 1),
    rand() * 50, c[1 + int(rand() * 3)] }' >items.csv
awk 'BEGIN { srand(26); print "user,item,ts,label";
  for (i = 1; i <= 3000; i++) { u = int(rand() * 40); t = int(rand() * 20);
    printf "u%02d,i%02d,%s,%d\n", u, t, strftime("%Y-%m-%d %H:%M:%S", 1709280000 + int(rand() * 150000), 1), (u % 7 > 3) != (t % 2 == 0) } }' >labels2.csv
awk 'BEGIN { srand(27); print "user,item,now";
  for (i = 1; i <= 500; i++) printf "u%02d,i%02d,%s\n", int(rand() * 45), int(rand() * 22), strftime("%Y-%m-%d %H:%M:%S", 1709424000 + int(rand() * 1080) * 10, 1) }' >pairs2.csv
item_views='    views:
      - name: items
        source: items.csv
        timestamp: at
        ttl: 6h
        features: [price, category]'
views='    views:
      - name: clicks
        source: clicks.csv
        timestamp: event_ts
        created: created_ts
        ttl: 1h
        features: [clicks, spend]
      - name: plans
        source: plans.csv
        timestamp: day
        features: [plan]
        prefix: plan_'
cat >millrace.yaml <<EOF
stages:
  training_set:
    op: pit_join
    entities: labels.csv
    keys: [user]
    timestamp: ts
$views
  offline:
    op: pit_join
    entities: pairs.csv
    keys: [user]
    timestamp: now
$views
  online:
    op: materialize_online
    keys: [user]
$views
  features:
    op: features
    fit: \${stages.training_set}
    label: label
    steps:
      - drop: {columns: [user, ts]}
      - ordinal: {columns: [plan_plan]}
  model:
    op: train
    train: \${stages.features.train}
    label: label
    categorical: [plan_plan]
    params: {objective: binary, num_iterations: 30, num_leaves: 7, min_data_in_leaf: 5}
  pkg:
    op: package
    model: \${stages.model}
    features: \${stages.features}
    online: \${stages.online}
  pkg_reject:
    op: package
    model: \${stages.model}
    features: \${stages.features}
    online: \${stages.online}
    missing: reject
  pkg_defaults:
    op: package
    model: \${stages.model}
    features: \${stages.features}
    online: \${stages.online}
    defaults: {clicks: 0, plan_plan: basic}
  pkg_plain:
    op: package
    model: \${stages.model}
    features: \${stages.features}
  users2:
    op: pit_join
    entities: labels2.csv
    keys: [user]
    timestamp: ts
$views
  training2:
    op: pit_join
    entities: \${stages.users2}
    keys: [item]
    timestamp: ts
$item_views
  offline_users2:
    op: pit_join
    entities: pairs2.csv
    keys: [user]
    timestamp: now
$views
  offline2:
    op: pit_join
    entities: \${stages.offline_users2}
    keys: [item]
    timestamp: now
$item_views
  online_items:
    op: materialize_online
    keys: [item]
$item_views
  features2:
    op: features
    fit: \${stages.training2}
    label: label
    steps:
      - drop: {columns: [user, item, ts]}
      - ordinal: {columns: [plan_plan, category]}
  model2:
    op: train
    train: \${stages.features2.train}
    label: label
    categorical: [plan_plan, category]
    params: {objective: binary, num_iterations: 30, num_leaves: 7, min_data_in_leaf: 5}
  pkg2:
    op: package
    model: \${stages.model2}
    features: \${stages.features2}
    online:
      - \${stages.online}
      - \${stages.online_items}
  online_redis:
    op: materialize_online
    keys: [user]
    store: redis://127.0.0.1:$rport
$views
  pkg_redis:
    op: package
    model: \${stages.model}
    features: \${stages.features}
    online: \${stages.online_redis}
EOF
expect_exit 0 mr run
assert_contains "$(cat .millrace/logs/run-1/pkg.log)" "feature service: the online store out/online/online.mrfs" \
    "the package records the store"
expect_exit 0 mr bundle inspect out/pkg/model.mrb
assert_contains "$T_OUT" "feature service: missing: default
  by user (string) from out/online/online.mrfs" "inspect shows the feature service"
expect_exit 0 mr data export out/offline offline.csv
expect_exit 0 mr predict out/pkg/model.mrb offline.csv -o pred.csv

. "$E2E_DIR/serve_lib.sh"
ec() { run_cmd python3 "$E2E_DIR/serve_entity_client.py" "$PORT" "$@"; }
start_server s1.log out/pkg/model.mrb
ec consistent pairs.csv offline.csv pred.csv
[ "$T_RC" = 0 ] || fail "consistency: $T_OUT"
pass "$T_OUT"

# the raw vector
expect_exit 0 mr features get out/online u05 --as-of "2024-03-03 01:00:00"
want=$(json 'd["features"]')
ec get "/v1/features?user=u05&as_of=2024-03-03%2001:00:00"
assert_eq "${T_OUT%% *}" 200 "GET /v1/features"
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["found"]') $(json 'd["features"]')" "true $want" "GET /v1/features equals features get"
ec get "/v1/features?entity=u05&as_of=2024-03-03%2001:00:00"
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"]')" "$want" "?entity= for a store of one key"
ec get "/v1/features?user=nobody"
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["found"]')" false "an unknown entity"
ec get "/v1/features"
assert_contains "$T_OUT" "400 " "no entity: 400"
assert_contains "$T_OUT" "?user=" "names the key to give"

# bad requests
ec post '{"rows": [{"user": "u01", "clicks": 3}]}'
assert_contains "$T_OUT" "400 " "a stored feature sent: 400"
assert_contains "$T_OUT" "\"field\": \"clicks\"" "names the field"
assert_contains "$T_OUT" "comes from the online store" "says why"
ec post '{"rows": [{"plan": "x"}]}'
assert_contains "$T_OUT" "422 " "no entity key: 422"
assert_contains "$T_OUT" "the entity key 'user' is missing" "names the key"
ec post '{"rows": [{"user": "u01"}], "as_of": "soon"}'
assert_contains "$T_OUT" "400 " "a bad as_of: 400"
assert_contains "$T_OUT" "\"field\": \"as_of\"" "names as_of"
ec post '{"columns": {"user": ["u01", "nobody"]}, "as_of": "2024-03-03 00:10:00", "include_features": true}'
assert_contains "$T_OUT" "200 " "columns bodies by entity"
T_OUT=${T_OUT#* }
assert_eq "$(json 'len(d["predictions"])') $(json 'd["features"][1]')" \
    '2 {"clicks": null, "plan_plan": null, "spend": null}' "an unknown entity reads as nulls by default"
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "SIGTERM stops the server"

# the same through Redis: the store in Redis, one round trip per batch
assert_contains "$(cat out/online_redis/online.redis)" "redis://127.0.0.1:$rport/millrace:online_redis" \
    "the stage's output names the Redis store"
expect_exit 0 mr bundle inspect out/pkg_redis/model.mrb
assert_contains "$T_OUT" "by user (string) from redis://127.0.0.1:$rport/millrace:online_redis" \
    "the bundle records the Redis location"
expect_exit 0 mr predict out/pkg_redis/model.mrb offline.csv -o pred_redis.csv
assert_eq "$(cmp pred.csv pred_redis.csv && echo same)" same "one model, whichever store it is packaged with"
start_server s5.log out/pkg_redis/model.mrb
ec consistent pairs.csv offline.csv pred.csv
[ "$T_RC" = 0 ] || fail "consistency through Redis: $T_OUT"
pass "through Redis: $T_OUT"
ec get "/v1/features?user=u05&as_of=2024-03-03%2001:00:00"
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"]')" "$want" "GET /v1/features through Redis"
kill -TERM "$SPID"
wait "$SPID"

# two stores: features by user and by item, one request row carrying both keys
expect_exit 0 mr bundle inspect out/pkg2/model.mrb
assert_contains "$T_OUT" "  by item (string) from out/online_items/online.mrfs
    feature price (float64, view items)" "the bundle names both stores"
expect_exit 0 mr data export out/offline2 offline2.csv
expect_exit 0 mr predict out/pkg2/model.mrb offline2.csv -o pred2.csv
start_server s6.log out/pkg2/model.mrb
ec consistent pairs2.csv offline2.csv pred2.csv user,item clicks:int,spend:float,plan_plan:str,price:float,category:str
[ "$T_RC" = 0 ] || fail "consistency with two stores: $T_OUT"
pass "two stores: $T_OUT"
ec get "/v1/features?item=i03&as_of=2024-03-03%2001:00:00"
T_OUT=${T_OUT#* }
assert_eq "$(json 'sorted(d["features"])')" "$(printf 'category\nprice')" "?item= alone: the item store's features"
ec get "/v1/features?user=u05&item=i03&as_of=2024-03-03%2001:00:00"
T_OUT=${T_OUT#* }
assert_eq "$(json 'sorted(d["features"])')" "$(printf 'category\nclicks\nplan_plan\nprice\nspend')" "both keys: both stores"
ec post '{"rows": [{"user": "u05"}]}'
assert_contains "$T_OUT" "the entity key 'item' is missing" "a row without the item key"
kill -TERM "$SPID"
wait "$SPID"
expect_exit 2 mr serve out/pkg2/model.mrb --store out/online/online.mrfs --port 0
assert_contains "$T_ERR" "the model reads features from 2 online stores; --store names 1" "one --store per store"

# the missing policy: reject, or defaults
start_server s2.log out/pkg_reject/model.mrb
last=$(awk -F, '$1 == "u01" { print $2 }' clicks.csv | sort | tail -1)
ec post "{\"rows\": [{\"user\": \"u01\"}, {\"user\": \"nobody\"}], \"as_of\": \"$last\"}"
assert_contains "$T_OUT" "422 " "missing: reject answers 422"
assert_contains "$T_OUT" "row 1: entity nobody is not in the online store" "names the row and entity"
ec post "{\"rows\": [{\"user\": \"u01\"}], \"as_of\": \"$last\"}"
assert_contains "$T_OUT" "200 " "a live entity under reject"
ec post '{"rows": [{"user": "u01"}], "as_of": "2024-03-03 23:00:00"}'
assert_contains "$T_OUT" "422 " "an expired value under reject"
assert_contains "$T_OUT" "expired, older than the view's ttl" "says why"
kill -TERM "$SPID"
wait "$SPID"
start_server s3.log out/pkg_defaults/model.mrb
ec post '{"rows": [{"user": "nobody"}], "include_features": true}'
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"][0]')" '{"clicks": 0, "plan_plan": "basic", "spend": null}' \
    "defaults fill what is missing; a feature without one stays null"
kill -TERM "$SPID"
wait "$SPID"

# --store: for a bundle without a service, refused; a store of another schema, refused at start
expect_exit 2 mr serve out/pkg_plain/model.mrb --store out/online/online.mrfs --port 0
assert_contains "$T_ERR" "the model reads no features from an online store" "--store without a feature service"
mkdir -p other
printf 'user,event_ts,clicks\nu01,2024-03-01 00:00:00,1.5\n' >other/c.csv
printf 'stages:\n  online:\n    op: materialize_online\n    keys: [user]\n    views:\n      - {name: clicks, source: c.csv, timestamp: event_ts, features: [clicks]}\n' \
    >other/millrace.yaml
expect_exit 0 mr -C other run
expect_exit 1 mr serve out/pkg/model.mrb --store other/out/online/online.mrfs --port 0
assert_contains "$T_ERR" "feature 'clicks' is float64; the model was trained on int64" "a store of another schema"

# a rematerialised store is picked up while serving
start_server s4.log out/pkg/model.mrb
ec post '{"rows": [{"user": "u03"}], "as_of": "2024-03-05 12:00:00", "include_features": true}'
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"][0]["clicks"]')" null "no live click count two days later"
echo "u03,2024-03-05 11:30:00,2024-03-05 11:30:05,77,1.000" >>clicks.csv
expect_exit 0 mr run
ec post '{"rows": [{"user": "u03"}], "as_of": "2024-03-05 12:00:00", "include_features": true}'
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"][0]["clicks"]')" 77 "the server reads the rematerialised store"
kill -TERM "$SPID"
wait "$SPID"
t_sanitizer_lines "$(cat s1.log s2.log s3.log s4.log s6.log)" && fail "sanitizer report in a server log"

start_server s5.log out/pkg_redis/model.mrb
# rematerialised in Redis while serving: the next batch reads the new generation
echo "u03,2024-03-05 11:40:00,2024-03-05 11:40:05,88,1.000" >>clicks.csv
expect_exit 0 mr run
ec post '{"rows": [{"user": "u03"}], "as_of": "2024-03-05 12:00:00", "include_features": true}'
T_OUT=${T_OUT#* }
assert_eq "$(json 'd["features"][0]["clicks"]')" 88 "the server reads Redis's new generation"
assert_eq "$(redis-cli -p "$rport" --scan --pattern 'millrace:online_redis:*:schema' | wc -l)" 1 \
    "the old generation is gone from Redis"
# Redis goes away: a 500 naming it, and the server answers again once it is back
"$E2E_DIR/../../scripts/redis-server.sh" stop "$T_ROOT/redis"
ec post '{"rows": [{"user": "u03"}]}'
assert_contains "$T_OUT" "500 " "Redis down: 500"
assert_contains "$T_OUT" "127.0.0.1:$rport" "names the Redis server"
"$E2E_DIR/../../scripts/redis-server.sh" start "$T_ROOT/redis" "$rport" >/dev/null || fail "redis-server restart"
bg_track "$(cat "$T_ROOT/redis/redis.pid")"
ec post '{"rows": [{"user": "u03"}]}'
assert_contains "$T_OUT" "500 " "an empty Redis: 500, not a wrong answer"
expect_exit 0 mr run --force online_redis
ec post '{"rows": [{"user": "u03"}], "as_of": "2024-03-05 12:00:00", "include_features": true}'
assert_contains "$T_OUT" "200 " "rematerialised: answers again"
kill -TERM "$SPID"
wait "$SPID"
t_sanitizer_lines "$(cat s5.log)" && fail "sanitizer report in the Redis server's log"

# spec errors: file:line:col
sed -i 's/    missing: reject/    missing: maybe/' millrace.yaml
expect_exit 2 mr run --dry-run
assert_contains "$T_ERR" "millrace.yaml:" "the spec's file"
assert_contains "$T_ERR" "missing must be default or reject" "a bad missing policy"
sed -i 's/    missing: maybe/    missing: reject/' millrace.yaml
sed -i '/^  pkg_plain:/a\    defaults: {clicks: 0}' millrace.yaml
expect_exit 2 mr run --dry-run
assert_contains "$T_ERR" "defaults without online" "defaults without a store"
sed -i '/^    defaults: {clicks: 0}$/d' millrace.yaml
sed -i "s|    store: redis://127.0.0.1:$rport|    store: memcached://x|" millrace.yaml
expect_exit 2 mr run --dry-run
assert_contains "$T_ERR" "store must be redis://HOST:PORT[/NAMESPACE]" "a store that is not Redis"
"$E2E_DIR/../../scripts/redis-server.sh" stop "$T_ROOT/redis"
t_done
