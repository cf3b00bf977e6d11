#!/usr/bin/env bash
# Starts and stops a Redis server for millrace's online feature store
# (docs/featurestore.md, "The online store in Redis"): Debian's redis-server
# (scripts/install-deps.sh installs it), listening on 127.0.0.1 only, no
# persistence, its files in DIR. The tests start theirs with this script,
# and stop it by its pid.
#
# usage: scripts/redis-server.sh start DIR [PORT]   (default port: a free one)
#        scripts/redis-server.sh stop DIR
#
# start prints the port and leaves DIR/redis.pid and DIR/redis.port; it
# returns once the server answers PING (at most 10 s). stop sends SIGTERM to
# the pid in DIR/redis.pid and waits for it to exit (SIGKILL after 10 s).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2; }

free_port() {
    /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case "$cmd" in
start)
    command -v redis-server >/dev/null || { echo "$0: redis-server is not installed (scripts/install-deps.sh)" >&2; exit 1; }
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    port=${3:-$(free_port)}
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --daemonize no \
        --dir "$dir" --logfile "$dir/redis.log" --protected-mode yes >/dev/null 2>&1 &
    pid=$!
    echo "$pid" >"$dir/redis.pid"
    echo "$port" >"$dir/redis.port"
    for _ in $(seq 100); do
        if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
            echo "$port"
            exit 0
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "$0: redis-server did not start on 127.0.0.1:$port (see $dir/redis.log)" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
    ;;
stop)
    [ -f "$dir/redis.pid" ] || exit 0
    pid=$(cat "$dir/redis.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$dir/redis.pid"; exit 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$dir/redis.pid"
    ;;
*)
    echo "usage: $0 start DIR [PORT] | stop DIR" >&2
    exit 2
    ;;
esac
