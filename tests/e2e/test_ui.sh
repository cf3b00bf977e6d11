#!/usr/bin/env bash
# millrace ui: the run browser over a workspace with a real run (stages,
# logs, artifacts, a report) and 2,000 generated runs (50 params, 20
# metrics, three curves), loopback only. The API: the runs table's total,
# sort, filter and paging against ui_gen.py's independent answers; a
# 100,000-step curve downsampled to the chart's width with its extremes
# kept; one run's stages, log, artifacts (a listing, a download equal to
# the workspace's file) and report; a run added while it serves shows up;
# read-only (POST 405), unknown pages 404, paths outside the logs refused.
# Then the page in headless Chromium driven by puppeteer-core
# (tests/fixtures/ui/ui_check.mjs): sort, filter, select three runs,
# overlay with the right points, params diff, parallel coordinates,
# timeline, a run's page, no console errors; screenshots are kept in
# BUILD/test-artifacts/ui/.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$E2E_DIR/../.." && pwd)
ws=$(new_ws ui)
cd "$ws" || fail "cd"
expect_exit 0 mr init .
expect_exit 0 mr run
run_cmd /usr/bin/python3 "$E2E_DIR/ui_gen.py" .millrace/runs.db 2000
assert_eq "$T_RC" 0 "2,000 runs generated ($T_ERR)"
EXPECT=$T_OUT

rm -f port.txt
"$MR_BIN" ui --port 0 --port-file port.txt >ui.log 2>&1 &
UPID=$!
bg_track $UPID
wait_for "ui listening" 20 test -s port.txt
PORT=$(cat port.txt)
assert_contains "$(cat ui.log)" "run browser on http://127.0.0.1:$PORT/" "binds 127.0.0.1 and says where"

# ---- the API ------------------------------------------------------------------------
run_cmd /usr/bin/python3 - "$PORT" "$EXPECT" <<'PY'
import json, sys, urllib.error, urllib.parse, urllib.request
port, want = sys.argv[1], json.loads(sys.argv[2])
base = f"http://127.0.0.1:{port}"
def get(path, code=200):
    try:
        r = urllib.request.urlopen(base + path, timeout=30)
        st, body, h = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        st, body, h = e.code, e.read(), e.headers
    assert st == code, (path, st, body[:300])
    return body, h
def js(path, code=200):
    return json.loads(get(path, code)[0])
d = js("/api/runs?limit=5")
assert d["total"] == 2001 and d["matched"] == 2001, d["total"]
assert [r["id"] for r in d["runs"]] == [2001, 2000, 1999, 1998, 1997], "newest first"
d = js("/api/runs?sort=-metrics.eval.m3&limit=1&columns=metrics.eval.m3")
assert d["runs"][0]["id"] == want["best_m3"] and abs(d["runs"][0]["cells"][0] - want["best_m3_value"]) < 1e-9, d["runs"]
q = urllib.parse.quote("metrics.eval.m0 > 0.9 and tags.exp = 'g1'")
d = js(f"/api/runs?filter={q}&limit=1000")
assert d["matched"] == want["filter_matches"] == len(d["runs"]), (d["matched"], want["filter_matches"])
page2 = js("/api/runs?offset=100&limit=100")
assert page2["runs"][0]["id"] == 2001 - 100 and len(page2["runs"]) == 100, "paging"
e = js("/api/runs?sort=metrics.eval.m33", 400)
assert "no column 'metrics.eval.m33'" in e["error"] and "did you mean 'metrics.eval.m" in e.get("hint", ""), e
e = js("/api/runs?filter=" + urllib.parse.quote("metrics.eval.m0 >"), 400)
assert "filter" in e["error"], e
cols = js("/api/columns")
assert len(cols["params"]) == 50 + 2 and len(cols["metrics"]) >= 20, (len(cols["params"]), len(cols["metrics"]))
print("api ok")
PY
assert_eq "$T_RC" 0 "the runs API: total, order, sort, filter, paging, errors ($T_ERR)"

run_cmd /usr/bin/python3 "$E2E_DIR/ui_gen.py" .millrace/runs.db 1 --curves 1:100000 --params 3 --metrics 2
assert_eq "$T_RC" 0 "a run with a 100,000-step curve added while the ui serves"
run_cmd /usr/bin/python3 - "$PORT" <<'PY'
import json, math, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
js = lambda p: json.loads(urllib.request.urlopen(base + p, timeout=60).read())
d = js("/api/runs?limit=1")
assert d["total"] == 2002 and d["runs"][0]["id"] == 2002, ("a run added while serving shows up", d["total"])
c = js("/api/curves?runs=2002&metric=train/loss&width=800")
s = c["series"][0]
vals = [1.0 / (1 + k * 0.01) + 0.001 * math.sin(k + 2002) for k in range(100000)]
assert s["points"] == 100000 and 0 < s["buckets"] <= 800 and len(s["x"]) == len(s["min"]) == len(s["max"]) == s["buckets"], s["buckets"]
assert abs(min(s["min"]) - min(vals)) < 1e-12 and abs(max(s["max"]) - max(vals)) < 1e-12, "the extremes survive"
assert s["x"] == sorted(s["x"]) and s["x"][0] == 0, "buckets in step order"
small = js("/api/curves?runs=2001,2000&metric=train/loss&width=800")
assert [x["points"] for x in small["series"]] == [500, 500] and [x["buckets"] for x in small["series"]] == [500, 500]
print("curves ok")
PY
assert_eq "$T_RC" 0 "curves are downsampled on the server, extremes kept ($T_ERR)"

# the real run: stages, a log, an artifact listing and download, the report
run_cmd /usr/bin/python3 - "$PORT" <<'PY'
import json, os, sys, urllib.request, urllib.error
base = f"http://127.0.0.1:{sys.argv[1]}"
def get(p, code=200, method="GET"):
    try:
        r = urllib.request.urlopen(urllib.request.Request(base + p, method=method), timeout=60)
        return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        assert e.code == code, (p, e.code, e.read()[:200])
        return e.code, e.read(), e.headers
st, body, _ = get("/api/run?id=1")
d = json.loads(body)
stages = {s["stage"]: s for s in d["stages"]}
assert set(stages) == {"customers", "split", "features", "model", "eval", "report"}, sorted(stages)
assert all(s["status"] == "executed" for s in d["stages"])
assert any(p["stage"] == "eval" for p in d["metrics"]), "its final metrics"
st, log, _ = get("/api/log?run=1&stage=model")
assert st == 200 and len(log) > 0, "the model stage's log"
art = stages["model"]["outputs"]["out"]
st, body, _ = get("/api/artifact?id=" + art)
files = json.loads(body)["files"]
paths = [f["path"] for f in files]
assert "model.bin" in paths, paths
st, data, h = get("/api/artifact?id=" + art + "&path=model.bin")
assert data == open("out/model/model.bin", "rb").read(), "the download is the workspace's file"
assert 'filename="model.bin"' in h["Content-Disposition"], h["Content-Disposition"]
st, html, h = get("/api/report?run=1")
assert html.startswith(b"<!doctype html") or b"<html" in html[:200], html[:100]
get("/api/runs", 405, "POST")
get("/nope", 404)
get("/api/log?run=1&stage=../../millrace.yaml", 400)
get("/api/artifact?id=zzz", 400)
st, page, h = get("/")
assert b"<script>" in page and b"src=" not in page.split(b"<script>")[0].split(b"<body>")[1], "one self-contained page"
assert "default-src 'self'" in h["Content-Security-Policy"]
print("run page API ok")
PY
assert_eq "$T_RC" 0 "one run: stages, log, artifacts, report; read-only; refusals ($T_ERR)"

# ---- the page in a real browser -----------------------------------------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "SKIP [$T_NAME] node/npm not found: the browser tier NOT run (scripts/install-deps.sh installs them)"
    t_done
fi
[ -x /usr/bin/chromium ] || fail "chromium is not installed (scripts/install-deps.sh installs it)"
NODEDIR="$(dirname "$MR_BIN")/ui-node"
if [ ! -d "$NODEDIR/node_modules/puppeteer-core" ]; then
    mkdir -p "$NODEDIR"
    cp "$SRC/tests/fixtures/ui/package.json" "$SRC/tests/fixtures/ui/package-lock.json" "$NODEDIR/"
    (cd "$NODEDIR" && npm ci --no-audit --no-fund >"$T_ROOT/npm.out" 2>&1) ||
        fail "npm ci of puppeteer-core failed: $(tail -5 "$T_ROOT/npm.out")"
fi
cp "$SRC/tests/fixtures/ui/ui_check.mjs" "$NODEDIR/"
SHOTS="$(dirname "$MR_BIN")/test-artifacts/ui"
rm -rf "$SHOTS" && mkdir -p "$SHOTS"
EXPECT=$(/usr/bin/python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["total"] = 2002; print(json.dumps(d))' "$EXPECT")
run_cmd timeout 300 node "$NODEDIR/ui_check.mjs" check "http://127.0.0.1:$PORT/" "$EXPECT" "$SHOTS"
printf '%s\n' "$T_OUT" | sed 's/^/  | /'
assert_eq "$T_RC" 0 "the run browser in headless Chromium ($(printf '%s' "$T_OUT" | grep FAIL | head -3))"
assert_file "$SHOTS/4-compare.png" "screenshots kept in $SHOTS"
kill -TERM "$UPID"
wait "$UPID"
assert_eq "$?" 0 "SIGTERM stops the ui, exit 0"
t_sanitizer_lines "$(cat ui.log)" && fail "sanitizer report in the ui log"
t_done
