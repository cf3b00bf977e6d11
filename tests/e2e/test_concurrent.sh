# Two `millrace run` processes on one workspace at once: both succeed, each
# stage's command runs exactly once in total, the other run reports it
# cached, and the workspace is consistent afterwards.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws concurrent)
write_diamond "$ws"
cd "$ws" || fail "cd"
# Slow the stages down a little so the two runs overlap for certain.
sed -i 's/cmd: "echo \([abcd]\) >> counts\/\([abcd]\);/cmd: "echo \1 >> counts\/\2; sleep 0.3;/' millrace.yaml
grep -q 'sleep 0.3' millrace.yaml || fail "could not edit the spec"

both() { # ARGS...: two runs at once; checks both exit 0, totals over both
    "$MR_BIN" run --json "$@" >r1.json 2>r1.err &
    local p1=$!
    "$MR_BIN" run --json "$@" >r2.json 2>r2.err &
    local p2=$!
    bg_track $p1
    bg_track $p2
    wait $p1; local rc1=$?
    wait $p2; local rc2=$?
    T_LAST="two concurrent runs $*"; T_RC="$rc1,$rc2"; T_OUT="$(cat r1.json r2.json)"; T_ERR="$(cat r1.err r2.err)"
    t_sanitizer_lines "$T_ERR" >/dev/null && fail "sanitizer report"
    assert_eq "$rc1 $rc2" "0 0" "both concurrent runs $* exit 0"
    python3 - r1.json r2.json <<'PY' || fail "bad JSON from a concurrent run"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
open("totals", "w").write("%d %d %s %s\n" % (a["executed"] + b["executed"], a["cached"] + b["cached"], a["status"], b["status"]))
PY
}

both
assert_eq "$(counts counts a b c d)" "a=1 b=1 c=1 d=1" "each stage's command executed exactly once in total"
assert_eq "$(cat totals)" "4 4 ok ok" "executed 4 and cached 4 over both runs (the waiting run reports cached)"

# Consistent afterwards: a third run is a no-op, verify passes, the lock
# names all four stages.
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]') $(json 'd["cached"]')" "0 4" "a later run is a no-op"
expect_exit 0 mr verify
pass "verify passes after concurrent runs"
for s in a b c d; do grep -q "^  $s:" millrace.lock || fail "millrace.lock lacks stage $s"; done
pass "millrace.lock names every stage"
expect_exit 0 mr runs --json
assert_eq "$(json '" ".join(r["status"] for r in d["runs"])')" "ok ok ok" "three runs recorded, all ok"

# Again with a param change that re-runs b and d: each once more.
both -S b.n=9
assert_eq "$(counts counts a b c d)" "a=1 b=2 c=1 d=2" "b and d executed exactly once more in total"
assert_eq "$(cat totals)" "2 6 ok ok" "executed 2, cached 6 over both runs"
assert_contains "$(cat b.txt)" "b9" "b.txt has the new param"

t_done
