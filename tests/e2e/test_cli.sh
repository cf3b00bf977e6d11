# Every verb's --help exits 0 and prints usage; unknown verbs and options
# exit 2 with a hint; init scaffolds a runnable pipeline; dag, params, ops.
. "$(dirname "$0")/lib.sh" "$@"

expect_exit 0 mr --help
assert_contains "$T_OUT" "usage: millrace" "millrace --help prints usage"
verbs=$(printf '%s\n' "$T_OUT" | sed -n '/^verbs:/,/^$/p' | awk 'NF && $1 != "verbs:" {print $1}')
[ "$(printf '%s\n' "$verbs" | wc -l)" -ge 10 ] || fail "could not read the verb list from --help: $verbs"
pass "--help lists $(printf '%s\n' "$verbs" | wc -l) verbs"
for v in init run status dag params runs show compare verify gc; do
    grep -qx -- "$v" <<<"$verbs" || fail "--help does not list verb $v"
done
pass "--help lists every verb of the issue"
for v in $verbs; do
    expect_exit 0 mr "$v" --help
    assert_contains "$T_OUT" "usage: millrace $v" "$v --help prints its usage"
    expect_exit 0 mr "$v" -h
done
expect_exit 0 mr --version
assert_match "$T_OUT" "^millrace [0-9]" "--version"

expect_exit 2 mr frobnicate
assert_contains "$T_ERR" "unknown verb 'frobnicate'" "unknown verb named"
expect_exit 2 mr rnu
assert_contains "$T_ERR" "did you mean 'millrace run'?" "unknown verb: did-you-mean hint"
# As in git, cargo or docker: bare millrace says what it is and what to type.
expect_exit 0 mr
assert_contains "$T_OUT" "usage: millrace" "no verb: usage on stdout, exit 0"
assert_contains "$T_OUT" "millrace init" "no verb: it says how to start"
expect_exit 0 mr help
assert_contains "$T_OUT" "usage: millrace" "millrace help lists the verbs"
expect_exit 0 mr help run
assert_contains "$T_OUT" "usage: millrace run" "millrace help VERB is VERB --help"
expect_exit 2 mr help frobnicate
assert_contains "$T_ERR" "unknown verb 'frobnicate'" "help of an unknown verb"
expect_exit 0 mr -V
assert_match "$T_OUT" "^millrace [0-9]+\.[0-9]+" "-V prints the version"
expect_exit 0 mr version
assert_match "$T_OUT" "^millrace [0-9]+\.[0-9]+" "millrace version prints the version"
expect_exit 2 mr --bogus
expect_exit 2 mr run --bogus
assert_contains "$T_ERR" "unknown option '--bogus'" "run: unknown option named"
assert_contains "$T_ERR" "millrace run --help" "run: unknown option hint"
expect_exit 2 mr run -j 0
expect_exit 2 mr run -j
expect_exit 2 mr run --force
expect_exit 2 mr gc --keep-runs -1
expect_exit 2 mr status --bogus

# init scaffolds a pipeline that runs; a second init refuses to overwrite.
ws=$(new_ws init)
cd "$ws" || fail "cd"
expect_exit 0 mr init
assert_file millrace.yaml "init writes millrace.yaml"
assert_file .millrace "init creates .millrace/"
expect_exit 2 mr init
assert_contains "$T_ERR" "--force" "second init: hint to use --force"
assert_file data/customers.csv "init writes the example table"
assert_eq "$(wc -l < data/customers.csv)" 3001 "3,000 generated customers and a header"
assert_eq "$(mr dag --json | python3 -c 'import json,sys; print(" ".join(s["op"] for s in json.load(sys.stdin)["stages"]))')" \
    "ingest split features train evaluate report" "the scaffold is a real ML pipeline: ingest, split, features, train, evaluate, report"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" "6" "the scaffolded pipeline runs as it is"
assert_file out/report/report.html "it writes the report"
auc=$(python3 -c "import json; print(json.load(open('out/eval/metrics.json'))['metrics']['auc']['value'] > 0.8)" 2>/dev/null || echo "no auc")
assert_eq "$auc" True "the scaffolded model learns something (test AUC > 0.8)"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" "0" "the scaffolded pipeline re-runs from the cache"
expect_exit 0 mr run --json -S train.learning_rate=0.05
assert_eq "$(json '" ".join(s["stage"] for s in d["stages"] if s["status"] == "executed")')" "model eval report" \
    "a learning-rate change re-runs the model and what reads it, never the data stages"
second=$(new_ws init2)
expect_exit 0 mr init "$second"
assert_eq "$(cmp -s data/customers.csv "$second/data/customers.csv" && echo same)" same "init writes the same example bytes every time"
expect_exit 0 mr verify
expect_exit 0 mr runs
assert_match "$T_OUT" "^RUN " "runs prints a header"
expect_exit 2 mr show 999
expect_exit 0 mr dag
expect_exit 0 mr dag --dot
assert_contains "$T_OUT" "digraph" "dag --dot prints a Graphviz graph"
expect_exit 0 mr params
expect_exit 0 mr ops
assert_contains "$T_OUT" "exec (version" "ops lists exec"
expect_exit 2 mr ops --bogus

# dag on the diamond: edges a->b, a->c, b->d, c->d.
ws2=$(new_ws dag)
write_diamond "$ws2"
cd "$ws2" || fail "cd"
expect_exit 0 mr dag --dot
for e in '"a" -> "b"' '"a" -> "c"' '"b" -> "d"' '"c" -> "d"'; do
    assert_contains "$T_OUT" "$e" "dag --dot has edge $e"
done
assert_not_contains "$T_OUT" '"a" -> "d"' "dag --dot: no direct a -> d edge"

t_done
