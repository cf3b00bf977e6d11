#!/usr/bin/env bash
# Missing-value tokens and the columns they used to spoil: a 5,000-row CSV
# whose numeric 'age' column holds one "n/a" stays numeric through `data
# ingest`, `data inspect` and `data stats`; one holding a "?" is read as
# string and ingest says so on stderr with file:line:field, the counts and the
# value (also in the ingest op's stage log and the run's output), and declaring "?" a null token
# fixes it; strings that look like null tokens survive `data export` to CSV
# and back.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws tokens)
cd "$ws" || fail "cd"
python3 - <<'PY'
# id,name,score,city,day,flag,age: 7 columns, 'age' is field 7
def write(path, bad):
    with open(path, "w") as f:
        f.write("id,name,score,city,day,flag,age\n")
        for i in range(5000):
            age = bad if i == 1040 else str(18 + i % 60)
            f.write(f"{i},user{i},{i * 0.25},c{i % 7},2024-01-{1 + i % 28:02d},{'true' if i % 2 else 'false'},{age}\n")
write("na.csv", "n/a")
write("events.csv", "?")
PY

# ---- "n/a" is a null token: the column stays int64 ----------------------------------
expect_exit 0 mr data ingest na.csv na_ds --json
assert_not_contains "$T_ERR" "warning" "a null token raises no warning"
expect_exit 0 mr data inspect na_ds --json
assert_eq "$(json '[c["type"] for c in d["columns"] if c["name"] == "age"][0]')" int64 "inspect: age stays int64"
assert_eq "$(json '[c["null_count"] for c in d["columns"] if c["name"] == "age"][0]')" 1 "inspect: the n/a is the one null"
assert_eq "$(json '[c["max"] for c in d["columns"] if c["name"] == "age"][0]')" 77 "inspect: age max"
expect_exit 0 mr data stats na_ds --json
assert_eq "$(json '[c["nulls"] for c in d["columns"] if c["name"] == "age"][0]')" 1 "stats: one null age"
assert_eq "$(json '[c["distinct_estimate"] for c in d["columns"] if c["name"] == "age"][0]')" 60 "stats: 60 distinct ages"

# ---- "?" is not: the column is read as string, and ingest says so --------------------
expect_exit 0 mr data ingest events.csv ev_ds
assert_contains "$T_ERR" \
    "millrace: warning: events.csv:1042:7: column 'age' was read as string: 4,999 of 5,000 values are numbers; the first that is not is \"?\" (declare it as a null token or fix the value)" \
    "ingest warns of a numeric column read as string, naming file:line:field, the counts and the value"
expect_exit 0 mr data inspect ev_ds --json
assert_eq "$(json '[c["type"] for c in d["columns"] if c["name"] == "age"][0]')" string "... and the column is a string column"
expect_exit 0 mr data ingest events.csv ev_fixed --null-values '?'
assert_not_contains "$T_ERR" "warning" "declaring the token as a null value silences the warning"
expect_exit 0 mr data inspect ev_fixed --json
assert_eq "$(json '[c["type"] for c in d["columns"] if c["name"] == "age"][0]')" int64 "... and the column is numeric"
printf 'age: string\n' >schema.yaml
expect_exit 0 mr data ingest events.csv ev_str --schema schema.yaml
assert_not_contains "$T_ERR" "warning" "a column declared string raises no warning"

# ---- the ingest op logs the warning in its stage log ---------------------------------
cat >millrace.yaml <<'YAML'
stages:
  ingest:
    op: ingest
    source: events.csv
YAML
expect_exit 0 mr run
assert_contains "$T_ERR" "warning: stage 'ingest': events.csv:1042:7: column 'age' was read as string" \
    "millrace run shows the stage's warning"
run_cmd cat .millrace/logs/run-*/ingest.log
assert_contains "$T_OUT" "events.csv:1042:7: column 'age' was read as string" "the ingest op's log holds the warning"

# ---- null-looking strings survive an export to CSV and back ---------------------------
printf 'id,s\n1,"NA"\n2,""\n3,"null"\n4,\n5,"-"\n6,"None"\n7,plain\n' >strs.csv
expect_exit 0 mr data ingest strs.csv strs_ds
expect_exit 0 mr data export strs_ds back.csv
assert_file_content back.csv "$(printf 'id,s\n1,"NA"\n2,""\n3,"null"\n4,\n5,"-"\n6,"None"\n7,plain')" \
    "export quotes every null token and the empty string; a null stays empty"
expect_exit 0 mr data export strs.csv back2.csv
assert_eq "$(cat back2.csv)" "$(cat back.csv)" "two exports of one table are the same bytes"
expect_exit 0 mr data head back.csv -n 10 --json
assert_eq "$(printf '%s\n' "$T_OUT" | python3 -c 'import json,sys; print("|".join(repr(json.loads(l)["s"]) for l in sys.stdin))')" \
    "'NA'|''|'null'|None|'-'|'None'|'plain'" "the export reads back as the same strings and null"
t_done
