#!/usr/bin/env bash
# bench/remote: the remote cache and data on S3 against the local S3 server
# (scripts/start-s3.sh), in one run (issue 15):
# - push and pull of one stage whose directory output holds BENCH_FILES
#   files of BENCH_FILE_BYTES (default 2,000 x 1 MiB, the noop bench's
#   2 GB), against `aws s3 sync` (Debian's awscli at /usr/bin/aws) of the
#   same files to and from the same server; ratios are millrace's time over
#   aws's (below 1: faster);
# - `status --remote` in a clone that has nothing local, everything on the
#   remote (median of BENCH_REPS runs, ms);
# - a filtered read (i00 = 42: 1% of the bench ingest dataset's 100
#   partitions) of the dataset on S3, put there by aws s3 sync: bytes the
#   server sent (all requests: listing, manifest, footer, column chunks)
#   over the dataset's bytes, and its selected rows checked against the
#   local read;
# - DuckDB's httpfs and DVC, when they can run here (each says why not).
#
# usage: bench/remote/run.sh PATH/TO/millrace
# environment: BENCH_FILES (2000), BENCH_FILE_BYTES (1048576), BENCH_REPS (5),
#   BENCH_ROWS (rows of the ingest CSV, 2000000), MILLRACE_BENCH_DATA.
# Ends with exactly one line:
#   RESULT remote push_vs_aws=X pull_vs_aws=X status_ms=X s3_bytes_fraction=X
BENCH=remote
. "$(dirname "$0")/../lib.sh" "$@"
FILES=${BENCH_FILES:-2000}
FILE_BYTES=${BENCH_FILE_BYTES:-1048576}
REPS=${BENCH_REPS:-5}
AWS=/usr/bin/aws
[ -x "$AWS" ] || bench_fail "Debian's awscli is not installed (scripts/install-deps.sh)"
W=$DATA/remote
rm -rf "$W"
mkdir -p "$W"
"$SRC/scripts/start-s3.sh" "$W/s3" >"$W/s3.env" || bench_fail "scripts/start-s3.sh failed"
trap '"$SRC/scripts/stop-s3.sh" "$W/s3" >/dev/null 2>&1' EXIT
. "$W/s3.env"
B=$MILLRACE_S3_BUCKET
aws_() { "$AWS" --endpoint-url "$MILLRACE_S3_ENDPOINT" --region us-east-1 --only-show-errors "$@"; }
now() { date +%s.%N; }
secs() { "$PY" -c "print(f'{$2 - $1:.3f}')"; }

# ---- push and pull against aws s3 sync ------------------------------------------------
mkdir -p "$W/a/in"
"$PY" - "$W/a/in" "$FILES" "$FILE_BYTES" <<'PY'
import os, random, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(15)
for i in range(n):
    with open(os.path.join(d, f"f{i:05d}.bin"), "wb") as f:
        f.write(r.randbytes(size))
PY
cd "$W/a"
"$MR" init >/dev/null
cat >millrace.yaml <<'EOF'
stages:
  copy:
    op: exec
    cmd: mkdir -p out && cp in/* out/
    deps: [in]
    outs: [out]
EOF
"$MR" run >/dev/null 2>&1 || bench_fail "the pipeline failed"
"$MR" remote add s3 "s3://$B/mr" --endpoint "$MILLRACE_S3_ENDPOINT" --default >/dev/null
echo "push and pull: $FILES files of $FILE_BYTES bytes"
t0=$(now); "$MR" push >"$W/push.out" 2>&1 || bench_fail "push failed: $(tail -3 "$W/push.out")"; t1=$(now)
push_s=$(secs "$t0" "$t1")
t0=$(now); aws_ s3 sync out "s3://$B/aws/out" || bench_fail "aws s3 sync up failed"; t1=$(now)
aws_up_s=$(secs "$t0" "$t1")
t0=$(now); aws_ s3 sync out "s3://$B/aws/out" || bench_fail "aws s3 sync (nothing to do) failed"; t1=$(now)
aws_noop_s=$(secs "$t0" "$t1")
t0=$(now); "$MR" push >/dev/null 2>&1 || bench_fail "second push failed"; t1=$(now)
push_noop_s=$(secs "$t0" "$t1")
mkdir -p "$W/b" && cp millrace.yaml millrace.lock "$W/b/"
mkdir -p "$W/c" && cp millrace.yaml millrace.lock "$W/c/" && cp -al in "$W/c/in"
cd "$W/b"
"$MR" init >/dev/null 2>&1 || true
t0=$(now); "$MR" pull >"$W/pull.out" 2>&1 || bench_fail "pull failed: $(tail -3 "$W/pull.out")"; t1=$(now)
pull_s=$(secs "$t0" "$t1")
cmp -s <(cd "$W/a/out" && cat ./*) <(cd "$W/b/out" && cat ./*) || bench_fail "the pulled output differs"
t0=$(now); aws_ s3 sync "s3://$B/aws/out" "$W/awsdown" || bench_fail "aws s3 sync down failed"; t1=$(now)
aws_down_s=$(secs "$t0" "$t1")
mb=$("$PY" -c "print($FILES * $FILE_BYTES / 1e6)")
echo "  millrace push $push_s s ($("$PY" -c "print(f'{$mb / $push_s:.0f}')") MB/s), aws s3 sync up $aws_up_s s ($("$PY" -c "print(f'{$mb / $aws_up_s:.0f}')") MB/s)"
echo "  millrace pull $pull_s s ($("$PY" -c "print(f'{$mb / $pull_s:.0f}')") MB/s), aws s3 sync down $aws_down_s s ($("$PY" -c "print(f'{$mb / $aws_down_s:.0f}')") MB/s)"
echo "  nothing to do: millrace push $push_noop_s s, aws s3 sync $aws_noop_s s"

# ---- status --remote with everything on the remote --------------------------------------
cd "$W/c"
"$MR" init >/dev/null 2>&1 || true
"$MR" status --remote >"$W/status.out" 2>&1 || true
grep -q "copy" "$W/status.out" || bench_fail "status --remote does not name the stage: $(cat "$W/status.out")"
ts=()
for _ in $(seq "$REPS"); do
    t0=$(now); "$MR" status --remote >/dev/null 2>&1 || true; t1=$(now)
    ts+=("$("$PY" -c "print(($t1 - $t0) * 1000)")")
done
status_ms=$("$PY" -c "import statistics, sys; print(f'{statistics.median(map(float, sys.argv[1:])):.1f}')" "${ts[@]}")
echo "status --remote (nothing local, all on the remote): median $status_ms ms of $REPS"

# ---- a 1% filtered read of the ingest dataset on S3 -------------------------------------
ensure_csv
DS=$DATA/remote_ds_$ROWS
if [ ! -f "$DS/manifest.json" ]; then
    "$MR" data ingest "$CSV" "$DS" --partition-by i00 --force >/dev/null || bench_fail "ingest failed"
fi
aws_ s3 sync "$DS" "s3://$B/ingest" || bench_fail "aws s3 sync of the dataset failed"
: >"$W/s3/requests.log"
"$MR" data inspect "s3://$B/ingest" --explain "i00 = 42" --json >"$W/s3_explain.json" || bench_fail "explain on S3 failed"
"$MR" data inspect "$DS" --explain "i00 = 42" --json >"$W/local_explain.json" || bench_fail "local explain failed"
read -r s3_fraction served total <<<"$("$PY" - "$W" <<'PY'
import json, sys
w = sys.argv[1]
s3 = json.load(open(w + "/s3_explain.json"))["explain"]
lo = json.load(open(w + "/local_explain.json"))["explain"]
if s3["rows_selected"] != lo["rows_selected"]:
    sys.exit(f"bench/remote: FAIL: {s3['rows_selected']} rows selected on S3, {lo['rows_selected']} locally")
served = sum(json.loads(l)["down"] for l in open(w + "/s3/requests.log"))
if served != s3["request_bytes"]:
    sys.exit(f"bench/remote: FAIL: the server sent {served} bytes, millrace counts {s3['request_bytes']}")
print(f"{served / s3['bytes_total']:.4f} {served} {s3['bytes_total']}")
PY
)" || bench_fail "the filtered read did not validate"
echo "filtered read on S3 (i00 = 42): $served bytes served of $total ($s3_fraction), rows as the local read"

# ---- peers that cannot run here -----------------------------------------------------------
ensure_duckdb
if out=$(duck "INSTALL httpfs; LOAD httpfs; SELECT 1 AS ok" 2>&1); then
    echo "duckdb httpfs: loads (a timed comparison is not implemented here)"
else
    echo "duckdb httpfs: not run: it does not load here ($(printf '%s' "$out" | tr '\n' ' ' | cut -c1-160)): extensions come from extensions.duckdb.org, which this machine cannot reach"
fi
if command -v dvc >/dev/null; then
    echo "dvc: found at $(command -v dvc) (not timed by this bench)"
else
    echo "dvc: not run: Debian 12 has no dvc package and PyPI is not reachable from this machine"
fi
echo "RESULT remote push_vs_aws=$("$PY" -c "print(f'{$push_s / $aws_up_s:.2f}')") pull_vs_aws=$("$PY" -c "print(f'{$pull_s / $aws_down_s:.2f}')") status_ms=$status_ms s3_bytes_fraction=$s3_fraction"
