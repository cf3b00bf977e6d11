# Ctrl-C (SIGINT to the runner): it stops the stage's command, records the
# run as interrupted, exits 1, and publishes nothing partial.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws interrupt)
cd "$ws" || fail "cd"
marker="mr-e2e-int-$$-$RANDOM"
write_slow "$ws" "$marker"

# A background job of a non-interactive shell starts with SIGINT ignored;
# millrace installs its own handler, which is what this test relies on.
"$MR_BIN" run >runner.out 2>runner.err &
runner=$!
bg_track "$runner"
wait_for "the stage wrote its partial output" 30 file_has out.txt partial-output
wait_for "the stage's sleep started" 30 test -s sleep.pid

t0=$(date +%s)
kill -INT "$runner"
wait "$runner"
rc=$?
t1=$(date +%s)
T_LAST="millrace run (SIGINT)"; T_RC=$rc; T_OUT=$(cat runner.out); T_ERR=$(cat runner.err)
t_sanitizer_lines "$T_ERR" >/dev/null && fail "sanitizer report from the interrupted runner"
assert_eq "$rc" "1" "interrupted run exits 1"
[ $((t1 - t0)) -lt 20 ] || fail "the runner took $((t1 - t0))s to stop after SIGINT"
pass "the runner stopped promptly ($((t1 - t0))s)"
assert_contains "$T_ERR" "interrupted" "stderr says the run was interrupted"

wait_for "the stage's shell is gone" 30 no_process "$marker"
wait_for "the stage's sleep is gone" 30 pidfile_dead sleep.pid
grep -rq partial-output .millrace/objects && fail "partial output published"
pass "no partial output in the store"

expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "interrupted" "runs --json: interrupted"
expect_exit 0 mr show --json
assert_eq "$(json 'd["stages"][0]["status"]')" "failed" "show --json: the stage is failed"
assert_eq "$(json 'd["stages"][0]["error"]')" "interrupted" "show --json: the stage's error is 'interrupted'"

expect_exit 0 mr run -S nap=0
assert_file_content out.txt "$(printf 'partial-output\ndone')" "the next run completes"

# SIGTERM is handled the same way (with a stage still waiting to start).
cat >>millrace.yaml <<'YAML'
  later:
    op: exec
    cmd: "echo later >> counts/later; cat out.txt > later.txt"
    deps: [out.txt]
    outs: [later.txt]
YAML
rm -f sleep.pid
"$MR_BIN" run -S nap=31 >runner.out 2>runner.err &
runner=$!
bg_track "$runner"
wait_for "the second run's stage started its sleep" 30 test -s sleep.pid
kill -TERM "$runner"
wait "$runner"
rc=$?
T_LAST="millrace run (SIGTERM)"; T_RC=$rc; T_OUT=$(cat runner.out); T_ERR=$(cat runner.err)
t_sanitizer_lines "$T_ERR" >/dev/null && fail "sanitizer report from the terminated runner"
assert_eq "$rc" "1" "SIGTERM: exit 1"
wait_for "SIGTERM: the stage's sleep is gone" 30 pidfile_dead sleep.pid
wait_for "SIGTERM: the stage's shell is gone" 30 no_process "$marker"
expect_exit 0 mr show --json
assert_eq "$(json 'd["run"]["status"]')" "interrupted" "SIGTERM: run recorded as interrupted"
assert_eq "$(json '[s["status"] for s in d["stages"] if s["stage"]=="later"]')" "skipped" "SIGTERM: the stage that never started is skipped"
assert_eq "$(count counts/later)" "0" "SIGTERM: the later stage never ran"

t_done
