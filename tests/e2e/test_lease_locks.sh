#!/usr/bin/env bash
# The lease-lock protocol (MILLRACE_LOCKS=lease, what NFS gets): two runners
# on two "nodes" (MILLRACE_HOSTNAME) publishing into one store compute each
# stage once, corrupt nothing and leave `verify` clean, with a lease shorter
# than the stages (so only renewal keeps it); a lease left by a killed
# worker whose command still runs is kept alive by its keeper until the
# command ends, then broken by the other node once it expires; one left by
# a holder killed with everything it started is broken at once on its own
# host.
. "$(dirname "$0")/lib.sh" "$@"
export MILLRACE_LOCKS=lease MILLRACE_LEASE_S=2

ws=$(new_ws shared)
cat >"$ws/millrace.yaml" <<'YAML'
stages:
  prep: {op: exec, cmd: "echo run >> ../prep.count; sleep 3; seq 1 100 > prep.txt", outs: [prep.txt]}
  total: {op: exec, cmd: "echo run >> ../total.count; awk '{ s += $1 } END { print s }' prep.txt > total.txt", deps: [prep.txt], outs: [total.txt]}
  other: {op: exec, cmd: "echo run >> ../other.count; sleep 1; echo o > other.txt", outs: [other.txt]}
YAML
MILLRACE_HOSTNAME=node-a "$MR_BIN" -C "$ws" run >"$T_ROOT/a.out" 2>"$T_ROOT/a.err" &
pa=$!
MILLRACE_HOSTNAME=node-b "$MR_BIN" -C "$ws" run >"$T_ROOT/b.out" 2>"$T_ROOT/b.err" &
pb=$!
bg_track "$pa"
bg_track "$pb"
wait "$pa"
ra=$?
wait "$pb"
rb=$?
assert_eq "$ra $rb" "0 0" "two runners on two nodes both succeed"
for s in prep total other; do
    assert_eq "$(grep -c run "$T_ROOT/$s.count")" 1 "stage $s was computed once (the lease, 2 s, held for its whole run by renewal)"
done
assert_file_content "$ws/total.txt" 5050 "the result is right"
assert_eq "$(cat "$T_ROOT/a.err" "$T_ROOT/b.err" | grep -E -c "^ +(done|cached) ")" 6 "each runner reports all three stages done or cached"
assert_file "$ws/.millrace/locks/stage-prep.lock.d" "the locks took the lease protocol"
assert_no_file "$ws/.millrace/locks/stage-prep.lock" "and no flock file"
assert_eq "$(find "$ws/.millrace/locks" -name '*.[xs]' | grep -c .)" 0 "every lease was released"
assert_not_contains "$(cat "$T_ROOT/a.err" "$T_ROOT/b.err")" "broke the lock" "no live lease was broken"
expect_exit 0 mr -C "$ws" verify

# ---- a killed worker: its command holds on through the keeper, then the lease expires ----------------
k=$(new_ws killed)
cat >"$k/millrace.yaml" <<'YAML'
stages:
  slow: {op: exec, cmd: "echo start >> ../slow.log; sleep 4; echo end >> ../slow.log; echo s > slow.txt", outs: [slow.txt]}
YAML
MILLRACE_HOSTNAME=node-a "$MR_BIN" -C "$k" run >"$T_ROOT/ka.out" 2>"$T_ROOT/ka.err" &
pa=$!
bg_track "$pa"
started() { grep -q start "$T_ROOT/slow.log" 2>/dev/null; }
wait_for "node-a's command to start" 30 started
worker=$(pgrep -f "stage run slow --job $k" | head -1)
[ -n "$worker" ] || fail "no worker process for stage slow"
kill -9 "$worker"
pass "node-a's worker killed with SIGKILL, its command left running"
MILLRACE_HOSTNAME=node-b "$MR_BIN" -C "$k" run >"$T_ROOT/kb.out" 2>"$T_ROOT/kb.err" &
pb=$!
bg_track "$pb"
wait "$pb"
assert_eq "$?" 0 "node-b's run succeeds"
wait "$pa"
assert_eq "$(tr '\n' ' ' <"$T_ROOT/slow.log")" "start end start end " \
    "node-b's command started only after node-a's orphaned command ended (no two at once)"
assert_contains "$(cat "$T_ROOT/kb.err")" "broke the lock" "node-b broke the lease once it expired"
assert_file_content "$k/slow.txt" s "with the stage's result"
expect_exit 0 mr -C "$k" verify

# ---- a holder killed with everything it started: broken at once on its own host ---------------------
rm -f "$T_ROOT/slow.log"
MILLRACE_HOSTNAME=node-a "$MR_BIN" -C "$k" run -f slow >"$T_ROOT/kc.out" 2>"$T_ROOT/kc.err" &
pa=$!
bg_track "$pa"
wait_for "the forced run's command to start" 30 started
worker=$(pgrep -f "stage run slow --job $k" | head -1)
kill -9 -- "-$worker" "$pa" 2>/dev/null # the worker's group (the command too) and the runner
wait "$pa" 2>/dev/null
gone() { ! pgrep -f "sleep 4" >/dev/null; }
wait_for "everything node-a started to be gone" 30 gone
assert_eq "$(find "$k/.millrace/locks/stage-slow.lock.d" -name '*.x' | grep -c .)" 1 "its lease entry is left behind"
MILLRACE_HOSTNAME=node-a expect_exit 0 mr -C "$k" run -f slow
assert_contains "$T_ERR" "broke the lock" "the next runner on node-a broke it: its pids are dead"
assert_eq "$(tr '\n' ' ' <"$T_ROOT/slow.log")" "start start end " "and ran the stage"
t_done
