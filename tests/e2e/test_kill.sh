# kill -9 of the runner in the middle of a stage: the stage's command dies
# with it, nothing partial is published, the run shows as killed (never as
# running), and the next run completes.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws kill)
cd "$ws" || fail "cd"
marker="mr-e2e-kill-$$-$RANDOM"
write_slow "$ws" "$marker"

"$MR_BIN" run >runner.log 2>&1 &
runner=$!
bg_track "$runner"
wait_for "the stage wrote its partial output" 30 file_has out.txt partial-output
wait_for "the stage's sleep started" 30 test -s sleep.pid
pgrep -f -- "$marker" >/dev/null || fail "no process carries the marker while the stage runs"
pass "the stage's shell is running (pgrep -f marker)"
expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "running" "while the runner lives, its run is 'running'"

kill -9 "$runner"
wait "$runner" 2>/dev/null
pass "runner killed with SIGKILL"

wait_for "the stage's shell died with the runner" 30 no_process "$marker"
wait_for "the stage's sleep died with the runner" 30 pidfile_dead sleep.pid
if grep -rq partial-output .millrace/objects; then
    fail "a partial output was published: $(grep -rl partial-output .millrace/objects)"
fi
pass "no object in .millrace/objects holds the partial output"

expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "killed" "runs --json: the killed run shows as 'killed'"
assert_not_contains "$T_OUT" '"running"' "runs --json: no run shows as running"
expect_exit 0 mr runs
assert_match "$T_OUT" "^1 .* killed " "runs (text): run 1 killed"
expect_exit 0 mr show 1 --json
assert_eq "$(json 'd["run"]["status"]')" "killed" "show 1 --json: killed"
expect_exit 0 mr verify
pass "verify is clean after the kill"

# The next run (short nap) completes and publishes the full output.
expect_exit 0 mr run -S nap=0 --json
assert_eq "$(run_statuses)" "slow=executed" "next run executes the stage"
assert_file_content out.txt "$(printf 'partial-output\ndone')" "next run publishes the complete output"
ino=$(stat -c %i out.txt)
[ -n "$(find .millrace/objects -inum "$ino")" ] || fail "out.txt is not in the store"
pass "the complete output is in the store"
expect_exit 0 mr runs --json
assert_eq "$(json '" ".join(r["status"] for r in d["runs"])')" "ok killed" "runs: ok (new) and killed (old)"
expect_exit 0 mr run -S nap=0 --json
assert_eq "$(run_statuses)" "slow=cached" "a third run serves it from the cache"
assert_eq "$(count counts/slow)" "2" "the stage's command ran twice in all (killed + completed)"

t_done
