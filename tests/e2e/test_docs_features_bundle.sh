#!/usr/bin/env bash
# Doc tests for docs/features.md, docs/bundle.md and docs/serve.md: every
# example runs as it stands. The fenced blocks of a page run in order in one
# fresh directory, with `millrace` on PATH:
#   ```sh   a shell block: `bash -e` in the directory; it must exit 0
#   ```yaml a block whose first line is `# millrace.yaml`: written to
#           millrace.yaml there (a later sh block runs it); a YAML block
#           without that line fails this test (an example that cannot run)
#   other languages (text, json, c) are not run.
# docs/serve.md serves docs/bundle.md's bundle, so it runs after it in the
# same directory. Each sh block runs in its own session under a time limit,
# and whatever it leaves running is killed.
. "$(dirname "$0")/lib.sh" "$@"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
bin="$T_ROOT/bin"
mkdir -p "$bin" && ln -s "$MR_BIN" "$bin/millrace" || fail "cannot link the millrace binary"
export PATH="$bin:$PATH"

# blocks DOC DIR: writes DOC's runnable blocks into DIR as NNN.sh / NNN.yaml
# and prints one "NNN KIND LINE" per block (KIND: sh, yaml or fragment).
blocks() {
    python3 - "$1" "$2" <<'PY'
import os, sys
doc, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
lang, start, body, n = None, 0, [], 0
for no, line in enumerate(open(doc, encoding="utf-8"), 1):
    if lang is None:
        if line.startswith("```"):
            lang, start, body = line[3:].strip(), no, []
        continue
    if not line.startswith("```"):
        body.append(line)
        continue
    kind = None
    if lang in ("sh", "bash", "shell"):
        kind = "sh"
    elif lang in ("yaml", "yml"):
        kind = "yaml" if body and body[0].strip() == "# millrace.yaml" else "fragment"
    if kind:
        n += 1
        with open(os.path.join(out, "%03d.%s" % (n, "sh" if kind == "sh" else "yaml")), "w") as f:
            f.writelines(body)
        print("%03d %s %d" % (n, kind, start))
    lang = None
if lang is not None:
    sys.exit("%s:%d: unterminated code block" % (doc, start))
PY
}

run_doc() { # DOC WS
    local doc=$1 ws=$2 dir="$T_ROOT/blocks/$1" id kind line list rc pid
    mkdir -p "$ws"
    list=$(blocks "$SRC/docs/$doc" "$dir") || fail "cannot read the blocks of docs/$doc"
    [ -n "$list" ] || fail "docs/$doc has no runnable example"
    while read -r id kind line; do
        case $kind in
        fragment) fail "docs/$doc:$line: a YAML example that is not a whole millrace.yaml (first line '# millrace.yaml')" ;;
        yaml)
            cp "$dir/$id.yaml" "$ws/millrace.yaml" || fail "copy"
            pass "docs/$doc:$line: millrace.yaml written"
            ;;
        sh)
            T_LAST="docs/$doc:$line (sh block)"
            setsid timeout 240 bash -c 'cd "$1" && exec bash -e "$2"' _ "$ws" "$dir/$id.sh" >"$dir/$id.out" 2>&1 &
            pid=$!
            bg_track "$pid"
            wait "$pid"
            rc=$?
            kill -9 -- "-$pid" 2>/dev/null
            T_RC=$rc
            T_OUT=$(cat "$dir/$id.out")
            T_ERR=""
            [ "$rc" = 0 ] || fail "docs/$doc:$line: the shell example exits $rc"
            t_sanitizer_lines "$T_OUT" && fail "docs/$doc:$line: sanitizer report"
            pass "docs/$doc:$line: the shell example runs"
            ;;
        esac
    done <<<"$list"
}

ws=$T_ROOT/features
run_doc features.md "$ws"
assert_file "$ws/out/features/transform/features.mrft" "features.md: the features stage fitted its transform"
assert_contains "$(cat "$T_ROOT"/blocks/features.md/*.out)" "customer_id" "features.md: the inspected train output holds the kept id"

ws=$T_ROOT/bundle
run_doc bundle.md "$ws"
assert_file "$ws/out/package/model.mrb" "bundle.md: the package stage wrote the bundle"
assert_eq "$(wc -l <"$ws/scores.csv" | tr -d ' ')" 101 "bundle.md: predict scored the 100 rows"
assert_eq "$(head -1 "$ws/scores.csv")" "customer_id,prediction" "bundle.md: the ids pass through"
assert_file "$ws/model.onnx" "bundle.md: the ONNX export was written"
run_doc serve.md "$ws"
assert_contains "$(cat "$T_ROOT"/blocks/serve.md/*.out)" '"predictions": [' "serve.md: the server answered the request"
t_done
