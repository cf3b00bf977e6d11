#!/usr/bin/env bash
# The embedded online feature store (docs/featurestore.md): materialize_online
# writes the latest vector per entity; `millrace features get` reads it as of
# a moment. Train-serve consistency: for 1,000 random (entity, now) pairs with
# now after the data's last event, the store's features equal pit_join's for
# the same rows, byte for byte (one-hour ttl edges included). Also: show and
# get, unknown entities, a key that does not parse, a damaged store refused,
# a materialisation killed with kill -9 leaves the previous table serving,
# and readers during a rematerialisation see the old vector or the new one;
# all of it again for the store in Redis (scripts/redis-server.sh).
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
rport=$("$E2E_DIR/../../scripts/redis-server.sh" start "$T_ROOT/redis") || fail "redis-server did not start"
bg_track "$(cat "$T_ROOT/redis/redis.pid")"

ws=$(new_ws online)
awk 'BEGIN { srand(5); print "id,user,event_ts,created_ts,clicks";
  for (i = 1; i <= 6000; i++) { u = sprintf("u%02d", int(rand() * 55));
    e = 1704067200 + int(rand() * 2000) * 60; t = (rand() < 0.02) ? "NULL" : strftime("%Y-%m-%d %H:%M:%S", e, 1);
    c = (rand() < 0.2) ? "NULL" : strftime("%Y-%m-%d %H:%M:%S", e + int(rand() * 3) * 10, 1);
    print i "," u "," t "," c "," int(rand() * 1000) } }' >"$ws/clicks.csv"
awk 'BEGIN { srand(9); print "id,user,day,tier";
  for (i = 1; i <= 300; i++) printf "%d,u%02d,%s,t%d\n", i, int(rand() * 50), strftime("%Y-%m-%d", 1703980800 + int(rand() * 3) * 86400, 1), i }' \
    >"$ws/profile.csv"
# (entity, now) pairs: now from the last event (2024-01-02 09:19) to three hours later, on a 10 s grid
awk 'BEGIN { srand(11); print "user,now";
  for (i = 1; i <= 1000; i++) printf "u%02d,%s\n", int(rand() * 60), strftime("%Y-%m-%d %H:%M:%S", 1704187140 + int(rand() * 1080) * 10, 1) }' \
    >"$ws/pairs.csv"
views='    views:
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
        prefix: p_'
cat >"$ws/millrace.yaml" <<EOF
stages:
  online:
    op: materialize_online
    keys: [user]
$views
  online_redis:
    op: materialize_online
    keys: [user]
    store: redis://127.0.0.1:$rport/t:small
$views
  offline:
    op: pit_join
    entities: pairs.csv
    keys: [user]
    timestamp: now
$views
EOF
expect_exit 0 mr -C "$ws" run
assert_contains "$(cat "$ws"/.millrace/logs/run-1/online.log)" "materialize_online: 55 entities, 2 features from 2 views" \
    "the store's entities and features"
expect_exit 0 mr -C "$ws" features show out/online --json
assert_eq "$(json 'd["entities"], [v["ttl_seconds"] for v in d["views"]], [f["name"] for v in d["views"] for f in v["features"]]')" \
    "(55, [3600, 0], ['clicks', 'p_tier'])" "show: entities, ttls, features"
expect_exit 0 mr -C "$ws" features list --json
assert_eq "$(json '"; ".join("%s %s %s %s" % (x["name"], x["op"], ",".join(v["name"] for v in x["views"]), x["store"] and x["store"]["entities"]) for x in d["stages"])')" \
    "online materialize_online clicks,profile 55; online_redis materialize_online clicks,profile 55; offline pit_join clicks,profile None" \
    "list: the stages' views and their stores"
expect_exit 0 mr -C "$ws" features list
assert_contains "$T_OUT" "view clicks: clicks.csv, event time event_ts, created created_ts, ttl 3600s; features clicks" "list, as text"
assert_contains "$T_OUT" "store redis://127.0.0.1:$rport/t:small: 55 entities" "list names the Redis store"
expect_exit 0 mr -C "$ws" features show online --json
assert_eq "$(json 'd["entities"]')" 55 "show by the stage's name"
expect_exit 0 mr -C "$ws" data export out/offline "$ws/offline.csv"
expect_exit 0 mr -C "$ws" features get out/online --batch "$ws/pairs.csv" --as-of-column now -o "$ws/online.csv"
assert_eq "$(wc -l <"$ws/online.csv")" 1001 "one lookup per pair"
assert_eq "$(cmp "$ws/online.csv" "$ws/offline.csv" && echo same)" same "the store's features equal pit_join's, byte for byte"
expect_exit 0 mr -C "$ws" features get out/online_redis --batch "$ws/pairs.csv" --as-of-column now -o "$ws/online_redis.csv"
assert_eq "$(cmp "$ws/online_redis.csv" "$ws/offline.csv" && echo same)" same "the Redis store's features equal pit_join's too"
expect_exit 0 mr -C "$ws" features show redis://127.0.0.1:$rport/t:small --json
assert_eq "$(json 'd["entities"]')" 55 "show by the Redis location"
# both kinds of answers are in the comparison: live values and ttl-expired ones
live=$(awk -F, 'NR > 1 && $3 != ""' "$ws/online.csv" | wc -l)
assert_eq "$([ "$live" -gt 50 ] && [ "$live" -lt 900 ] && echo mixed)" mixed "live and expired clicks among the pairs ($live live)"

# one entity: found, a value stamped after the moment reads as null, unknown entities exit 1
last=$(awk -F, 'NR > 1 && $2 == "u07" && $3 != "NULL" { print $3 }' "$ws/clicks.csv" | sort | tail -1)
expect_exit 0 mr -C "$ws" features get out/online u07 --as-of "$last"
assert_eq "$(json 'd["found"], d["features"]["clicks"] is not None')" "(True, True)" "u07 at its last event"
expect_exit 0 mr -C "$ws" features get out/online u07 --as-of "2024-01-01"
assert_eq "$(json 'd["features"]')" '{"clicks": null, "p_tier": null}' "before the values: nulls"
expect_exit 1 mr -C "$ws" features get out/online nobody
assert_eq "$(json 'd["found"]')" false "an unknown entity"
expect_exit 2 mr -C "$ws" features get out/online u07 u08
assert_contains "$T_ERR" "get takes 1 key(s) (user); got 2" "the wrong number of keys"
expect_exit 2 mr -C "$ws" features get out/online u07 --as-of yesterday
assert_contains "$T_ERR" "--as-of: expected YYYY-MM-DD" "a time that does not parse"

# a damaged store: refused with its name, never a crash
cp "$ws/out/online/online.mrfs" "$ws/cut.mrfs"
chmod u+w "$ws/cut.mrfs"
truncate -s 100 "$ws/cut.mrfs"
expect_exit 1 mr -C "$ws" features show "$ws/cut.mrfs"
assert_contains "$T_ERR" "not a valid online feature store" "a truncated store"
printf 'not a store at all, but long enough to hold a header of sixty-four bytes......' >"$ws/junk.mrfs"
expect_exit 1 mr -C "$ws" features show "$ws/junk.mrfs"
assert_contains "$T_ERR" "no MRFSTORE magic" "a file that is no store"

# kill -9 during a rematerialisation: the previous table still serves
ws2=$(new_ws big)
awk 'BEGIN { srand(7); print "user,event_ts,created_ts,clicks";
  for (i = 1; i <= 1500000; i++)
      printf "u%05d,2024-01-0%d 10:00:00,%s,%d\n", int(rand() * 90000), 1 + int(rand() * 8), strftime("%Y-%m-%d %H:%M:%S", 1706745600 - i, 1), i }' \
    >"$ws2/big.csv"
# an entity whose latest event time holds two rows: the later row wins without created times, the earlier
# (created later) with them
who=$(awk -F, 'NR > 1 { if ($2 > d[$1]) { d[$1] = $2; n[$1] = 0 } if ($2 == d[$1]) n[$1]++ }
               END { for (u in n) if (n[u] >= 2) print u }' "$ws2/big.csv" | sort | head -1)
printf 'stages:\n  online:\n    op: materialize_online\n    keys: [user]\n    views:\n      - {name: c, source: big.csv, timestamp: event_ts, features: [clicks]}\n' \
    >"$ws2/millrace.yaml"
expect_exit 0 mr -C "$ws2" run
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
before=$T_OUT
sed -i 's/features: \[clicks\]}/features: [clicks], created: created_ts}/' "$ws2/millrace.yaml"
"$MR_BIN" -C "$ws2" run >"$T_ROOT/killed.log" 2>&1 &
pid=$!
bg_track "$pid"
sleep 1
pkill -9 -P "$pid" 2>/dev/null
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
assert_not_contains "$(cat "$T_ROOT/killed.log")" "1 executed" "the run was killed before it finished"
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
assert_eq "$T_OUT" "$before" "after kill -9, the previous table serves"
# readers during a rematerialisation: the old vector or the new one, nothing else
"$MR_BIN" -C "$ws2" run >"$T_ROOT/remat.log" 2>&1 &
pid=$!
bg_track "$pid"
answers=0
while kill -0 "$pid" 2>/dev/null; do
    out=$("$MR_BIN" -C "$ws2" features get out/online "$who" --as-of 2024-02-01 2>&1) || fail "a read failed during the rematerialisation: $out"
    answers=$((answers + 1))
    printf '%s\n' "$out" >>"$T_ROOT/answers.txt"
done
wait "$pid"
assert_eq "$?" 0 "the rematerialisation completes"
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
after=$T_OUT
assert_ne "$after" "$before" "the corrections changed the entity's vector"
assert_eq "$(sort -u "$T_ROOT/answers.txt" | grep -v -x -F -e "$before" -e "$after" | wc -l)" 0 \
    "$answers reads during the rematerialisation: each the old or the new vector"

# the same two for the store in Redis: kill -9 while a new generation is written, readers during it
printf 'stages:\n  online:\n    op: materialize_online\n    keys: [user]\n    store: redis://127.0.0.1:%s/t:big\n    views:\n      - {name: c, source: big.csv, timestamp: event_ts, features: [clicks]}\n' \
    "$rport" >"$ws2/millrace.yaml"
expect_exit 0 mr -C "$ws2" run
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
assert_eq "$T_OUT" "$before" "Redis: the same vector as the file store"
sed -i 's/features: \[clicks\]}/features: [clicks], created: created_ts}/' "$ws2/millrace.yaml"
"$MR_BIN" -C "$ws2" run >"$T_ROOT/killed-redis.log" 2>&1 &
pid=$!
bg_track "$pid"
# kill it once the new generation's records are going in (the key count grows past the old generation's)
gen_before=$(redis-cli -p "$rport" get t:big:current)
size_before=$(redis-cli -p "$rport" dbsize)
for _ in $(seq 3000); do
    [ "$(redis-cli -p "$rport" dbsize)" -gt $((size_before + 200)) ] && break
    sleep 0.01
done
pkill -9 -P "$pid" 2>/dev/null
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
assert_eq "$(redis-cli -p "$rport" get t:big:current)" "$gen_before" "killed while writing the new generation, before its switch"
assert_eq "$([ "$(redis-cli -p "$rport" dbsize)" -gt $((size_before + 200)) ] && echo partial)" partial \
    "a half-written generation is in Redis"
assert_not_contains "$(cat "$T_ROOT/killed-redis.log")" "1 executed" "the Redis run was killed before it finished"
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
assert_eq "$T_OUT" "$before" "after kill -9, the previous generation serves from Redis"
"$MR_BIN" -C "$ws2" run >"$T_ROOT/remat-redis.log" 2>&1 &
pid=$!
bg_track "$pid"
answers=0
rm -f "$T_ROOT/answers-redis.txt"
while kill -0 "$pid" 2>/dev/null; do
    out=$("$MR_BIN" -C "$ws2" features get "redis://127.0.0.1:$rport/t:big" "$who" --as-of 2024-02-01 2>&1) ||
        fail "a Redis read failed during the rematerialisation: $out"
    answers=$((answers + 1))
    printf '%s\n' "$out" >>"$T_ROOT/answers-redis.txt"
done
wait "$pid"
assert_eq "$?" 0 "the Redis rematerialisation completes"
expect_exit 0 mr -C "$ws2" features get out/online "$who" --as-of 2024-02-01
assert_eq "$T_OUT" "$after" "Redis: the corrected vector, as the file store gave it"
assert_eq "$(sort -u "$T_ROOT/answers-redis.txt" | grep -v -x -F -e "$before" -e "$after" | wc -l)" 0 \
    "$answers Redis reads during the rematerialisation: each the old or the new vector"
assert_eq "$(redis-cli -p "$rport" --scan --pattern 't:big:*:schema' | wc -l)" 1 "one generation left (the killed one's records are gone)"
"$E2E_DIR/../../scripts/redis-server.sh" stop "$T_ROOT/redis"
t_done
