# Concurrent runs with different params never poison the cache (issue 18,
# finding 1): runners started a moment apart on one workspace, each with
# its own -S round=R, on a two-stage exec pipeline where a appends lines
# slowly to a.txt and b copies a.txt to b.txt. Afterwards every stage-cache
# entry must hold what its key describes: a's output only its round's
# lines, b's output exactly the a.txt its key names; and a later sequential
# run of each round is all cache hits with that round's content in b.txt.
. "$(dirname "$0")/lib.sh" "$@"

ITER=${RACE_ITER:-4}
RUNNERS=${RACE_RUNNERS:-4}
ws=$(new_ws race)
cd "$ws" || fail "cd"
cat >millrace.yaml <<'YAML'
params:
  round: 0
stages:
  a:
    op: exec
    cmd: "for i in 1 2 3 4 5 6; do echo round=${params.round} line=$i >> a.txt; sleep 0.03; done"
    outs: [a.txt]
  b:
    op: exec
    cmd: "sleep 0.05; cp a.txt b.txt; sleep 0.05"
    deps: [a.txt]
    outs: [b.txt]
YAML

for it in $(seq "$ITER"); do
    pids=()
    for r in $(seq "$RUNNERS"); do
        "$MR_BIN" -q run -S round=$((it * 10 + r)) >"run.$r.out" 2>"run.$r.err" &
        pids+=($!)
        bg_track $!
        sleep 0.05
    done
    for p in "${pids[@]}"; do wait "$p"; done
done
pass "$((ITER * RUNNERS)) runs with different params ran concurrently, $RUNNERS at a time"

# Every cache entry against what its key says (the key documents in runs.db).
bad=$(python3 - <<'PY'
import json, os, sqlite3
db = sqlite3.connect(".millrace/runs.db")
def obj(i):
    i = i.split(".")[0]
    return open(os.path.join(".millrace/objects", i[:2], i[2:]), "rb").read()
bad, n = [], 0
for stage, doc, outs in db.execute("SELECT stage, key_doc, outputs_json FROM stage_cache WHERE stage IN ('a','b')"):
    doc, outs = json.loads(doc), json.loads(outs)
    n += 1
    if stage == "a":
        r = doc["params"]["round"]
        lines = obj(outs["a.txt"]).decode().split("\n")[:-1]
        if len(lines) != 6 or any(l.split()[0] != "round=%d" % r for l in lines):
            bad.append("a for round %d holds %r" % (r, lines))
    else:
        if obj(outs["b.txt"]) != obj(doc["inputs"]["a.txt"]):
            bad.append("b for a.txt %s holds another a.txt" % doc["inputs"]["a.txt"][:8])
print("%d of %d" % (len(bad), n), *bad[:5], sep="\n")
PY
)
assert_eq "$(head -1 <<<"$bad")" "0 of $(head -1 <<<"$bad" | cut -d' ' -f3)" "no cache entry holds a result its key does not describe"

# A later run of each round: all hits, and the workspace holds that round.
for it in 1 "$ITER"; do
    for r in 1 "$RUNNERS"; do
        R=$((it * 10 + r))
        expect_exit 0 mr run --json -S round=$R
        assert_eq "$(json 'd["executed"]')" 0 "round $R re-runs from the cache"
        assert_eq "$(sort -u <(cut -d' ' -f1 b.txt))" "round=$R" "b.txt holds round $R's lines after its cached run"
    done
done
expect_exit 0 mr verify
t_done
