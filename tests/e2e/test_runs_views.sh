#!/usr/bin/env bash
# The run store's views end to end on a small ML pipeline (ingest -> split
# -> features -> train -> evaluate -> report): named and tagged runs
# (`run --name/--tag`, `runs --tag`, `show NAME`), `runs --columns/--sort`
# with did-you-mean for unknown columns, `compare` of three runs (text,
# --json, --html), params printed as written (0.05, not 0.05000000000000000277),
# what `status` says after `run -S`, the report op's artifact stating what it
# reports on (not "status: running"), and a version-1 runs.db migrated on open.
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
INSPECT="$SRC/tests/e2e/report/inspect.py"
ws=$(new_ws views)
cd "$ws" || fail "cd"
cat >gen.py <<'PY'
import math, os, random
r = random.Random(11)
os.makedirs("data", exist_ok=True)
with open("data/raw.csv", "w") as f:
    f.write("id,age,income,plan,label\n")
    for i in range(1500):
        age = r.randint(18, 80); inc = round(r.lognormvariate(10, 0.5), 2); plan = r.choice(["basic", "pro"])
        z = 0.06 * (age - 45) - 0.00003 * (inc - 22000) + (0.8 if plan == "pro" else 0)
        f.write(f"{i},{age},{inc},{plan},{1 if r.random() < 1 / (1 + math.exp(-z)) else 0}\n")
PY
python3 gen.py || fail "gen.py"
cat >millrace.yaml <<'YAML'
params:
  train: {learning_rate: 0.1, num_iterations: 30}
stages:
  ingest: {op: ingest, source: data/raw.csv}
  split:
    op: split
    input: ${stages.ingest}
    method: stratified
    label: label
    parts: {train: 0.7, valid: 0.15, test: 0.15}
    seed: 3
  features:
    op: features
    fit: ${stages.split.train}
    apply: {valid: "${stages.split.valid}", test: "${stages.split.test}"}
    label: label
    steps:
      - onehot: {columns: [plan]}
      - standardize: {columns: [age, income]}
  model:
    op: train
    train: ${stages.features.train}
    valid: ${stages.features.valid}
    label: label
    exclude: [id]
    params: {objective: binary, learning_rate: "${params.train.learning_rate}", num_iterations: "${params.train.num_iterations}"}
  eval:
    op: evaluate
    model: ${stages.model}
    data: ${stages.features.test}
    raw: ${stages.split.test}
    label: label
    id: id
    slices: {numeric: [age], categorical: [plan]}
  report: {op: report, evaluate: "${stages.eval}", model: "${stages.model}"}
YAML

# ---- named and tagged runs ----------------------------------------------------
expect_exit 0 mr run --name baseline --tag exp=lr --tag gpu
expect_exit 0 mr run -S train.learning_rate=0.05 --name lr-low --tag exp=lr
expect_exit 0 mr run -S train.learning_rate=0.3 --tag exp=lr-high
expect_exit 0 mr runs
assert_match "$T_OUT" "^RUN +NAME +STARTED" "runs has a NAME column when a run is named"
assert_match "$T_OUT" "^ *1 +baseline .* exp=lr,gpu$" "runs shows run 1's name and tags"
assert_match "$T_OUT" "^ *2 +lr-low " "runs shows run 2's name"
expect_exit 0 mr runs --tag exp=lr --json
assert_eq "$(json '[r["id"] for r in d["runs"]]' | tr '\n' ' ')" "2 1 " "runs --tag exp=lr: the runs tagged exp=lr, newest first"
assert_eq "$(json 'd["runs"][1]["name"]')" "baseline" "runs --json has the name"
assert_eq "$(json 'd["runs"][1]["tags"]')" '{"exp": "lr", "gpu": null}' "runs --json has the tags (a bare tag is null)"
expect_exit 0 mr runs --tag gpu --json
assert_eq "$(json '[r["id"] for r in d["runs"]]')" "1" "runs --tag KEY matches any value"
expect_exit 0 mr show baseline
assert_match "$T_OUT" "^run 1 " "show NAME finds the named run"
assert_match "$T_OUT" "^  name: +baseline$" "show prints the name"
assert_match "$T_OUT" "^  tags: +exp=lr,gpu$" "show prints the tags"
expect_exit 0 mr show lr-low --json
assert_eq "$(json 'd["run"]["name"]') $(json 'd["run"]["tags"]["exp"]')" "lr-low lr" "show --json has name and tags"
assert_ne "$(json 'len(d["lineage"])')" "0" "show --json lists the run's lineage"
expect_exit 2 mr run --tag 'bad key'
assert_contains "$T_ERR" "tag 'bad key'" "a malformed tag is a usage error naming it"
expect_exit 2 mr run --name 42
assert_contains "$T_ERR" "reads as a run id" "a name that reads as a run id is refused"

# ---- params as written ----------------------------------------------------------
expect_exit 0 mr show 2
assert_contains "$T_OUT" '"learning_rate":0.05' "show prints the param as written"
assert_not_contains "$T_OUT" "0.050000000" "and never its binary expansion"

# ---- runs --columns / --sort ----------------------------------------------------
expect_exit 0 mr runs --columns params.train.learning_rate,metrics.eval.test.auc --sort -metrics.eval.test.auc --json
auc=$(json '[r["columns"]["metrics.eval.test.auc"] for r in d["runs"]]')
assert_eq "$auc" "$(printf '%s\n' "$auc" | sort -gr)" "--sort -metrics.eval.test.auc: best AUC first"
assert_eq "$(json 'sorted(r["columns"]["params.train.learning_rate"] for r in d["runs"])' | tr '\n' ' ')" "0.05 0.1 0.3 " \
    "--columns carries each run's param"
expect_exit 0 mr runs --columns params.train.learning_rate --sort params.train.learning_rate 2
assert_match "$(printf '%s\n' "$T_OUT" | sed -n 2p)" "^ *2 .* 0\.05 +exp=lr$" "ascending sort with N: the smallest value first"
assert_eq "$(printf '%s\n' "$T_OUT" | wc -l | tr -d ' ')" 3 "N limits the sorted list (header + 2)"
assert_match "$(printf '%s\n' "$T_OUT" | head -1)" "COMMIT +params.train.learning_rate +TAGS$" "the chosen column is in the header"
expect_exit 2 mr runs --columns params.train.learnig_rate
assert_contains "$T_ERR" "params.train.learnig_rate" "an unknown column is named"
assert_contains "$T_ERR" "'params.train.learning_rate'" "and the closest columns are suggested"
expect_exit 2 mr runs --sort -metrics.eval.auc
assert_contains "$T_ERR" "'metrics.eval.test.auc'" "an unknown sort column suggests the metric names"

# ---- compare three runs -------------------------------------------------------------
expect_exit 0 mr compare 1 2 3
assert_match "$T_OUT" "^PARAM +1 +2 +3" "compare takes three runs"
assert_match "$T_OUT" "^train\.learning_rate +0\.1 +0\.05 +0\.3 +\*$" "params side by side, as written, differences marked"
assert_match "$T_OUT" "^train\.num_iterations +30 +30 +30$" "an equal param is not marked"
assert_match "$T_OUT" "^eval\.test\.auc( +0\.[0-9]+){3} +\*$" "final metrics side by side"
assert_contains "$T_OUT" "stage model: key changed" "stages whose key differs"
expect_exit 0 mr compare 1 2 3 --json
assert_eq "$(json 'd["runs"]' | tr '\n' ' ')" "1 2 3 " "compare --json lists the runs"
assert_eq "$(json 'json.dumps([p["values"] for p in d["params"] if p["path"] == "train.learning_rate"][0])')" "[0.1, 0.05, 0.3]" \
    "compare --json: a param's values per run"
assert_eq "$(json '"a" in d')" false "the two-run fields belong to two runs"
expect_exit 0 mr compare 1 2 --json
assert_eq "$(json 'json.dumps([[p["a"], p["b"], p["changed"]] for p in d["params"] if p["path"] == "train.learning_rate"][0])')" \
    "[0.1, 0.05, true]" "two runs keep the a/b shape"
expect_exit 0 mr compare 1 2 3 --html -o cmp.html
run_cmd python3 "$INSPECT" dom cmp.html summary params metrics curves stages
[ "$T_RC" = 0 ] || fail "compare page DOM: $T_ERR"
pass "the three-run page draws: $T_OUT"
assert_contains "$(cat cmp.html)" "Run 1 vs run 2 vs run 3" "the page names the three runs"
assert_contains "$(cat cmp.html)" "Metric deltas (run 3 - run 1)" "a delta chart for each run after the first"
expect_exit 2 mr compare 1
assert_contains "$T_ERR" "two runs or more" "one run is a usage error"

# ---- status after run -S ------------------------------------------------------------
expect_exit 0 mr run -S train.learning_rate=0.05
expect_exit 0 mr status
assert_match "$T_OUT" "stale +model" "after run -S, model is stale for the spec"
assert_contains "$T_OUT" "the workspace holds the outputs of run 4 (-S train.learning_rate=0.05)" \
    "status says whose outputs the workspace holds, with the override"
assert_contains "$T_OUT" "param 'train.learning_rate' changed: 0.05 -> 0.1" "and the param, as written"
assert_not_contains "$T_OUT" "0.10000000000000001" "no binary expansion of a param"
assert_not_contains "$T_OUT" "outputs missing or modified" "not 'missing or modified': they are neither"
chmod -R u+w out/model && rm -rf out/model
expect_exit 0 mr status
assert_contains "$T_OUT" "'out/model' is missing" "a missing output is named"

# ---- the report op's artifact ---------------------------------------------------------
expect_exit 0 mr run
md=out/report/report.md
assert_file "$md" "the report stage writes report.md"
assert_not_contains "$(cat $md)" "running" "the report does not call itself running"
assert_match "$(cat $md)" "^\| eval \| evaluate \| [0-9a-f]{32}\.dir \| ok \|$" "it states the evaluate stage it reports on, ok"
assert_match "$(cat $md)" "^\| model \| model \| [0-9a-f]{32}\.dir \| ok \|$" "and the model stage"
assert_not_contains "$(cat $md)" "run 5" "no run id in the artifact"
assert_not_contains "$(cat $md)" "$ws" "no workspace path in the artifact"
assert_contains "$(cat $md)" "params.train.learning_rate**: 0.1" "the params its stages used, as written"
expect_exit 0 mr report -o r.html --md r.md
assert_contains "$(cat r.md)" "**status**: ok" "the regenerated report states the run's final status"
expect_exit 0 mr report baseline -o rb.html --md rb.md
assert_contains "$(cat rb.md)" "**name**: baseline" "a regenerated report names the run"

# ---- a version-1 runs.db opens and is migrated ------------------------------------------
ws1=$(new_ws v1)
cp "$ws/millrace.yaml" "$ws/gen.py" "$ws1/" && cp -r "$ws/data" "$ws1/" || fail "copy"
mkdir -p "$ws1/.millrace"
python3 - "$ws1/.millrace/runs.db" <<'PY' || fail "cannot build a v1 store"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE meta(key TEXT PRIMARY KEY, value);
CREATE TABLE runs(id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, ended REAL, status TEXT NOT NULL,
 argv TEXT, cwd TEXT, git_commit TEXT, git_dirty INTEGER NOT NULL DEFAULT 0, params_json TEXT, overrides TEXT,
 smoke INTEGER NOT NULL DEFAULT 0, pid INTEGER, pid_start INTEGER, n_executed INTEGER NOT NULL DEFAULT 0,
 n_cached INTEGER NOT NULL DEFAULT 0, n_failed INTEGER NOT NULL DEFAULT 0, n_skipped INTEGER NOT NULL DEFAULT 0);
CREATE TABLE stage_runs(id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, stage TEXT NOT NULL, op TEXT, key TEXT,
 status TEXT NOT NULL, started REAL, wall_s REAL, user_s REAL, sys_s REAL, max_rss_kb INTEGER, bytes_read INTEGER,
 bytes_written INTEGER, error TEXT, outputs_json TEXT);
CREATE TABLE metrics(run_id INTEGER NOT NULL, stage TEXT NOT NULL, name TEXT NOT NULL, step INTEGER NOT NULL, value REAL);
CREATE TABLE lineage(run_id INTEGER NOT NULL, stage TEXT NOT NULL, role TEXT NOT NULL, name TEXT, artifact TEXT NOT NULL);
CREATE TABLE stage_cache(key TEXT PRIMARY KEY, stage TEXT NOT NULL, op TEXT, key_doc TEXT, outputs_json TEXT,
 metrics_json TEXT, created REAL NOT NULL, run_id INTEGER);
CREATE TABLE stat_cache(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ino INTEGER NOT NULL,
 hash TEXT NOT NULL);
INSERT INTO meta VALUES('schema_version', 1);
INSERT INTO runs(started, ended, status, argv, params_json, n_executed) VALUES(1.7e9, 1.7e9 + 2, 'ok', 'millrace run', '{"train":{"learning_rate":0.1}}', 6);
""")
db.commit()
PY
cd "$ws1" || fail "cd"
expect_exit 0 mr runs --json
assert_eq "$(json '[d["runs"][0]["id"], d["runs"][0]["status"], d["runs"][0]["name"]]' | tr '\n' ' ')" "1 ok null " \
    "a version-1 store opens: its run reads back, without a name"
expect_exit 0 mr run --name after-migration
expect_exit 0 mr runs --json
assert_eq "$(json '[r["name"] for r in d["runs"]]' | tr '\n' ' ')" "after-migration null " "and takes named runs"
assert_eq "$(python3 -c 'import sqlite3; print(sqlite3.connect(".millrace/runs.db").execute("select value from meta where key=\"schema_version\"").fetchone()[0])')" \
    3 "the store is at schema version 3"
t_done
