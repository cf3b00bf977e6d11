#!/usr/bin/env bash
# The HTML report: mr_reporttool builds a sample report with every section
# (and a hostile parameter value); the file must reference nothing outside
# itself, and, when Debian's chromium is installed, render headless without
# console errors, with every section present, every <svg> drawing marks, no
# injected <script>, and a non-blank screenshot. Without chromium the render
# tier is skipped with a note (the self-containment checks still run).
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOOL="$(dirname "$MR_BIN")/tests/mr_reporttool"
[ -x "$TOOL" ] || fail "mr_reporttool not built at $TOOL"
PY=$(command -v python3 || command -v /usr/bin/python3) || { echo "SKIP [$T_NAME] no python3"; exit 0; }
INSPECT="$SRC/tests/e2e/report/inspect.py"
SECTIONS="summary timeline training metrics curves confusion importance slices errors residuals checks"

expect_exit 0 "$TOOL" "$T_ROOT/report.html" "$T_ROOT/report.md"
assert_file "$T_ROOT/report.html" "report.html written"
assert_file "$T_ROOT/report.md" "Markdown summary written beside it"
md=$(cat "$T_ROOT/report.md")
assert_contains "$md" "## Slices" "Markdown has the slice section"
assert_not_contains "$md" "<script>" "Markdown escapes markup"
html=$(cat "$T_ROOT/report.html")
assert_not_contains "$html" "<script" "no script in the HTML (hostile text escaped)"
assert_contains "$html" "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" "hostile parameter shown as text"
if grep -Eiq '@import|url\(' "$T_ROOT/report.html"; then fail "report loads something via url( or @import"; fi
pass "no url( or @import"
run_cmd "$PY" "$INSPECT" selfcontained "$T_ROOT/report.html"
[ "$T_RC" = 0 ] || fail "self-containment: $T_ERR"
pass "$T_OUT"

CHROME=""
for c in /usr/bin/chromium "$(command -v chromium 2>/dev/null)" "$(command -v chromium-browser 2>/dev/null)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then CHROME=$c; break; fi
done
if [ -z "$CHROME" ]; then
    echo "SKIP [$T_NAME] chromium not installed: headless render tier NOT run (apt-get install chromium)"
    t_done
fi
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --enable-logging=stderr --v=0)
url="file://$T_ROOT/report.html"
run_cmd timeout 120 "$CHROME" "${flags[@]}" --user-data-dir="$(mktemp -d "$T_ROOT/chrome.XXXXXX")" --dump-dom "$url"
[ "$T_RC" = 0 ] || fail "chromium --dump-dom failed (exit $T_RC)"
printf '%s\n' "$T_OUT" >"$T_ROOT/dom.html"
console=$(printf '%s\n' "$T_ERR" | grep -E 'CONSOLE' || true)
[ -z "$console" ] || fail "console messages while rendering: $console"
pass "no console errors (--dump-dom)"
run_cmd "$PY" "$INSPECT" dom "$T_ROOT/dom.html" $SECTIONS
[ "$T_RC" = 0 ] || fail "rendered DOM: $T_ERR"
pass "$T_OUT"
run_cmd timeout 120 "$CHROME" "${flags[@]}" --user-data-dir="$(mktemp -d "$T_ROOT/chrome.XXXXXX")" \
    --window-size=1280,5200 --screenshot="$T_ROOT/shot.png" "$url"
[ "$T_RC" = 0 ] || fail "chromium --screenshot failed (exit $T_RC)"
console=$(printf '%s\n' "$T_ERR" | grep -E 'CONSOLE' || true)
[ -z "$console" ] || fail "console messages while rendering: $console"
run_cmd "$PY" "$INSPECT" png "$T_ROOT/shot.png"
[ "$T_RC" = 0 ] || fail "screenshot: $T_ERR"
pass "$T_OUT"
[ -n "${MILLRACE_KEEP_REPORT:-}" ] && cp "$T_ROOT/report.html" "$T_ROOT/report.md" "$T_ROOT/shot.png" "$MILLRACE_KEEP_REPORT/"
t_done
