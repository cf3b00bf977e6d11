#!/usr/bin/env bash
# bench/noop: first-run input hashing vs `cat`, and the no-op re-run, on a
# 20-stage pipeline whose inputs are 2,000 files totalling 2 GB (issue 2).
#
# usage: bench/noop/run.sh PATH/TO/millrace
#
# environment:
#   MILLRACE_BENCH_DIR  work directory, reused between runs (default /tmp/millrace-bench-noop)
#   BENCH_FILES         number of input files (default 2000; a multiple of BENCH_STAGES)
#   BENCH_FILE_BYTES    bytes per file (default 1048576)
#   BENCH_STAGES        number of stages (default 20)
#   BENCH_REPS_HASH     repetitions of the hashing runs, best taken (default 3)
#   BENCH_REPS_NOOP     repetitions of the no-op run (default 10)
#   BENCH_REPS_START    repetitions of --help / status (default 10)
#
# Ends with exactly one line:
#   RESULT noop hash_vs_cat=X.XX noop_ms=Y.Y help_ms=Z.Z status_ms=W.W exec_stage_ms=V.VV
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 PATH/TO/millrace" >&2
    exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
MR=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -x "$MR" ] || { echo "bench/noop: $1 is not an executable" >&2; exit 2; }

WORK=${MILLRACE_BENCH_DIR:-/tmp/millrace-bench-noop}
FILES=${BENCH_FILES:-2000}
FILE_BYTES=${BENCH_FILE_BYTES:-1048576}
STAGES=${BENCH_STAGES:-20}
REPS_HASH=${BENCH_REPS_HASH:-3}
REPS_NOOP=${BENCH_REPS_NOOP:-10}
REPS_START=${BENCH_REPS_START:-10}
TOTAL_BYTES=$((FILES * FILE_BYTES))
TIME="python3 $HERE/timecmd.py"

die() { echo "bench/noop: FAIL: $*" >&2; exit 1; }
# jget JSON KEY: a top-level field of a JSON document.
jget() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
# stage_status JSON STAGE: the status of one stage in `run --json` output.
stage_status() {
    python3 -c 'import json,sys; print([s["status"] for s in json.loads(sys.argv[1])["stages"] if s["stage"]==sys.argv[2]][0])' "$1" "$2"
}
drop_statcache='python3 -c "import sqlite3; c = sqlite3.connect(\".millrace/runs.db\"); c.execute(\"DELETE FROM stat_cache\"); c.commit()"'

mkdir -p "$WORK"
python3 "$HERE/gen.py" "$WORK" "$FILES" "$FILE_BYTES" "$STAGES"
cd "$WORK"
# The workspace must not sit inside a git work tree: `millrace run` asks git
# for the commit, and a parent repo would add its `git status` to every run.
if git -C "$WORK" rev-parse --git-dir >/dev/null 2>&1; then
    echo "bench/noop: warning: $WORK is inside a git work tree; run times include git" >&2
fi

echo "bench/noop: $FILES files x $FILE_BYTES bytes = $TOTAL_BYTES bytes, $STAGES stages, in $WORK ($(nproc) cores)" >&2

# ---- correctness first ------------------------------------------------------
rm -rf .millrace millrace.lock out
j=$("$MR" -q run --json) || die "first run failed"
[ "$(jget "$j" status)" = ok ] && [ "$(jget "$j" executed)" = "$STAGES" ] ||
    die "first run: expected $STAGES executed, got: $j"
j=$("$MR" -q run --json) || die "no-op run failed"
[ "$(jget "$j" executed)" = 0 ] && [ "$(jget "$j" cached)" = "$STAGES" ] ||
    die "no-op run: expected executed=0 cached=$STAGES, got: $j"
j=$("$MR" -q status --json) || die "status failed"
[ "$(jget "$j" stale)" = 0 ] || die "status after a run: expected stale=0, got: $j"
# The no-op must not be blind: change one input byte (same size, same inode),
# exactly that stage runs; restore it, and the old result is a cache hit.
victim=$(ls data/part_07/* | head -n 1)
flip() { python3 -c 'import sys; f=open(sys.argv[1],"r+b"); b=f.read(1); f.seek(0); f.write(bytes([b[0]^0xff])); f.close()' "$1"; }
flip "$victim"
j=$("$MR" -q status --json) || die "status failed"
[ "$(jget "$j" stale)" = 1 ] || die "status after editing $victim: expected stale=1, got: $j"
j=$("$MR" -q run --json) || die "run after edit failed"
[ "$(jget "$j" executed)" = 1 ] && [ "$(stage_status "$j" stage_07)" = executed ] ||
    die "run after editing $victim: expected only stage_07 executed, got: $j"
flip "$victim"
j=$("$MR" -q run --json) || die "run after restore failed"
[ "$(jget "$j" executed)" = 0 ] || die "run after restoring $victim: expected executed=0, got: $j"
j=$("$MR" -q run --json) || die "no-op run failed"
[ "$(jget "$j" executed)" = 0 ] || die "no-op run: expected executed=0, got: $j"
echo "bench/noop: correctness ok (first run executes $STAGES, no-op executes 0, a 1-byte edit re-runs exactly 1 stage)" >&2

# ---- timing -----------------------------------------------------------------
# Warm the page cache: every figure below is from memory, not the disk.
cat data/part_*/* >/dev/null

t_cat=$($TIME "$REPS_HASH" -- sh -c 'cat data/part_*/* >/dev/null')
# First run on a fresh .millrace: hashing + 20 stage processes + publishing.
t_first=$($TIME "$REPS_HASH" --pre 'rm -rf .millrace millrace.lock out' -- "$MR" -q run)
j=$("$MR" -q run --json)
[ "$(jget "$j" executed)" = 0 ] || die "no-op run after the timed first runs: got: $j"
# Pure hashing: `status` with an empty stat cache hashes every dep and runs nothing.
t_hash=$($TIME "$REPS_HASH" --pre "$drop_statcache" -- "$MR" -q status)
# The same on one core: `cat` is single-threaded, millrace hashes on every core.
t_hash1='{"n": 0, "best_ms": 0, "median_ms": 0}'
if command -v taskset >/dev/null 2>&1; then
    t_hash1=$($TIME "$REPS_HASH" --pre "$drop_statcache" -- taskset -c 0 "$MR" -q status)
fi
t_noop=$($TIME "$REPS_NOOP" -- "$MR" -q run)
# Every stage executed again, inputs known (stat cache warm): what one exec
# stage costs besides its command (worker, locks, dep checks, publishing).
t_force=$($TIME "$REPS_HASH" -- "$MR" -q run --force-all)
t_help=$($TIME "$REPS_START" -- "$MR" --help)
t_status=$($TIME "$REPS_START" -- "$MR" -q status)
j=$("$MR" -q run --json)
[ "$(jget "$j" executed)" = 0 ] || die "no-op run after timing: got: $j"

python3 - "$TOTAL_BYTES" "$t_cat" "$t_first" "$t_hash" "$t_noop" "$t_help" "$t_status" "$t_hash1" "$t_force" "$STAGES" <<'EOF'
import json, sys
total = int(sys.argv[1])
cat, first, hsh, noop, hlp, st, hsh1, force = (json.loads(a) for a in sys.argv[2:10])
stages = int(sys.argv[10])
gbs = lambda t: total / 1e9 / (t["best_ms"] / 1000.0) if t["best_ms"] else 0.0
cat_gbs, first_gbs, hash_gbs, hash1_gbs = gbs(cat), gbs(first), gbs(hsh), gbs(hsh1)
rows = [
    ("cat of all inputs (page cache)", cat, f"{cat_gbs:6.2f} GB/s", ""),
    ("first run, fresh .millrace", first, f"{first_gbs:6.2f} GB/s", f"{first_gbs / cat_gbs:5.2f} x cat"),
    ("status, empty stat cache (hash only)", hsh, f"{hash_gbs:6.2f} GB/s", f"{hash_gbs / cat_gbs:5.2f} x cat  (target >= 0.80)"),
    ("status, empty stat cache, 1 core", hsh1, f"{hash1_gbs:6.2f} GB/s", f"{hash1_gbs / cat_gbs:5.2f} x cat  (taskset -c 0)"),
    ("no-op re-run", noop, "", "target < 50 ms"),
    ("run --force-all (every stage executes)", force, "", f"{force['best_ms'] / stages:.1f} ms per exec stage"),
    ("millrace --help", hlp, "", "target < 10 ms"),
    ("millrace status (up to date)", st, "", "target < 10 ms"),
]
print(f"{'measure':40} {'n':>3} {'best ms':>10} {'median ms':>10}  {'throughput':>11}  vs target")
for name, t, thr, note in rows:
    if not t["n"]:
        continue
    print(f"{name:40} {t['n']:3d} {t['best_ms']:10.1f} {t['median_ms']:10.1f}  {thr:>11}  {note}")
print(f"inputs: {total} bytes; GB = 1e9 bytes; throughput from the best run; "
      "hash_vs_cat uses the status-based (pure hashing) figure")
print(f"RESULT noop hash_vs_cat={hash_gbs / cat_gbs:.2f} noop_ms={noop['best_ms']:.1f} "
      f"help_ms={hlp['best_ms']:.1f} status_ms={st['best_ms']:.1f} exec_stage_ms={force['best_ms'] / stages:.2f}")
EOF
