# exec params (${params.x} in cmd, MILLRACE_PARAM_* env, MILLRACE_PARAMS_FILE,
# declared params:), metrics files (JSON and JSON lines) in the run store,
# and compare of two runs.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws params)
cd "$ws" || fail "cd"
mkdir counts
cat >millrace.yaml <<'YAML'
params:
  train:
    lr: 0.1
    rounds: 3
    learning-rate-name: fast
  other: {x: 1}
stages:
  fit:
    op: exec
    cmd:
      - "echo fit >> counts/fit; echo lr=${params.train.lr} > fit.txt"
      - "env | grep '^MILLRACE_' | grep -v -e MILLRACE_RUN_ID -e MILLRACE_PARAMS_FILE | sort > env.txt"
      - "cp \"$MILLRACE_PARAMS_FILE\" params.json"
      - "echo \"{\\\"acc\\\": $MILLRACE_PARAM_TRAIN_LR, \\\"loss\\\": {\\\"val\\\": 0.5, \\\"name\\\": \\\"x\\\"}}\" > metrics.json"
      - "printf '{\"step\": 1, \"loss\": 0.9}\\n{\"step\": 2, \"loss\": 0.7}\\n' > curve.jsonl"
    params: [train.rounds, train.learning-rate-name]
    outs: [fit.txt, env.txt, params.json]
    metrics: [metrics.json, curve.jsonl]
YAML

expect_exit 0 mr run
assert_file_content fit.txt "lr=0.1" "\${params.train.lr} interpolated in cmd"
env_txt=$(cat env.txt)
assert_contains "$env_txt" "MILLRACE_PARAM_TRAIN_LR=0.1" "MILLRACE_PARAM_TRAIN_LR reaches the command"
assert_contains "$env_txt" "MILLRACE_PARAM_TRAIN_ROUNDS=3" "declared param train.rounds reaches the command"
assert_contains "$env_txt" "MILLRACE_PARAM_TRAIN_LEARNING_RATE_NAME=fast" "param env names: non-alphanumerics become _"
assert_not_contains "$env_txt" "MILLRACE_PARAM_OTHER_X" "an undeclared param does not reach the command"
assert_contains "$env_txt" "MILLRACE_STAGE=fit" "MILLRACE_STAGE set"
assert_contains "$env_txt" "MILLRACE_SMOKE=0" "MILLRACE_SMOKE=0 in a full run"
T_OUT=$(cat params.json)
assert_eq "$(json 'd["train"]["lr"]') $(json 'd["train"]["rounds"]') $(json 'd["train"]["learning-rate-name"]')" "0.1 3 fast" "MILLRACE_PARAMS_FILE holds the stage's params as JSON"
assert_eq "$(json '"other" in d')" "false" "MILLRACE_PARAMS_FILE holds only the stage's params"

# Metrics in the run store.
expect_exit 0 mr show --json
metric() { json "[m[\"value\"] for m in d[\"metrics\"] if m[\"stage\"]==\"fit\" and m[\"name\"]==\"$1\" and m[\"step\"]==$2]"; }
assert_eq "$(metric acc 0)" "0.1" "metrics.json: acc recorded"
assert_eq "$(metric loss.val 0)" "0.5" "metrics.json: nested numeric leaf recorded as loss.val"
assert_eq "$(json '[m for m in d["metrics"] if m["name"]=="loss.name"]')" "" "non-numeric leaves are not metrics"
assert_eq "$(metric loss 1) $(metric loss 2)" "0.9 0.7" "curve.jsonl: loss at steps 1 and 2"
assert_eq "$(json '[m for m in d["metrics"] if m["name"]=="step"]')" "" "the step field itself is not a metric"
expect_exit 0 mr show
assert_match "$T_OUT" "fit +acc +0.1 +1\b" "show (text) lists the metric"
run1=$(json 'd["run"]["id"]' 2>/dev/null || true)
expect_exit 0 mr runs --json
run1=$(json 'd["runs"][0]["id"]')

# Undeclared param changes nothing; declared-only param re-runs.
expect_exit 0 mr run -S other.x=2 --json
assert_eq "$(run_statuses)" "fit=cached" "changing an undeclared param keeps the stage cached"
expect_exit 0 mr show --json
assert_eq "$(metric acc 0)" "0.1" "a cached stage's metrics are recorded in the new run too"
expect_exit 0 mr run -S train.rounds=4 --json
assert_eq "$(run_statuses)" "fit=executed" "changing a param listed in params: re-runs the stage"
assert_contains "$(cat env.txt)" "MILLRACE_PARAM_TRAIN_ROUNDS=4" "the override reaches the command"
expect_exit 0 mr status -S train.rounds=5
assert_contains "$T_OUT" "param 'train.rounds' changed: 4 -> 5" "status names a declared-only param change"

# A second run with another lr: compare shows the param change and delta.
expect_exit 0 mr run -S train.lr=0.3 --json
run2=$(json 'd["run_id"]')
assert_eq "$(count counts/fit)" "3" "fit executed 3 times in all"
expect_exit 0 mr compare "$run1" "$run2" --json
assert_eq "$(json '[(p["a"], p["b"]) for p in d["params"] if p["path"]=="train.lr" and p["changed"]]')" "(0.1, 0.3)" "compare --json: train.lr changed 0.1 -> 0.3"
assert_eq "$(json '[p["path"] for p in d["params"] if p["changed"]]')" "train.lr" "compare --json: only train.lr changed"
assert_eq "$(json '[round(m["delta"], 9) for m in d["metrics"] if m["stage"]=="fit" and m["name"]=="acc"]')" "0.2" "compare --json: acc delta 0.2"
assert_eq "$(json '[m["delta"] for m in d["metrics"] if m["name"]=="loss.val"]')" "0.0" "compare --json: unchanged metric delta 0"
expect_exit 0 mr compare "$run1" "$run2"
assert_match "$T_OUT" "train\.lr +0\.1 +0\.3 +\*" "compare (text) marks the changed param"
assert_match "$T_OUT" "fit\.acc +0\.1 +0\.3 +0\.2" "compare (text) shows the metric delta"
expect_exit 2 mr compare "$run1"
assert_contains "$T_ERR" "two runs" "compare with one run is a usage error"

t_done
