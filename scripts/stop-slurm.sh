#!/usr/bin/env bash
# Stops the one-node cluster scripts/start-slurm.sh started from DIR
# (default /tmp/millrace-slurm): each daemon by the pid in DIR/pids/, in the
# reverse order of their start, TERM and then, after 10 s, KILL. The
# directory stays (its logs); the next start wipes it.
# usage: scripts/stop-slurm.sh [DIR]
set -uo pipefail
dir=${1:-${MILLRACE_SLURM_DIR:-/tmp/millrace-slurm}}
[ -d "$dir/pids" ] || { echo "$0: no cluster in $dir" >&2; exit 0; }
for d in slurmd slurmctld slurmdbd mariadbd munged; do
    f="$dir/pids/$d.pid"
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || { rm -f "$f"; continue; }
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -f "$f"
done
exit 0
