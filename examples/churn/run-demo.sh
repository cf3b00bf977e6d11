#!/usr/bin/env bash
# make demo: runs examples/churn end to end in a scratch copy, then shows the
# iteration loop: a learning-rate change re-runs training and evaluation,
# never the data preparation.
set -euo pipefail
MILLRACE=${1:?usage: run-demo.sh /path/to/millrace}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${MILLRACE_DEMO_DIR:-$(dirname "$MILLRACE")/demo-churn}
GEN=${MILLRACE_CHURN_GEN:-$(dirname "$MILLRACE")/churn_gen}
[ -x "$GEN" ] || { echo "run-demo.sh: no churn_gen next to $MILLRACE (build the churn_gen target)" >&2; exit 2; }
rm -rf "$WORK"
mkdir -p "$WORK/bin"
cp "$HERE/millrace.yaml" "$WORK/"
cp "$GEN" "$WORK/bin/churn_gen"
cd "$WORK"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
n_stages=$("$MILLRACE" dag --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["stages"]))')

step "millrace dag"
"$MILLRACE" dag
step "millrace run   (first run: every stage executes)"
"$MILLRACE" run
step "millrace run   (nothing changed: every stage comes from the cache)"
"$MILLRACE" run
step "millrace status -S train.learning_rate=0.05   (what a learning-rate change invalidates)"
"$MILLRACE" status -S train.learning_rate=0.05
step "millrace run -S train.learning_rate=0.05   (the model and its evaluation re-run; the data stages come from the cache)"
"$MILLRACE" run -S train.learning_rate=0.05
step "millrace compare 1 3"
"$MILLRACE" compare 1 3
step "millrace show"
"$MILLRACE" show
step "millrace model inspect out/model/model.bin"
"$MILLRACE" model inspect out/model/model.bin
step "millrace verify"
"$MILLRACE" verify
json=$("$MILLRACE" run --json -S train.learning_rate=0.05)
echo "$json" | python3 -c "import json,sys; d=json.load(sys.stdin); assert d['executed']==0 and d['cached']==$n_stages, d"
printf '\ndemo finished in %s: %d stages ran, re-ran from the cache, and a param change re-ran the model and what reads it.\n' "$WORK" "$n_stages"
printf 'report: %s/out/report/report.html\n' "$WORK"

step "millrace predict out/package/model.mrb   (the bundle applies the fitted features, then the model)"
"$MILLRACE" data head out/split/test -n 3 --json > sample.jsonl
"$MILLRACE" predict out/package/*.mrb out/split/test -o scores.csv --id user_id
head -4 scores.csv
row=$(python3 -c 'import json; r = json.loads(open("sample.jsonl").readline()); r.pop("churned", None); print(json.dumps({"rows": [r]}))')
bundle=$(ls "$WORK"/out/package/*.mrb)
printf '\nserve the bundle and score a row:\n'
printf '  %s serve %s --port 8080\n' "$MILLRACE" "$bundle"
printf "  curl -s -d '%s' http://127.0.0.1:8080/v1/predict\n" "$row"
printf 'or take it to ONNX Runtime (the features transform becomes ONNX ops; categorical columns go in "input_cat"):\n'
printf '  %s bundle export-onnx %s -o churn.onnx\n' "$MILLRACE" "$bundle"
