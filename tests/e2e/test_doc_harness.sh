#!/usr/bin/env bash
# The doc-test harness (tests/doc/run_doc_examples.py) on the pages of
# tests/doc/fixtures: a page whose examples pass passes, with every
# annotation at work (setup, file, fragment, of, output, expect-exit,
# background, ignore, console); each kind of broken example fails, naming
# its fence's file:line and showing the command's output; nothing a block
# starts outlives it.
. "$(dirname "$0")/lib.sh" "$@"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
export TMPDIR=$T_ROOT # the harness's scratch directories land here, removed with it

doc() { # PAGE [OPTIONS...]: runs the harness on tests/doc/fixtures/PAGE
    local page=$1
    shift
    run_cmd /usr/bin/python3 "$SRC/tests/doc/run_doc_examples.py" --millrace "$MR_BIN" --root "$SRC" "$@" \
        "tests/doc/fixtures/$page"
}

doc pass.md --keep
[ "$T_RC" = 0 ] || fail "pass.md: expected exit 0, got $T_RC"
pass "pass.md: every example passes"
F=tests/doc/fixtures/pass.md
assert_contains "$T_OUT" "ok 3 - $F:18: fragment of stages.model.params: accepted" "a fragment is checked in the spec"
assert_contains "$T_OUT" "$F:25: fragment of stages.model.params: rejected with exit 2" "an expected error is an error"
assert_contains "$T_OUT" "$F:32: millrace.yaml at stages written and accepted" "file= with of= splices and keeps"
assert_contains "$T_OUT" "$F:54: bash block exits 3" "expect-exit"
assert_match "$T_OUT" "$F:59: sh block listens on 127\.0\.0\.1:[0-9]+ \(port 8080 in the doc\)" "the server listens on a port of its own"
assert_contains "$T_OUT" "$F:69: the output shown is what the block before printed" "the client's output is checked"
assert_contains "$T_OUT" "$F:74: sh block # SKIP fails if run: the test checks that it is not" "ignore prints its reason"
assert_contains "$T_OUT" "PASS $F: 12 runnable blocks, 15 checks, 1 ignored" "every block counted"
kept=$(printf '%s\n' "$T_OUT" | sed -n 's/^# scratch directory kept: //p')
[ -d "$kept/ws" ] || fail "no kept scratch directory in the output"
ws=$kept/ws
assert_file_content "$ws/hello.sh" 'echo "hello from a file"' "file= writes the block"
assert_contains "$(cat "$ws/millrace.yaml")" "eval2:" "the splice stays in the workspace's millrace.yaml"
assert_not_contains "$(cat "$ws/millrace.yaml")" "num_leafs" "a fragment never changes the workspace"
# alive PID: running (a zombie, killed and not yet reaped by init, is not).
alive() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
for f in server.pid sleeper.pid; do
    pid=$(cat "$ws/$f") || fail "no $f"
    for _ in $(seq 20); do alive "$pid" || break; sleep 0.1; done # SIGKILL lands asynchronously
    ! alive "$pid" || fail "process $pid ($f) outlived its block"
    pass "the process of $f was stopped"
done

doc fail_sh.md
assert_eq "$T_RC" 1 "fail_sh.md: exit 1"
assert_contains "$T_OUT" "not ok 2 - tests/doc/fixtures/fail_sh.md:7: the sh block exited 1, expected 0" "the fence's file:line"
assert_contains "$T_OUT" "  | the output before the failure" "the block's output"
assert_not_contains "$T_OUT" "after the failure" "later blocks do not run"
doc fail_sh.md -k
assert_contains "$T_OUT" "fail_sh.md:13: sh block exits 0" "-k runs the later blocks"
assert_eq "$T_RC" 1 "-k still fails"

doc fail_fragment.md
assert_eq "$T_RC" 1 "fail_fragment.md: exit 1"
assert_contains "$T_OUT" "fail_fragment.md:4: the fragment in the workspace's millrace.yaml at 'stages.model.params': \`millrace dag\` exited 2, expected 0" "a rejected fragment fails"
assert_contains "$T_OUT" "unknown gbdt parameter 'num_leafs'" "with millrace's error"
assert_contains "$T_OUT" "--- the millrace.yaml checked ---" "and the spec it checked"

doc fail_output.md
assert_eq "$T_RC" 1 "fail_output.md: exit 1"
assert_contains "$T_OUT" "fail_output.md:8: the output shown does not match: no line 'one' (in this order)" "output in another order fails"

doc fail_bare.md
assert_eq "$T_RC" 1 "fail_bare.md: exit 1"
assert_contains "$T_OUT" "fail_bare.md:3: a fence without an info string" "a bare fence fails"

doc fail_annotation.md
assert_eq "$T_RC" 1 "fail_annotation.md: exit 1"
assert_contains "$T_OUT" "fail_annotation.md:3: unknown doctest annotation 'setpu' (did you mean 'setup'?)" "a misspelt annotation fails"

doc fail_yaml.md
assert_eq "$T_RC" 1 "fail_yaml.md: exit 1"
assert_contains "$T_OUT" "fail_yaml.md:3: a YAML block that is not a whole millrace.yaml" "YAML must say what it is"

doc fail_timeout.md
assert_eq "$T_RC" 1 "fail_timeout.md: exit 1"
assert_contains "$T_OUT" "fail_timeout.md:4: still running after 1 s" "a block over its time limit fails"
assert_contains "$T_OUT" "  | started" "with what it printed"

doc fail_server.md
assert_eq "$T_RC" 1 "fail_server.md: exit 1"
assert_match "$T_OUT" "fail_server.md:4: nothing listens on 127\.0\.0\.1:[0-9]+ \(8080 in the doc\) after 2 s" "a server that never listens fails"
t_done
