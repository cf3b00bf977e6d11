#!/usr/bin/env bash
# millrace serve: serve == predict bit for bit (rows and columns bodies,
# concurrent keep-alive clients); concurrent mixed valid/invalid requests get
# the right codes and bodies (400 with the parse position, 404, 405, 413,
# 422 naming the field); the queue limit answers 503 + Retry-After; SIGHUP
# reloads under load with no failed request; /metrics parses as Prometheus
# text; the raw requests of tests/fuzz/corpus/serve (valid and malformed,
# also replayed through the fuzz target by fuzz.replay_http) leave it
# healthy; bearer tokens; SIGTERM drains and exits 0. Loopback only.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ws=$(new_ws serve)
cd "$ws" || fail "cd"
. "$E2E_DIR/bundle_fixture.sh"
expect_exit 0 mr run
cp out/pkg/model.mrb live.mrb
chmod u+w live.mrb
expect_exit 0 mr predict live.mrb test.csv -o pred.csv
. "$E2E_DIR/serve_lib.sh"
start_server s1.log live.mrb --max-body 100000
assert_contains "$(cat s1.log)" "http://127.0.0.1:" "binds 127.0.0.1 by default"
# a busy port: which address and port, exit 1 like other runtime failures
expect_exit 1 mr serve live.mrb --port "$PORT"
assert_contains "$T_ERR" "cannot listen on 127.0.0.1:$PORT: port $PORT is already in use" "a busy port is named with its address"
assert_contains "$T_ERR" "hint:" "a busy port says what to do"
assert_not_contains "$T_ERR" "port 0" "not libmicrohttpd's 'port 0'"
client "$PORT" equal test.csv pred.csv
client "$PORT" mixed
client "$PORT" metrics
client "$PORT" replay "$E2E_DIR/../fuzz/corpus/serve"
client "$PORT" abandon

# hot reload under load: a second model (more rounds) swapped in and out
mr train train_x.csv --label label -p objective=binary -p num_iterations=60 -p num_leaves=15 -o gb2.bin >/dev/null || fail "train 2"
sed -i 's/model: gb.bin/model: gb2.bin/' millrace.yaml
expect_exit 0 mr run
cp out/pkg/model.mrb new.mrb
client "$PORT" reload live.mrb new.mrb out/pkg/model.mrb "$SPID"
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "SIGTERM drains and exits 0"
assert_contains "$(cat s1.log)" "reloaded live.mrb" "SIGHUP reloads"
t_sanitizer_lines "$(cat s1.log)" && fail "sanitizer report in the server log"

# --watch reloads on its own
start_server s2.log live.mrb --watch
cp new.mrb live.tmp && mv live.tmp live.mrb
wait_for "--watch picks up the new file" 10 grep -q reloaded s2.log
# a corrupt replacement keeps the old model serving
printf 'garbage' >live.tmp && mv live.tmp live.mrb
wait_for "a bad bundle is reported" 10 grep -q "reload failed" s2.log
run_cmd curl -s -o /dev/null -w '%{http_code}' -d '{"rows":[{"x1":1,"x2":1,"plan":"pro","n":1}]}' "http://127.0.0.1:$PORT/v1/predict"
assert_eq "$T_OUT" 200 "the old model keeps serving after a failed reload"
kill -TERM "$SPID"
wait "$SPID"

# queue limit
cp new.mrb live.mrb
start_server s3.log live.mrb --max-queue 1 --max-batch 1
client "$PORT" queue
kill -TERM "$SPID"
wait "$SPID"

# bearer token
echo s3cret >tok.txt
start_server s4.log live.mrb --token-file tok.txt
run_cmd curl -s -o /dev/null -w '%{http_code}' -d '{"rows":[]}' "http://127.0.0.1:$PORT/v1/predict"
assert_eq "$T_OUT" 401 "no token: 401"
run_cmd curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong' -d '{"rows":[]}' "http://127.0.0.1:$PORT/v1/predict"
assert_eq "$T_OUT" 401 "wrong token: 401"
run_cmd curl -s -w ' %{http_code}' -H 'Authorization: Bearer s3cret' -d '{"rows":[]}' "http://127.0.0.1:$PORT/v1/predict"
assert_contains "$T_OUT" "200" "right token: 200"
run_cmd curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz"
assert_eq "$T_OUT" 200 "healthz needs no token"
kill -TERM "$SPID"
wait "$SPID"

# IPv6: --host ::1 serves the same answers (only where the kernel has an
# IPv6 loopback; a machine without one is told so)
if grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null; then
    expect_exit 0 mr predict live.mrb test.csv -o pred6.csv
    start_server s5.log live.mrb --host ::1
    assert_contains "$(cat s5.log)" "http://[::1]:" "binds [::1]"
    SERVE_HOST=::1 client "$PORT" equal test.csv pred6.csv
    run_cmd curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz"
    assert_eq "$T_OUT" 000 "bound to ::1 only: 127.0.0.1 is not answered"
    kill -TERM "$SPID"
    wait "$SPID"
else
    echo "NOTE: this machine has no IPv6 loopback (::1); the IPv6 bind was not exercised"
fi
expect_exit 2 mr serve live.mrb --host not-an-address --port 0
assert_contains "$T_ERR" "not an IPv4 or IPv6 address" "a bad --host is refused by name"

# bench-serve runs, bounded
expect_exit 0 mr bench-serve live.mrb --qps 200 --duration 1 --connections 2 --json
assert_eq "$(json 'd["non_2xx"] + d["errors"]')" 0 "bench-serve: every request answered 200"
# the floor: the same server answering a constant response (bench/serve's vs_floor)
expect_exit 0 mr bench-serve live.mrb --qps 0 --duration 1 --connections 4 --floor --json
assert_eq "$(json 'd["non_2xx"] + d["errors"]')" 0 "bench-serve --floor: every request answered 200"
assert_eq "$(json 'int(d["achieved_qps"] > 0)')" 1 "bench-serve --floor: requests were answered"
t_done
