#!/usr/bin/env bash
# Data read straight from S3 (docs/remote.md, "Data on S3"), against the
# local S3-compatible server of scripts/start-s3.sh, with the objects
# written by boto3 (an independent client) and the bytes counted on the
# server side (its request log):
# - a filtered read of a partitioned dataset fetches the manifest, one
#   listing, the surviving shard's footer and only the needed columns of the
#   surviving row groups (DuckDB's parquet_metadata() says how many bytes
#   those are), and its rows equal the local read's;
# - `data inspect --explain` lists those requests, and its byte count is
#   the server's;
# - CSV, Parquet files, globs and datasets as `data` sources and as ingest
#   stages: cached on the objects' listed versions (key, size, ETag), so a
#   changed object re-runs only its stage;
# - a read pinned to a version refuses a newer one; bad keys, a missing
#   bucket or object, a bad row: each named, nothing half-published.
. "$(dirname "$0")/lib.sh" "$@"
BUILD=$(dirname "$MR_BIN")
S3TOOL="$BUILD/tests/mr_s3tool"
[ -x "$S3TOOL" ] || fail "mr_s3tool not built at $S3TOOL"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
duckdb_setup "the byte count of the needed column chunks" chunk_bytes.mjs
ws=$(new_ws s3data)
cd "$ws" || fail "cd"
s3_start
B=$MILLRACE_S3_BUCKET
up() { # LOCAL KEY: boto3 uploads a file or a directory tree
    /usr/bin/python3 - "$1" "$2" <<'PYEOF' || fail "boto3 upload of $1 failed"
import boto3, os, sys
c = boto3.client("s3", endpoint_url=os.environ["MILLRACE_S3_ENDPOINT"], region_name="us-east-1")
src, dst = sys.argv[1], sys.argv[2]
b = os.environ["MILLRACE_S3_BUCKET"]
if os.path.isdir(src):
    for root, _, files in os.walk(src):
        for f in sorted(files):
            p = os.path.join(root, f)
            c.upload_file(p, b, dst + "/" + os.path.relpath(p, src))
else:
    c.upload_file(src, b, dst)
PYEOF
}
# bytes the server sent for the requests logged since the log was cleared
served() { /usr/bin/python3 -c '
import json, sys
t = {"all": 0, "data": 0, "n": 0, "ranged": 0}
for l in open(sys.argv[1]):
    r = json.loads(l)
    t["all"] += r["down"]; t["n"] += 1
    if r["range"]: t["ranged"] += 1
print(t["all"], t["n"], t["ranged"])' "$sdir/requests.log"; }

# 120 days sorted by day, 3 countries: 360k rows in row groups of 6,000
/usr/bin/python3 - <<'PYEOF' || fail "generator failed"
import random, datetime
random.seed(7)
d0 = datetime.date(2024, 1, 1)
with open("ev.csv", "w") as f:
    f.write("day,user,amount,note\n")
    for i in range(360000):
        day = d0 + datetime.timedelta(days=i // 3000)
        f.write(f"{day},{random.randint(1, 10**6)},{random.random() * 100:.4f},n{random.randint(0, 10**9)}\n")
with open("bad.csv", "w") as f:
    f.write("id,amount\n1,2.5\n2,oops\n")
PYEOF
expect_exit 0 mr data ingest ev.csv evds --row-group-rows 6000 --json
/usr/bin/python3 - <<'PYEOF' || fail "country column"
import csv
rows = list(csv.reader(open("ev.csv")))
with open("evc.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(rows[0] + ["country"])
    for i, r in enumerate(rows[1:]):
        w.writerow(r + [["DE", "FR", "US"][i % 3]])
PYEOF
expect_exit 0 mr data ingest evc.csv ds --row-group-rows 2000 --partition-by country
up ds ds
up ev.csv raw/ev.csv
up bad.csv raw/bad.csv
up evds/part-00000.parquet pq/ev-a.parquet
up evds/part-00000.parquet pq/ev-b.parquet

# ---- a filtered read: only the bytes it needs -------------------------------------------
F="day = DATE '2024-03-05' and country = 'DE'"
: >"$sdir/requests.log"
expect_exit 0 mr data inspect "s3://$B/ds" --explain "$F" --columns amount --json
ex=$T_OUT
read -r sv_all sv_n sv_ranged <<<"$(served)"
assert_eq "$(printf '%s' "$ex" | json 'd["explain"]["request_bytes"]')" "$sv_all" \
    "the bytes millrace counts are the bytes the server sent"
assert_eq "$(printf '%s' "$ex" | json 'd["explain"]["requests"]')" "$sv_n" "and so are its requests"
assert_eq "$(printf '%s' "$ex" | json 'len(d["requests"])')" "$sv_n" "--explain lists every request"
assert_eq "$(printf '%s' "$ex" | json '" ".join(sorted(set(r["what"] for r in d["requests"])))')" \
    "data footer list manifest" "requests: a listing, the manifest, a footer, column chunks"
assert_eq "$(printf '%s' "$ex" | json 'sum(r["what"] == "footer" for r in d["requests"])')" 1 \
    "one footer read: the one shard that survives partition pruning"
assert_eq "$(printf '%s' "$ex" | json 'sorted(set(r["key"] for r in d["requests"] if r["what"] in ("data", "footer")))[0]')" \
    "ds/country=DE/part-00000.parquet" "only the surviving shard is read"
assert_eq "$(grep -c '"url":"/'"$B"'/ds/country=FR' "$sdir/requests.log")" 0 "no request touches a pruned shard"
shard="$ws/ds/country=DE/part-00000.parquet"
read -r need groups <<<"$(node "$DUCK/chunk_bytes.mjs" "$shard" day,amount 2024-03-05)"
[ "$groups" -ge 1 ] || fail "DuckDB finds no row group holding the day"
data_bytes=$(printf '%s' "$ex" | json 'sum(r["bytes"] for r in d["requests"] if r["what"] == "data")')
data_reqs=$(printf '%s' "$ex" | json 'sum(r["what"] == "data" for r in d["requests"])')
[ "$data_bytes" -ge "$need" ] || fail "column chunk bytes: $data_bytes fetched, DuckDB counts $need needed"
# nearby ranges are coalesced across gaps of at most 8 KiB
[ "$data_bytes" -le $((need + data_reqs * 8192)) ] ||
    fail "column chunk bytes: $data_bytes fetched for $need needed in $data_reqs requests"
pass "the column chunks fetched are the needed ones ($data_bytes bytes, $need by DuckDB's count, $groups row groups)"
total=$(printf '%s' "$ex" | json 'd["explain"]["bytes_total"]')
frac=$(/usr/bin/python3 -c "print(round($sv_all / $total, 4))")
assert_eq "$(/usr/bin/python3 -c "print(int($sv_all * 10 < $total))")" 1 "the read moves under a tenth of the dataset ($frac)"
expect_exit 0 mr data inspect "s3://$B/ds" --explain "$F" --columns amount
assert_contains "$T_OUT" "footer   ds/country=DE/part-00000.parquet bytes=" "the text form names each range"

# the same rows as the local read
expect_exit 0 mr data export "s3://$B/ds" s3.csv --filter "$F" --columns day,user,amount
expect_exit 0 mr data export ds local.csv --filter "$F" --columns day,user,amount
assert_eq "$(cmp s3.csv local.csv && echo same)" same "the filtered read from S3 equals the local one"
assert_eq "$(($(wc -l <s3.csv) - 1))" 1000 "and holds the day's rows for DE"

# ---- sources: a CSV object, Parquet objects by a glob, a dataset ------------------------
expect_exit 0 mr data export "s3://$B/raw/ev.csv" csv_s3.csv
expect_exit 0 mr data export ev.csv csv_local.csv
assert_eq "$(cmp csv_s3.csv csv_local.csv && echo same)" same "a CSV object reads as the local file"
assert_eq "$(ls "${TMPDIR:-/tmp}" | grep -c "^millrace-s3-$$" || true)" 0 "no local copy is left behind"
: >"$sdir/requests.log"
expect_exit 0 mr data stats "s3://$B/pq/ev-*.parquet" --json
assert_eq "$(printf '%s' "$T_OUT" | json 'd["rows"]')" 720000 "a glob of Parquet objects reads both"
assert_eq "$(grep -c '"method":"GET","url":"/'"$B"'/pq/ev-a.parquet","range":""' "$sdir/requests.log")" 0 \
    "a Parquet object is read by ranges, never whole"
expect_exit 0 mr data head "s3://$B/ds/" -n 1 --json
assert_contains "$T_OUT" '"country":' "a dataset URL with a trailing slash reads the dataset"

# ---- the Python package's loader reads a dataset on S3 as the local one -------------------
if [ -d "$BUILD/python/millrace" ]; then
    loader_sum() {
        PYTHONPATH="$BUILD/python" /usr/bin/python3 - "$1" <<'PYEOF'
import sys, millrace
ld = millrace.Loader(sys.argv[1], batch_size=4096, columns=["amount", "user"], shuffle=True, seed=1)
n, s, first = 0, 0.0, None
for b in ld:
    if first is None: first = [int(x) for x in b["user"][:3]]
    n += len(b["amount"]); s += float(sum(b["amount"]))
print(n, round(s, 4), first)
PYEOF
    }
    got=$(loader_sum "s3://$B/ds") || fail "the loader failed on S3"
    assert_eq "$got" "$(loader_sum "$ws/ds")" "millrace.Loader over s3:// gives the local dataset's batches, in the same order"
else
    echo "# the Python package is not built here (a sanitizer build): the loader check did not run"
fi

# ---- ingest stages on S3 sources: keyed by the listed versions ---------------------------
mkdir pipe && cd pipe || fail "cd pipe"
expect_exit 0 mr init
cat >millrace.yaml <<EOF
stages:
  raw:
    op: ingest
    source: s3://$B/raw/ev.csv
  de:
    op: ingest
    source: s3://$B/ds
    filter: "$F"
EOF
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "raw=executed de=executed" "the first run ingests from S3"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "raw=cached de=cached" "unchanged objects: both stages cached"
assert_match "$(cat millrace.lock)" "s3://$B/raw/ev.csv\": s3[0-9a-f]{32}" "the lock records the object's version"
head -1000 ../ev.csv >../ev_small.csv
up ../ev_small.csv raw/ev.csv
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "raw=executed de=cached" "a changed object re-runs only the stage that reads it"
cd "$ws" || fail "cd"

# ---- a read pinned to a version refuses a newer one -------------------------------------
etag=$("$S3TOOL" head raw/bad.csv 2>/dev/null | cut -d' ' -f2)
expect_exit 0 "$S3TOOL" getv raw/bad.csv "$etag"
assert_contains "$T_OUT" "oops" "the listed version reads"
up ev_small.csv raw/bad.csv
expect_exit 1 "$S3TOOL" getv raw/bad.csv "$etag"
assert_contains "$T_ERR" "changed while it was read" "a newer version is refused, named"
up bad.csv raw/bad.csv

# ---- bad input: named, nothing half-published -------------------------------------------
printf 'id: int64\namount: float64\n' >schema.yaml
expect_exit 1 mr data ingest "s3://$B/raw/bad.csv" out1 --schema schema.yaml
assert_contains "$T_ERR" "s3://$B/raw/bad.csv:3" "a bad row names the object and its line"
assert_no_file out1 "nothing is published"
AWS_SECRET_ACCESS_KEY=wrong expect_exit 1 mr data ingest "s3://$B/raw/ev.csv" out2
assert_contains "$T_ERR" "SignatureDoesNotMatch" "wrong keys: the service's 403"
assert_contains "$T_ERR" "s3://$B/raw/ev.csv" "naming the object"
assert_not_contains "$T_ERR" "$AWS_SECRET_ACCESS_KEY" "and no secret"
assert_no_file out2 "nothing is published"
expect_exit 1 mr data head "s3://no-such-bucket/x.csv"
assert_contains "$T_ERR" "NoSuchBucket" "a missing bucket is named"
expect_exit 1 mr data head "s3://$B/raw/none.csv"
assert_contains "$T_ERR" "s3://$B/raw/none.csv: no input files match" "a missing object is named"
MILLRACE_S3_ENDPOINT=http://127.0.0.1:1 expect_exit 1 mr data head "s3://$B/raw/ev.csv"
assert_contains "$T_ERR" "127.0.0.1:1" "a wrong endpoint is named"
t_done
