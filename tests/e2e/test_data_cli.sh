#!/usr/bin/env bash
# millrace data {ingest, inspect, head, stats, export} and the ingest op:
# round trips of a CSV with quotes, nulls and dates; filters and push-down
# counts on a partitioned dataset; bad values named by file:line, column and
# value; skip/quarantine counts; atomic, refusing ingest; and the op in a
# pipeline (cache, source change, glob sources, metrics, quarantine inside
# the artifact, smoke mode, a downstream train stage).
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws data)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random
r = random.Random(11)
notes = ['plain', 'with, comma', 'say "hi"', 'multi\nline', 'NA', '']
with open("events.csv", "w", newline="") as f:
    f.write("id,country,amount,day,note\n")
    for i in range(3000):
        note = notes[i % len(notes)]
        # an empty unquoted field is null; the other notes are quoted strings
        q = '' if note == '' else '"' + note.replace('"', '""') + '"'
        amount = '' if i % 10 == 3 else f"{r.uniform(-50, 500):.3f}"
        country = ['DE', 'FR', 'US', 'IT'][r.randrange(4)]
        f.write(f"{i},{country},{amount},2024-03-{1 + i % 20:02d},{q}\n")
PY

# ---- ingest / inspect / head / stats / export --------------------------------
expect_exit 0 mr data ingest events.csv ds --json
assert_eq "$(json 'd["rows_written"]')" 3000 "ingest writes every row"
assert_eq "$(json 'd["rows_read"]')" 3000 "ingest counts the rows read"
assert_file ds/manifest.json "the dataset has a manifest"
assert_eq "$(ls -d ds.tmp.* 2>/dev/null | wc -l)" 0 "no staging directory is left behind"
expect_exit 2 mr data ingest events.csv ds
assert_contains "$T_ERR" "--force" "an existing dataset is refused, with a hint"
expect_exit 0 mr data ingest events.csv ds --force --row-group-rows 1000
expect_exit 0 mr data inspect ds --json
assert_eq "$(json 'd["rows"]')" 3000 "inspect: total rows"
assert_eq "$(json 'd["row_groups"]')" 3 "inspect: row groups of 1000 rows"
expect_exit 0 mr data ingest events.csv ds_b --row-group-bytes 1
expect_exit 0 mr data inspect ds_b --json
assert_eq "$(json 'd["rows"]') $(json 'd["row_groups"]')" "3000 3000" "--row-group-bytes 1: every row closes its row group"
assert_eq "$(json '" ".join(c["name"] + ":" + c["type"] for c in d["columns"])')" \
    "id:int64 country:string amount:float64 day:date note:string" "inspect: inferred schema"
assert_eq "$(json '[c["null_count"] for c in d["columns"] if c["name"] == "amount"][0]')" 300 "inspect: null counts"
assert_eq "$(json '[c["max"] for c in d["columns"] if c["name"] == "day"][0]')" 2024-03-20 "inspect: date max"
expect_exit 0 mr data inspect ds
assert_contains "$T_OUT" "3000 rows" "inspect prints a text summary"

expect_exit 0 mr data head ds -n 3 --json
assert_eq "$(printf '%s\n' "$T_OUT" | wc -l | tr -d ' ')" 3 "head -n 3 prints three rows"
assert_eq "$(printf '%s\n' "$T_OUT" | sed -n 3p | python3 -c 'import json,sys; print(json.load(sys.stdin)["note"])')" 'say "hi"' \
    "head --json keeps quotes inside values"
expect_exit 0 mr data head ds -n 2 --columns note,id --filter "id >= 1000 AND amount IS NULL" --json
assert_eq "$(printf '%s\n' "$T_OUT" | head -1)" '{"note":"with, comma","id":1003}' "head --filter --columns"
expect_exit 0 mr data head ds -n 2
assert_match "$T_OUT" "^id +country +amount +day +note" "head prints a table with a header"

expect_exit 0 mr data stats ds --json
assert_eq "$(json '[c["nulls"] for c in d["columns"] if c["name"] == "amount"][0]')" 300 "stats: nulls"
assert_eq "$(json '[c["distinct_estimate"] for c in d["columns"] if c["name"] == "id"][0]')" 3000 "stats: distinct ids (exact when few)"
assert_eq "$(json '[c["distinct_estimate"] for c in d["columns"] if c["name"] == "country"][0]')" 4 "stats: distinct countries"
assert_eq "$(json '[c["mean"] for c in d["columns"] if c["name"] == "id"][0]')" 1499.5 "stats: mean"
assert_eq "$(json '[c["nulls"] for c in d["columns"] if c["name"] == "note"][0]')" 500 "stats: string nulls"
expect_exit 0 mr data stats ds
assert_match "$T_OUT" "^amount +float64 +300" "stats prints a table"

expect_exit 0 mr data export ds back.csv
python3 - <<'PY' || fail "exported CSV differs from the input"
import csv
a = list(csv.reader(open("events.csv", newline="")))
b = list(csv.reader(open("back.csv", newline="")))
assert a[0] == b[0], (a[0], b[0])
def norm(row):
    out = list(row)
    if out[2]: out[2] = repr(float(out[2]))
    return out
a = sorted((norm(r) for r in a[1:]), key=lambda r: int(r[0]))
b = sorted((norm(r) for r in b[1:]), key=lambda r: int(r[0]))
assert len(a) == len(b), (len(a), len(b))
for x, y in zip(a, b):
    assert x == y, (x, y)
PY
pass "export CSV holds the input's values (quotes, commas, newlines, nulls, dates)"
expect_exit 0 mr data export ds back.parquet --filter "country = 'DE'" --json
de=$(grep -c ',DE,' events.csv)
assert_eq "$(json 'd["rows"]')" "$de" "export --filter writes the matching rows"
expect_exit 0 mr data ingest back.parquet ds_pq --json
assert_eq "$(json 'd["rows_written"]')" "$de" "a Parquet file ingests back"
expect_exit 0 mr data head back.csv -n 1 --json
assert_contains "$T_OUT" '"id":0' "head reads plain files too"
# a Parquet file of no rows still has its columns: head shows them, ingest
# keeps them in the manifest, export writes them (as DuckDB reads such files)
expect_exit 0 mr data export ds empty.parquet --filter "id < 0" --columns id,note --json
assert_eq "$(json 'd["rows"]')" 0 "export of no rows"
expect_exit 0 mr data head empty.parquet
assert_eq "$(echo "$T_OUT" | tr -s ' ')" "id note" "head of a file of no rows prints its columns"
expect_exit 0 mr data ingest empty.parquet ds_empty --json
assert_eq "$(json 'd["rows_written"]')" 0 "a file of no rows ingests"
assert_eq "$(python3 -c "import json; print([c['name'] for c in json.load(open('ds_empty/manifest.json'))['schema']])")" \
    "['id', 'note']" "the dataset of no rows keeps the columns"
expect_exit 0 mr data export ds_empty empty_back.parquet
expect_exit 0 mr data head empty_back.parquet
assert_eq "$(echo "$T_OUT" | tr -s ' ')" "id note" "and exports them"
printf 'id,note\n' >header_only.csv # a CSV of a header only, the same way (DuckDB: two VARCHAR columns)
expect_exit 0 mr data head header_only.csv
assert_eq "$(echo "$T_OUT" | tr -s ' ')" "id note" "head of a header-only CSV prints its columns"
expect_exit 0 mr data ingest header_only.csv ds_hdr --json
assert_eq "$(python3 -c "import json; print([(c['name'], c['type']) for c in json.load(open('ds_hdr/manifest.json'))['schema']])")" \
    "[('id', 'string'), ('note', 'string')]" "a header-only CSV ingests to a dataset with its columns, as strings"

# ---- partitions, filters and push-down --------------------------------------
expect_exit 0 mr data ingest events.csv parts --partition-by day --filter "country != 'IT'" --json
it=$(grep -c ',IT,' events.csv)
assert_eq "$(json 'd["rows_written"]')" "$((3000 - it))" "ingest --filter keeps the matching rows"
assert_eq "$(json 'd["rows_filtered"] + d["rows_written"]')" 3000 "filtered rows are counted, not dropped silently"
assert_eq "$(json 'd["partitions"]')" 20 "one partition per day"
expect_exit 0 mr data inspect parts --explain "day = DATE '2024-03-05'" --json
assert_eq "$(json 'd["explain"]["partitions_pruned"]')" 19 "explain: 19 of 20 partitions pruned"
assert_eq "$(json 'd["explain"]["shards_pruned_partition"]')" 19 "explain: their shards are never opened"
python3 -c "
import json,sys; e=json.loads(sys.argv[1])['explain']
sys.exit(0 if 0 < e['bytes_read'] < e['bytes_total'] / 10 else 1)" "$T_OUT" || fail "explain: bytes_read should be a small part of bytes_total: $T_OUT"
pass "explain: bytes read are a small fraction"
expect_exit 0 mr data inspect parts --explain "amount > 100000"
assert_contains "$T_OUT" "pruned" "explain text names the pruning steps"
expect_exit 0 mr data head parts -n 100 --filter "day = DATE '2024-03-05'" --json
assert_eq "$(printf '%s\n' "$T_OUT" | grep -c '"day":"2024-03-05"')" "$(printf '%s\n' "$T_OUT" | wc -l | tr -d ' ')" "head --filter on a partition column"
expect_exit 2 mr data head parts --filter "contry = 'DE'"
assert_contains "$T_ERR" "country" "an unknown filter column gets a did-you-mean"

# ---- bad values, skip and quarantine ----------------------------------------
printf 'id,score,day\n1,0.5,2024-01-01\n2,??,2024-01-02\n3,1.5,2024-01-03\n4,2.5,not-a-date\n5,3.5,2024-01-05\n' >bad.csv
printf 'score: float64\nday: date\n' >schema.yaml
expect_exit 1 mr data ingest bad.csv bad_ds --schema schema.yaml
assert_contains "$T_ERR" "bad.csv:3:2" "a bad value names file:line:field"
assert_contains "$T_ERR" "column 'score'" "... the column"
assert_contains "$T_ERR" '"??"' "... and the value"
assert_no_file bad_ds "a failed ingest leaves no dataset"
assert_eq "$(ls -d bad_ds.tmp.* 2>/dev/null | wc -l)" 0 "a failed ingest leaves no staging directory"
expect_exit 0 mr data ingest bad.csv skip_ds --schema schema.yaml --on-error skip --json
assert_eq "$(json 'd["rows_skipped"]')" 2 "skip: bad rows counted"
assert_eq "$(json 'd["rows_written"]')" 3 "skip: good rows written"
assert_no_file skip_ds/quarantine.csv "skip writes no quarantine file"
expect_exit 0 mr data ingest bad.csv q_ds --schema schema.yaml --on-error quarantine --json
assert_eq "$(json 'd["rows_quarantined"]')" 2 "quarantine: bad rows counted"
assert_file_content q_ds/quarantine.csv "$(printf '2,??,2024-01-02\n4,2.5,not-a-date')" "quarantine: bad rows kept unchanged inside the dataset"
expect_exit 2 mr data ingest bad.csv x --on-error maybe
expect_exit 2 mr data frobnicate
assert_contains "$T_ERR" "unknown subcommand" "unknown subcommand is a usage error"
for sub in ingest inspect head stats export; do
    expect_exit 0 mr data $sub --help
    assert_contains "$T_OUT" "usage: millrace data $sub" "data $sub --help"
done

# ---- the ingest op in a pipeline ---------------------------------------------
pws=$(new_ws pipe)
cd "$pws" || fail "cd"
mkdir -p raw logs
python3 - <<'PY'
import random, math
r = random.Random(3)
with open("raw/train.csv", "w") as f:
    f.write("id,x1,x2,label\n")
    for i in range(12000):
        x1, x2 = r.gauss(0, 1), r.gauss(0, 1)
        y = 1 if r.random() < 1 / (1 + math.exp(-(2 * x1 - x2))) else 0
        f.write(f"{i},{x1:.5f},{x2:.5f},{y}\n")
    f.write("12000,oops,0.1,1\n")
with open("logs/a.csv", "w") as f:
    f.write("k,v\n1,10\n2,20\n")
PY
cat >millrace.yaml <<'YAML'
stages:
  ingest:
    op: ingest
    source: raw/train.csv
    schema: {x1: float64, x2: float64}
    on_error: quarantine
    row_group_rows: 4096
  logs:
    op: ingest
    source: logs/*.csv
  model:
    op: train
    train: ${stages.ingest}
    label: label
    exclude: [id]
    params: {objective: binary, num_iterations: 10}
YAML
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 3 "ingest, glob ingest and train run"
assert_file out/ingest/manifest.json "the op publishes a dataset"
assert_file_content out/ingest/quarantine.csv "12000,oops,0.1,1" "the quarantine file is inside the artifact"
expect_exit 0 mr show --json
metric() { json "[int(m[\"value\"]) for m in d[\"metrics\"] if m[\"name\"] == \"$1\" and m.get(\"stage\", \"ingest\") == \"${2:-ingest}\"][0]"; }
assert_eq "$(metric rows_written)" 12000 "metric rows_written"
assert_eq "$(metric rows_read)" 12001 "metric rows_read"
assert_eq "$(metric rows_quarantined)" 1 "metric rows_quarantined"
assert_eq "$(metric rows_skipped)" 1 "metric rows_skipped"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) == $(stat -c %s raw/train.csv) else 1)" "$(metric bytes_read)" ||
    fail "bytes_read should be the CSV's size"
pass "metric bytes_read"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 0 "a re-run is cached"
echo "12001,0.5,0.5,1" >>raw/train.csv
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "ingest=executed logs=cached model=executed" "a changed source re-runs ingest and train"
printf 'k,v\n3,30\n' >logs/b.csv
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "ingest=cached logs=executed model=cached" "a new file matching the glob re-runs the glob stage"
expect_exit 0 mr data inspect out/logs --json
assert_eq "$(json 'd["rows"]')" 3 "the glob stage read both files"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 0 "the glob stage is cached afterwards"
expect_exit 0 mr run --smoke --json
expect_exit 0 mr show --json
assert_eq "$(metric rows_written)" 10000 "smoke mode ingests the first 10,000 rows"
expect_exit 0 mr data inspect out/ingest --json
assert_eq "$(json 'd["rows"]')" 10000 "the smoke dataset holds 10,000 rows"
sed -i 's/on_error: quarantine/on_error: fail/' millrace.yaml
expect_exit 1 mr run
expect_exit 0 mr runs --json
run_cmd cat .millrace/logs/run-*/ingest.log
assert_contains "$T_OUT" "train.csv:12002:2" "a failing ingest stage names file:line:field in its log"
assert_contains "$T_OUT" "column 'x1'" "... and the column"
t_done
