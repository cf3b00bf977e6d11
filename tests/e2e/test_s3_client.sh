#!/usr/bin/env bash
# The S3 client (include/millrace/s3.h) against a real S3-compatible server
# that checks signatures (scripts/start-s3.sh, stopped by its pid), through
# mr_s3tool, with independent clients on the other side: what millrace
# writes, awscli reads back byte for byte; what boto3 writes, millrace
# reads. Ranged reads, HEAD, a listing past one page (1,000 keys), a
# multipart upload, deletes; then the failures: a wrong secret (403
# SignatureDoesNotMatch, named, no secret shown), a missing key (404) and
# bucket, a server that is gone (retried, then an error naming the
# endpoint), with nothing half-written locally.
. "$(dirname "$0")/lib.sh" "$@"
BUILD=$(dirname "$MR_BIN")
S3TOOL="$BUILD/tests/mr_s3tool"
[ -x "$S3TOOL" ] || fail "mr_s3tool not built at $S3TOOL"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ws=$(new_ws s3)
cd "$ws" || fail "cd"
s3_start
assert_match "$MILLRACE_S3_ENDPOINT" '^http://127\.0\.0\.1:[0-9]+$' "the server listens on 127.0.0.1"
s3() { "$S3TOOL" "$@"; }
aws_() { /usr/bin/aws --endpoint-url "$MILLRACE_S3_ENDPOINT" --region us-east-1 "$@"; }

# millrace writes, awscli reads
head -c 300000 /dev/urandom >blob.bin
expect_exit 0 s3 put "dir/blob bin+1.bin" blob.bin
expect_exit 0 aws_ s3 cp "s3://$MILLRACE_S3_BUCKET/dir/blob bin+1.bin" back.bin
assert_eq "$(cmp blob.bin back.bin && echo same)" same "awscli reads back what millrace put (a key with a space and a +)"
expect_exit 0 s3 head "dir/blob bin+1.bin"
assert_eq "${T_OUT%% *}" 300000 "HEAD gives the size"
# the bytes go to a file: a shell variable drops NUL bytes and trailing newlines, which random data has
s3 get "dir/blob bin+1.bin" 1000 24 >range.bin || fail "s3 get of a range"
assert_eq "$(od -An -tx1 range.bin | tr -d ' \n')" "$(dd if=blob.bin bs=1 skip=1000 count=24 2>/dev/null | od -An -tx1 | tr -d ' \n')" \
    "a ranged GET gives exactly those bytes"
assert_contains "$T_ERR" "requests=1 " "one request for a range"

# boto3 writes, millrace reads
/usr/bin/python3 - <<PYEOF || fail "boto3 put failed"
import boto3, os
c = boto3.client("s3", endpoint_url=os.environ["MILLRACE_S3_ENDPOINT"], region_name="us-east-1")
c.put_object(Bucket=os.environ["MILLRACE_S3_BUCKET"], Key="from-boto/é note.txt", Body=b"written by boto3\n")
PYEOF
expect_exit 0 s3 get "from-boto/é note.txt"
assert_eq "$T_OUT" "written by boto3" "millrace reads what boto3 wrote (a non-ASCII key)"

# a multipart upload (5 MiB parts), read back by awscli
head -c $((12 * 1024 * 1024 + 7)) /dev/urandom >big.bin
MR_S3_MULTIPART=$((5 * 1024 * 1024)) expect_exit 0 s3 put big/big.bin big.bin
assert_contains "$T_ERR" "requests=5 " "create, three parts, complete"
expect_exit 0 aws_ s3 cp "s3://$MILLRACE_S3_BUCKET/big/big.bin" big.back
assert_eq "$(cmp big.bin big.back && echo same)" same "the multipart object reads back whole"
expect_exit 0 s3 head big/big.bin
assert_match "$T_OUT" "^$((12 * 1024 * 1024 + 7)) [0-9a-f-]+$" "HEAD gives its size and ETag"
expect_exit 0 s3 getfile big/big.bin got.bin
assert_eq "$(cmp big.bin got.bin && echo same)" same "a download to a file"

# a listing past one page: 1,050 keys written by boto3, listed by millrace
/usr/bin/python3 - <<PYEOF || fail "boto3 puts failed"
import boto3, os
from concurrent.futures import ThreadPoolExecutor
c = boto3.client("s3", endpoint_url=os.environ["MILLRACE_S3_ENDPOINT"], region_name="us-east-1")
b = os.environ["MILLRACE_S3_BUCKET"]
with ThreadPoolExecutor(8) as ex:
    list(ex.map(lambda i: c.put_object(Bucket=b, Key="many/k%04d" % i, Body=b"x" * (i % 7)), range(1050)))
PYEOF
expect_exit 0 s3 ls many/
assert_eq "$(printf '%s\n' "$T_OUT" | wc -l)" 1050 "every key is listed, across pages"
assert_eq "$(printf '%s\n' "$T_OUT" | sort | uniq | wc -l)" 1050 "each once"
assert_eq "$(printf '%s\n' "$T_OUT" | awk '{ s += $2 } END { print s }')" "$(awk 'BEGIN { for (i = 0; i < 1050; i++) s += i % 7; print s }')" \
    "with their sizes"
assert_contains "$T_ERR" "requests=2 " "two pages, two requests"

# deletes: gone for awscli too; deleting a missing key is no error
expect_exit 0 s3 rm "dir/blob bin+1.bin"
expect_exit 3 s3 head "dir/blob bin+1.bin"
assert_contains "$T_ERR" "s3://$MILLRACE_S3_BUCKET/dir/blob bin+1.bin: HTTP 404" "a missing key is a 404 naming it"
expect_exit 0 s3 rm "dir/blob bin+1.bin"
expect_exit 254 aws_ s3api head-object --bucket "$MILLRACE_S3_BUCKET" --key "dir/blob bin+1.bin"
assert_contains "$T_ERR" "(404)" "awscli finds it gone too"

# a wrong secret: 403, named, the secret never shown
AWS_SECRET_ACCESS_KEY=not-the-secret-xyz expect_exit 1 s3 get big/big.bin
assert_contains "$T_ERR" "HTTP 403 SignatureDoesNotMatch" "a wrong secret is the service's 403, named"
assert_contains "$T_ERR" "s3://$MILLRACE_S3_BUCKET/big/big.bin" "naming the object"
assert_not_contains "$T_ERR" "not-the-secret-xyz" "the secret is never printed"
assert_not_contains "$T_ERR" "$AWS_SECRET_ACCESS_KEY" "nor the real one"
assert_contains "$T_ERR" "requests=1 " "a 403 is not retried"
# a missing bucket
MILLRACE_S3_BUCKET=no-such-bucket expect_exit 3 s3 get x
assert_contains "$T_ERR" "NoSuchBucket" "a missing bucket is named"
# a download that fails leaves no file
expect_exit 3 s3 getfile nothing/here out.bin
assert_no_file out.bin "a failed download leaves nothing"

# the server gone: retried with backoff, then an error naming the endpoint
spid=$(cat "$sdir/s3.pid")
"$SRC/scripts/stop-s3.sh" "$sdir"
assert_eq "$(kill -0 "$spid" 2>/dev/null && echo alive || echo gone)" gone "stop-s3.sh stopped it by its pid"
MR_S3_RETRIES=2 expect_exit 1 s3 get big/big.bin
assert_contains "$T_ERR" "$MILLRACE_S3_ENDPOINT" "a dead endpoint is named"
assert_contains "$T_ERR" "retries=2 " "and was retried"
t_done
