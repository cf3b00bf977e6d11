#!/usr/bin/env bash
# millrace serve speaks MLflow's scoring protocol (/invocations, /ping,
# /health, /version) and the Open Inference Protocol (/v2/...) beside
# /v1/predict: every MLflow input form (dataframe_split, dataframe_records,
# instances, inputs, text/csv) and OIP per-column inputs return the numbers
# /v1/predict prints and `millrace predict` writes, bit for bit, under
# concurrent clients; OIP [N, n_inputs] matrices do on an all-numeric bundle;
# malformed requests get their protocol's error shape and a 4xx; metadata and
# health documents; per-endpoint metrics; the bearer token on every protocol
# endpoint; a reload changes the /v2 version. Client: serve_protocols_client.py
# with Debian's python3-requests. Loopback only.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
ws=$(new_ws serve_protocols)
cd "$ws" || fail "cd"
. "$E2E_DIR/bundle_fixture.sh"
expect_exit 0 mr run
cp out/pkg/model.mrb live.mrb
chmod u+w live.mrb
expect_exit 0 mr predict live.mrb test.csv -o pred.csv
. "$E2E_DIR/serve_lib.sh"
pclient() {
    run_cmd "$PY" "$E2E_DIR/serve_protocols_client.py" "$@"
    [ "$T_RC" = 0 ] || fail "serve_protocols_client $*"
    pass "$T_OUT"
}

# the fixture's bundle is named e2e (its package stage's name:), the /v2 model name
start_server s1.log live.mrb --max-body 100000 --max-rows 500
pclient "$PORT" equal test.csv pred.csv e2e
pclient "$PORT" errors e2e
pclient "$PORT" meta e2e
pclient "$PORT" metrics
# a reload: /v2 serves the new version, and the old one is a 404
old=$(curl -s "http://127.0.0.1:$PORT/v1/model" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["version"])')
mr train train_x.csv --label label -p objective=binary -p num_iterations=60 -p num_leaves=15 -o gb2.bin >/dev/null || fail "train 2"
sed -i 's/model: gb.bin/model: gb2.bin/' millrace.yaml
expect_exit 0 mr run
cp out/pkg/model.mrb live.tmp && mv live.tmp live.mrb
kill -HUP "$SPID"
wait_for "the reload" 10 grep -q reloaded s1.log
new=$(curl -s "http://127.0.0.1:$PORT/v1/model" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["version"])')
[ "$new" != "$old" ] || fail "the reload did not change the version"
run_cmd curl -s "http://127.0.0.1:$PORT/v2/models/e2e"
assert_contains "$T_OUT" "\"versions\": [\"$new\"]" "/v2 metadata names the reloaded version"
body='{"inputs": [{"name": "x1", "shape": [1], "datatype": "FP64", "data": [0.5]}, {"name": "x2", "shape": [1], "datatype": "FP64", "data": [-1]}, {"name": "plan", "shape": [1], "datatype": "BYTES", "data": ["pro"]}, {"name": "n", "shape": [1], "datatype": "INT64", "data": [3]}]}'
run_cmd curl -s -w ' %{http_code}' -d "$body" "http://127.0.0.1:$PORT/v2/models/e2e/versions/$new/infer"
assert_contains "$T_OUT" "\"model_version\": \"$new\"" "the new version answers on its versioned path"
assert_contains "$T_OUT" " 200" "the new version answers on its versioned path: 200"
run_cmd curl -s -o /dev/null -w '%{http_code}' -d "$body" "http://127.0.0.1:$PORT/v2/models/e2e/versions/$old/infer"
assert_eq "$T_OUT" 404 "the replaced version is a 404"
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "SIGTERM drains and exits 0"
t_sanitizer_lines "$(cat s1.log)" && fail "sanitizer report in the server log"

# an all-numeric bundle (the model alone, its inputs the transformed
# columns), scored through OIP [N, n_inputs] matrices
mkdir num && cp gb.bin num/ || fail "num"
"$TOOLS/mr_feattool" apply feat.mrft test.csv >num/test_x.csv || fail "mr_feattool apply"
cd num || fail "cd num"
printf 'stages:\n  pkg:\n    op: package\n    model: gb.bin\n    name: num-gb\n' >millrace.yaml
expect_exit 0 mr run
expect_exit 0 mr predict out/pkg/model.mrb test_x.csv -o pred_x.csv
start_server s2.log out/pkg/model.mrb
pclient "$PORT" matrix test_x.csv pred_x.csv num-gb
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "the numeric server exits 0"
t_sanitizer_lines "$(cat s2.log)" && fail "sanitizer report in the numeric server's log"
cd .. || fail "cd .."

# the bearer token guards every protocol endpoint
echo s3cret >tok.txt
start_server s3.log live.mrb --token-file tok.txt
pclient "$PORT" token e2e s3cret
kill -TERM "$SPID"
wait "$SPID"
assert_eq "$?" 0 "the token server exits 0"
t_sanitizer_lines "$(cat s3.log)" && fail "sanitizer report in the token server's log"
t_done
