# A failing stage: its dependents are skipped, --keep-going lets the other
# branch run, exit 1, the summary names the stage and shows its stderr, and
# the run store records it. Also: a declared out the command never writes.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws fail)
cd "$ws" || fail "cd"
mkdir counts
echo in >input.txt
write_spec() { # EXIT-CODE-OF-bad
    cat >millrace.yaml <<YAML
stages:
  a:
    op: exec
    cmd: "echo a >> counts/a; cat input.txt > a.txt"
    deps: [input.txt]
    outs: [a.txt]
  bad:
    op: exec
    cmd: "echo bad >> counts/bad; echo first-line-of-bad >&2; echo boom-marker-4711 >&2; echo bad-partial-content > bad.txt; exit $1"
    deps: [a.txt]
    outs: [bad.txt]
  after_bad:
    op: exec
    cmd: "echo after_bad >> counts/after_bad; cat bad.txt a.txt > after_bad.txt"
    deps: [bad.txt]
    outs: [after_bad.txt]
  indep:
    op: exec
    cmd: "echo indep >> counts/indep; cat a.txt > indep.txt"
    deps: [a.txt]
    outs: [indep.txt]
YAML
}
write_spec 3
cnt() { counts counts a bad after_bad indep; }

# Without --keep-going, -j 1: bad starts first (file order), fails, and
# nothing new starts: indep is not run.
expect_exit 1 mr run -j 1
assert_eq "$(cnt)" "a=1 bad=1 after_bad=0 indep=0" "-j1 without --keep-going: nothing starts after the failure"
assert_match "$T_ERR" "failed +bad: command exited with status 3" "summary names the failed stage and exit status"
assert_contains "$T_ERR" "boom-marker-4711" "summary shows the tail of the failing stage's stderr"
assert_match "$T_ERR" "skipped after_bad" "summary lists the skipped dependent"
assert_no_file after_bad.txt "the dependent produced nothing"
grep -rq bad-partial-content .millrace/objects && fail "a failed stage's out was published into the store"
pass "a failed stage's out is not published into the store"
expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "failed" "runs --json: the run is 'failed'"
assert_eq "$(json 'd["runs"][0]["n_failed"]')" "1" "runs --json: n_failed=1"

# With --keep-going: the independent branch runs, the dependent is skipped.
expect_exit 1 mr run -j 1 --keep-going
assert_eq "$(cnt)" "a=1 bad=2 after_bad=0 indep=1" "--keep-going: indep runs, after_bad does not, bad retried"
assert_match "$T_ERR" "failed +bad" "--keep-going summary names bad"
assert_contains "$T_ERR" "boom-marker-4711" "--keep-going summary shows bad's stderr"
assert_match "$T_ERR" "skipped after_bad" "--keep-going summary lists after_bad as skipped"
assert_file indep.txt "indep.txt produced"

expect_exit 0 mr show
assert_match "$T_OUT" "^ *bad +failed" "show lists bad as failed"
assert_contains "$T_OUT" "error: command exited with status 3" "show prints bad's error"
assert_match "$T_OUT" "^ *after_bad +skipped" "show lists after_bad as skipped"
assert_match "$T_OUT" "^ *indep +executed" "show lists indep as executed"
expect_exit 0 mr show --json
assert_eq "$(json '[s["status"] for s in d["stages"] if s["stage"]=="bad"][0]')" "failed" "show --json: bad failed"
assert_contains "$(json '[s["error"] for s in d["stages"] if s["stage"]=="bad"][0]')" "status 3" "show --json: bad's error"
assert_eq "$(json 'd["run"]["status"]')" "failed" "show --json: run status failed"
expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "failed" "runs --json: --keep-going run is failed"

# --json run: same facts, on stdout.
expect_exit 1 mr run -j 1 --keep-going --json
assert_eq "$(json 'd["status"]') $(json 'd["failed"]') $(json 'd["skipped"]')" "failed 1 1" "run --json: status failed, 1 failed, 1 skipped"
assert_eq "$(run_statuses)" "a=cached bad=failed after_bad=skipped indep=cached" "run --json: statuses"

# A failure is never cached; fixing the stage lets everything finish.
write_spec 0
expect_exit 0 mr run
assert_eq "$(cnt)" "a=1 bad=4 after_bad=1 indep=1" "after the fix: bad and after_bad execute, the rest cached"
expect_exit 0 mr runs --json
assert_eq "$(json 'd["runs"][0]["status"]')" "ok" "runs --json: fixed run is ok"

# A declared out the command never creates.
ws2=$(new_ws missing-out)
cd "$ws2" || fail "cd"
cat >millrace.yaml <<'YAML'
stages:
  lazy:
    op: exec
    cmd: "echo made > made.txt"
    outs: [made.txt, never-written.txt]
YAML
expect_exit 1 mr run
assert_contains "$T_ERR" "never-written.txt" "missing out: the message names the out"
assert_match "$T_ERR" "failed +lazy" "missing out: the stage is reported failed"
expect_exit 0 mr show --json
assert_contains "$(json 'd["stages"][0]["error"]')" "declared output 'never-written.txt' was not created" "missing out: show --json error"
expect_exit 0 mr verify
pass "verify is clean after a failed publish"

t_done
