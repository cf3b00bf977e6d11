#!/usr/bin/env bash
# Stops the S3 server scripts/start-s3.sh started from DIR (default
# /tmp/millrace-s3), by its pid: SIGTERM, SIGKILL after 10 s. Its objects
# stay under DIR/data.
set -euo pipefail
dir=${1:-${MILLRACE_S3_DIR:-/tmp/millrace-s3}}
[ -f "$dir/s3.pid" ] || exit 0
pid=$(cat "$dir/s3.pid")
kill -TERM "$pid" 2>/dev/null || true
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$dir/s3.pid"; exit 0; }
    sleep 0.1
done
kill -KILL "$pid" 2>/dev/null || true
rm -f "$dir/s3.pid"
