#!/usr/bin/env bash
# scripts/start-slurm.sh: a one-node Slurm cluster (munged, MariaDB,
# slurmdbd, slurmctld, slurmd) started without systemd, every daemon on
# 127.0.0.1, and stopped by its pids with scripts/stop-slurm.sh. On it: a
# chain of two jobs with --dependency=afterok runs in order, a failing job
# is FAILED with its exit code in the accounting and its afterok dependent
# never runs (--kill-on-invalid-dep), srun starts two MPI ranks through
# PMIx, and a start over a running cluster is refused.
. "$(dirname "$0")/lib.sh" "$@"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
sl="$T_ROOT/slurm"
env_out=$("$SRC/scripts/start-slurm.sh" "$sl") || fail "scripts/start-slurm.sh failed: $(tail -5 "$sl"/log/*.log 2>/dev/null)"
for p in "$sl"/pids/*.pid; do bg_track "$(cat "$p")"; done
# t_cleanup exits with the status the script ended with: keep it across the stop
trap 'rc=$?; "$SRC/scripts/stop-slurm.sh" "$sl" >/dev/null 2>&1; (exit $rc); t_cleanup' EXIT
eval "$env_out"
assert_eq "$SLURM_CONF" "$sl/etc/slurm.conf" "start-slurm.sh prints the SLURM_CONF to use"
listen=$(ss -ltnpH 2>/dev/null | grep -E 'slurm|mariadbd' || true)
assert_eq "$(printf '%s\n' "$listen" | grep -c .)" 4 "slurmctld, slurmd, slurmdbd and MariaDB listen"
assert_eq "$(printf '%s\n' "$listen" | awk '{ print $4 }' | grep -vc '^127\.0\.0\.1:')" 0 "all on 127.0.0.1"
expect_exit 1 "$SRC/scripts/start-slurm.sh" "$sl"
assert_contains "$T_ERR" "already runs" "a second start over a running cluster is refused"

cd "$T_ROOT" || fail "cd"
a=$(sbatch --parsable -J chain -o "$T_ROOT/a.out" --wrap 'sleep 1; date +%s.%N >a.t') || fail "sbatch a"
b=$(sbatch --parsable -J chain -o "$T_ROOT/b.out" --dependency="afterok:$a" --kill-on-invalid-dep=yes \
    --wrap 'date +%s.%N >b.t') || fail "sbatch b"
c=$(sbatch --parsable -J bad -o "$T_ROOT/c.out" --wrap 'echo failing; exit 3') || fail "sbatch c"
d=$(sbatch --parsable -J bad -o "$T_ROOT/d.out" --dependency="afterok:$c" --kill-on-invalid-dep=yes \
    --wrap 'touch d.ran') || fail "sbatch d"
done_all() { [ -z "$(squeue -h -j "$a,$b,$c,$d" 2>/dev/null)" ]; }
wait_for "the four jobs to leave the queue" 60 done_all
states() { sacct -n -X -P -j "$1" -o State,ExitCode | head -1; }
assert_eq "$(states "$a")" "COMPLETED|0:0" "the first job completed"
assert_eq "$(states "$b")" "COMPLETED|0:0" "its afterok dependent completed"
assert_eq "$(/usr/bin/python3 -c "print(float(open('b.t').read()) > float(open('a.t').read()))")" True "after it"
assert_eq "$(states "$c")" "FAILED|3:0" "a failing job is FAILED with its exit code"
assert_contains "$(cat "$T_ROOT/c.out")" "failing" "its log is kept"
assert_no_file d.ran "its afterok dependent never ran"
assert_match "$(states "$d")" "^(CANCELLED|PENDING)" "and was cancelled"
expect_exit 0 timeout 60 srun --mpi=pmix -n 2 bash -c 'echo "rank $PMIX_RANK"'
assert_eq "$(printf '%s\n' "$T_OUT" | sort | tr '\n' ' ')" "rank 0 rank 1 " "srun starts two ranks through PMIx"

pids=$(cat "$sl"/pids/*.pid)
"$SRC/scripts/stop-slurm.sh" "$sl"
alive=0
for p in $pids; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
assert_eq "$alive" 0 "stop-slurm.sh stopped every daemon by its pid"
t_done
