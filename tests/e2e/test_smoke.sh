# Smoke mode: MILLRACE_SMOKE=1 reaches the command; smoke and full results
# never share cache entries.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws smoke)
cd "$ws" || fail "cd"
mkdir counts
cat >millrace.yaml <<'YAML'
stages:
  prep:
    op: exec
    cmd: "echo prep >> counts/prep; echo smoke=$MILLRACE_SMOKE > prep.txt"
    outs: [prep.txt]
  fit:
    op: exec
    cmd: "echo fit >> counts/fit; cat prep.txt > fit.txt; echo fit-smoke=$MILLRACE_SMOKE >> fit.txt"
    deps: [prep.txt]
    outs: [fit.txt]
YAML

expect_exit 0 mr run --smoke --json
assert_eq "$(run_statuses)" "prep=executed fit=executed" "smoke run executes"
assert_file_content prep.txt "smoke=1" "MILLRACE_SMOKE=1 reaches the command in smoke mode"
expect_exit 0 mr run --smoke --json
assert_eq "$(run_statuses)" "prep=cached fit=cached" "a second smoke run is cached"
expect_exit 0 mr status
assert_match "$T_OUT" "stale +prep" "status (full) after a smoke run: prep stale"
assert_contains "$T_OUT" "smoke" "status explains the smoke difference"
expect_exit 0 mr status --smoke
assert_contains "$T_OUT" "everything is up to date" "status --smoke: up to date"

expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "prep=executed fit=executed" "full run after smoke runs executes (no shared cache)"
assert_file_content prep.txt "smoke=0" "full run: MILLRACE_SMOKE=0"
assert_eq "$(counts counts prep fit)" "prep=2 fit=2" "each command ran once per mode"

expect_exit 0 mr run --smoke --json
assert_eq "$(run_statuses)" "prep=cached fit=cached" "smoke results still cached after a full run"
assert_file_content prep.txt "smoke=1" "the smoke output is restored in the workspace"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "prep=cached fit=cached" "full results still cached after a smoke run"
assert_file_content fit.txt "$(printf 'smoke=0\nfit-smoke=0')" "the full output is restored"
assert_eq "$(counts counts prep fit)" "prep=2 fit=2" "no re-execution when switching modes back and forth"

expect_exit 0 mr runs --json
assert_eq "$(json '" ".join(str(r["smoke"]).lower() for r in d["runs"])')" "false true false true true" "runs --json records the smoke flag per run"

t_done
