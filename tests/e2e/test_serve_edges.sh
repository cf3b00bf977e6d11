#!/usr/bin/env bash
# millrace serve against clients that try to hold it (issue 18, findings 6
# and 7; tests/e2e/serve_client.py does the talking, over loopback):
#   - with --token-file, a request without the token is answered 401 from
#     its headers, before its body; 800 unauthenticated 1 MB bodies leave the
#     peak RSS within 64 MiB (before: 7 -> 217 MiB after one round of 200,
#     305 MiB after four);
#   - --max-inflight-bytes bounds the bodies in flight: exactly budget/size
#     are admitted (100 Continue), the others get 503 + Retry-After before
#     sending a byte, and peak RSS stays within the budget + 32 MiB;
#   - 600 idle connections (above the 512 cap) do not starve a real request
#     (before: it timed out after 10 s), and the server closes the oldest
#     idle ones;
#   - slow-loris headers, a trickled body and an idle keep-alive are closed
#     by --idle-timeout / --request-timeout (before: a header line every
#     0.5 s kept a connection open for good);
#   - conflicting Content-Length or Transfer-Encoding: 400/501 and the
#     connection closed, one response only (before: the first length was
#     used, and a request smuggled behind a zero length ran);
#   - 800 clients that shutdown(SHUT_WR) after their request, 16 at a time,
#     all get their answer (before: 217 of 1600 did).
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ws=$(new_ws serve_edges)
cd "$ws" || fail "cd"
. "$E2E_DIR/bundle_fixture.sh"
expect_exit 0 mr run
cp out/pkg/model.mrb m.mrb
. "$E2E_DIR/serve_lib.sh"
stop_server() { # LOG
    kill -TERM "$SPID"
    wait "$SPID"
    assert_eq "$?" 0 "SIGTERM stops the server cleanly"
    t_sanitizer_lines "$(cat "$1")" && fail "sanitizer report in $1"
}

echo s3cret >tok.txt
export SERVE_TOKEN=s3cret
start_server s1.log m.mrb --token-file tok.txt
client "$PORT" unauth "$SPID"
stop_server s1.log

start_server s2.log m.mrb --token-file tok.txt --max-inflight-bytes 8388608 --max-body 1000000
client "$PORT" budget "$SPID" 8388608 1000000
stop_server s2.log
unset SERVE_TOKEN

start_server s3.log m.mrb
client "$PORT" idle 600
client "$PORT" framing
client "$PORT" halfclose 800
run_cmd curl -s "http://127.0.0.1:$PORT/metrics"
assert_match "$T_OUT" 'millrace_connections_closed_total\{reason="evicted"\} [1-9][0-9]*' "evictions are counted"
stop_server s3.log

start_server s4.log m.mrb --idle-timeout 2 --request-timeout 2
client "$PORT" slow
run_cmd curl -s "http://127.0.0.1:$PORT/metrics"
assert_match "$T_OUT" 'millrace_connections_closed_total\{reason="idle_timeout"\} [1-9][0-9]*' "idle timeouts are counted"
assert_match "$T_OUT" 'millrace_connections_closed_total\{reason="request_timeout"\} [1-9][0-9]*' \
    "request timeouts are counted"
stop_server s4.log

# the limits are checked when the server starts
expect_exit 2 mr serve m.mrb --port 0 --max-body 2000000 --max-inflight-bytes 1000000
assert_contains "$T_ERR" "--max-inflight-bytes 1000000 is below --max-body 2000000" "a budget below one body is refused"
expect_exit 2 mr serve m.mrb --port 0 --idle-timeout 0
assert_contains "$T_ERR" "--idle-timeout takes 1..86400 seconds" "a zero timeout is refused"
expect_exit 2 mr serve m.mrb --port 0 --max-connections 1
assert_contains "$T_ERR" "--max-connections takes 2..65536" "one connection is refused"
t_done
