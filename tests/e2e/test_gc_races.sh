# gc and runs exclude each other, and a killed gc leaves a smaller, valid
# store (issue 18, findings 2 and 3).
#  - gc --keep-runs 1 in a loop while runs with changing params proceed:
#    every run exits 0, and afterwards millrace.lock's outputs all exist,
#    every stage-cache entry names objects that exist, verify is clean.
#  - gc killed with SIGKILL at many points of its work: verify is clean after
#    every kill (no manifest lists a deleted file, no cache entry names a
#    deleted object).
. "$(dirname "$0")/lib.sh" "$@"

ROUNDS=${GC_RACE_ROUNDS:-12}
KILLS=${GC_KILLS:-12}
ws=$(new_ws gcrace)
cd "$ws" || fail "cd"
cat >millrace.yaml <<'YAML'
params:
  n: 0
stages:
  make:
    op: exec
    cmd: "mkdir -p d && for i in $(seq 1 60); do echo ${params.n}-$i > d/f$i.txt; done"
    outs: [d]
  sum:
    op: exec
    cmd: "cat d/*.txt | wc -l > sum.txt; echo ${params.n} >> sum.txt"
    deps: [d]
    outs: [sum.txt]
YAML

consistent() { # what: millrace.lock, the stage cache and the store agree
    python3 - <<'PY' || fail "$1: a reference names a missing object"
import json, os, re, sqlite3, sys
def has(i):
    h = i.split(".")[0]
    return os.path.exists(os.path.join(".millrace/objects", h[:2], h[2:] + (".dir" if i.endswith(".dir") else "")))
bad = []
section = None
for line in (open("millrace.lock") if os.path.exists("millrace.lock") else []):
    s = line.strip()
    if line.startswith("    ") and not line.startswith("      "):
        section = s.rstrip(":").split(":")[0]
    elif section == "outputs" and line.startswith("      "):
        i = s.split(": ", 1)[1]
        if not has(i): bad.append("lock output: " + s)
db = sqlite3.connect(".millrace/runs.db")
for key, outs in db.execute("SELECT key, outputs_json FROM stage_cache"):
    for i in json.loads(outs).values():
        if not has(i): bad.append("cache %s: %s" % (key[:8], i))
if bad:
    print(*bad[:5], sep="\n", file=sys.stderr)
    sys.exit(1)
PY
    expect_exit 0 mr verify
}

# 1. gc in a loop beside runs.
( for _ in $(seq 200); do "$MR_BIN" -q gc --keep-runs 1 >/dev/null 2>&1 || true; sleep 0.02; done ) &
gcloop=$!
bg_track $gcloop
for r in $(seq "$ROUNDS"); do
    expect_exit 0 mr -q run -S n=$((r % 4))
    consistent "after run $r beside a gc loop"
done
kill "$gcloop" 2>/dev/null
wait "$gcloop" 2>/dev/null
pass "$ROUNDS runs with changing params beside gc --keep-runs 1 in a loop: all consistent"

# 2. gc killed at many points.
for k in $(seq "$KILLS"); do
    for r in 1 2 3; do expect_exit 0 mr -q run -S n=$((100 + k * 3 + r)); done
    "$MR_BIN" -q gc --keep-runs 1 >/dev/null 2>&1 &
    g=$!
    sleep "0.0$(( (k * 7) % 10 ))"
    kill -9 "$g" 2>/dev/null
    wait "$g" 2>/dev/null
    consistent "after gc killed (trial $k)"
done
pass "$KILLS gc runs killed with SIGKILL at different points: the store stayed valid each time"
expect_exit 0 mr gc --keep-runs 1
consistent "after a full gc"
t_done
