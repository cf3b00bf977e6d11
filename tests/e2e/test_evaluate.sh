#!/usr/bin/env bash
# evaluate, check and report ops end to end: exec makes CSVs -> train ->
# evaluate -> check -> report. Metrics reach the run store; the predictions
# artifact holds every test row; a tier change re-runs evaluate (not the data
# or the model); a violating property and a failing gate fail the check stage
# with a table and still publish results.json (never cached); the report has
# every section and references nothing outside itself (and renders in
# headless chromium when installed); `millrace report RUN` regenerates it and
# `compare --html` draws two runs.
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
PQTOOL="$(dirname "$MR_BIN")/tests/mr_pqtool"
INSPECT="$SRC/tests/e2e/report/inspect.py"
SECTIONS="summary timeline training metrics curves confusion importance slices errors residuals checks"
ws=$(new_ws evaluate)
cd "$ws" || fail "cd"
cat >gen.py <<'PY'
import random, math, os
r = random.Random(5)
os.makedirs("data", exist_ok=True)
with open("data/train.csv", "w") as f, open("data/test.csv", "w") as g:
    for h in (f, g): h.write("id,x1,x2,x3,flag,plan,label\n")
    for i in range(4000):
        x1, x2, x3, flag = r.gauss(0, 1), r.gauss(0, 1), r.random(), int(r.random() < 0.4)
        plan = r.choice(["basic", "pro", "team"])
        z = 1.8 * x1 - 1.2 * x2 + 1.0 * flag - 0.3 + (r.gauss(0, 4) if plan == "basic" else 0)
        y = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        (f if i < 3000 else g).write(f"{i},{x1:.5f},{x2:.5f},{x3:.5f},{flag},{plan},{y}\n")
PY
cat >millrace.yaml <<'YAML'
params:
  eval: {tier: full}
  check: {dir2: decreasing, min_auc: 0.7}
stages:
  data:
    op: exec
    cmd: python3 gen.py
    deps: [gen.py]
    outs: [data]
  train:
    op: train
    train: data/train.csv
    label: label
    model: linear
    exclude: [id, plan]
    params: {objective: binary}
  eval:
    op: evaluate
    model: ${stages.train}
    data: data/test.csv
    label: label
    id: id
    passthrough: [plan]
    tier: ${params.eval.tier}
    sample_size: 300
    bootstrap: {n: 100, alpha: 0.1, seed: 3}
    slices: {categorical: [plan], numeric: [x1], buckets: 3}
    top_k_wrong: 5
  check:
    op: check
    model: ${stages.train}
    data: data/test.csv
    metrics: ${stages.eval}
    rows: 120
    properties:
      - {type: consistency}
      - {type: monotonic, feature: x1, direction: increasing}
      - {type: monotonic, feature: x2, direction: "${params.check.dir2}"}
      - {type: directional, feature: flag, direction: up}
      - {type: robustness, noise: 0.01, delta: 0.05, fraction: 0.9}
      - {type: invariance, feature: x3, epsilon: 0.2}
    gates: ["auc >= ${params.check.min_auc}", "slices.min >= 0.5", "logloss <= 0.9"]
    limits: {model_size_mb: 10, latency_p99_us: 200000, throughput_rows_s: 100, peak_rss_mb: 4096}
  report:
    op: report
    evaluate: ${stages.eval}
    model: ${stages.train}
    check: ${stages.check}
YAML

expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "data=executed train=executed eval=executed check=executed report=executed" "the whole pipeline runs"
for f in predictions.parquet metrics.json curves.json slices.json errors.json; do
    assert_file "out/eval/$f" "evaluate publishes $f"
done
assert_file out/check/results.json "check publishes results.json"
assert_file out/report/report.html "report publishes report.html"
assert_file out/report/report.md "and a Markdown summary beside it"

# Metrics in the run store, from the one prediction pass.
expect_exit 0 mr show --json
assert_eq "$(json '[m["name"] for m in d["metrics"] if m["stage"]=="eval" and m["name"] in ("test.auc","test.logloss","test.f1")]' | sort | tr '\n' ' ')" \
    "test.auc test.f1 test.logloss " "headline metrics are recorded as test.*"
auc=$(json '[m["value"] for m in d["metrics"] if m["name"]=="test.auc"][0]')
python3 -c "import sys; sys.exit(0 if $auc > 0.75 else 1)" || fail "test AUC $auc should be > 0.75"
pass "test AUC $auc is sensible"
assert_eq "$(json '[m["name"] for m in d["metrics"] if m["name"]=="check.latency_p99_us"]')" "check.latency_p99_us" "latency is recorded"

# metrics.json: intervals around the point; AUC agrees with a rank formula over the predictions.
T_OUT=$(cat out/eval/metrics.json)
assert_eq "$(json 'd["rows"]')" 1000 "full tier evaluates every test row"
assert_eq "$(json 'd["metrics"]["auc"]["lo"] <= d["metrics"]["auc"]["value"] <= d["metrics"]["auc"]["hi"]')" true "AUC has a bootstrap interval around it"
[ -x "$PQTOOL" ] || fail "mr_pqtool not built at $PQTOOL"
run_cmd "$PQTOOL" dump out/eval/predictions.parquet
[ "$T_RC" = 0 ] || fail "cannot dump predictions.parquet"
printf '%s\n' "$T_OUT" >preds.csv
assert_eq "$(head -1 preds.csv)" "row,id,label,score,plan,x1" "predictions: row, id, label, score, passthrough and slice columns"
assert_eq "$(($(wc -l <preds.csv) - 1))" 1000 "one prediction per test row"
assert_eq "$(sed -n 2p preds.csv | cut -d, -f1,2)" "0,3000" "rows keep their order and ids"
rank_auc=$(python3 - <<'PY'
import csv
rows = list(csv.DictReader(open("preds.csv")))
p = sorted((float(r["score"]), int(float(r["label"]))) for r in rows)
pos = sum(y for _, y in p); neg = len(p) - pos
i = 0; s = 0.0
while i < len(p):
    j = i
    while j < len(p) and p[j][0] == p[i][0]: j += 1
    s += (i + j + 1) / 2 * sum(y for _, y in p[i:j]); i = j
print((s - pos * (pos + 1) / 2) / (pos * neg))
PY
)
python3 -c "import sys; sys.exit(0 if abs($rank_auc - $auc) < 1e-9 else 1)" || fail "AUC $auc != rank AUC $rank_auc of the predictions artifact"
pass "the recorded AUC is the AUC of the predictions artifact"
T_OUT=$(cat out/eval/slices.json)
assert_eq "$(json 'sorted(set(s["column"] for s in d["slices"]))' | tr '\n' ' ')" "plan x1 " "slices per category and per numeric bucket"
assert_eq "$(json '[s["label"] for s in d["slices"] if s["flagged"] and s["column"] == "plan"]')" "plan=basic" "the noisy plan (alone of the plans) is flagged as worse than overall"
T_OUT=$(cat out/eval/errors.json)
assert_eq "$(json 'len(d["most_confident_wrong"])')" 5 "top_k_wrong confident errors listed"
assert_eq "$(json 'sorted(d["most_confident_wrong"][0]["features"])' | tr '\n' ' ')" "flag x1 x2 x3 " "with their feature values"
T_OUT=$(cat out/eval/curves.json)
assert_eq "$(json 'sorted(k for k in d if k != "tier")' | tr '\n' ' ')" "calibration gain pr roc " "ROC, PR, calibration and gain curves"
T_OUT=$(cat out/check/results.json)
assert_eq "$(json 'd["passed"]')" true "every check passes on the well-behaved model"
assert_eq "$(json 'd["n_checks"]')" 13 "6 properties + 3 gates + 4 limits"

# The report: every section, nothing external.
html=out/report/report.html
for s in $SECTIONS; do grep -q "id=\"$s\"" $html || fail "report lacks section $s"; done
pass "report.html has every section"
run_cmd python3 "$INSPECT" selfcontained $html
[ "$T_RC" = 0 ] || fail "self-containment: $T_ERR"
pass "report.html references nothing outside itself"
if grep -Eiq '@import|url\(' $html; then fail "report loads something"; fi
pass "no url( or @import"
run_cmd python3 "$INSPECT" dom $html $SECTIONS
[ "$T_RC" = 0 ] || fail "report DOM: $T_ERR"
pass "every chart draws marks: $T_OUT"

# A no-op re-run is cached; a tier change re-runs evaluate and what reads it, not data or model.
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 0 "an unchanged pipeline is all cached"
expect_exit 1 mr run --json -S eval.tier=fast
assert_eq "$(run_statuses | cut -d' ' -f1-4)" "data=cached train=cached eval=executed check=failed" "tier fast re-runs only evaluate (data and model cached)"
assert_eq "$(json '[s["error"] for s in d["stages"] if s["stage"]=="check"][0]' | grep -c 'tier: fast')" 1 \
    "a slice gate over a fast-tier evaluation fails, saying why"
T_OUT=$(cat out/eval/metrics.json)
assert_eq "$(json '[d["tier"], d["rows"], d["metrics"]["auc"]["lo"]]' | tr '\n' ' ')" "fast 300 null " "fast tier: stratified 300-row subsample, no intervals"
T_OUT=$(cat out/eval/slices.json)
assert_eq "$(json '"slices" in d')" false "fast tier computes no slices"

# A violating property fails the check stage with the table, publishes results, skips the report.
expect_exit 1 mr run --json -S check.dir2=increasing
assert_eq "$(run_statuses)" "data=cached train=cached eval=cached check=failed report=skipped" "the violated property fails check"
run_cmd mr run -S check.dir2=increasing
assert_contains "$T_ERR" "1 of 13 checks failed" "the error says how many checks failed"
assert_contains "$T_ERR" "monotonic x2 up" "and which"
assert_match "$T_ERR" "FAIL +property +monotonic x2 up +[0-9]+ of 120 rows: output fell by up to" "the log table says by how much"
assert_file out/check/results.json "a failed check still publishes results.json"
T_OUT=$(cat out/check/results.json)
assert_eq "$(json '[d["passed"]] + [c["name"] for c in d["checks"] if not c["passed"]]' | tr '\n' ' ')" "false monotonic x2 up " "results.json names the failure"
failed_run=$(mr show --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
expect_exit 0 mr show --json
assert_ne "$(json '[s["outputs"] for s in d["stages"] if s["stage"]=="check"][0]')" null "the run store records the failed stage's output"
run_cmd mr run --json -S check.dir2=increasing
assert_eq "$(run_statuses | cut -d' ' -f4)" "check=failed" "a failed check is never served from the cache"

# Gates: pass and fail.
expect_exit 1 mr run -S check.min_auc=0.99
assert_match "$T_ERR" "auc >= 0.99: auc = 0\.[0-9]+, needs >= 0.99 \(misses by 0\.[0-9]+\)" "a failing metric gate says by how much"
expect_exit 0 mr run -S check.min_auc=0.6 --json
assert_eq "$(run_statuses | cut -d' ' -f4)" "check=executed" "a lower bound passes"

# millrace report: regenerate any run (including the failed one's check table).
expect_exit 0 mr report 1 -o r1.html --md r1.md
assert_file r1.html "millrace report 1 regenerates run 1's report"
for s in $SECTIONS; do grep -q "id=\"$s\"" r1.html || fail "regenerated report lacks section $s"; done
pass "the regenerated report has every section"
assert_contains "$(cat r1.md)" "## Checks" "the Markdown summary has the checks"
expect_exit 0 mr report "$failed_run" -o rf.html
assert_contains "$(cat rf.html)" "monotonic x2 up" "a failed run's report shows the failed check"
run_cmd python3 "$INSPECT" dom rf.html $SECTIONS
[ "$T_RC" = 0 ] || fail "regenerated report DOM: $T_ERR"
pass "the regenerated report draws every chart"
expect_exit 2 mr report 999
assert_contains "$T_ERR" "999" "an unknown run is an error naming it"

# compare --html.
expect_exit 0 mr compare 1 2 --html -o cmp.html
assert_file cmp.html "compare --html writes a page"
run_cmd python3 "$INSPECT" selfcontained cmp.html
[ "$T_RC" = 0 ] || fail "compare page: $T_ERR"
run_cmd python3 "$INSPECT" dom cmp.html summary params metrics curves stages
[ "$T_RC" = 0 ] || fail "compare DOM: $T_ERR"
pass "the comparison has params, metrics, overlaid curves: $T_OUT"
assert_contains "$(cat cmp.html)" "run 2" "both runs are named"

# Headless chromium: no console errors.
CHROME=""
for c in /usr/bin/chromium "$(command -v chromium 2>/dev/null)" "$(command -v chromium-browser 2>/dev/null)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then CHROME=$c; break; fi
done
if [ -z "$CHROME" ]; then
    echo "SKIP [$T_NAME] chromium not installed: headless render tier NOT run"
    t_done
fi
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --enable-logging=stderr --v=0)
for page in "$ws/out/report/report.html" "$ws/cmp.html"; do
    run_cmd timeout 120 "$CHROME" "${flags[@]}" --user-data-dir="$(mktemp -d "$T_ROOT/chrome.XXXXXX")" --dump-dom "file://$page"
    [ "$T_RC" = 0 ] || fail "chromium --dump-dom $page failed (exit $T_RC)"
    console=$(printf '%s\n' "$T_ERR" | grep -E 'CONSOLE' || true)
    [ -z "$console" ] || fail "console messages while rendering $page: $console"
    pass "chromium renders $(basename "$page") without console errors"
done
printf '%s\n' "$T_OUT" >dom.html
run_cmd python3 "$INSPECT" dom dom.html summary params metrics curves stages
[ "$T_RC" = 0 ] || fail "rendered DOM: $T_ERR"
pass "rendered DOM ok"
t_done
