# Sourced by the serve tests after lib.sh, with E2E_DIR set:
#   client ARGS...            runs serve_client.py ARGS (a check, passes with its output)
#   start_server LOG ARGS...  starts `millrace serve ARGS` on a free port; sets SPID and PORT
client() { run_cmd python3 "$E2E_DIR/serve_client.py" "$@"; [ "$T_RC" = 0 ] || fail "serve_client $*"; pass "$T_OUT"; }

start_server() {
    local log=$1
    shift
    rm -f port.txt
    "$MR_BIN" serve "$@" --port 0 --port-file port.txt >"$log" 2>&1 &
    SPID=$!
    bg_track $SPID
    wait_for "server listening" 20 test -s port.txt
    PORT=$(cat port.txt)
}
