#!/usr/bin/env bash
# Serving benchmark: single-row requests over keep-alive loopback connections
# with `millrace bench-serve` (in-process server on 127.0.0.1, built-in load
# generator). Model: the bench model of bench/predict — 500 trees x 255
# leaves (learning rate 0.1) trained here on 200,000 Higgs-like rows, about
# 15 s — or the bundle at BENCH_BUNDLE (BENCH_ROUNDS / BENCH_ROWS shrink the
# trained one). Measures, BENCH_REPEATS times (default 3) interleaved so that
# a slow stretch of a shared machine hits every configuration alike, medians
# kept:
#   1. the floor: the same server answering /v1/predict with one constant
#      response, without parsing or predicting (bench-serve --floor), max QPS
#   2. max sustained QPS, closed loop, batching on, and with --max-batch 1
#   3. p50/p99 at 5,000 req/s open loop (micro-batching on: max batch 256, 200 us)
#   4. the protocols: the same row as /v1/predict, MLflow's /invocations
#      (dataframe_split) and the Open Inference Protocol's
#      /v2/models/NAME/infer (one [1, n_inputs] FP64 tensor), each max QPS
#      closed loop and p99 at 5,000 req/s, through one `millrace serve`
#      process and the same load generator (tests/mr_loadtool); the three
#      answers are checked to hold the same number first
#   5. the protocols' cost: instructions per request of each (callgrind, one
#      keep-alive connection, BENCH_CG_REQUESTS sequential requests, 300)
# Every run is bounded (BENCH_SECONDS each, default 5).
# Last line: RESULT serve vs_floor=<predict max QPS / floor max QPS>
#   p99_ms_at_5000=<ms> batching_qps_gain=<on/off> floor_qps=<q> predict_qps=<q>
#   invocations_vs_v1=<max QPS ratio> invocations_cost_vs_v1=<instructions ratio>
#   v2_cost_vs_v1=<instructions ratio> v2_vs_v1=<max QPS ratio>
#   invocations_p99_ms_at_5000=<ms> v2_p99_ms_at_5000=<ms> v1_p99_ms_at_5000_process=<ms>
# (targets, issue 19: vs_floor >= 0.8, p99 <= 1 ms; issue 17: the protocols cost
# under 10% more than /v1/predict, *_cost_vs_v1 <= 1.1).
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
mr=$arg
[ -d "$arg" ] && mr=$arg/millrace
[ -x "$mr" ] || { echo "bench/serve: no millrace at $mr" >&2; exit 2; }
mr=$(cd "$(dirname "$mr")" && pwd)/$(basename "$mr")
PY=${MR_PYTHON:-/usr/bin/python3}
shared=${MILLRACE_SHARED:-$repo/../shared}
SECS=${BENCH_SECONDS:-5}
CONN=${BENCH_CONNECTIONS:-32}
ws=$(mktemp -d /tmp/millrace-bench-serve.XXXXXX)
trap 'chmod -R u+w "$ws"; rm -rf "$ws"' EXIT
cd "$ws" || exit 1
bundle=${BENCH_BUNDLE:-}
if [ -z "$bundle" ]; then
    rows=${BENCH_ROWS:-200000}
    data=/tmp/millrace-bench-serve-data-$rows
    [ -f "$data/train.csv" ] || "$PY" "$shared/bench/gen_higgs_like.py" "$data" --n-train "$rows" --n-test 1000 >/dev/null || exit 1
    "$mr" train "$data/train.csv" --label label -j 2 -p objective=binary -p num_iterations=${BENCH_ROUNDS:-500} \
        -p learning_rate=0.1 -p num_leaves=255 -p max_bin=255 -p min_data_in_leaf=20 -o model.bin >/dev/null || exit 1
    printf 'stages:\n  pkg:\n    op: package\n    model: model.bin\n' >millrace.yaml
    "$mr" run >/dev/null 2>&1 || exit 1
    bundle=$ws/out/pkg/model.mrb
fi
echo "# bundle: $bundle ($("$mr" bundle inspect "$bundle" --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["model"]["kind"], d["model"].get("trees"), "trees")'))"
j() { "$PY" -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
REP=${BENCH_REPEATS:-3}
for ((r = 1; r <= REP; r++)); do
    "$mr" bench-serve "$bundle" --qps 0 --duration "$SECS" --connections "$CONN" --floor --json >floor.$r.json || exit 1
    "$mr" bench-serve "$bundle" --qps 0 --duration "$SECS" --connections "$CONN" --json >on.$r.json || exit 1
    "$mr" bench-serve "$bundle" --qps 0 --duration "$SECS" --connections "$CONN" --max-batch 1 --json >off.$r.json || exit 1
    "$mr" bench-serve "$bundle" --qps 5000 --duration "$SECS" --connections "$CONN" --json >open.$r.json || exit 1
done
printf '%-28s %3s %10s %9s %9s %9s %9s %8s\n' run rep achieved_qps p50_ms p90_ms p99_ms max_ms errors
for k in floor on off open; do
    case $k in floor) name="floor (constant answer)" ;; on) name="max qps, batching on" ;; off) name="max qps, max-batch 1" ;; open) name="5000 req/s, batching on" ;; esac
    for ((r = 1; r <= REP; r++)); do
        f=$k.$r.json
        printf '%-28s %3d %10.0f %9.3f %9.3f %9.3f %9.3f %8s\n' "$name" "$r" "$(j $f achieved_qps)" "$(j $f p50_ms)" \
            "$(j $f p90_ms)" "$(j $f p99_ms)" "$(j $f max_ms)" "$("$PY" -c "import json; d=json.load(open('$f')); print(d['non_2xx']+d['errors'])")"
    done
done
# 4. the protocols, against one server process
tool=$(dirname "$mr")/tests/mr_loadtool
[ -x "$tool" ] || { echo "bench/serve: no $tool (build the tests)" >&2; exit 2; }
"$mr" serve "$bundle" --port 0 --port-file port.txt --max-queue 100000 >serve.log 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null; chmod -R u+w "$ws"; rm -rf "$ws"' EXIT
for i in $(seq 100); do [ -s port.txt ] && break; sleep 0.1; done
port=$(cat port.txt)
"$PY" - "$port" <<'PY' || { echo "bench/serve: FAIL: the protocols do not answer the same number" >&2; exit 1; }
import json, re, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
man = json.load(urllib.request.urlopen(base + "/v1/model"))["manifest"]
name = man.get("name") or ""
name = name if re.fullmatch(r"[A-Za-z0-9._-]{1,128}", name) else "model"
cols = [i["name"] for i in man["inputs"]]
row = [0.5] * len(cols)
bodies = {"v1": {"rows": [dict(zip(cols, row))]},
          "inv": {"dataframe_split": {"columns": cols, "data": [row]}},
          "v2": {"inputs": [{"name": "input", "shape": [1, len(cols)], "datatype": "FP64", "data": row}]}}
paths = {"v1": "/v1/predict", "inv": "/invocations", "v2": f"/v2/models/{name}/infer"}
got = {}
for k, b in bodies.items():
    open(f"body.{k}.json", "w").write(json.dumps(b))
    open(f"path.{k}", "w").write(paths[k])
    req = urllib.request.Request(base + paths[k], json.dumps(b).encode(), {"Content-Type": "application/json"})
    a = json.loads(urllib.request.urlopen(req).read(), parse_float=str)
    got[k] = a["predictions"][0] if k != "v2" else a["outputs"][0]["data"][0]
print("# one row through each protocol:", got)
sys.exit(0 if len(set(got.values())) == 1 else 1)
PY
for ((r = 1; r <= REP; r++)); do
    for k in v1 inv v2; do
        "$tool" "$port" "$(cat path.$k)" body.$k.json 0 "$SECS" "$CONN" >p_max_$k.$r.json || exit 1
        "$tool" "$port" "$(cat path.$k)" body.$k.json 5000 "$SECS" "$CONN" >p_open_$k.$r.json || exit 1
    done
done
kill -TERM "$spid"
wait "$spid"
for k in v1 inv v2; do
    for ((r = 1; r <= REP; r++)); do
        for m in max open; do
            f=p_${m}_$k.$r.json
            printf '%-28s %3d %10.0f %9.3f %9.3f %9.3f %9.3f %8s\n' "$(cat path.$k | cut -c1-18) $m" "$r" "$(j $f achieved_qps)" \
                "$(j $f p50_ms)" "$(j $f p90_ms)" "$(j $f p99_ms)" "$(j $f max_ms)" \
                "$("$PY" -c "import json; d=json.load(open('$f')); print(d['non_2xx']+d['errors'])")"
        done
    done
done
# 5. what each protocol costs: instructions per request (callgrind), the same
# row sent BENCH_CG_REQUESTS times (300) over one keep-alive connection to a
# server under callgrind, the counters zeroed before and dumped after each
# protocol. Unlike req/s on this shared machine (where the load generator
# shares the two cores with the server, and /v1/predict's own max req/s moves
# between 12k and 25k from one run to the next) it does not depend on the
# machine's load: the cost ratio is the number the "under 10% more" target reads.
cg=$ws/cg
mkdir -p "$cg"
valgrind --tool=callgrind --callgrind-out-file="$cg/out.%p" "$mr" serve "$bundle" --port 0 --port-file "$cg/port" \
    >"$cg/serve.log" 2>&1 &
cpid=$!
for i in $(seq 1200); do [ -s "$cg/port" ] && break; sleep 0.1; done
"$PY" - "$(cat "$cg/port")" "${BENCH_CG_REQUESTS:-300}" "$cpid" <<'PY' || { echo "bench/serve: FAIL: the callgrind run" >&2; exit 1; }
import http.client, subprocess, sys
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
def send(k, m):
    body, path = open(f"body.{k}.json", "rb").read(), open(f"path.{k}").read()
    for _ in range(m):
        c.request("POST", path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"{path}: {r.status}")
send("v1", 30)  # warm: first-request allocations and lazy setup are nobody's cost
for k in ("v1", "inv", "v2"):
    subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    send(k, n)
    subprocess.run(["callgrind_control", "--dump=" + k, pid], check=True, capture_output=True)
PY
kill -INT "$cpid"
wait "$cpid"
ir() { for f in "$cg"/out.*; do grep -q "^desc: Trigger: dump $1\$" "$f" && sed -n 's/^summary: //p' "$f"; done | head -1; }
irv1=$(ir v1) irinv=$(ir inv) irv2=$(ir v2)
nreq=${BENCH_CG_REQUESTS:-300}
echo "# instructions per request (callgrind, $nreq sequential requests each): /v1/predict $((irv1 / nreq)), /invocations $((irinv / nreq)), /v2 infer $((irv2 / nreq))"
# medians over the repeats
med() { "$PY" -c "import json,statistics; print(statistics.median(json.load(open(f'$1.{r}.json'))['$2'] for r in range(1, $REP + 1)))"; }
floor=$(med floor achieved_qps) on=$(med on achieved_qps) off=$(med off achieved_qps) p99=$(med open p99_ms)
pv1=$(med p_max_v1 achieved_qps) pinv=$(med p_max_inv achieved_qps) pv2=$(med p_max_v2 achieved_qps)
p99v1=$(med p_open_v1 p99_ms) p99inv=$(med p_open_inv p99_ms) p99v2=$(med p_open_v2 p99_ms)
echo "# protocols, medians of $REP: /v1/predict $pv1 req/s (p99 $p99v1 ms at 5000), /invocations $pinv ($p99inv ms), /v2 infer $pv2 ($p99v2 ms)"
echo "# medians of $REP: floor $floor req/s, predict $on req/s (batching on), $off req/s (max-batch 1), p99 at 5000 req/s $p99 ms"
echo "RESULT serve vs_floor=$("$PY" -c "print(round($on / $floor, 3))") p99_ms_at_5000=$p99 batching_qps_gain=$("$PY" -c "print(round($on / $off, 2))") floor_qps=$("$PY" -c "print(round($floor))") predict_qps=$("$PY" -c "print(round($on))") invocations_vs_v1=$("$PY" -c "print(round($pinv / $pv1, 3))") invocations_cost_vs_v1=$("$PY" -c "print(round($irinv / $irv1, 3))") v2_cost_vs_v1=$("$PY" -c "print(round($irv2 / $irv1, 3))") v2_vs_v1=$("$PY" -c "print(round($pv2 / $pv1, 3))") invocations_p99_ms_at_5000=$p99inv v2_p99_ms_at_5000=$p99v2 v1_p99_ms_at_5000_process=$p99v1"
