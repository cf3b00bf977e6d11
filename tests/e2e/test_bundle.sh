#!/usr/bin/env bash
# Bundles: the package op writes out/<stage>/model.mrb with schema, features,
# model, compiled predictor, metrics and lineage; bundle inspect/verify;
# `millrace predict` equals `millrace model predict` on the transformed rows
# bit for bit (CSV and Parquet in/out, ids passed through); invalid rows are
# reported with row numbers and fail the run or go to quarantine; corrupt,
# truncated and wrong-version bundles are refused naming the section; in a
# pipeline, `features: ${stages.features}` packages the features stage's
# fitted transform (as ${stages.features.transform} does).
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ws=$(new_ws bundle)
cd "$ws" || fail "cd"
. "$E2E_DIR/bundle_fixture.sh"
expect_exit 0 mr run --json
assert_file out/pkg/model.mrb "the package op publishes out/pkg/model.mrb"
expect_exit 0 mr bundle verify out/pkg/model.mrb
assert_contains "$T_OUT" "5 sections verified" "verify checks all five sections"
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
assert_eq "$(json '[i["name"] for i in d["inputs"]]' | tr '\n' ' ')" "x1 x2 plan n " "input schema: the raw columns (id dropped)"
assert_eq "$(json '[s["name"] for s in d["sections"]]' | tr '\n' ' ')" "manifest features model compiled metrics " "sections in order"
assert_eq "$(json 'd["metrics"]["auc"]')" 0.81 "metrics snapshot"
assert_eq "$(json 'd["lineage"]["run_id"]')" null "lineage: no run id (the bundle holds what its key describes)"
assert_eq "$(json 'd["lineage"]["stage"]')" pkg "lineage: stage"
assert_match "$(json 'd["lineage"]["stage_key"]')" '^[0-9a-f]{32}$' "lineage: stage key"
assert_match "$(json '[a["id"] for a in d["lineage"]["artifacts"]]' | head -1)" '^[0-9a-f]{32}' "lineage: input artifact ids"
expect_exit 0 mr bundle inspect out/pkg/model.mrb
assert_contains "$T_OUT" "compiled" "inspect lists the compiled predictor section"

# predict == model predict on the transformed rows, bit for bit
"$TOOLS/mr_feattool" apply feat.mrft test.csv >test_x.csv || fail "apply"
expect_exit 0 mr model predict gb.bin test_x.csv -o ref.csv
expect_exit 0 mr predict out/pkg/model.mrb test.csv -o pred.csv --id id -j 2
assert_eq "$(cut -d, -f2 pred.csv | tail -n +2 | md5sum)" "$(tail -n +2 ref.csv | md5sum)" "predict == features apply + model predict, bit for bit"
assert_eq "$(head -1 pred.csv)" "id,prediction" "ids pass through"
expect_exit 0 mr predict out/pkg/model.mrb test.csv -o pred1.csv --id id -j 1 --batch-rows 97
assert_eq "$(md5sum <pred1.csv)" "$(md5sum <pred.csv)" "thread count and batch size never change the output"
# Parquet out, then Parquet in (the scores file has no inputs: a schema error naming one)
expect_exit 0 mr predict out/pkg/model.mrb test.csv -o pred.parquet --id id
"$TOOLS/mr_pqtool" dump pred.parquet >pq.csv || fail "dump"
assert_eq "$(tail -n +2 pq.csv | md5sum)" "$(tail -n +2 pred.csv | md5sum)" "Parquet output holds the same values"
expect_exit 1 mr predict out/pkg/model.mrb pred.parquet -o x.csv
assert_contains "$T_ERR" "input column 'x1' is missing" "Parquet input is checked against the schema"
expect_exit 0 mr predict out/pkg/model.mrb test.csv -o pred_j.csv --json
assert_eq "$(json 'd["scored"]')" 800 "--json summary"

# invalid rows: fail with the row number, or quarantine
cp test.csv bad.csv
sed -i '11s/^\([0-9]*\),[^,]*,/\1,oops,/' bad.csv
sed -i '21s/^\([0-9]*\),\([^,]*\),[^,]*,/\1,\2,1e,/' bad.csv
sed -i '31s/^\([0-9]*\),[^,]*,/\1,"a,""b",/' bad.csv
expect_exit 1 mr predict out/pkg/model.mrb bad.csv -o bad_pred.csv
assert_contains "$T_ERR" "row 10: column 'x1': expected a number, got \"oops\"" "the first bad row is named"
assert_no_file bad_pred.csv "no partial output after a failure"
expect_exit 0 mr predict out/pkg/model.mrb bad.csv -o bad_pred.csv --on-error quarantine --quarantine q.csv --id id
assert_contains "$T_ERR" "3 invalid rows quarantined" "quarantined rows are counted, never silent"
assert_eq "$(tail -n +2 q.csv | cut -d, -f1,2 | tr '\n' ' ')" '10,x1 20,x2 30,x1 ' "the quarantine file names row and column, in row order"
assert_eq "$(/usr/bin/python3 -c 'import csv; print(list(csv.reader(open("q.csv")))[3][2])')" 'a,"b' \
    "a quarantined value holding a comma and a quote reads back as it was"
assert_eq "$(tail -n +2 bad_pred.csv | wc -l)" 797 "the other rows are scored"

# a missing required column fails the run (exit 1, as any input it cannot use), naming it
cut -d, -f1,2,4,5 test.csv >nox2.csv
expect_exit 1 mr predict out/pkg/model.mrb nox2.csv -o x.csv
assert_contains "$T_ERR" "'x2'" "a missing input is named"

# corrupt / truncated / wrong version
cp out/pkg/model.mrb c.mrb
chmod u+w c.mrb
off=$(mr bundle inspect out/pkg/model.mrb --json | python3 -c 'import json,sys; d=json.load(sys.stdin); s=[s for s in d["sections"] if s["name"]=="model"][0]; print(s["offset"]+s["length"]//2)')
printf 'X' | dd of=c.mrb bs=1 seek="$off" conv=notrunc 2>/dev/null
expect_exit 1 mr bundle verify c.mrb
assert_contains "$T_ERR" "section 'model': checksum mismatch" "a corrupt model section is named"
expect_exit 1 mr predict c.mrb test.csv -o x.csv
assert_contains "$T_ERR" "section 'model'" "predict refuses a corrupt bundle"
head -c "$off" out/pkg/model.mrb >t.mrb
expect_exit 1 mr bundle verify t.mrb
assert_contains "$T_ERR" "truncated" "a truncated bundle is refused"
cp out/pkg/model.mrb v.mrb
chmod u+w v.mrb
printf '\x00' | dd of=v.mrb bs=1 seek=8 conv=notrunc 2>/dev/null
expect_exit 1 mr bundle verify v.mrb
assert_contains "$T_ERR" "unsupported bundle format version 0" "an older format version is refused clearly"
# The package op given a whole features stage (${stages.features}, which
# reads as all of its outputs) takes the output holding the fitted transform.
pw=$(new_ws pipeline)
cp train.csv "$pw/" && cd "$pw" || fail "cd"
pkg_pipeline() { # FEATURES-VALUE
    cat >millrace.yaml <<Y
stages:
  data: {op: ingest, source: train.csv}
  split: {op: split, input: "\${stages.data}", method: random, parts: {train: 0.8, test: 0.2}}
  features:
    op: features
    fit: \${stages.split.train}
    apply: {test: "\${stages.split.test}"}
    label: label
    keep: [id]
    steps:
      - impute: {columns: [x1], strategy: median}
      - onehot: {columns: [plan]}
  model:
    op: train
    train: \${stages.features.train}
    label: label
    exclude: [id]
    params: {objective: binary, num_iterations: 10}
  pkg: {op: package, model: "\${stages.model}", features: "$1"}
Y
}
pkg_pipeline '${stages.features}'
expect_exit 0 mr run
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
fsec() { json '[s["xxh3_128"] for s in d["sections"] if s["name"] == "features"][0]'; }
whole=$(fsec)
assert_match "$whole" '^[0-9a-f]{32}$' "the bundle has a features section"
assert_eq "$(json '[i["name"] for i in d["inputs"]]' | tr '\n' ' ')" "x1 x2 plan n " "\${stages.features}: the bundle holds the stage's transform"
pkg_pipeline '${stages.features.transform}'
expect_exit 0 mr run
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
assert_eq "$(fsec)" "$whole" "\${stages.features} and \${stages.features.transform} package the same transform"
pkg_pipeline '${stages.split}'
expect_exit 1 mr run
assert_contains "$T_OUT$T_ERR" "holds a fitted features transform" "a stage without a transform is refused"
assert_contains "$T_OUT$T_ERR" "hint: give the features stage" "... saying what to give"

# The commit a bundle records is in the package stage's key: a new commit
# re-packages (and only that), and the bundle names the commit it was made at.
pkg_pipeline '${stages.features}'
git init -q . && git config user.email t@t && git config user.name t || fail "git init"
printf 'out/\n.millrace/\n' >.gitignore
git add -A >/dev/null && git commit -qm one || fail "git commit"
expect_exit 0 mr run --json
c1=$(git rev-parse HEAD)
assert_eq "$(json '[s["status"] for s in d["stages"] if s["stage"] == "pkg"][0]')" executed "in a git checkout the package stage runs"
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
assert_eq "$(json 'd["lineage"]["git_commit"]')" "$c1" "the bundle records the commit"
echo note >NOTES && git add NOTES && git commit -qm two || fail "git commit"
expect_exit 0 mr run --json
assert_eq "$(json '" ".join(s["stage"] for s in d["stages"] if s["status"] == "executed")')" pkg "a new commit re-packages, nothing else"
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
assert_eq "$(json 'd["lineage"]["git_commit"]')" "$(git rev-parse HEAD)" "and the new bundle names the new commit"
echo dirty >>NOTES
expect_exit 0 mr run --json
expect_exit 0 mr bundle inspect out/pkg/model.mrb --json
assert_eq "$(json 'd["lineage"]["git_commit"]')" "$(git rev-parse HEAD)-dirty" "a dirty tree is recorded as such"
t_done
