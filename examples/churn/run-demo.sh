#!/usr/bin/env bash
# make demo: runs examples/churn end to end in a scratch copy, then shows the
# iteration loop: a learning-rate change re-runs train + evaluate only.
set -euo pipefail
MILLRACE=${1:?usage: run-demo.sh /path/to/millrace}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${MILLRACE_DEMO_DIR:-$(dirname "$MILLRACE")/demo-churn}
rm -rf "$WORK"
mkdir -p "$WORK"
cp -r "$HERE/millrace.yaml" "$HERE/scripts" "$WORK/"
cd "$WORK"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "millrace dag"
"$MILLRACE" dag
step "millrace run   (first run: every stage executes)"
"$MILLRACE" run
step "millrace run   (nothing changed: every stage comes from the cache)"
"$MILLRACE" run
step "millrace status -S train.learning_rate=0.3   (what a learning-rate change invalidates)"
"$MILLRACE" status -S train.learning_rate=0.3
step "millrace run -S train.learning_rate=0.3   (only train and evaluate execute)"
"$MILLRACE" run -S train.learning_rate=0.3
step "millrace compare 1 3"
"$MILLRACE" compare 1 3
step "millrace show"
"$MILLRACE" show
step "millrace verify"
"$MILLRACE" verify
json=$("$MILLRACE" run --json -S train.learning_rate=0.3)
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["executed"]==0 and d["cached"]==5, d'
printf '\ndemo finished in %s: the pipeline ran, re-ran from cache, and a param change re-ran 2 of 5 stages.\n' "$WORK"
