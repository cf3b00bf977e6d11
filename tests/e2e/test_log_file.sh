#!/usr/bin/env bash
# An exec stage's commands log metrics while they run by appending JSON lines to
# $MILLRACE_LOG_FILE (what millrace.log_metric does): each metric is recorded at its step,
# a numeric param as params.NAME, another in the stage log; a line that is neither fails
# the stage, naming the file and the line.
. "$(dirname "$0")/lib.sh" "$@"
ws=$(new_ws logfile)
cd "$ws" || fail "cd"
cat >curve.sh <<'S'
for i in 0 1 2; do printf '{"metric": "loss", "value": 0.%d, "step": %d}\n' $((9 - i)) $i >>"$MILLRACE_LOG_FILE"; done
S
cat >params.sh <<'S'
printf '{"param": "lr", "value": 0.25}\n{"param": "opt", "value": "sgd"}\n' >>"$MILLRACE_LOG_FILE"
S
printf 'printf %s >>"$MILLRACE_LOG_FILE"\n' "'{\"metric\": \"loss\", \"value\": 1, \"step\": 0}\\nnot json\\n'" >bad.sh
cat >millrace.yaml <<'Y'
stages:
  fit:
    op: exec
    cmd: [sh curve.sh, sh params.sh]
Y
expect_exit 0 mr run
expect_exit 0 mr show 1 --json
assert_eq "$(json '" ".join("%d:%s" % (m["step"], m["value"]) for m in d["metrics"] if m["name"] == "loss")')" "0:0.9 1:0.8 2:0.7" \
    "the logged curve, step by step, from two commands"
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"] == "params.lr"]')" "0.25" "a numeric param as params.lr"
assert_contains "$(cat .millrace/logs/run-1/fit.log)" 'param opt = "sgd"' "another param in the stage log"
cat >millrace.yaml <<'Y'
stages:
  fit:
    op: exec
    cmd: sh bad.sh
Y
expect_exit 1 mr run
assert_contains "$(cat .millrace/logs/run-2/fit.log)$T_ERR" "logged.jsonl:2" "a bad record fails the stage, naming its line"
t_done
