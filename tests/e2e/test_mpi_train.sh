#!/usr/bin/env bash
# Training across ranks (docs/cluster.md "Training across ranks"): the model
# `mpirun -np 2 --oversubscribe` and `-np 3` train (directly, through
# `millrace train --ranks N`, and as a pipeline stage with distributed:) is
# the single-process model byte for byte, on a CSV file, a Parquet file and
# datasets, with bagging, feature sampling, a categorical feature, early
# stopping and a training metric, for binary, multiclass, L1 and huber
# objectives; a share with no rows is legal; kill -9 of a rank, and a rank
# that stops answering, end every rank non-zero within the deadline with a
# message naming it.
. "$(dirname "$0")/lib.sh" "$@"

command -v mpirun >/dev/null || fail "mpirun is not installed (scripts/install-deps.sh installs openmpi-bin)"
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

ws=$(new_ws mpi)
cd "$ws" || fail "cd"
/usr/bin/python3 - <<'PYEOF' || fail "data generation"
import random
random.seed(7)
cols = ['x%d' % i for i in range(8)] + ['c', 'y']
with open('train.csv', 'w') as f, open('valid.csv', 'w') as g:
    for h in (f, g):
        h.write(','.join(cols) + '\n')
    for r in range(26000):
        x = [random.gauss(0, 1) for _ in range(8)]
        c = random.randint(0, 20)
        z = x[0] * 1.2 - x[1] + 0.5 * x[2] * x[3] + (0.8 if c % 3 == 0 else -0.3) + random.gauss(0, 1)
        xs = ['' if random.random() < 0.05 else '%.5f' % v for v in x]
        (f if r < 20000 else g).write(','.join(xs + [str(c), str(1 if z > 0 else 0)]) + '\n')
random.seed(3)
with open('mc.csv', 'w') as f:
    f.write('a,b,c,y\n')
    for i in range(9001):
        a, b, c = random.gauss(0, 1), random.gauss(0, 1), random.randint(0, 5)
        y = (0 if a < -0.5 else 1 if a < 0.5 else 2) if random.random() < 0.8 else random.randint(0, 2)
        f.write('%.4f,%.4f,%d,%d\n' % (a, b, c, y))
PYEOF
expect_exit 0 mr data ingest train.csv ds3 --rows-per-shard 7000 --row-group-rows 3000
expect_exit 0 mr data ingest train.csv ds2 --rows-per-shard 12000
expect_exit 0 mr data export ds3 train.parquet

BIN=(-p objective=binary -p num_iterations=40 -p num_leaves=15 -p bagging_fraction=0.7 -p bagging_freq=2
     -p feature_fraction=0.8 -p early_stopping_round=5 -p is_provide_training_metric=true -p metric=auc,binary_logloss)
# same_model WHAT SRC ARGS...: one process, then 2 and 3 ranks, give one model file
same_model() {
    local what=$1 src=$2
    shift 2
    expect_exit 0 mr train "$src" -o one.mrm -j 1 "$@"
    for r in 2 3; do
        expect_exit 0 "${MPIRUN[@]}" -np $r "$MR_BIN" train "$src" -o np$r.mrm -j 1 --mpi "$@"
        cmp -s one.mrm np$r.mrm || fail "$what: the model of mpirun -np $r differs from one process's"
        pass "$what: mpirun -np $r trains the single-process model byte for byte"
    done
}
same_model "binary, CSV" train.csv --label y --valid valid.csv --categorical c "${BIN[@]}"
assert_contains "$(mr model inspect np2.mrm)" "binary" "the model is a binary gbdt"
same_model "binary, Parquet (row groups)" train.parquet --label y --valid valid.csv --categorical c "${BIN[@]}"
same_model "binary, dataset of 3 shards" ds3 --label y --valid valid.csv --categorical c "${BIN[@]}"
same_model "multiclass" mc.csv --label y -p objective=multiclass -p num_class=3 -p num_iterations=15 \
    -p bagging_fraction=0.5 -p bagging_freq=1
same_model "regression_l1 (a median of all ranks' labels)" mc.csv --label y -p objective=regression_l1 -p num_iterations=15
same_model "huber, L1 regularised" mc.csv --label y -p objective=huber -p num_iterations=15 -p lambda_l1=0.5 \
    -p min_data_in_leaf=50

# --ranks starts them itself; a dataset of 2 shards over 3 ranks leaves one with no rows.
expect_exit 0 mr train ds2 --label y --valid valid.csv "${BIN[@]}" -o one.mrm -j 1
expect_exit 0 mr -v train ds2 --label y --valid valid.csv "${BIN[@]}" -o r3.mrm -j 1 --ranks 3 --json
cmp -s one.mrm r3.mrm || fail "--ranks 3 on 2 shards: a different model"
pass "--ranks 3 on a dataset of 2 shards: the single-process model"
assert_contains "$T_ERR" "rank 2 of 3 reads rows 20000..20000 of 20000 (0 rows)" "the third rank's share is empty"
assert_contains "$T_ERR" "rank 0 of 3 reads rows 0..12000 of 20000" "shares are whole shards"
assert_eq "$(json 'd["ranks"], d["rows"], d["rank0_rows"]')" "(3, 20000, 12000)" "the summary tells the ranks and the rows"
assert_eq "$(json 'd["rank0_bytes_sent"] > 0')" "true" "rank 0 sent its histograms"

# A pipeline stage: distributed: is how it runs, not what it computes.
pw=$(new_ws pipe)
cp train.csv valid.csv "$pw/"
write_spec() { # DIR DISTRIBUTED-LINE
    cat >"$1/millrace.yaml" <<EOF
stages:
  model:
    op: train
    train: train.csv
    valid: valid.csv
    label: y
    categorical: [c]
$2
    params:
      objective: binary
      metric: [auc, binary_logloss]
      num_iterations: 20
      num_leaves: 15
      bagging_fraction: 0.8
      bagging_freq: 1
      is_provide_training_metric: true
EOF
}
write_spec "$pw" "    distributed: {ranks: 2, timeout: 60}"
lw=$(new_ws pipe_local)
cp train.csv valid.csv "$lw/"
write_spec "$lw" ""
out_of() { (cd "$1" && mr show --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["stages"][0]["outputs"]["out"])'); }
cd "$lw" || fail "cd"
expect_exit 0 mr run
cd "$pw" || fail "cd"
expect_exit 0 mr run
assert_eq "$(out_of "$pw")" "$(out_of "$lw")" "a stage with distributed: {ranks: 2} publishes the local stage's model"
assert_contains "$(cat "$pw"/.millrace/logs/*/model.log)" "training across 2 ranks" "the stage log says it trained across ranks"
expect_exit 0 mr show --json
assert_eq "$(json '" ".join(sorted({m["name"] for m in d["metrics"] if m["name"].startswith("valid.")}))')" \
    "valid.auc valid.binary_logloss" "the ranks' curve becomes the stage's metrics"
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"] == "valid.auc"])')" 20 "... one value per round"
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"] == "train.auc"])')" 20 "... and the training metric's too"
local_train_auc() { (cd "$lw" && mr show --json | /usr/bin/python3 -c 'import json,sys; print([m["value"] for m in json.load(sys.stdin)["metrics"] if m["name"] == "train.auc"][-1])'); }
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"] == "train.auc"][-1]')" "$(local_train_auc)" "the ranks' training AUC is the local stage's"
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"] == "train_rows"][0]')" "20000.0" "train_rows counts every rank's rows"
sed -i 's/ranks: 2, timeout: 60/ranks: 3/' millrace.yaml
expect_exit 0 mr run --json
assert_eq "$(json 'd["cached"]')" 1 "another rank count is a cache hit (the model does not change)"
sed -i 's/ranks: 3/ranks: 0, tmeout: 3/' millrace.yaml
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:8:" "a bad distributed: names its line"
assert_contains "$T_ERR" "distributed.ranks must be an integer 1..65536" "... and what was expected"
cd "$ws" || fail "cd"

# kill -9 of a rank: every rank ends, non-zero, and the message names it.
LONG=(train.csv --label y -p num_iterations=100000 -p min_gain_to_split=0 -o "$ws/long.mrm" -j 1)
ranks_of() { pgrep -f -- "^$MR_BIN train train.csv .*-o $ws/long.mrm .*--mpi" | sort -n; }
three_ranks() { [ "$(ranks_of | wc -l)" = 3 ]; }
no_rank() { [ -z "$(ranks_of)" ]; }
mr train "${LONG[@]}" --ranks 3 --rank-timeout 20 >kill.out 2>kill.err &
launcher=$!
bg_track $launcher
wait_for "three ranks run" 30 three_ranks
victim=$(ranks_of | sed -n 2p)
sleep 1
kill -9 "$victim"
t0=$(date +%s)
wait $launcher
rc=$?
elapsed=$(($(date +%s) - t0))
assert_ne "$rc" 0 "the launcher exits non-zero after kill -9 of a rank"
[ "$elapsed" -le 20 ] || fail "the ranks took ${elapsed}s to end, past the 20 s deadline"
pass "every rank ended within the deadline (${elapsed}s)"
assert_match "$(cat kill.err)" "rank [0-9]+ (with PID [0-9]+ )?on node [^ ]+ exited on signal 9|no answer from rank [0-9]+" "the message names the dead rank"
wait_for "no rank is left" 10 no_rank

# A rank that stops answering (SIGSTOP): the others give up at the deadline, naming it.
mr train "${LONG[@]}" --ranks 3 --rank-timeout 4 >stop.out 2>stop.err &
launcher=$!
bg_track $launcher
wait_for "three ranks run" 30 three_ranks
sleep 1
stopped_rank_pid=$(ranks_of | sed -n 3p)
kill -STOP "$stopped_rank_pid"
t0=$(date +%s)
wait $launcher
rc=$?
elapsed=$(($(date +%s) - t0))
kill -CONT "$stopped_rank_pid" 2>/dev/null
assert_ne "$rc" 0 "the launcher exits non-zero when a rank stops answering"
[ "$elapsed" -le 15 ] || fail "the ranks took ${elapsed}s to give up, past the 4 s deadline"
pass "the others gave up within the deadline (${elapsed}s)"
assert_match "$(cat stop.err)" "rank [0-9]: no answer from rank [0-9] within 4 s \((the best split|a leaf histogram|the root histogram|the root sums|the stop decision|the gradient scale|the gradient check|the bag size), iteration [0-9]+\)" \
    "the message names the rank, the exchange and the round"
wait_for "no rank is left" 10 no_rank

# Bad use.
expect_exit 2 mr train train.csv --label y -o x.mrm --ranks 0
assert_contains "$T_ERR" "--ranks expects 1..65536" "--ranks 0 is refused"
expect_exit 2 mr train train.csv --label y -o x.mrm --ranks 2 --mpi
assert_contains "$T_ERR" "--ranks starts the ranks; --mpi is what each rank runs" "--ranks with --mpi is refused"
# --mpi outside mpirun is a job of one rank (MPI's singleton start)
expect_exit 0 mr train mc.csv --label y -p num_iterations=5 -o single.mrm -j 1 --mpi
expect_exit 0 mr train mc.csv --label y -p num_iterations=5 -o plain.mrm -j 1
cmp -s single.mrm plain.mrm || fail "a one-rank job trains another model"
pass "a one-rank job trains the plain model"
t_done
