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

# ---- features -----------------------------------------------------------------
features() { # STEPS [EXTRA KEYS]: a features stage on prep (steps from line 18)
    spec <<YAML
  fx:
    op: features
    fit: \${stages.prep}
    label: y
$2
    steps:
$1
YAML
}

features "      - standardise: {columns: [x]}" "    keep: [id]"
for verb in run status dag params; do
    expect_exit 2 mr $verb
    assert_contains "$T_ERR" "millrace.yaml:18:9: stage 'fx': features: unknown step 'standardise'" "$verb: an unknown step at its line:col"
    assert_contains "$T_ERR" "hint: did you mean 'standardize'?" "$verb: the step's did-you-mean"
done
assert_no_file data.csv "an unknown step runs no stage"

features "      - onehot: {columns: [plan], othre: true}" "    keep: [id]"
refused 18:35 fx "features: onehot: unknown key 'othre'" "did you mean 'other'?" "an unknown key of a step"

features "      - onehot: {columns: [plan], top_k: -1}" "    keep: [id]"
refused 18:42 fx "features: onehot: 'top_k' must be an integer in 0..1048576, got \"-1\"" "" "an encoding's option out of range"

features "      - standardize: {columns: numerc}" "    keep: [id]"
refused 18:32 fx "features: standardize: 'columns' is a list of names or one of numeric, categorical, all; got 'numerc'" \
    "did you mean 'numeric'?" "a columns selector typo"

features "      - clip: {columns: [x], lo: 3, hi: 1}" "    keep: [id]"
refused 18:41 fx "features: clip: needs lo <= hi, got lo 3 and hi 1" "" "clip bounds the wrong way round"

features "      - impute: {columns: [x], strategy: median, value: 0}" "    keep: [id]"
refused 18:57 fx "features: impute: 'value' needs strategy constant, got strategy median" "" "an option of another strategy"

# keep: a kept id named by a step that would make a feature of its name
features "      - onehot: {columns: [plan]}
      - standardize: {columns: [x, id]}" "    keep: [id]"
refused 19:36 fx "features: standardize: column 'id' is under keep (copied unchanged, under its own name, into every output), so it cannot also be a feature of that name" \
    "to keep 'id' as an id only, take it out of this step's columns; to use it as a feature, take it out of keep" \
    "a kept column a step would make a feature of its name"
features "      - ordinal: {columns: [plan]}" "    keep: [id, plan]"
refused 18:29 fx "features: ordinal: column 'plan' is under keep" "to keep 'plan' as an id only, take it out of this step's columns" "a kept column ordinal would encode under its name"
features "      - onehot: {columns: [plan]}" "    keep: [id, id]"
refused 16:16 fx "features: keep: column 'id' is listed twice" "" "a column kept twice"

# apply: part names are output names, values data
features "      - onehot: {columns: [plan]}" "    keep: [id]
    apply: {train: \"\${stages.prep}\"}"
refused 17:13 fx "apply: part name 'train' is taken: every features stage has the outputs transform and train" \
    "name the part otherwise" "an apply part named like a fixed output"
features "      - onehot: {columns: [plan]}" "    keep: [id]
    apply: {\"a/b\": \"\${stages.prep}\"}"
refused 17:13 fx "apply: part name 'a/b' is not an output name" "a part name names an output (out/STAGE/NAME, \${stages.STAGE.NAME}): letters, digits, '_' and '-'" "an apply part name that is no output name"
features "      - onehot: {columns: [plan]}" "    keep: [id]
    apply:
      test: {path: data.csv}"
refused 18:13 fx "apply.test: expected a data path or \${stages.X}, got a mapping" "" "an apply value that is no data"

# label: a column name
spec <<'YAML'
  fx:
    op: features
    fit: ${stages.prep}
    label: ""
    steps: [{onehot: {columns: [plan]}}]
YAML
refused 15:12 fx "label: expected a column name, got an empty string" "" "an empty label"

# ---- evaluate -----------------------------------------------------------------
evaluate() { # EXTRA KEYS (from line 16)
    spec <<YAML
  eval:
    op: evaluate
    model: \${stages.model}
    data: \${stages.prep}
$1
    label: y
YAML
}

evaluate "    tier: fulll"
for verb in run status dag params; do
    expect_exit 2 mr $verb
    assert_contains "$T_ERR" "millrace.yaml:16:11: stage 'eval': tier: expected fast or full, got \"fulll\"" "$verb: an unknown tier at its line:col"
    assert_contains "$T_ERR" "hint: did you mean 'full'?" "$verb: the tier's did-you-mean"
done
assert_no_file data.csv "an unknown tier runs no stage"

evaluate "    bootstrap: {n: 500000, seed: 1}"
refused 16:20 eval "bootstrap.n: expected an integer in [0, 100000], got \"500000\"" "" "bootstrap resamples out of range"
evaluate "    bootstrap: {n: 20.5}"
refused 16:20 eval "bootstrap.n: expected an integer in [0, 100000], got \"20.5\"" "" "a fractional resample count"
evaluate "    bootstrap: {alpha: 1.5}"
refused 16:24 eval "bootstrap.alpha: expected a finite number in (0, 1), got \"1.5\"" "" "alpha out of range"
evaluate "    bootstrap: {nn: 100}"
refused 16:17 eval "bootstrap: unknown key 'nn'" "did you mean 'n'?" "an unknown bootstrap key"
evaluate "    slices: {categorical: [plan], metric: acu}"
refused 16:43 eval "slices.metric: unknown metric 'acu'" "did you mean 'auc'?" "an unknown slice metric"
evaluate "    slices: {metric: zzzzzz}"
refused 16:22 eval "slices.metric: unknown metric 'zzzzzz'" \
    "expected one of: auc, ap, roc_auc, average_precision, logloss, brier, accuracy, precision, recall, f1, macro_f1, micro_f1, rmse, mae, r2, mape" \
    "a slice metric far from any: the hint lists them"
evaluate "    tier: quick"
refused 16:11 eval "tier: expected fast or full, got \"quick\"" "expected one of: fast, full" "a tier far from both"
evaluate "    slices: {numeric: [x], buckets: 0}"
refused 16:37 eval "slices.buckets: expected an integer in [1, 100], got \"0\"" "" "slice buckets out of range"
evaluate "    slices: {numeric: [x], min_rows: -3}"
refused 16:38 eval "slices.min_rows: expected an integer >= 0, got \"-3\"" "" "a negative slice size"
evaluate "    slices: {categorical: [plan, 3]}"
refused 16:34 eval "slices.categorical: expected a column name, got \"3\"" "" "a slice column that is no name"
evaluate "    slices: {categorical: {plan: 1}}"
refused 16:27 eval "slices.categorical: expected a column name or a list of them, got a mapping" "" "slice columns that are no list"
evaluate "    threshold: 1.5"
refused 16:16 eval "threshold: expected a finite number in [0, 1], got \"1.5\"" "" "a threshold out of [0, 1]"
evaluate "    top_k_wrong: 20000"
refused 16:18 eval "top_k_wrong: expected an integer in [0, 10000], got \"20000\"" "" "too many error rows"
evaluate "    sample_size: 0"
refused 16:18 eval "sample_size: expected an integer >= 1, got \"0\"" "" "an empty fast-tier sample"
evaluate "    prefix: \"test set\""
refused 16:13 eval "prefix: expected a metric-name prefix (letters, digits, '_', '-', '.'), got \"test set\"" \
    "metrics are recorded as PREFIX.auc" "a prefix that makes no metric name"
evaluate "    raw: \${stages.prep}"
refused 16:10 eval "raw: '\${stages.prep}' is the data itself; raw is the same rows before the features stage" \
    "give the input of the features stage that made data" "raw naming the data itself"

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

# ---- the same stages, written right, run ---------------------------------------
spec <<'YAML'
  fx:
    op: features
    fit: ${stages.prep}
    apply: {again: "${stages.prep}"}
    label: y
    keep: [id]
    steps:
      - standardize: {columns: [x]}
      - onehot: {columns: [plan]}
  eval:
    op: evaluate
    model: ${stages.model}
    data: ${stages.prep}
    label: y
    tier: full
    bootstrap: {n: 1e1, alpha: 0.1, seed: 1}
    slices: {categorical: [plan], metric: ap, buckets: 2, min_rows: 0}
    threshold: 0.5
  pkg: {op: package, model: "${stages.model}", name: churn}
  rep: {op: report, model: "${stages.model}", evaluate: "${stages.eval}", title: churn model}
YAML
expect_exit 0 mr run
assert_file out/fx/again/manifest.json "features: an apply part runs"
assert_file out/pkg/model.mrb "package runs"
assert_file out/rep/report.html "report runs"
T_OUT=$(cat out/eval/metrics.json)
assert_eq "$(json 'd["bootstrap"]["n"]')" 10 "evaluate: a whole float (1e1) is an integer setting"
T_OUT=$(cat out/eval/slices.json)
assert_eq "$(json 'd["metric"]')" average_precision "evaluate: slices.metric ap is average precision"

t_done
