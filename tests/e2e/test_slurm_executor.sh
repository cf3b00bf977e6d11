#!/usr/bin/env bash
# run --executor slurm on the one-node cluster of scripts/start-slurm.sh:
# the churn example's artifacts equal a local run's; a failing stage's job is
# reported with its exit code and log tail and its dependents never start;
# --detach returns at once and `status` / `runs` record the run to its end;
# Ctrl-C cancels every submitted job; a job requeued mid-run (scontrol
# requeue) still gives the right result; the run survives slurmdbd stopped
# for a minute; status queries stay at one per interval whatever the number
# of jobs (counted by a sacct wrapper).
. "$(dirname "$0")/lib.sh" "$@"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
sl="$T_ROOT/slurm"
env_out=$("$SRC/scripts/start-slurm.sh" "$sl") || fail "scripts/start-slurm.sh failed: $(tail -5 "$sl"/log/*.log 2>/dev/null)"
for p in "$sl"/pids/*.pid; do bg_track "$(cat "$p")"; done
# t_cleanup exits with the status the script ended with: keep it across the stop
trap 'rc=$?; "$SRC/scripts/stop-slurm.sh" "$sl" >/dev/null 2>&1; (exit $rc); t_cleanup' EXIT
eval "$env_out"
queue_empty() { [ -z "$(squeue -h 2>/dev/null)" ]; }

# ---- the churn example, locally and on Slurm ----------------------------------------
gen=$(dirname "$MR_BIN")/churn_gen
[ -x "$gen" ] || fail "churn_gen not built next to millrace"
small=(-S data.users=2000 -S data.events_per_user=20)
for w in local slurm; do
    d=$(new_ws "churn-$w")
    mkdir -p "$d/bin" && cp "$SRC/examples/churn/millrace.yaml" "$d/" && cp "$gen" "$d/bin/churn_gen" || fail "setup $w"
done
expect_exit 0 mr -C "$T_ROOT/churn-local" run "${small[@]}"
expect_exit 0 mr -C "$T_ROOT/churn-slurm" run --executor slurm --poll 1 --json "${small[@]}"
assert_eq "$(json 'd["executed"]')" 12 "every stage of the churn example ran as a Slurm job"
assert_eq "$(sacct -n -X -P -o JobName,State | grep -E -c '^millrace-[0-9a-f]{8}-1\|COMPLETED$')" 12 \
    "twelve jobs named after the workspace and run, all COMPLETED in the accounting"
# check measures the predictor's latency and report embeds that: those two differ run to run anywhere
lo=$(lock_outputs "$T_ROOT/churn-local/millrace.lock" | grep -v -E '^(check|report)\.')
so=$(lock_outputs "$T_ROOT/churn-slurm/millrace.lock" | grep -v -E '^(check|report)\.')
assert_eq "$(printf '%s\n' "$lo" | grep -c .)" 15 "the local run's lock lists the 15 outputs of the ten deterministic stages"
assert_eq "$so" "$lo" "every deterministic artifact of the Slurm run equals the local run's, hash for hash"
n_jobs=$(sacct -n -X -P -o JobID | grep -c .)
expect_exit 0 mr -C "$T_ROOT/churn-slurm" run --executor slurm --poll 1 --json "${small[@]}"
assert_eq "$(json 'd["cached"]')" 12 "a second Slurm run is all cache hits"
assert_eq "$(sacct -n -X -P -o JobID | grep -c .)" "$n_jobs" "and submits no job"
jobs_json=$(sqlite3 "$T_ROOT/churn-slurm/.millrace/runs.db" "SELECT count(*), count(DISTINCT job_id), min(nodes), sum(exit_code) FROM stage_jobs WHERE run_id = 1")
assert_eq "$jobs_json" "12|12|localhost|0" "the run store records each stage's job id, node and exit code"
assert_eq "$(sqlite3 "$T_ROOT/churn-slurm/.millrace/runs.db" "SELECT min(max_rss_kb) > 1000 FROM stage_jobs WHERE run_id = 1")" 1 \
    "and each job's peak RSS (the worker's own where accounting sampled none)"
expect_exit 0 mr -C "$T_ROOT/churn-slurm" verify
mr -C "$T_ROOT/churn-slurm" status >/dev/null 2>&1

# ---- a failing stage -----------------------------------------------------------------------
f=$(new_ws failing)
cat >"$f/millrace.yaml" <<'YAML'
stages:
  a: {op: exec, cmd: "echo a > a.txt", outs: [a.txt]}
  b: {op: exec, cmd: "cat a.txt; echo b-is-failing-now; exit 3", deps: [a.txt], outs: [b.txt]}
  c: {op: exec, cmd: "cp b.txt c.txt", deps: [b.txt], outs: [c.txt]}
YAML
expect_exit 1 mr -C "$f" run --executor slurm --poll 1
assert_match "$T_ERR" "b: Slurm job [0-9]+ ended FAILED \(exit code 1" "the failed job is named with its state and exit code"
assert_contains "$T_ERR" "command exited with status 3" "and the stage's own error"
assert_contains "$T_ERR" "| b-is-failing-now" "and the tail of its log"
assert_contains "$T_ERR" "skipped c" "its dependent is skipped"
assert_no_file "$f/.millrace/logs/run-1/c.result.json" "and its job never ran"
cj=$(sqlite3 "$f/.millrace/runs.db" "SELECT status FROM stage_runs WHERE stage = 'c'")
assert_eq "$cj" skipped "the run store records c skipped"

# ---- --detach, then status and runs record the run -------------------------------------------
dd=$(new_ws detach)
cat >"$dd/millrace.yaml" <<'YAML'
stages:
  one: {op: exec, cmd: "sleep 2; echo 1 > one.txt", outs: [one.txt]}
  two: {op: exec, cmd: "cat one.txt > two.txt; echo 2 >> two.txt", deps: [one.txt], outs: [two.txt]}
YAML
expect_exit 0 mr -C "$dd" run --executor slurm --poll 1 --detach --json
assert_eq "$(json 'd["status"] + " " + " ".join(s["status"] for s in d["stages"])')" "submitted submitted submitted" \
    "--detach returns with both stages submitted"
expect_exit 0 mr -C "$dd" runs
assert_match "$T_OUT" "1 +[0-9TZ:-]+ +submitted" "runs shows the run submitted"
detached_done() { mr -C "$dd" status >/dev/null 2>&1; [ "$(sqlite3 "$dd/.millrace/runs.db" "SELECT status FROM runs WHERE id = 1")" = ok ]; }
wait_for "status records the detached run to its end (no runner alive)" 60 detached_done
assert_file_content "$dd/two.txt" "$(printf '1\n2')" "its outputs are in the workspace"
assert_eq "$(sqlite3 "$dd/.millrace/runs.db" "SELECT group_concat(stage || '=' || status, ' ') FROM (SELECT * FROM stage_runs WHERE run_id = 1 ORDER BY id)")" \
    "one=executed two=executed" "and its stages in the run store"
expect_exit 0 mr -C "$dd" run --executor slurm --attach 1
assert_contains "$T_ERR" "run 1: 2 executed" "attach to a finished run reports it"

# ---- Ctrl-C cancels the submitted jobs -----------------------------------------------------------
k=$(new_ws interrupt)
cat >"$k/millrace.yaml" <<'YAML'
stages:
  s1: {op: exec, cmd: "sleep 60; echo > s1.txt", outs: [s1.txt]}
  s2: {op: exec, cmd: "cp s1.txt s2.txt", deps: [s1.txt], outs: [s2.txt]}
  s3: {op: exec, cmd: "sleep 60; echo > s3.txt", outs: [s3.txt]}
YAML
"$MR_BIN" -C "$k" run --executor slurm --poll 1 >"$T_ROOT/int.out" 2>"$T_ROOT/int.err" &
rp=$!
bg_track "$rp"
running() { squeue -h -o %T | grep -q RUNNING; }
wait_for "a job of the run to start" 60 running
ids=$(squeue -h -o %i | sort -n | tr '\n' ',')
assert_eq "$(printf '%s' "$ids" | tr ',' '\n' | grep -c .)" 3 "three jobs in the queue"
assert_match "$(squeue -h -o %j | sort -u)" '^millrace-[0-9a-f]{8}-1$' "all three share one name: the workspace's and the run's"
kill -INT "$rp"
wait "$rp"
assert_eq "$?" 1 "the interrupted run exits 1"
wait_for "every job to leave the queue" 30 queue_empty
three_cancelled() { [ "$(sacct -n -X -P -j "${ids%,}" -o State | grep -c '^CANCELLED')" = 3 ]; }
wait_for "the accounting to show all three jobs CANCELLED by Ctrl-C" 60 three_cancelled
assert_eq "$(sqlite3 "$k/.millrace/runs.db" "SELECT status FROM runs WHERE id = 1")" interrupted "the run is recorded interrupted"

# ---- a job requeued mid-run ----------------------------------------------------------------------------
q=$(new_ws requeue)
cat >"$q/millrace.yaml" <<'YAML'
stages:
  slow: {op: exec, cmd: "echo attempt >> attempts.log; sleep 4; seq 1 5 > slow.txt", outs: [slow.txt]}
  after: {op: exec, cmd: "wc -l < slow.txt > after.txt", deps: [slow.txt], outs: [after.txt]}
YAML
"$MR_BIN" -C "$q" run --executor slurm --poll 1 >"$T_ROOT/rq.out" 2>"$T_ROOT/rq.err" &
rp=$!
bg_track "$rp"
cmd_started() { grep -q attempt "$q/attempts.log" 2>/dev/null; }
wait_for "the slow job's command to start" 60 cmd_started
jid=$(squeue -h -o "%i %T" | awk '$2 == "RUNNING" { print $1; exit }')
expect_exit 0 scontrol requeue "$jid"
wait "$rp"
assert_eq "$?" 0 "the run with a requeued job succeeds"
assert_file_content "$q/after.txt" 5 "with the right result"
assert_eq "$(grep -c attempt "$q/attempts.log")" 2 "the requeued job ran twice"
assert_eq "$(sacct -n -X -P -D -j "$jid" -o State | tr '\n' ' ')" "REQUEUED COMPLETED " "the accounting shows the requeue"

# ---- a job that ends NODE_FAIL is resubmitted, with the jobs after it ------------------------------------
nf=$(new_ws nodefail)
cp "$q/millrace.yaml" "$nf/"
node_fail_run() { # RETRIES [ARG...]: runs the pipeline with Slurm's own requeue off, downs the node under the slow job
    local retries=$1
    shift
    "$MR_BIN" -C "$nf" run --executor slurm --poll 1 --retries "$retries" --slurm-opt=--no-requeue "$@" >"$T_ROOT/nf.out" 2>"$T_ROOT/nf.err" &
    rp=$!
    bg_track "$rp"
    rm -f "$nf/attempts.log"
    nf_started() { grep -q attempt "$nf/attempts.log" 2>/dev/null; }
    wait_for "the slow job's command to start (retries $retries)" 60 nf_started
    jid=$(squeue -h -o "%i %T" | awk '$2 == "RUNNING" { print $1; exit }')
    scontrol update nodename=localhost state=down reason=millrace-test || fail "cannot down the node"
    ended_node_fail() { [ "$(sacct -n -X -P -j "$jid" -o State)" = NODE_FAIL ]; }
    wait_for "its job to end NODE_FAIL" 30 ended_node_fail
    scontrol update nodename=localhost state=resume 2>/dev/null # ReturnToService=2 may have brought it back already
    wait "$rp"
    nf_rc=$?
}
node_fail_run 2
assert_eq "$nf_rc" 0 "a run whose job ended NODE_FAIL succeeds"
assert_contains "$(cat "$T_ROOT/nf.err")" "ended NODE_FAIL; resubmitting (attempt 2)" "the job was resubmitted"
assert_file_content "$nf/after.txt" 5 "the stage after it ran, on the new job's output"
assert_eq "$(sqlite3 "$nf/.millrace/runs.db" "SELECT group_concat(attempt || ':' || state, ' ') FROM (SELECT * FROM stage_jobs WHERE run_id = 1 AND stage = 'slow' ORDER BY rowid)")" \
    "1:NODE_FAIL 2:COMPLETED" "both attempts are recorded"
node_fail_run 0 -f slow
assert_eq "$nf_rc" 1 "with --retries 0 the same failure fails the stage"
assert_match "$(cat "$T_ROOT/nf.err")" "slow: Slurm job [0-9]+ ended NODE_FAIL" "naming the state"

# ---- OUT_OF_MEMORY: again with twice the memory, where the stage allows it --------------------------------
# This cluster enforces no memory limit (no cgroups here), so the accounting is made to say
# OUT_OF_MEMORY for the first job by a sacct wrapper: what is tested is the runner's answer.
o=$(new_ws oom)
cat >"$o/millrace.yaml" <<'YAML'
stages:
  big: {op: exec, cmd: "sleep 3; echo big > big.txt", outs: [big.txt], resources: {mem: 100M, oom_retries: 1}}
YAML
mkdir -p "$T_ROOT/oomwrap"
cat >"$T_ROOT/oomwrap/sacct" <<EOF
#!/bin/sh
id=\$(cat "$T_ROOT/oom.id" 2>/dev/null)
$(command -v sacct) "\$@" | sed "s/^\$id|COMPLETED|/\$id|OUT_OF_MEMORY|/"
EOF
chmod +x "$T_ROOT/oomwrap/sacct"
PATH="$T_ROOT/oomwrap:$PATH" "$MR_BIN" -C "$o" run --executor slurm --poll 1 >"$T_ROOT/oom.out" 2>"$T_ROOT/oom.err" &
rp=$!
bg_track "$rp"
queued() { [ -n "$(squeue -h -o %i)" ]; }
wait_for "the job to be queued" 30 queued
first=$(squeue -h -o %i | head -1)
echo "$first" >"$T_ROOT/oom.id"
wait "$rp"
assert_eq "$?" 0 "a run whose job ended OUT_OF_MEMORY succeeds"
assert_contains "$(cat "$T_ROOT/oom.err")" "OUT_OF_MEMORY; with --mem=200M" "after a resubmission with twice the memory"
assert_eq "$(sqlite3 "$o/.millrace/runs.db" "SELECT group_concat(state || '@' || mem_mb, ' ') FROM (SELECT * FROM stage_jobs WHERE run_id = 1 ORDER BY rowid)")" \
    "OUT_OF_MEMORY@100 COMPLETED@200" "both jobs recorded with the memory they asked for"
second=$(sqlite3 "$o/.millrace/runs.db" "SELECT job_id FROM stage_jobs WHERE run_id = 1 ORDER BY rowid DESC LIMIT 1")
assert_contains "$(scontrol show job "$second")" "MinMemoryNode=200M" "Slurm gave the second job 200M"

# ---- a tune stage's trials as one job array ---------------------------------------------------------------
for w in local slurm; do
    d=$(new_ws "tune-$w")
    tune_data "$d" || fail "tune data"
    cat >"$d/millrace.yaml" <<'YAML'
stages:
  tune:
    op: tune
    resources: {cpus: 2}
    train: train.csv
    valid: valid.csv
    label: label
    params: {objective: binary, num_iterations: 30, metric: auc}
    space:
      learning_rate: {loguniform: [0.01, 0.3]}
      num_leaves: {int: [4, 64]}
      max_depth: {choice: [-1, 4]}
      lambda_l2: {uniform: [0, 10], when: {max_depth: -1}}
    n_trials: 8
    parallel: 2
    sampler: {type: tpe, n_startup_trials: 3}
    pruner: {type: asha, min_resource: 3, reduction_factor: 3}
    seed: 1
YAML
done
expect_exit 0 mr -C "$T_ROOT/tune-local" run
expect_exit 0 mr -C "$T_ROOT/tune-slurm" run --executor slurm --poll 1
assert_match "$T_ERR" "tune: its 8 pieces submitted as Slurm job array [0-9]+ \(2 at once\)" "the 8 trials went out as one job array"
arr=$(printf '%s\n' "$T_ERR" | sed -n 's/.*Slurm job array \([0-9]*\).*/\1/p')
eight_done() { [ "$(sacct -n -X -P -j "$arr" -o JobID,State | grep -c -E "^${arr}_[0-9]+\|COMPLETED$")" = 8 ]; }
wait_for "the accounting to show its eight tasks COMPLETED" 60 eight_done
assert_eq "$(grep -c -E '^trial [0-9]+: .*\(cached\)' "$T_ROOT/tune-slurm/.millrace/logs/run-1/tune.log")" 8 \
    "the stage's own job found all eight trials cached by the array"
for f in best.json trials.json study.json; do
    expect_exit 0 cmp "$T_ROOT/tune-local/out/tune/$f" "$T_ROOT/tune-slurm/out/tune/$f"
done
pass "the study is byte for byte the local one (trial k suggested from trials 0..k-2 in both)"
assert_eq "$(sqlite3 "$T_ROOT/tune-slurm/.millrace/runs.db" "SELECT count(*) FROM stage_cache WHERE stage = 'tune#trial'")" 8 \
    "the runner recorded the trials the tasks cached"
assert_eq "$(sqlite3 "$T_ROOT/tune-slurm/.millrace/runs.db" "SELECT count(*) FROM tune_trials WHERE run_id = 1")" 8 \
    "and the study's eight trials, once each"

# ---- slurmdbd down for a minute -----------------------------------------------------------------------
b=$(new_ws dbd-down)
cat >"$b/millrace.yaml" <<'YAML'
stages:
  x: {op: exec, cmd: "sleep 2; echo x > x.txt", outs: [x.txt]}
  y: {op: exec, cmd: "cp x.txt y.txt", deps: [x.txt], outs: [y.txt]}
YAML
dbd=$(cat "$sl/pids/slurmdbd.pid")
kill "$dbd"
gone() { ! kill -0 "$dbd" 2>/dev/null; }
wait_for "slurmdbd to stop" 30 gone
t0=$(date +%s)
"$MR_BIN" -C "$b" run --executor slurm --poll 1 >"$T_ROOT/dbd.out" 2>"$T_ROOT/dbd.err" &
rp=$!
bg_track "$rp"
sleep 60
expect_exit 0 kill -0 "$rp"
pass "the runner still waits after a minute without accounting"
slurmdbd || fail "slurmdbd did not restart"
for p in "$sl"/pids/slurmdbd.pid; do bg_track "$(cat "$p")"; done
wait "$rp"
assert_eq "$?" 0 "the run succeeds once accounting answers again"
assert_file_content "$b/y.txt" x "with its result"
assert_contains "$(cat "$T_ROOT/dbd.err")" "the job status query failed" "the failed queries were warnings"
assert_not_contains "$(cat "$T_ROOT/dbd.err")" "failed  x" "and failed no stage"
assert_eq "$(($(date +%s) - t0 >= 60))" 1 "(the outage lasted a minute)"

# ---- status queries: one per interval, whatever the number of jobs ------------------------------------
w=$(new_ws wide)
{
    echo "stages:"
    for i in $(seq 1 20); do echo "  s$i: {op: exec, cmd: \"sleep 1; echo $i > o$i.txt\", outs: [o$i.txt]}"; done
} >"$w/millrace.yaml"
mkdir -p "$T_ROOT/wrap"
cat >"$T_ROOT/wrap/sacct" <<EOF
#!/bin/sh
echo "\$(date +%s.%N) \$*" >> "$T_ROOT/sacct.calls"
exec $(command -v sacct) "\$@"
EOF
chmod +x "$T_ROOT/wrap/sacct"
t0=$(date +%s.%N)
PATH="$T_ROOT/wrap:$PATH" expect_exit 0 mr -C "$w" run --executor slurm --poll 2
t1=$(date +%s.%N)
calls=$(grep -c . "$T_ROOT/sacct.calls")
allowed=$(/usr/bin/python3 -c "import math; print(math.floor(($t1 - $t0) / 2) + 1)")
secs=$(/usr/bin/python3 -c "print(round($t1 - $t0))")
assert_eq "$((calls >= 1 && calls <= allowed))" 1 "20 jobs followed with $calls sacct calls in $secs s (at most $allowed at one per 2 s)"
assert_eq "$(awk '{ print NF }' "$T_ROOT/sacct.calls" | sort -u | tr '\n' ' ')" "7 " "each call one query"
first_ids=$(awk 'NR == 1 { print $NF }' "$T_ROOT/sacct.calls" | tr ',' '\n' | grep -c .)
assert_eq "$first_ids" 20 "for all twenty jobs at once"
gaps=$(/usr/bin/python3 -c "
import sys
t = [float(l.split()[0]) for l in open('$T_ROOT/sacct.calls')]
print(min([b - a for a, b in zip(t, t[1:])] or [9]) >= 1.9)")
assert_eq "$gaps" True "never two queries within the interval"
assert_contains "$T_ERR" "$calls job status queries" "the runner reports how many it made"

# ---- a train stage across 2 ranks: its job holds 2 tasks, srun starts the ranks --------------
dw=$(new_ws dist)
/usr/bin/python3 - "$dw" <<'PYEOF2' || fail "data generation"
import random, sys
r = random.Random(5)
with open(sys.argv[1] + "/train.csv", "w") as f:
    f.write("a,b,y\n")
    for i in range(4000):
        a, b = r.gauss(0, 1), r.gauss(0, 1)
        f.write(f"{a:.5f},{b:.5f},{1 if a + 0.5 * b + r.gauss(0, 1) > 0 else 0}\n")
PYEOF2
cat >"$dw/millrace.yaml" <<'EOF'
stages:
  model:
    op: train
    train: train.csv
    label: y
    distributed: {ranks: 2}
    resources: {cpus: 1, mem: 200M}
    params: {objective: binary, num_iterations: 10, bagging_fraction: 0.7, bagging_freq: 1}
EOF
dl=$(new_ws dist_local)
cp "$dw/train.csv" "$dl/"
grep -v distributed "$dw/millrace.yaml" >"$dl/millrace.yaml"
expect_exit 0 mr -C "$dl" run
expect_exit 0 mr -C "$dw" run --executor slurm --poll 1
out_of() { mr -C "$1" show --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stages"][0]["outputs"]["out"])'; }
assert_eq "$(out_of "$dw")" "$(out_of "$dl")" "the stage trained across 2 ranks on Slurm publishes the local model"
job=$(mr -C "$dw" show --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["slurm_jobs"][0]["job_id"])')
ranks_step() { sacct -n -P -o JobID,NTasks -j "$job" | grep -qx "$job.0|2"; }
wait_for "accounting shows the ranks' step" 30 ranks_step
assert_contains "$(sacct -n -P -o JobID,NTasks -j "$job")" "$job.0|2" "srun started the 2 ranks as one step of 2 tasks"
t_done
