#!/usr/bin/env bash
# Tuning benchmark: millrace's tune op (TPE + ASHA, trials in parallel)
# against Optuna (TPE + successive halving) driving XGBoost with its pruning
# callback, same search space, same rounds, same wall budget and cores, on a
# 200,000-row sample of the bench/gbdt data (160k train, 40k validation).
#
#   bench/tune/run.sh [BUILD_DIR|MILLRACE]   (BUDGET=120 THREADS=2 ROUNDS=300)
#
# Reported: trials run, best validation AUC within the budget, and the time
# each took to first reach the target AUC = (the lower of the two best AUCs)
# - 0.002, which both reach by construction. Both clocks start before the
# data is loaded (millrace reads CSV, Optuna/XGBoost .npy). Ends with
#   RESULT tune speedup_vs_optuna=<Optuna time-to-target / millrace's>
#          best_auc_minus_optuna=<difference>
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
[ -f "$arg" ] && arg=$(dirname "$arg") # the millrace binary (make bench passes it) or its build directory
build=$(cd "$arg" && pwd) || exit 2
MR=$build/millrace
PY=${MR_PYTHON:-/usr/bin/python3}
BUDGET=${BUDGET:-120}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-300}
gen=$repo/../shared/bench/gen_higgs_like.py
[ -f "$gen" ] || gen=/work/shared/bench/gen_higgs_like.py
[ -x "$MR" ] || { echo "build millrace first ($MR)" >&2; exit 2; }
"$PY" -c "import optuna, xgboost" 2>/dev/null || { echo "bench/tune: needs python3-optuna and python3-xgboost: run scripts/install-deps.sh --bench (make bench does)" >&2; exit 2; }
data=/tmp/millrace-bench-tune
if [ ! -f "$data/train.csv" ] || [ ! -f "$data/test_X.npy" ]; then
    echo "# generating 160000 + 40000 rows into $data"
    "$PY" "$gen" "$data" --n-train 160000 --n-test 40000 >/dev/null || exit 1
fi
ws=$(mktemp -d /tmp/millrace-bench-tune-ws.XXXXXX)
trap 'chmod -R u+w "$ws"; rm -rf "$ws"' EXIT
ln -s "$data/train.csv" "$ws/train.csv"
ln -s "$data/test.csv" "$ws/valid.csv"
cat >"$ws/millrace.yaml" <<YAML
stages:
  tune:
    op: tune
    resources: {cpus: $THREADS}
    train: train.csv
    valid: valid.csv
    label: label
    params: {objective: binary, num_iterations: $ROUNDS, max_bin: 255, metric: auc}
    space:
      learning_rate: {loguniform: [0.02, 0.3]}
      num_leaves: {int: [15, 255]}
      lambda_l2: {uniform: [0, 10]}
      feature_fraction: {uniform: [0.5, 1.0]}
    n_trials: 10000
    parallel: $THREADS
    sampler: {type: tpe, n_startup_trials: 10}
    pruner: {type: asha, min_resource: 10, reduction_factor: 3}
    timeout_s: $BUDGET
    seed: 1
YAML
echo "# budget ${BUDGET}s, $THREADS cores, $ROUNDS rounds; optuna $("$PY" -c 'import optuna; print(optuna.__version__)'), xgboost $("$PY" -c 'import xgboost; print(xgboost.__version__)')"
t0=$(date +%s.%N)
(cd "$ws" && "$MR" run -j "$THREADS" >"$ws/mr.out" 2>&1) || { cat "$ws/mr.out" "$ws"/.millrace/logs/run-1/tune.log | tail -20; exit 1; }
t1=$(date +%s.%N)
"$PY" "$here/optuna_run.py" --data "$data" --budget "$BUDGET" --threads "$THREADS" --rounds "$ROUNDS" >"$ws/optuna.out" 2>"$ws/optuna.err" ||
    { tail -20 "$ws/optuna.err"; exit 1; }
"$PY" - "$ws" "$t0" "$t1" <<'PY'
import json, sys
ws, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
mr = json.load(open(f"{ws}/out/tune/trials.json"))
mr_trials = sorted(((t["done_s"], t["value"], t["status"]) for t in mr if t["status"] != "failed"), key=lambda r: r[0])
op = []
for line in open(f"{ws}/optuna.out"):
    p = line.split()
    if p[0] == "trial" and p[4] in ("COMPLETE", "PRUNED") and p[3] != "nan":
        op.append((float(p[2]), float(p[3]), p[4].lower()))
def best(ts):  # best AUC of complete trials (pruned ones never report a final model)
    return max((v for _, v, st in ts if st == "complete"), default=float("nan"))
def time_to(ts, target):
    for t, v, st in sorted(ts):
        if st == "complete" and v >= target:
            return t
    return float("inf")
bm, bo = best(mr_trials), best(op)
target = min(bm, bo) - 0.002
tm, to = time_to(mr_trials, target), time_to(op, target)
n_pr = lambda ts: sum(st == "pruned" for _, _, st in ts)
print(f"{'system':9} {'trials':>6} {'pruned':>6} {'best_auc':>9} {'t_target_s':>10}")
print(f"{'millrace':9} {len(mr_trials):6d} {n_pr(mr_trials):6d} {bm:9.5f} {tm:10.2f}")
print(f"{'optuna':9} {len(op):6d} {n_pr(op):6d} {bo:9.5f} {to:10.2f}")
print(f"# target AUC {target:.5f}; millrace wall (process) {t1 - t0:.1f}s")
print(f"RESULT tune speedup_vs_optuna={to / tm:.2f} best_auc_minus_optuna={bm - bo:+.5f}")
PY
