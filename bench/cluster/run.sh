#!/usr/bin/env bash
# bench/cluster: millrace on a Slurm cluster against Snakemake 7 (Debian's
# snakemake, its --slurm executor) on the same one-node cluster
# (scripts/start-slurm.sh), in one run (issue 14):
# - a chain of BENCH_STAGES (default 20) stages, each a trivial command:
#   the overhead per stage, (time from the tool's start to the last stage's
#   end, less the commands' own time) / stages, which is submission to
#   start for the first and end to dependent start for the others; its two
#   parts are printed apart;
# - the number of status queries (sacct and squeue calls, counted by
#   wrappers first on PATH) per minute of each tool's run;
# - a BENCH_TRIALS-trial tune stage (default 100, parallel 2) whose trials
#   go out as one job array, against the same study run locally: seconds
#   per trial each way (millrace only: Snakemake has no such stage).
# - the GBDT trained across 2 ranks (mpirun, one thread each) against one
#   process with one thread, on the bench model's data (a BENCH_MPI_ROWS
#   sample, default 500,000, of ../shared/bench/gen_higgs_like.py, as a
#   dataset of 4 shards), 50 rounds of 255 leaves: the bytes one rank sends
#   per round (those of a 1-round run, the labels and the bin sample, left
#   out), the share of rank 0's rounds spent in exchanges (moving bytes and
#   waiting for the other rank), and the parallel efficiency T1 / (2 T2),
#   best of two runs each; the models must be byte-identical.
# Both tools ask Slurm for the same: one core and 100 MB per job, and both
# ask for the jobs' states every BENCH_POLL seconds (default 15, millrace's
# default; Snakemake's --max-status-checks-per-second 1/BENCH_POLL, where its
# Slurm executor's own default is one per 33 s).
#
# usage: bench/cluster/run.sh PATH/TO/millrace
# environment: BENCH_STAGES (20), BENCH_POLL (15), MILLRACE_BENCH_DATA.
# Ends with exactly one line:
#   RESULT cluster slurm_stage_overhead_s=X vs_snakemake=X queries_per_min=X snakemake_queries_per_min=X
#          array_s_per_trial=X local_s_per_trial=X allreduce_mb_per_round=X ranks2_efficiency=X comm_share_2ranks=X
BENCH=cluster
. "$(dirname "$0")/../lib.sh" "$@"
STAGES=${BENCH_STAGES:-20}
TRIALS=${BENCH_TRIALS:-100}
POLL=${BENCH_POLL:-15}
command -v snakemake >/dev/null || bench_fail "snakemake is not installed (scripts/install-deps.sh --bench)"
W=$DATA/cluster
rm -rf "$W"
mkdir -p "$W/wrap" "$W/m/t" "$W/s/t" "$W/tl" "$W/ts"
"$SRC/scripts/start-slurm.sh" "$W/slurm" >"$W/slurm.env" || bench_fail "scripts/start-slurm.sh failed"
trap '"$SRC/scripts/stop-slurm.sh" "$W/slurm" >/dev/null 2>&1' EXIT
. "$W/slurm.env"
for c in sacct squeue; do
    real=$(command -v "$c")
    cat >"$W/wrap/$c" <<WRAP
#!/bin/sh
echo "\$(date +%s.%N) $c" >> "$W/queries.\${BENCH_TOOL:-none}"
exec $real "\$@"
WRAP
    chmod +x "$W/wrap/$c"
done
export PATH="$W/wrap:$PATH"
export USER=${USER:-$(id -un)} # snakemake's slurm executor reads it
now() { date +%s.%N; }

# the chain: stage k copies stage k-1's file and adds its number; each records when it ran
cmd() { # K DIR
    local prev=""
    [ "$1" -gt 1 ] && prev="cat s$(($1 - 1)).txt > s$1.txt; "
    printf 'date +%%s.%%N > t/s%d.start; %secho %d >> s%d.txt; date +%%s.%%N > t/s%d.end' "$1" "$prev" "$1" "$1" "$1"
}
{
    echo "stages:"
    for k in $(seq 1 "$STAGES"); do
        deps=""
        [ "$k" -gt 1 ] && deps=", deps: [s$((k - 1)).txt]"
        echo "  s$k: {op: exec, cmd: \"$(cmd "$k")\"$deps, outs: [s$k.txt], resources: {cpus: 1, mem: 100M}}"
    done
} >"$W/m/millrace.yaml"
{
    echo "rule all:"
    echo "    input: \"s$STAGES.txt\""
    for k in $(seq 1 "$STAGES"); do
        echo "rule s$k:"
        [ "$k" -gt 1 ] && echo "    input: \"s$((k - 1)).txt\""
        echo "    output: \"s$k.txt\""
        echo "    resources: mem_mb=100, runtime=10, slurm_partition=\"main\""
        echo "    shell: \"$(cmd "$k" | sed 's/"/\\"/g')\""
    done
} >"$W/s/Snakefile"

# millrace
cd "$W/m"
t0=$(now)
BENCH_TOOL=millrace "$MR" run --executor slurm --poll "$POLL" >"$W/m.out" 2>"$W/m.err" || { cat "$W/m.err" >&2; bench_fail "millrace run failed"; }
t1=$(now)
[ "$(wc -l <"s$STAGES.txt")" = "$STAGES" ] || bench_fail "millrace's chain did not write $STAGES lines"
# Snakemake
cd "$W/s"
t2=$(now)
rate=$("$PY" -c "print(1 / $POLL)")
BENCH_TOOL=snakemake snakemake --slurm --jobs 100 --cores 1 --latency-wait 5 --max-status-checks-per-second "$rate" >"$W/s.out" 2>"$W/s.err" || { tail -30 "$W/s.err" >&2; bench_fail "snakemake failed"; }
t3=$(now)
[ "$(wc -l <"s$STAGES.txt")" = "$STAGES" ] || bench_fail "snakemake's chain did not write $STAGES lines"
cmp "$W/m/s$STAGES.txt" "$W/s/s$STAGES.txt" || bench_fail "the two chains' results differ"

# the tune study: its trials as one job array, and the same study here
"$PY" - "$W/tl" <<'PY'
import math, random, sys
r = random.Random(7)
with open(sys.argv[1] + "/train.csv", "w") as f, open(sys.argv[1] + "/valid.csv", "w") as g:
    f.write("x1,x2,x3,label\n"); g.write("x1,x2,x3,label\n")
    for i in range(20000):
        x1, x2, x3 = r.gauss(0, 1), r.gauss(0, 1), r.random()
        z = 2.0 * x1 * x2 - x1 + 2 * (x3 > 0.5) - 1
        y = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        (f if i < 15000 else g).write(f"{x1:.6f},{x2:.6f},{x3:.6f},{y}\n")
PY
cat >"$W/tl/millrace.yaml" <<YAML
stages:
  tune:
    op: tune
    resources: {cpus: 2}
    train: train.csv
    valid: valid.csv
    label: label
    params: {objective: binary, num_iterations: 50, metric: auc}
    space:
      learning_rate: {loguniform: [0.01, 0.3]}
      num_leaves: {int: [4, 64]}
    n_trials: $TRIALS
    parallel: 2
    sampler: {type: tpe, n_startup_trials: 10}
    seed: 1
YAML
cp "$W/tl/"* "$W/ts/"
cd "$W/tl"
t4=$(now)
"$MR" run >"$W/tl.out" 2>"$W/tl.err" || { cat "$W/tl.err" >&2; bench_fail "the local study failed"; }
t5=$(now)
cd "$W/ts"
t6=$(now)
BENCH_TOOL=array "$MR" run --executor slurm --poll "$POLL" >"$W/ts.out" 2>"$W/ts.err" || { cat "$W/ts.err" >&2; bench_fail "the study on Slurm failed"; }
t7=$(now)
grep -q "pieces submitted as Slurm job array" "$W/ts.err" || bench_fail "the study's trials did not go out as a job array"
cmp "$W/tl/out/tune/trials.json" "$W/ts/out/tune/trials.json" || bench_fail "the study on Slurm differs from the local one"

# the GBDT across ranks
MPI_ROWS=${BENCH_MPI_ROWS:-500000}
G=$DATA/cluster-mpi-$MPI_ROWS
if [ ! -f "$G/ds/manifest.json" ]; then
    rm -rf "$G" && mkdir -p "$G"
    gen=$SRC/../shared/bench/gen_higgs_like.py
    [ -f "$gen" ] || bench_fail "$gen not found (../shared is absent)"
    "$PY" "$gen" "$G" --n-train "$MPI_ROWS" --n-test 1000 >/dev/null || bench_fail "gen_higgs_like.py failed"
    "$MR" data ingest "$G/train.csv" "$G/ds" --rows-per-shard $((MPI_ROWS / 4)) >/dev/null || bench_fail "ingest failed"
fi
GP=(-p objective=binary -p num_iterations=50 -p num_leaves=255 -p learning_rate=0.1 --label label -j 1)
best_of_two() { # OUT CMD...: the shorter wall time of two runs into $BEST
    local out=$1 a b
    shift
    a=$(now); "$@" >"$out" 2>"$out.err" || { cat "$out.err" >&2; bench_fail "$*"; }; b=$(now)
    local t1; t1=$("$PY" -c "print($b - $a)")
    a=$(now); "$@" >"$out" 2>"$out.err" || { cat "$out.err" >&2; bench_fail "$*"; }; b=$(now)
    BEST=$("$PY" -c "print(min($t1, $b - $a))")
}
best_of_two "$W/mpi1.out" "$MR" train "$G/ds" "${GP[@]}" -o "$W/mpi1.mrm"
T1=$BEST
best_of_two "$W/mpi2.json" "$MR" train "$G/ds" "${GP[@]}" -o "$W/mpi2.mrm" --ranks 2 --json
T2=$BEST
cmp "$W/mpi1.mrm" "$W/mpi2.mrm" || bench_fail "the model of 2 ranks differs from one process's"
# the bytes of one round less those of the start (labels, the bin sample): a 1-round run
"$MR" train "$G/ds" "${GP[@]}" -p num_iterations=1 -o "$W/mpi2r1.mrm" --ranks 2 --json >"$W/mpi2r1.json" || bench_fail "the 1-round run failed"
echo "gbdt across ranks: $MPI_ROWS rows, 50 x 255 leaves: one process $T1 s, 2 ranks $T2 s (one thread each); models byte-identical"

"$PY" - "$W" "$STAGES" "$t0" "$t1" "$t2" "$t3" "$TRIALS" "$t4" "$t5" "$t6" "$t7" "$T1" "$T2" <<'PY'
import json, os, sys
w, n = sys.argv[1], int(sys.argv[2])
t0, t1, t2, t3 = map(float, sys.argv[3:7])
def tool(d, start, end, name):
    st = [float(open(f"{w}/{d}/t/s{k}.start").read()) for k in range(1, n + 1)]
    en = [float(open(f"{w}/{d}/t/s{k}.end").read()) for k in range(1, n + 1)]
    work = sum(e - s for s, e in zip(st, en))
    first = st[0] - start
    gaps = [st[k + 1] - en[k] for k in range(n - 1)]
    overhead = (en[-1] - start - work) / n
    q = os.path.join(w, f"queries.{name}")
    nq = sum(1 for _ in open(q)) if os.path.exists(q) else 0
    wall = end - start
    return dict(first=first, gap=sum(gaps) / len(gaps), overhead=overhead, wall=wall, tail=end - en[-1], queries=nq,
                qpm=nq / (wall / 60))
m = tool("m", t0, t1, "millrace")
s = tool("s", t2, t3, "snakemake")
print(f"{'':32} {'millrace':>10} {'snakemake':>10}")
for key, label in [("first", "start to first stage start, s"), ("gap", "stage end to next start, s"),
                   ("overhead", "overhead per stage, s"), ("tail", "last stage end to exit, s"), ("wall", "wall, s"),
                   ("queries", "status queries"), ("qpm", "status queries per minute")]:
    print(f"{label:32} {m[key]:10.2f} {s[key]:10.2f}")
print(f"{n} stages in a chain on a one-node cluster; overhead = (last stage end - start - commands' time) / stages")
trials = int(sys.argv[7])
t4, t5, t6, t7 = map(float, sys.argv[8:12])
local, array = (t5 - t4) / trials, (t7 - t6) / trials
print(f"a {trials}-trial tune study (2 at once): {t5 - t4:.1f} s here, {t7 - t6:.1f} s as a Slurm job array "
      f"({local:.3f} and {array:.3f} s per trial); the two studies are byte-identical")
T1, T2 = float(sys.argv[12]), float(sys.argv[13])
j, j1 = json.load(open(f"{w}/mpi2.json")), json.load(open(f"{w}/mpi2r1.json"))
mb = (j["rank0_bytes_sent"] - j1["rank0_bytes_sent"]) / 49 / 1e6
# communication's share of a round: rank 0's time inside exchanges (moving bytes and waiting for rank 1)
comm = (j["rank0_exchange_seconds"] - j1["rank0_exchange_seconds"]) / (j["seconds"] - j1["seconds"])
print(f"2 ranks: rank 0 sent {mb:.2f} MB per round ({(j['rank0_exchanges'] - j1['rank0_exchanges']) / 49:.0f} exchanges), "
      f"{j1['rank0_bytes_sent'] / 1e6:.1f} MB at the start; its rounds spent {100 * comm:.1f}% of their time in exchanges; "
      f"efficiency T1 / (2 T2) = {T1 / (2 * T2):.2f}")
print(f"RESULT cluster slurm_stage_overhead_s={m['overhead']:.2f} vs_snakemake={m['overhead'] / s['overhead']:.3f} "
      f"queries_per_min={m['qpm']:.1f} snakemake_queries_per_min={s['qpm']:.1f} "
      f"array_s_per_trial={array:.3f} local_s_per_trial={local:.3f} "
      f"allreduce_mb_per_round={mb:.2f} ranks2_efficiency={T1 / (2 * T2):.2f} comm_share_2ranks={comm:.3f}")
PY
