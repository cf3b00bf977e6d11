# The features, evaluate, package and report ops check their definitions
# when millrace.yaml is loaded: a mistake exits 2 before any stage runs,
# printed as millrace.yaml:LINE:COL: stage 'X': what was expected, what was
# found, and a hint. An exec stage ahead of the mistake never executes.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws validate_ml)
cd "$ws" || fail "cd"

# spec: writes millrace.yaml: a prep stage (writes data.csv), a train stage
# on it (lines 1-11), then the stages read from stdin (from line 12).
spec() {
    cat >millrace.yaml <<'YAML'
stages:
  prep:
    op: exec
    cmd: "printf 'id,x,plan,y\n1,1,a,0\n2,2,b,1\n3,3,a,0\n4,4,b,1\n' > data.csv"
    outs: [data.csv]
  model:
    op: train
    train: ${stages.prep}
    label: y
    exclude: [plan]
    params: {objective: binary, num_iterations: 2, min_data_in_leaf: 1}
YAML
    cat >>millrace.yaml
}

# refused LINE:COL STAGE MESSAGE HINT WHAT: `millrace run` exits 2 with the
# message at that position (and the hint, unless empty); nothing ran.
refused() {
    expect_exit 2 mr run
    assert_contains "$T_ERR" "millrace.yaml:$1: stage '$2': $3" "$5: the message at its line:col"
    if [ -n "$4" ]; then assert_contains "$T_ERR" "hint: $4" "$5: the hint"; fi
    assert_no_file data.csv "$5: no stage ran"
    assert_eq "$(ls .millrace/logs 2>/dev/null | wc -l)" 0 "$5: no run was started"
}

# ---- package ------------------------------------------------------------------
spec <<'YAML'
  pkg:
    op: package
    model: ${stages.model}
    name: ""
YAML
refused 15:11 pkg "name: expected one line of text, got an empty string" "leave name out to record the stage's name" "an empty bundle name"
spec <<'YAML'
  pkg:
    op: package
    model: ${stages.model}
    name: "churn\nv2"
YAML
refused 15:11 pkg "name: expected one line of text, got a control character (0x0a) at byte 6" "" "a bundle name of two lines"
spec <<'YAML'
  pkg:
    op: package
    model: ${stages.model}
    metrics: ""
YAML
refused 15:14 pkg "metrics: expected a path or \${stages.X}, got an empty string" "" "an empty metrics path"

# ---- report -------------------------------------------------------------------
spec <<'YAML'
  rep:
    op: report
    title: churn
YAML
refused 12:3 rep "a report needs at least one input: evaluate, model, check or tune" "e.g. evaluate: \${stages.eval}" "a report of nothing"
spec <<'YAML'
  rep:
    op: report
    model: ${stages.model}
    title: "churn\tmodel"
YAML
refused 15:12 rep "title: expected one line of text, got a control character (0x09) at byte 6" "leave title out" "a title with a tab"

t_done
