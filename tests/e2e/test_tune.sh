#!/usr/bin/env bash
# The tune op: a study over a small synthetic CSV with the built-in train
# objective; raising n_trials from 6 to 10 runs only the 4 new trials; the
# best params flow into a downstream train stage through
# ${stages.tune.best.learning_rate}; `tune show` prints the leaderboard;
# smoke mode runs two tiny trials; a study killed with -9 half-way resumes
# without re-running its finished trials; an exec objective that appends
# per-step metrics is pruned (SIGTERM) as the rules say, and a crashing
# trial is recorded while the study goes on.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws tune)
cd "$ws" || fail "cd"
tune_data . || fail "tune data"
cat >millrace.yaml <<'YAML'
params:
  study: {n_trials: 6}
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
    n_trials: ${params.study.n_trials}
    parallel: 2
    sampler: {type: tpe, n_startup_trials: 3}
    pruner: {type: asha, min_resource: 3, reduction_factor: 3}
    seed: 1
  final:
    op: train
    train: train.csv
    valid: valid.csv
    label: label
    params: {objective: binary, num_iterations: 30, metric: auc, learning_rate: "${stages.tune.best.learning_rate}"}
  report:
    op: report
    model: ${stages.final}
    tune: ${stages.tune}
YAML
study() { python3 -c "import json,sys; print(json.load(open('out/tune/study.json'))[sys.argv[1]])" "$1"; }
# From the run store: whether a trial came from the cache is a fact of the run, not of the artifact.
n_cached() { "$MR_BIN" tune show tune --json | python3 -c "import json,sys; print(json.load(sys.stdin)['n_cached'])"; }

expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 3 "tune, the downstream train and the report run"
tuning=$(python3 - <<'PY'
import re
h = open("out/report/report.html").read()
sec = h[h.index('id="tuning"'):]
sec = sec[:sec.find("<section", 10)] if "<section" in sec[10:] else sec
svgs = re.findall(r"<svg.*?</svg>", sec, re.S)
marks = sum(1 for s in svgs if re.search(r"<(circle|path|rect)", s))
print(len(svgs) >= 3 and marks == len(svgs) and "Leaderboard" in sec)
PY
)
assert_eq "$tuning" True "the report has a tuning section: metric by trial, per-parameter scatters, importances, leaderboard"
assert_eq "$(study n_trials)" 6 "the study ran 6 trials"
assert_eq "$(n_cached)" 0 "none from the cache the first time"
assert_contains "$(cat .millrace/logs/run-1/tune.log)" "study: data binned once for all trials" "the study bins the data once"
assert_eq "$(grep -c "^trial [0-9]*: \(complete\|pruned\) at .*bins from cache" .millrace/logs/run-1/tune.log)" 6 \
    "every trial loads the binned matrices (its params do not change binning)"
assert_file out/tune/best.json "best.json is published"
best_lr=$(python3 -c "import json; print(repr(json.load(open('out/tune/best.json'))['learning_rate']))")
model_lr=$("$MR_BIN" model dump out/final/model.bin | python3 -c "import json,sys; print(repr(float(json.load(sys.stdin)['params']['learning_rate'])))")
assert_eq "$model_lr" "$best_lr" "the downstream train is trained with \${stages.tune.best.learning_rate}, as a number"
first6=$(python3 -c "import json; print(' '.join(t['key'] for t in json.load(open('out/tune/trials.json'))))")

expect_exit 0 mr run --json
assert_eq "$(json 'd["cached"]')" 3 "an unchanged study is one cache hit"

expect_exit 0 mr run --json -S study.n_trials=10
assert_eq "$(study n_trials)" 10 "raising n_trials to 10 extends the study"
assert_eq "$(n_cached)" 6 "the 6 finished trials come from the cache: only 4 new ones run"
assert_eq "$(python3 -c "import json; print(' '.join(t['key'] for t in json.load(open('out/tune/trials.json'))[:6]))")" "$first6" \
    "the first 6 trials of the extended study are the same trials"
n_new=$(grep -c "^trial [0-9]*: \(complete\|pruned\) at" .millrace/logs/run-3/tune.log)
assert_eq "$n_new" 4 "the log shows 4 trials run"

expect_exit 0 mr tune show tune
assert_contains "$T_OUT" "10 trials" "tune show summarises the study"
assert_match "$T_OUT" "^ +1 +[0-9]+ +0\.[0-9]+ complete" "tune show ranks the best complete trial first"
assert_contains "$T_OUT" "parameter importance" "tune show prints importances"
expect_exit 0 mr tune show tune --json
assert_eq "$(json 'd["n_trials"]')" 10 "tune show --json lists every trial"
assert_eq "$(json 'sorted(d["importance"])')" "$(printf 'lambda_l2\nlearning_rate\nmax_depth\nnum_leaves')" "an importance per parameter"
expect_exit 1 mr tune show nosuch
assert_contains "$T_ERR" "no trials recorded" "tune show of an unknown stage is an error"

expect_exit 0 mr run --smoke --json tune
assert_eq "$(study n_trials)" 2 "smoke mode runs two trials"
assert_eq "$(n_cached)" 0 "smoke trials never answer for full ones"

# ---- kill -9 mid-study, then resume ---------------------------------------
ws2=$(new_ws kill)
cp train.csv valid.csv "$ws2/"
cd "$ws2" || fail "cd"
cat >millrace.yaml <<'YAML'
stages:
  tune:
    op: tune
    train: train.csv
    valid: valid.csv
    label: label
    params: {objective: binary, num_iterations: 1000, num_leaves: 64, min_data_in_leaf: 2, metric: auc}
    space:
      learning_rate: {loguniform: [0.01, 0.3]}
      lambda_l2: {uniform: [0, 1]}
    n_trials: 5
    parallel: 1
    seed: 3
YAML
"$MR_BIN" run >run1.out 2>&1 &
runner=$!
bg_track $runner
wait_for "two trials finish before the kill" 120 eval '[ "$(grep -c "^trial [0-9]*: complete" .millrace/logs/run-1/tune.log 2>/dev/null)" -ge 2 ]'
kill -9 $runner
wait $runner 2>/dev/null
wait_for "the trial processes die with the runner" 20 no_process "stage run tune --job $ws2"
done_before=$(grep -c "^trial [0-9]*: complete" .millrace/logs/run-1/tune.log)
expect_exit 0 mr run
cached_after=$(grep -c "^trial [0-9]*: complete (cached)" .millrace/logs/run-2/tune.log)
[ "$cached_after" -ge "$done_before" ] || fail "resume: $done_before trials finished before the kill, only $cached_after from the cache"
pass "the resumed study takes the $done_before trials finished before the kill from the cache ($cached_after)"
assert_eq "$(study n_trials)" 5 "the resumed study completes"
[ "$done_before" -lt 5 ] || fail "the study finished before the kill: make its trials slower"

# ---- an exec objective: pruning by SIGTERM; a crash is recorded ------------
ws3=$(new_ws exec)
cd "$ws3" || fail "cd"
mkdir -p terms
cat >objective.py <<'PY'
import json, math, os, signal, sys, time
trial = os.environ["MILLRACE_TRIAL"]
def on_term(sig, frame):
    open("terms/trial-" + trial, "w").write("SIGTERM\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
x = float(os.environ["MILLRACE_PARAM_X"])
if trial == "3":
    os.kill(os.getpid(), signal.SIGSEGV)
with open(os.environ["MILLRACE_METRICS_FILE"], "a") as f:
    for step in range(1, 21):
        f.write(json.dumps({"step": step, "score": x * (1 - math.exp(-step / 5.0))}) + "\n")
        f.flush()
        time.sleep(0.05)
PY
cat >millrace.yaml <<'YAML'
stages:
  search:
    op: tune
    exec: {cmd: python3 objective.py, metric: score, grace_s: 2}
    deps: [objective.py]
    space: {x: {uniform: [0, 1]}}
    direction: maximize
    sampler: random
    pruner: {type: asha, min_resource: 2, reduction_factor: 2}
    n_trials: 8
    parallel: 1
    seed: 11
YAML
expect_exit 0 mr run
python3 - <<'PY' || fail "exec objective: pruning, SIGTERM and crash rules"
import json, os, math
trials = json.load(open("out/search/trials.json"))
assert len(trials) == 8, len(trials)
assert trials[3]["status"] == "failed" and ("signal 11" in trials[3]["error"] or "status 139" in trials[3]["error"]), trials[3]
xs = []
for t in trials:
    n = t["trial"]
    if n == 3:
        continue
    # ASHA at rungs 2, 4, 8, 16 over the earlier trials that got there.
    hist = [u for u in trials[:n] if u["status"] != "failed"]
    x = t["params"]["x"]
    expect_stop = None
    for r in (2, 4, 8, 16):
        if r > 20: break
        vals = [u["curve"][r - 1] for u in hist if len(u["curve"]) >= r] + [x * (1 - math.exp(-r / 5.0))]
        vals.sort(reverse=True)
        idx = max(0, len(vals) // 2 - 1)
        if x * (1 - math.exp(-r / 5.0)) < vals[idx]:
            expect_stop = r
            break
    if expect_stop is None:
        assert t["status"] == "complete" and t["round"] == 20, t
        assert not os.path.exists("terms/trial-%d" % n), "a complete trial got SIGTERM"
    else:
        assert t["status"] == "pruned" and t["round"] == expect_stop, (n, expect_stop, t)
        assert os.path.exists("terms/trial-%d" % n), "pruned trial %d got no SIGTERM" % n
print("pruned:", sum(t["status"] == "pruned" for t in trials))
assert sum(t["status"] == "pruned" for t in trials) >= 2
PY
pass "exec trials are pruned at the rungs ASHA says, receive SIGTERM, and a crash is recorded"
wait_for "no objective process is left" 10 no_process "objective.py"
t_done
