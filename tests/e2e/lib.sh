# Helpers for the end-to-end tests. Each tests/e2e/test_<topic>.sh does
#
#   . "$(dirname "$0")/lib.sh" "$@"     # $1: path of the millrace binary
#   ws=$(new_ws diamond)                 # fresh workspace under $T_ROOT
#   expect_exit 0 mr -C "$ws" run        # run, capture stdout/stderr, check rc
#   assert_contains "$T_ERR" "4 executed" "first run executes all stages"
#   t_done
#
# Every assertion counts and prints one "ok N - what" line; the first failed
# one prints what was expected, the last command's output, and exits 1.
# Everything lives under one mktemp directory that the EXIT trap removes
# (after killing any background process a test registered with bg_track).

set -u
set -o pipefail

if [ $# -lt 1 ] || [ ! -x "$1" ]; then
    echo "usage: bash $0 /path/to/millrace" >&2
    exit 2
fi
MR_BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
T_NAME=$(basename "$0" .sh)
T_CHECKS=0
T_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/millrace-e2e.${T_NAME}.XXXXXX") || exit 2
T_OUT=""   # stdout of the last `run_cmd` / `expect_exit`
T_ERR=""   # its stderr
T_RC=0     # its exit status
T_BG=()    # background pids to kill on exit
T_LAST="(none)"
export NO_COLOR=1
# Sanitizer builds: reports must fail the test, not scroll by. UBSan is built
# with -fno-sanitize-recover; make sure ASan and LSan exit non-zero too. TSan
# (make tsan) exits 66 after a report by default; halt_on_error=1 (make tsan
# sets it) stops the process at the first one.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}exitcode=99"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

t_cleanup() {
    local rc=$?
    local p
    for p in "${T_BG[@]+"${T_BG[@]}"}"; do
        kill -9 "$p" 2>/dev/null
    done
    for p in "${T_BG[@]+"${T_BG[@]}"}"; do
        wait "$p" 2>/dev/null
    done
    # Outputs are read-only; make the tree writable so rm can remove it.
    chmod -R u+w "$T_ROOT" 2>/dev/null
    rm -rf "$T_ROOT"
    exit $rc
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

bg_track() { T_BG+=("$1"); }

fail() {
    echo "FAIL [$T_NAME] after $T_CHECKS passed checks: $*" >&2
    echo "  last command: $T_LAST (exit $T_RC)" >&2
    if [ -n "$T_OUT" ]; then
        echo "  --- its stdout ---" >&2
        printf '%s\n' "$T_OUT" | head -60 | sed 's/^/  | /' >&2
    fi
    if [ -n "$T_ERR" ]; then
        echo "  --- its stderr ---" >&2
        printf '%s\n' "$T_ERR" | head -60 | sed 's/^/  | /' >&2
    fi
    exit 1
}

pass() {
    T_CHECKS=$((T_CHECKS + 1))
    echo "ok $T_CHECKS - $*"
}

# Prints the sanitizer report lines in text, if any.
# TSan reports start with "WARNING: ThreadSanitizer:" (a data race, a
# lock-order inversion), not "ERROR:".
T_SANITIZER_RE='(ERROR|WARNING): (Address|Leak|Thread|Memory)Sanitizer|runtime error:|SUMMARY: (Address|Undefined|Leak|Thread)'
t_sanitizer_lines() { printf '%s\n' "$1" | grep -E "$T_SANITIZER_RE" ; }

# mr ARGS...: the millrace binary (a function so tests read naturally).
mr() { "$MR_BIN" "$@"; }

# run_cmd CMD...: runs it, keeping stdout in T_OUT, stderr in T_ERR, the exit
# status in T_RC. Fails on a sanitizer report on stderr whatever the status.
run_cmd() {
    local o="$T_ROOT/.last.out" e="$T_ROOT/.last.err"
    T_LAST="$*"
    "$@" >"$o" 2>"$e"
    T_RC=$?
    T_OUT=$(cat "$o")
    T_ERR=$(cat "$e")
    if t_sanitizer_lines "$T_ERR" >/dev/null; then
        fail "sanitizer report on stderr"
    fi
    return 0
}

# expect_exit CODE CMD...: runs CMD, fails unless it exits with CODE.
expect_exit() {
    local want=$1
    shift
    run_cmd "$@"
    [ "$T_RC" = "$want" ] || fail "expected exit $want, got $T_RC: $*"
    pass "exit $want: $(t_short "$*")"
}

t_short() {
    local s=${1//$T_ROOT/\$T}
    s=${s//$MR_BIN/millrace}
    printf '%s' "${s:0:110}"
}

assert_eq() { # ACTUAL EXPECTED WHAT
    [ "$1" = "$2" ] || fail "$3: expected '$2', got '$1'"
    pass "$3"
}

assert_ne() { # ACTUAL UNEXPECTED WHAT
    [ "$1" != "$2" ] || fail "$3: did not expect '$2'"
    pass "$3"
}

assert_contains() { # HAYSTACK NEEDLE WHAT
    case "$1" in
    *"$2"*) pass "$3" ;;
    *) fail "$3: expected to find '$2' in: $(printf '%s' "$1" | head -c 2000)" ;;
    esac
}

assert_not_contains() { # HAYSTACK NEEDLE WHAT
    case "$1" in
    *"$2"*) fail "$3: did not expect '$2' in: $(printf '%s' "$1" | head -c 2000)" ;;
    *) pass "$3" ;;
    esac
}

assert_match() { # TEXT EXTENDED-REGEX WHAT
    # a here-string, not a pipe: with pipefail, grep -q leaving at the first
    # match could kill a printf still writing (SIGPIPE) and fail a match
    grep -Eq -- "$2" <<<"$1" || fail "$3: no line matches /$2/ in: $(printf '%s' "$1" | head -c 2000)"
    pass "$3"
}

assert_file() { # PATH WHAT
    [ -e "$1" ] || fail "$2: $1 does not exist"
    pass "$2"
}

assert_no_file() { # PATH WHAT
    [ ! -e "$1" ] || fail "$2: $1 exists"
    pass "$2"
}

assert_file_content() { # PATH EXPECTED WHAT
    [ -e "$1" ] || fail "$3: $1 does not exist"
    local got
    got=$(cat "$1")
    [ "$got" = "$2" ] || fail "$3: $1 holds '$got', expected '$2'"
    pass "$3"
}

# json EXPR: evaluates a Python expression over the JSON in $T_OUT (as `d`).
# Lists print one item a line; bools as true/false; None as null.
json() {
    printf '%s' "$T_OUT" | python3 -c '
import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1], {"d": d, "json": json})
def show(x):
    if x is True: return "true"
    if x is False: return "false"
    if x is None: return "null"
    if isinstance(x, (dict, list)): return json.dumps(x, sort_keys=True)
    return str(x)
if isinstance(v, list):
    for x in v: print(show(x))
else:
    print(show(v))
' "$1" || fail "cannot evaluate '$1' over the JSON output"
}

# Writes the count of lines in a per-stage counter file (0 if absent).
count() { # FILE
    if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi
}

# counts DIR STAGE...: "a=1 b=2 ..." for the counter files in DIR.
counts() {
    local dir=$1 s out=""
    shift
    for s in "$@"; do out="$out${out:+ }$s=$(count "$dir/$s")"; done
    printf '%s' "$out"
}

# new_ws NAME: a fresh empty directory under T_ROOT (its path on stdout).
new_ws() {
    local d="$T_ROOT/$1"
    mkdir -p "$d" || fail "cannot create $d"
    printf '%s' "$d"
}

# wait_for DESCRIPTION SECONDS TEST-CMD...: polls TEST-CMD every 0.1 s.
wait_for() {
    local what=$1 secs=$2
    shift 2
    local tries=$((secs * 10))
    while ! "$@" 2>/dev/null; do
        tries=$((tries - 1))
        [ $tries -gt 0 ] || fail "timed out after ${secs}s waiting for: $what"
        sleep 0.1
    done
    pass "$what"
}

# No process whose command line contains MARKER is left (pgrep -f).
no_process() { ! pgrep -f -- "$1" >/dev/null; }

# The run's final check: no stage log of any workspace holds a sanitizer
# report (stage workers are the same binary), then the summary line.
t_done() {
    local hits
    hits=$(grep -rlE "$T_SANITIZER_RE" "$T_ROOT" --include='*.log' 2>/dev/null || true)
    [ -z "$hits" ] || fail "sanitizer report in stage logs: $hits"
    echo "PASS [$T_NAME] $T_CHECKS checks"
    exit 0
}

# write_diamond WS: a -> b, a -> c, b + c -> d, exec stages. Each command
# appends a line to counts/<stage> (outside its outs) so tests can count
# executions. Params a.n, b.n, c.n end up in the outputs; c also reads
# c_extra.txt, and b reads b_cfg.txt without letting it change b.txt.
write_diamond() {
    local ws=$1
    mkdir -p "$ws/counts" || fail "mkdir $ws/counts"
    echo hello >"$ws/input.txt"
    echo extra1 >"$ws/c_extra.txt"
    echo cfg1 >"$ws/b_cfg.txt"
    cat >"$ws/millrace.yaml" <<'YAML'
params:
  a: {n: 1}
  b: {n: 2}
  c: {n: 3}
stages:
  a:
    op: exec
    cmd: "echo a >> counts/a; cat input.txt > a.txt; echo a${params.a.n} >> a.txt"
    deps: [input.txt]
    outs: [a.txt]
  b:
    op: exec
    cmd: "echo b >> counts/b; cat a.txt > b.txt; echo b${params.b.n} >> b.txt; test -s b_cfg.txt"
    deps: [a.txt, b_cfg.txt]
    outs: [b.txt]
  c:
    op: exec
    cmd: "echo c >> counts/c; cat a.txt c_extra.txt > c.txt; echo c${params.c.n} >> c.txt"
    deps: [a.txt, c_extra.txt]
    outs: [c.txt]
  d:
    op: exec
    cmd: "echo d >> counts/d; cat b.txt c.txt > d.txt"
    deps: [b.txt, c.txt]
    outs: [d.txt]
YAML
}

# From `run --json` output in T_OUT: "a=cached b=executed ..." in file order
# of the JSON (topological).
run_statuses() { json '" ".join(s["stage"] + "=" + s["status"] for s in d["stages"])'; }

# write_slow WS MARKER: one exec stage that writes half its output, then
# sleeps ${params.nap} seconds (default 30) in the background of its shell
# (pid in sleep.pid), then completes the output. MARKER is in the command
# line, for pgrep -f.
write_slow() {
    local ws=$1 marker=$2
    mkdir -p "$ws/counts"
    cat >"$ws/millrace.yaml" <<YAML
params:
  nap: 30
stages:
  slow:
    op: exec
    cmd: "echo $marker >> counts/slow; echo partial-output > out.txt; sleep \${params.nap} & echo \$! > sleep.pid; wait \$!; echo done >> out.txt"
    outs: [out.txt]
YAML
}

# Is the process in pid file FILE gone (or the file absent)?
pidfile_dead() { [ ! -s "$1" ] || ! kill -0 "$(cat "$1")" 2>/dev/null; }
# Does FILE exist and contain TEXT?
file_has() { [ -f "$1" ] && grep -q -- "$2" "$1"; }

# s3_start: the local S3 server of scripts/start-s3.sh under $T_ROOT/s3 (sets
# sdir to it), its export lines evaluated, stopped by its pid when the test
# ends.
T_SRC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd) # while the path is relative to where it was sourced
s3_start() {
    local env_out
    sdir="$T_ROOT/s3"
    env_out=$("$T_SRC_ROOT/scripts/start-s3.sh" "$sdir") || fail "scripts/start-s3.sh failed: $(cat "$sdir/s3.log" 2>/dev/null)"
    bg_track "$(cat "$sdir/s3.pid")"
    eval "$env_out"
    T_S3_STOP="$T_SRC_ROOT/scripts/stop-s3.sh"
    trap 'rc=$?; "$T_S3_STOP" "$sdir" >/dev/null 2>&1; (exit $rc); t_cleanup' EXIT
}

# duckdb_setup WHAT SCRIPT...: sets DUCK to a directory where node can import
# @duckdb/node-api next to the given scripts from tests/fixtures/duckdb/:
# the fixtures directory itself when its node_modules exists, else a cache
# next to the build, installed with npm on first use. Without node/npm it
# says that WHAT was not run and ends the test.
duckdb_setup() {
    local what=$1 src fx s
    shift
    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    fx="$src/tests/fixtures/duckdb"
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        echo "SKIP [$T_NAME] node/npm not found: $what not run"
        exit 0
    fi
    DUCK="$fx"
    [ -d "$DUCK/node_modules/@duckdb/node-api" ] && return 0
    DUCK="$(dirname "$MR_BIN")/duckdb-node"
    if [ ! -d "$DUCK/node_modules/@duckdb/node-api" ]; then
        mkdir -p "$DUCK"
        cp "$fx/package.json" "$DUCK/"
        [ -f "$fx/package-lock.json" ] && cp "$fx/package-lock.json" "$DUCK/"
        (cd "$DUCK" && npm install --no-audit --no-fund >"$T_ROOT/npm.out" 2>&1) ||
            fail "npm install of @duckdb/node-api failed: $(tail -5 "$T_ROOT/npm.out")"
    fi
    for s in "$@" csv.mjs; do cp "$fx/$s" "$DUCK/"; done # node resolves imports next to the script
}

# Every stage's output ids in a lock file: "stage.output=id" lines, sorted.
lock_outputs() { # LOCK
    python3 - "$1" <<'PY'
import sys
stage = None; section = None; out = []
for line in open(sys.argv[1]):
    s = line.rstrip("\n")
    if s.startswith("  ") and not s.startswith("   ") and s.strip().endswith(":"):
        stage = s.strip()[:-1]; section = None
    elif s.startswith("    ") and not s.startswith("     "):
        section = s.strip().rstrip(":")
    elif s.startswith("      ") and section == "outputs":
        name, _, ident = s.strip().partition(": ")
        out.append(f"{stage}.{name}={ident}")
print("\n".join(sorted(out)))
PY
}

# tune_data DIR: the tune tests' train.csv (3,000 rows) and valid.csv (1,000) of
# a seeded binary problem with an interaction (x1 * x2) and a step (x3 > 0.5).
tune_data() {
    (cd "$1" && python3 - <<'PY'
import random, math
r = random.Random(7)
with open("train.csv", "w") as f, open("valid.csv", "w") as g:
    f.write("x1,x2,x3,label\n"); g.write("x1,x2,x3,label\n")
    for i in range(4000):
        x1, x2, x3 = r.gauss(0, 1), r.gauss(0, 1), r.random()
        z = 2.0 * x1 * x2 - x1 + 2 * (x3 > 0.5) - 1
        y = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        (f if i < 3000 else g).write(f"{x1:.6f},{x2:.6f},{x3:.6f},{y}\n")
PY
    )
}
