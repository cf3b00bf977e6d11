#!/usr/bin/env bash
# millrace run --sweep (issue 17, sweeps): the grid of the -S lists runs as separate named runs
# tagged sweep=NAME, sharing the cache (a stage every point needs runs once), at most -j at a
# time; runs --sweep NAME lists them; a failing point fails the sweep without stopping the
# others; a point whose spec does not load fails the sweep before anything runs.
. "$(dirname "$0")/lib.sh" "$@"
ws=$(new_ws sweep)
cd "$ws" || fail "cd"
cat >millrace.yaml <<'Y'
params:
  a: 1
  b: x
  shape: [1]
stages:
  prep:
    op: exec
    cmd: sleep 0.5; echo once >> prep_count.txt; echo p > prep.txt
    outs: [prep.txt]
  fit:
    op: exec
    cmd: test "${params.a}" != 4 && echo "${params.a} ${params.b}" > fit.txt
    params: [shape]
    deps: [prep.txt]
    outs: [fit.txt]
Y
expect_exit 0 mr run --sweep --name grid -S a=1,2,3 -S b=x,y -j 2 --json
assert_eq "$(json 'd["sweep"]')" "grid" "the sweep's name"
assert_eq "$(json '" ".join(r["name"] for r in d["runs"])')" "grid-1 grid-2 grid-3 grid-4 grid-5 grid-6" "one run per point"
assert_eq "$(json '" ".join(r["params"]["a"] + r["params"]["b"] for r in d["runs"])')" "1x 1y 2x 2y 3x 3y" \
    "the grid, the last list varying fastest"
assert_eq "$(json '" ".join(r["status"] for r in d["runs"])')" "succeeded succeeded succeeded succeeded succeeded succeeded" \
    "every point succeeds"
assert_eq "$(json '" ".join(str(i) for i in sorted(r["run_id"] for r in d["runs"]))')" "1 2 3 4 5 6" "each point is a run of its own"
assert_eq "$(cat prep_count.txt)" "once" "the stage every point needs ran once, the others took it from the cache"
expect_exit 0 mr runs --sweep grid --json
assert_eq "$(json '" ".join(sorted(r["name"] for r in d["runs"]))')" "grid-1 grid-2 grid-3 grid-4 grid-5 grid-6" \
    "runs --sweep lists the sweep's runs"
expect_exit 0 mr show grid-4 --json
assert_eq "$(json 'd["run"]["overrides"]')" "a=2 b=y" "a point's run records its overrides"
assert_eq "$(json 'd["run"]["tags"]["sweep"]')" "grid" "and its sweep"
expect_exit 0 mr runs --tag sweep=grid --json
assert_eq "$(json 'len(d["runs"])')" 6 "the same runs by their tag"

# a failing point: the sweep fails, the other points still run
expect_exit 1 mr run --sweep --name bad -S a=3,4,5
assert_contains "$T_ERR" "failed    bad-2" "the failing point is named"
assert_contains "$T_ERR" "bad: 2 succeeded, 1 failed" "the summary counts it"
assert_file .millrace/sweeps/bad/2.log "its log is kept"

# a value in [...] stays one value; a point that does not load fails before anything runs
expect_exit 0 mr run --sweep --name lists -S a=7,8 -S 'shape=[1, 2]' --json
assert_eq "$(json '" ".join(r["params"]["shape"] for r in d["runs"])')" "[1, 2] [1, 2]" "a flow list is one value"
before=$(mr runs 0 --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["runs"]))')
expect_exit 2 mr run --sweep --name broken -S a=1,2 -S nosuch=1
assert_contains "$T_ERR" "nosuch" "an override the spec does not have fails the sweep"
assert_eq "$(mr runs 0 --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["runs"]))')" "$before" "before any run"
expect_exit 2 mr run --sweep -S a=1
assert_contains "$T_ERR" "--sweep needs a list to sweep" "a sweep without a list is a usage error"
t_done
