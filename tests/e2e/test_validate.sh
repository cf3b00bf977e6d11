# Mistakes an op finds in its own definition are reported when
# millrace.yaml is loaded, before any stage runs: exit 2, "millrace.yaml:
# LINE:COL: stage 'x': what was expected, what was found", and a hint; a
# definition without mistakes loads. One section per op. Each case puts the
# mistake after a prep stage whose output must never appear.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws validate)
cd "$ws" || fail "cd"
# Lines 2-5; the stage under test starts at line 6.
prep='  prep:
    op: exec
    cmd: "printf '"'"'x,y\n1,0\n2,1\n'"'"' > data.csv"
    outs: [data.csv]'
# The stage under test: $S when a helper below set it, else stdin.
S=""
spec() {
    if [ -n "$S" ]; then printf 'stages:\n%s\n%s\n' "$prep" "$S"; else { printf 'stages:\n%s\n' "$prep"; cat; }; fi >millrace.yaml
    S=""
}
# refused WHERE STAGE MESSAGE HINT WHAT: `millrace run` refuses the spec.
refused() {
    spec
    expect_exit 2 mr run
    assert_contains "$T_ERR" "millrace.yaml:$1: stage '$2': $3" "$5: the message at millrace.yaml:$1"
    if [ -n "$4" ]; then assert_contains "$T_ERR" "hint: $4" "$5: the hint"; fi
    assert_no_file data.csv "$5: no stage ran"
}
# loads: the spec passes the load (`millrace dag`).
loads() {
    spec
    expect_exit 0 mr dag
}

# ---- exec -------------------------------------------------------------------
refused 9:19 use "'outs' entry \"\${stages.prep}\" names another stage's output: an exec stage's outs are the paths its command writes" \
    "list what the command reads under 'deps:' (deps: [\${stages.prep}]), and the files it writes under 'outs:'" \
    "exec: another stage's output under outs" <<'YAML'
  use:
    op: exec
    cmd: "cat data.csv > u.txt"
    outs: [u.txt, "${stages.prep}"]
YAML
refused 9:14 use "'metrics' entry \"\${stages.prep}/m.json\" names another stage's output" "list what the command reads under 'deps:'" \
    "exec: another stage's output under metrics" <<'YAML'
  use:
    op: exec
    cmd: "true"
    metrics: "${stages.prep}/m.json"
YAML
for verb in status dag params; do
    expect_exit 2 mr $verb
    assert_contains "$T_ERR" "millrace.yaml:9:14: stage 'use': 'metrics' entry" "$verb checks the exec definition at load too"
done
refused 8:10 use "'cmd' is an empty list: the stage would run nothing" "give the command to run, e.g. cmd: python train.py" \
    "exec: an empty command list" <<'YAML'
  use:
    op: exec
    cmd: []
YAML
refused 8:21 use "'cmd' item 2 is an empty command" "give the command to run" "exec: an empty command in the list" <<'YAML'
  use:
    op: exec
    cmd: ["echo a", "  "]
YAML
refused 8:10 use "'cmd' is an empty command: the stage would run nothing" "" "exec: an empty command" <<'YAML'
  use:
    op: exec
    cmd: ""
YAML
refused 9:11 use "env: 'MY-VAR' is not a valid environment variable name" "names are letters, digits and '_', not starting with a digit" \
    "exec: an invalid variable name" <<'YAML'
  use:
    op: exec
    cmd: "true"
    env: {MY-VAR: 1}
YAML
refused 10:14 use "env.FLAGS: expected a string, number or bool, got a list" "an environment variable holds one value: write it as one string" \
    "exec: a list as an environment value" <<'YAML'
  use:
    op: exec
    cmd: "true"
    env:
      FLAGS: [a, b]
YAML
refused 9:19 use "'deps' holds an empty path" "" "exec: an empty path" <<'YAML'
  use:
    op: exec
    cmd: "true"
    deps: [a.txt, ""]
YAML
loads <<'YAML'
  use:
    op: exec
    cmd: ["cat data.csv > u.txt", "echo $N >> u.txt"]
    deps: ["${stages.prep}"]
    outs: [u.txt]
    env: {N: 3, MODE: fast, DEBUG: false}
YAML

# ---- split ------------------------------------------------------------------
refused 9:13 split "split: unknown method 'stratifed' (random, stratified, group, time)" "did you mean 'stratified'?" \
    "split: a method typo" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    method: stratifed
    parts: {train: 0.8, test: 0.2}
YAML
refused 9:13 split "split: method stratified needs a 'label' column" "add 'label: COLUMN'" "split: the key a method needs" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    method: stratified
    parts: {train: 0.8, test: 0.2}
YAML
refused 9:12 split "split: fractions sum to 1.1, not 1" "" "split: fractions that do not sum to 1" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    parts: {train: 0.8, test: 0.3}
YAML
refused 9:29 split "split: fraction of part 'test' must be in (0, 1], got 0" "a part of fraction 0 would be empty: leave it out" \
    "split: an empty part" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    parts: {train: 1, test: 0}
YAML
refused 12:29 split "split: cut-offs must increase (\"2023-06-01\" after \"2024-01-01\")" "" "split: cut-offs out of order" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    method: time
    time: ts
    parts: [train, valid, test]
    cutoffs: ["2024-01-01", "2023-06-01"]
YAML
refused 12:14 split "split: 3 parts need 2 cut-offs, got 1" "" "split: cut-offs = parts - 1" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    method: time
    time: ts
    parts: [train, valid, test]
    cutoffs: ["2024-01-01"]
YAML
refused 10:11 split "split: 'seed' must be a non-negative integer" "" "split: a negative seed" <<'YAML'
  split:
    op: split
    input: ${stages.prep}
    parts: {train: 0.5, test: 0.5}
    seed: -1
YAML

# ---- transform --------------------------------------------------------------
refused 10:17 xf "step 1 (filter): column 10: expected an expression, got end of input" "" \
    "transform: expression syntax" <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    steps:
      - filter: "x > 1 and"
YAML
refused 11:9 xf "step 2: unknown step 'filtr'" "did you mean 'filter'?" "transform: a step kind typo" <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    steps:
      - limit: 10
      - filtr: "x > 1"
YAML
refused 10:33 xf "step 1 (aggregate): 'n': unknown aggregate function 'cnt'" "did you mean 'count'?" \
    "transform: an aggregate function typo" <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    steps:
      - aggregate: {by: [x], n: "cnt(y)"}
YAML
refused 10:19 xf "memory_limit: expected bytes or a size like 2G, got \"2X\"" \
    "a size is a number with K, M or G (binary multiples): 512M, 2G, 1.5G" "transform: a memory limit" <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    steps: [{limit: 5}]
    memory_limit: 2X
YAML
# A value read from another stage's output is checked when it runs; the
# steps around it are checked now, with their own numbers.
refused 12:17 xf "step 3 (select): select needs at least one column" "" "transform: the steps beside a deferred one" <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    steps:
      - limit: 5
      - filter: "x > ${stages.prep.data.csv.x}"
      - select: []
YAML
loads <<'YAML'
  xf:
    op: transform
    input: ${stages.prep}
    memory_limit: 1.5GiB
    steps:
      - filter: "x > ${stages.prep.data.csv.x}"
      - join: {with: "${stages.prep}", on: [x], how: left}
      - derive: {z: "x * 2"}
      - sort: [z desc]
YAML

# ---- ingest -----------------------------------------------------------------
ingest() { S=$(printf '  ing:\n    op: ingest\n    source: ${stages.prep}\n%s' "$1"); }
ingest '    format: parqet'
refused 9:13 ing "unknown format 'parqet' (expected csv, tsv, jsonl, parquet, dataset, webdataset, auto)" \
    "did you mean 'parquet'?" "ingest: a format typo"
ingest '    on_error: skp'
refused 9:15 ing "unknown on_error 'skp' (expected fail, skip, quarantine)" "did you mean 'skip'?" \
    "ingest: an on_error typo"
ingest '    delimiter: ";;"'
refused 9:16 ing "delimiter ';;' must be one character (or \\t), not a quote or line break" \
    'delimiter: ";", delimiter: "|" or delimiter: tab' "ingest: a delimiter"
ingest '    filter: "y >= "'
refused 9:13 ing "filter: column 6: expected an expression, got end of input" "" \
    "ingest: filter syntax"
ingest '    schema: {x: int64, y: integr}'
refused 9:27 ing "schema: column 'y' has unknown type 'integr'" \
    "did you mean 'integer'? types: bool, int64, float64, float32, string, date, timestamp, int8, int16, int32," \
    "ingest: a declared type"
ingest '    codec: lzo'
refused 9:12 ing "unknown codec 'lzo' (expected zstd, snappy, gzip, lz4_raw, none)" "" "ingest: a codec"
ingest '    rows_per_shard: 0'
refused 9:21 ing "rows_per_shard must be positive, got 0" "" "ingest: a shard size"
ingest '    null_values: ["NA", "a,b"]'
refused 9:25 ing "null_values: token \"a,b\" holds the delimiter, so no unquoted field can equal it" \
    "" "ingest: a null token no field can hold"
ingest '    columns: [x, y, x]'
refused 9:21 ing "'columns' lists column 'x' twice" "" "ingest: a column kept twice"
ingest '    columns: [x]
    partition_by: [y]'
refused 10:20 ing "partition column 'y' is not among the columns kept ('columns')" \
    "add 'y' to columns, or partition by a kept column" "ingest: a partition column that is dropped"
ingest '    format: csv
    delimiter: tab
    schema: {x: int, y: float64}
    null_values: ["", "?"]
    filter: "x > 0 and y is not null"
    columns: [x, y]
    partition_by: [x]
    codec: snappy'
loads

# ---- check ------------------------------------------------------------------
check() { S=$(printf '  chk:\n    op: check\n    model: ${stages.prep}\n%s' "$1"); }
check '    inputs: sample'
refused 9:13 chk "inputs must be 'sampled' or 'generated', got 'sample'" "did you mean 'sampled'?" \
    "check: inputs"
check '    rows: 0'
refused 9:11 chk "rows must be in [1, 1000000], got 0" "" "check: rows"
check '    batch_size: -3'
refused 9:17 chk "batch_size must be in [1, 10000000], got -3" "" "check: batch_size"
check '    limits: {latency_p99: 5}'
refused 9:14 chk "limits: unknown key 'latency_p99'" "did you mean 'latency_p99_us'?" \
    "check: a limit's name"
check '    data: data.csv
    limits: {model_size_mb: 0}'
refused 10:29 chk "limits.model_size_mb must be a positive number, got 0" "" "check: a limit's bound"
check '    limits: {latency_p99_us: 10}'
refused 9:14 chk "limits.latency_p99_us needs rows to measure on: give \`data:\`" "" \
    "check: a measurement without data"
check '    gates: ["auc > "]'
refused 9:13 chk "gate 'auc > ': expected NAME OP NUMBER, e.g. \"auc >= 0.85\"" \
    "OP is one of >=, <=, >, <, ==, !=" "check: gate syntax"
check '    metrics: ${stages.prep}
    gates: ["auc >= 0.8", "aucc.lo >= 0.7"]'
refused 10:27 chk "gate 'aucc.lo >= 0.7': no value named 'aucc.lo'" \
    "did you mean 'auc.lo'?" "check: a gate's metric name"
check '    gates: ["model_size_mb <= 5", "slices.min >= 0.1"]'
refused 9:35 chk \
    "gate 'slices.min >= 0.1': 'slices.min' is read from an evaluate stage, and the stage has no \`metrics:\`" \
    "give \`metrics: \${stages.EVAL}\`" "check: a metric gate without metrics"
check '    properties: [{type: consistency}]'
refused 9:17 chk "properties need rows to test: give \`data:\`" "" \
    "check: properties without data"
check '    data: data.csv
    properties: [{type: monotnic, feature: x}]'
refused 10:25 chk "unknown property type 'monotnic'" \
    "did you mean 'monotonic'?" "check: a property type typo"
check '    data: data.csv
    properties: [{type: monotonic}]'
refused 10:18 chk "property monotonic needs a feature" \
    "add \`feature: COLUMN\` (a model feature)" "check: a property's required key"
check '    data: data.csv
    properties: [{type: monotonic, feature: x, direction: upwards}]'
refused 10:59 chk \
    "direction must be increasing/up/1 or decreasing/down/-1, got 'upwards'" "" "check: a direction"
check '    data: data.csv
    properties: [{type: robustness, fraction: 1.5}]'
refused 10:47 chk \
    "property robustness: fraction must be in [0, 1], got 1.5" "" "check: a property's range"
check '    data: data.csv
    metrics: ${stages.prep}
    gates: ["auc.lo >= 0.7", "slice[plan=basic] >= 0.6", "latency_p50_us <= 100", "slices.flagged == 0"]
    limits: {model_size_mb: 5, throughput_rows_s: 1000}
    properties:
      - {type: consistency}
      - {type: directional, feature: x, from: 0, to: 1, fraction: 0.8}'
loads

# ---- tune -------------------------------------------------------------------
tune() { S=$(printf '  tune:\n    op: tune\n    train: ${stages.prep}\n    valid: ${stages.prep}\n    label: y\n%s' "$1"); }
base='    params: {objective: binary, metric: auc, num_iterations: 20}'
tune "$base
    space: {learning_rate: {loguniform: [0.01, 0.3]}, num_leafs: {int: [4, 64]}}"
    refused 12:55 tune "space.num_leafs: unknown gbdt parameter 'num_leafs'" "did you mean 'num_leaves'?" \
        "tune: a space parameter the trainer does not take"
tune "$base
    space: {num_leaves: {uniform: [4.5, 64]}}"
refused 12:35 tune \
    "space.num_leaves: parameter 'num_leaves': expected an integer, got \"34.25\"" "" "tune: a float range for an integer parameter"
tune "$base
    space: {learning_rate: {uniform: [0.05, 0.2]}, metric: {choice: [auc, binary_logloss, rmsee]}}"
refused 12:91 tune "space.metric: parameter 'metric': expected auc, " "did you mean rmse?" "tune: every option of a choice is a value the trainer takes"
tune '    params: {objective: binary, metric: auc, learning_rat: 0.1}
    space: {num_leaves: {int: [4, 64]}}'
refused 11:46 tune "unknown gbdt parameter 'learning_rat'" \
    "did you mean 'learning_rate'?" "tune: a fixed param typo"
tune '    metric: aucc
    params: {objective: binary}
    space: {num_leaves: {int: [4, 64]}}'
refused 11:13 tune "parameter 'metric': expected auc, " "did you mean auc?" \
    "tune: the study's metric is a training metric"
tune "$base
    space: {num_leaves: {int: [4, 64], whne: {}}}"
refused 12:40 tune "space.num_leaves: unknown key 'whne'" \
    "did you mean 'when'?" "tune: the search space"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    sampler: {type: tpe, gama: 0.2}"
refused 13:26 tune "sampler: unknown key 'gama'" "did you mean 'gamma'?" \
    "tune: a sampler option"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    sampler: {gamma: 0}"
refused 13:22 tune "sampler.gamma must be in (0, 1], got 0" "" "tune: a sampler option's range"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    pruner: medain"
refused 13:13 tune "pruner: unknown type 'medain'" "did you mean 'median'?" "tune: a pruner"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    pruner: {type: asha, min_resource: 0}"
refused 13:40 tune "pruner.min_resource must be >= 1, got 0" "" \
    "tune: a pruner option"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    direction: maximise"
refused 13:16 tune "direction: expected maximize or minimize, got 'maximise'" \
    "did you mean 'maximize'?" "tune: the direction"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    n_trials: 0"
refused 13:15 tune "n_trials must be >= 1, got 0" "" "tune: n_trials"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    parallel: 0"
refused 13:15 tune "parallel must be >= 1, got 0" "" "tune: parallel"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    timeout_s: -5"
refused 13:16 tune "timeout_s must be >= 0, got -5" "" "tune: timeout_s"
tune "$base
    space: {num_leaves: {int: [4, 64]}}
    model: forest"
refused 13:12 tune "unknown model 'forest' (expected gbdt or linear)" "" "tune: the model kind"
S=$(printf '  tune:\n    op: tune\n    train: ${stages.prep}\n    label: y\n%s\n    space: {num_leaves: {int: [4, 64]}}' "$base")
    refused 6:3 tune "the train objective needs train, valid and label (missing: valid)" \
    "or give an exec: {cmd, metrics} objective" "tune: the built-in objective's keys"
exec_tune() { S=$(printf '  tune:\n    op: tune\n    space: {x: {uniform: [0, 1]}}\n%s' "$1"); }
exec_tune '    exec: {cmd: python3 objective.py, metric: score, grace: 2}'
refused 9:54 tune "exec: unknown key 'grace'" \
    "did you mean 'grace_s'?" "tune: the exec objective's keys"
exec_tune "    exec: {cmd: '', metric: score}"
refused 9:17 tune "exec: needs cmd (a command string), got an empty string" \
    "exec: {cmd: python objective.py, metric: score}" "tune: the exec objective's command"
exec_tune '    exec: {cmd: run, metric: score, env: {1X: a}}'
refused 9:43 tune \
    "exec.env: '1X' is not a valid environment variable name" "" "tune: the exec objective's env"
exec_tune '    exec: {cmd: run}'
refused 6:3 tune "say which validation metric the study optimises" \
    "add \`metric: auc\` (or set params.metric)" "tune: the metric"
tune "$base
    space:
      learning_rate: {loguniform: [0.01, 0.3]}
      num_leaves: {int: [4, 64]}
      max_depth: {choice: [-1, 4]}
      lambda_l2: {uniform: [0, 10], when: {max_depth: -1}}
    sampler: {type: tpe, n_startup_trials: 3}
    pruner: {type: asha, min_resource: 3, reduction_factor: 3}
    n_trials: 4
    parallel: 2
    timeout_s: 0"
loads
# Parameters the trainer needs together: the space may give the fixed params' companions.
tune '    params: {objective: multiclass, metric: multi_logloss}
    space: {num_class: {choice: [3, 4]}, learning_rate: {uniform: [0.05, 0.2]}}'
loads
exec_tune '    exec: {cmd: python3 objective.py, metric: score, grace_s: 2, env: {MODE: fast}}
    direction: maximize
    sampler: random'
loads

assert_eq "$(ls .millrace/logs 2>/dev/null | wc -l)" 0 "no run was ever started"
t_done
