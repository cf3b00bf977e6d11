#!/usr/bin/env bash
# An exec stage's `loaders:` (issue 13: loader options in the spec): each is checked when the spec
# loads by the parser the Python package's Loader uses, so a bad option fails before anything runs,
# naming millrace.yaml's line and column; the command gets them as $MILLRACE_LOADERS_FILE with
# ${stages.X} resolved to the dataset's path and ${params.X} to its typed value; they are part of
# the stage's key (a changed option re-runs the stage, nothing else does).
. "$(dirname "$0")/lib.sh" "$@"
ws=$(new_ws loaders)
cd "$ws" || fail "cd"
printf 'id,path,x\n' >rows.csv
for i in $(seq 1 40); do printf '%d,p%d,%d.5\n' "$i" "$i" "$i" >>rows.csv; done
mkdir -p local && cp rows.csv local/
expect_exit 0 mr data ingest local/rows.csv local/ds

spec() { # LOADER-OPTIONS (indented under the loader): the pipeline, with one loader "train"
    cat >millrace.yaml <<Y
params:
  bs: 8
stages:
  pack: {op: ingest, source: rows.csv}
  fit:
    op: exec
    cmd: cp "\$MILLRACE_LOADERS_FILE" loaders.json
    outs: [loaders.json]
    loaders:
      train:
$1
Y
}

spec '        dataset: ${stages.pack}
        batch_size: ${params.bs}
        shuffle: true
        seed: 3
        columns: [id, x]'
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "pack=executed fit=executed" "both stages run"
assert_eq "$(python3 -c 'import json; d = json.load(open("loaders.json"))["train"]; print(d["batch_size"], d["shuffle"], d["columns"], d["dataset"].startswith("${"))')" \
    "8 True ['id', 'x'] False" "the command reads the options: params typed, the dataset a path"
ds=$(python3 -c 'import json; print(json.load(open("loaders.json"))["train"]["dataset"])')
assert_file "$ds/manifest.json" "the dataset path names pack's output"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "pack=cached fit=cached" "unchanged: cache hits"
expect_exit 0 mr run --json -S bs=16
assert_eq "$(run_statuses)" "pack=cached fit=executed" "a param the loader interpolates re-runs the stage"
spec '        dataset: ${stages.pack}
        batch_size: ${params.bs}
        shuffle: true
        seed: 4
        columns: [id, x]'
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "pack=cached fit=executed" "a changed loader option re-runs the stage"

# Bad options fail when the spec loads, with the position of the key or value.
spec '        dataset: ${stages.pack}
        batch_sise: 8'
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:12:9: " "an unknown option: its line and column"
assert_contains "$T_ERR" "unknown loader option 'batch_sise'" "an unknown option is named"
assert_contains "$T_ERR" "did you mean 'batch_size'?" "with the option meant"
spec '        dataset: ${stages.pack}
        decode: image
        resize: [28]'
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:13:17: " "a bad size: the value's position"
assert_contains "$T_ERR" "loader option 'resize': expected a size: an integer or [height, width]" "what a size is"
spec '        dataset: ${stages.pack}
        decode: image
        resize: 28
        normalize: {mean: [0.5, 0.5, 0.5], std: [0.2, 0.2, 0.2]}'
expect_exit 2 mr run
assert_contains "$T_ERR" "'normalize' goes with output: float32" "normalize needs float32 output"
spec '        dataset: ${stages.pack}
        resize: 28'
expect_exit 2 mr run
assert_contains "$T_ERR" "need decode: {column: ...}" "geometry without decode"
spec '        dataset: ${stages.pack}
        decode: {column: image, format: gif}
        resize: 28'
expect_exit 2 mr run
assert_contains "$T_ERR" "expected one of auto, jpeg or png, got \"gif\"" "an unknown image format"
spec '        dataset: ${stages.pack}
        decode: image
        random_resized_crop: {size: 224, scale: [0.9, 0.1]}'
expect_exit 2 mr run
assert_contains "$T_ERR" "scale" "a random_resized_crop scale out of order is refused"
spec '        dataset: ${stages.pack}
        rank: 2
        world_size: 2'
expect_exit 2 mr run
assert_contains "$T_ERR" "rank 2 is not below world_size 2" "a rank outside the world"
spec '        dataset: ${stages.pack}
        shapes: {x: [[3, 0], float32]}'
expect_exit 2 mr run
assert_contains "$T_ERR" "loader option 'shapes': expected positive dimensions" "a zero dimension in shapes"
spec '        batch_size: 8'
expect_exit 2 mr run
assert_contains "$T_ERR" "loader 'train' has no dataset" "a loader needs its dataset"
spec '        dataset: local/ds'
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:11:18: stage 'fit': loader 'train' reads dataset 'local/ds', which is not among the stage's deps" \
    "a dataset path outside deps is refused: it would not be in the key"

# A dataset path listed under deps: a change to it re-runs the stage.
cat >millrace.yaml <<'Y'
stages:
  fit:
    op: exec
    cmd: cp "$MILLRACE_LOADERS_FILE" loaders.json
    deps: [./local/ds/]
    outs: [loaders.json]
    loaders:
      train: {dataset: local/ds, batch_size: 4}
Y
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "fit=executed" "a loader over a dep path runs"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "fit=cached" "then is cached"
cat >millrace.yaml <<'Y'
stages:
  fit:
    op: exec
    cmd: cp "$MILLRACE_LOADERS_FILE" loaders.json
    deps: [local]
    outs: [loaders.json]
    loaders:
      train: {dataset: ./local/ds, batch_size: 4}
Y
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "fit=executed" "a dep folder above the dataset covers it"
printf '41,p41,41.5\n' >>local/rows.csv
rm -rf local/ds && expect_exit 0 mr data ingest local/rows.csv local/ds
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "fit=executed" "a changed dataset re-runs the stage"
t_done
