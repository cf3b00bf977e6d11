#!/usr/bin/env bash
# Starts a local S3-compatible server on 127.0.0.1 for trying remotes and
# for the suite (docs/remote.md): s3rver, the @20minutes fork that checks
# SigV4 signatures (npm registry; installed once into MILLRACE_S3_HOME,
# default ~/.cache/millrace/s3-fixture), run by Node.js with one bucket
# (MILLRACE_S3_BUCKET, default millrace) and a fresh random key pair. It is
# a test fixture, not a store for real data: path-style addressing only,
# listings in its own order, no ListParts.
#
# usage: eval "$(scripts/start-s3.sh [DIR])"   (DIR default /tmp/millrace-s3)
#        scripts/stop-s3.sh [DIR]
#
# Prints export lines for AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION, MILLRACE_S3_ENDPOINT and MILLRACE_S3_BUCKET, and leaves them
# in DIR/s3.env, the pid in DIR/s3.pid, the objects under DIR/data, and a
# line of JSON per request in DIR/requests.log (method, url, range, status,
# body bytes up and down: what the suite counts on the server side).
# Returns once the server listens (at most 20 s).
set -euo pipefail
dir=${1:-${MILLRACE_S3_DIR:-/tmp/millrace-s3}}
src=$(cd "$(dirname "$0")" && pwd)/s3
home=${MILLRACE_S3_HOME:-${HOME:-/root}/.cache/millrace/s3-fixture}
bucket=${MILLRACE_S3_BUCKET:-millrace}
command -v node >/dev/null && command -v npm >/dev/null ||
    { echo "$0: node and npm are needed (scripts/install-deps.sh)" >&2; exit 1; }
if [ -f "$dir/s3.pid" ] && kill -0 "$(cat "$dir/s3.pid")" 2>/dev/null; then
    echo "$0: a server already runs from $dir (scripts/stop-s3.sh $dir)" >&2
    exit 1
fi
if [ ! -d "$home/node_modules/@20minutes/s3rver" ]; then
    mkdir -p "$home"
    cp "$src/package.json" "$home/"
    (cd "$home" && npm install --no-audit --no-fund --loglevel=error >"$home/npm.log" 2>&1) ||
        { echo "$0: npm install of @20minutes/s3rver failed (see $home/npm.log)" >&2; exit 1; }
fi
cp "$src/server.js" "$home/server.js"
mkdir -p "$dir/data"
dir=$(cd "$dir" && pwd)
key="AK$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)"
secret=$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
# paginated listings need node's legacy OpenSSL provider (s3rver's MD5 use)
node --openssl-legacy-provider "$home/server.js" "$dir/data" 0 "$bucket" "$key" "$secret" "$dir/requests.log" \
    >"$dir/s3.out" 2>"$dir/s3.log" &
pid=$!
echo "$pid" >"$dir/s3.pid"
port=""
for _ in $(seq 200); do
    port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$dir/s3.out" 2>/dev/null || true)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "$0: the S3 server did not start (see $dir/s3.log)" >&2
    kill "$pid" 2>/dev/null || true
    rm -f "$dir/s3.pid"
    exit 1
fi
{
    echo "export AWS_ACCESS_KEY_ID=$key"
    echo "export AWS_SECRET_ACCESS_KEY=$secret"
    echo "export AWS_REGION=us-east-1"
    echo "export MILLRACE_S3_ENDPOINT=http://127.0.0.1:$port"
    echo "export MILLRACE_S3_BUCKET=$bucket"
} >"$dir/s3.env"
cat "$dir/s3.env"
