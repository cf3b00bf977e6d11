"""HTTP helpers for tests/e2e/test_serve.sh (standard library only; every
connection goes to 127.0.0.1, or to $SERVE_HOST such as ::1, and every loop
is bounded in count and time).

  serve_client.py PORT equal TEST.csv PRED.csv      serve == predict, bit for bit
  serve_client.py PORT mixed                        concurrent valid + invalid requests
  serve_client.py PORT reload BUNDLE NEW OLD PID    hot reload under load loses nothing
  serve_client.py PORT metrics                      /metrics parses as Prometheus text
  serve_client.py PORT replay DIR                   raw corpus replay; server still healthy
  serve_client.py PORT queue                        503 + Retry-After when the queue is full
  serve_client.py PORT abandon                      clients that hang up while queued; server healthy
"""
import csv, http.client, json, os, re, signal, socket, sys, threading, time

PORT = int(sys.argv[1])
HOST = os.environ.get("SERVE_HOST", "127.0.0.1")


def req(method, path, body=None, headers=None, conn=None):
    c = conn or http.client.HTTPConnection(HOST, PORT, timeout=10)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    return r.status, data, dict(r.getheaders())


def row_of(r):
    out = {"x2": float(r["x2"]), "plan": r["plan"], "n": int(r["n"])}
    if r["x1"] != "":
        out["x1"] = float(r["x1"])
    else:
        out["x1"] = None
    return out


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def equal(test_csv, pred_csv):
    rows = [row_of(r) for r in csv.DictReader(open(test_csv))]
    want = [float(r["prediction"]) for r in csv.DictReader(open(pred_csv))]
    got = [None] * len(rows)
    errors = []

    def work(k):
        conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
        for start in range(k * 50, len(rows), 8 * 50):
            chunk = rows[start:start + 50]
            if start // 50 % 2:
                body = {"columns": {f: [r[f] for r in chunk] for f in ("x1", "x2", "plan", "n")}}
            else:
                body = {"rows": chunk}
            st, data, _ = req("POST", "/v1/predict", json.dumps(body), conn=conn)
            if st != 200:
                errors.append((st, data))
                return
            got[start:start + len(chunk)] = json.loads(data)["predictions"]

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts: t.start()
    for t in ts: t.join(60)
    check(not errors, f"errors: {errors[:3]}")
    bad = [i for i in range(len(rows)) if got[i] != want[i]]
    check(not bad, f"{len(bad)} rows differ, first {bad[:3]}: {[(got[i], want[i]) for i in bad[:3]]}")
    print(f"serve == predict on {len(rows)} rows (rows and columns bodies, 8 keep-alive clients)")


def mixed():
    good = json.dumps({"rows": [{"x1": 0.1, "x2": 0.2, "plan": "pro", "n": 3}]})
    cases = [
        ("POST", "/v1/predict", good, 200, "predictions"),
        ("POST", "/v1/predict", '{"rows": [{"x1": 1,', 400, "position"),
        ("POST", "/v1/predict", json.dumps({"rows": [{"x1": 1, "plan": "pro", "n": 1}]}), 422, '"field": "x2"'),
        ("POST", "/v1/predict", json.dumps({"rows": [{"x1": "a", "x2": 1, "plan": "pro", "n": 1}]}), 422, '"field": "x1"'),
        ("POST", "/v1/predict", json.dumps({"rows": [{"x1": 1, "x2": 1, "plan": 7, "n": 1}]}), 422, '"field": "plan"'),
        ("POST", "/v1/predict", json.dumps({"columns": {"x1": [1], "x2": [1, 2]}}), 400, "same length"),
        ("POST", "/v1/predict", json.dumps({"nope": 1}), 400, "rows"),
        ("POST", "/v1/predict", "x" * 300000, 413, "too large"),
        ("GET", "/v1/predict", None, 405, "POST"),
        ("GET", "/nope", None, 404, "no such endpoint"),
        ("GET", "/healthz", None, 200, "ok"),
        ("GET", "/readyz", None, 200, "ready"),
        ("GET", "/v1/model", None, 200, "millrace-bundle/1"),
    ]
    failures = []
    counts = {}

    def work(k):
        conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
        for i in range(60):
            m, p, b, code, needle = cases[(k * 7 + i) % len(cases)]
            try:
                st, data, _ = req(m, p, b, conn=conn)
            except Exception as e:  # the server may close after a 413
                conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
                st, data, _ = req(m, p, b, conn=conn)
            counts[code] = counts.get(code, 0) + 1
            if st != code or needle.encode() not in data:
                failures.append((m, p, code, st, data[:200]))
            if st == 413:
                conn.close()
                conn = http.client.HTTPConnection(HOST, PORT, timeout=10)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(12)]
    for t in ts: t.start()
    for t in ts: t.join(120)
    check(not failures, f"{len(failures)} wrong answers, e.g. {failures[:3]}")
    print("mixed requests:", " ".join(f"{c}x{n}" for c, n in sorted(counts.items())))


def reload(bundle, new, old, pid):
    pid = int(pid)
    stop = time.time() + 4.0
    results = []
    versions = set()

    def work():
        conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
        body = json.dumps({"rows": [{"x1": 0.3, "x2": -0.2, "plan": "max", "n": 2}]})
        for _ in range(20000):
            if time.time() > stop:
                break
            try:
                st, data, _ = req("POST", "/v1/predict", body, conn=conn)
            except Exception as e:
                results.append(("exc", str(e)))
                conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
                continue
            results.append((st, None))
            if st == 200:
                versions.add(json.loads(data)["model_version"])

    ts = [threading.Thread(target=work) for _ in range(6)]
    for t in ts: t.start()
    for i in range(4):  # swap the bundle file atomically, then SIGHUP
        time.sleep(0.6)
        src = new if i % 2 == 0 else old
        tmp = bundle + ".tmp"
        with open(src, "rb") as f, open(tmp, "wb") as g:
            g.write(f.read())
        os.replace(tmp, bundle)
        os.kill(pid, signal.SIGHUP)
    for t in ts: t.join(30)
    bad = [r for r in results if r[0] != 200]
    check(len(results) > 100, f"only {len(results)} requests")
    check(not bad, f"{len(bad)} of {len(results)} requests failed during reloads: {bad[:3]}")
    check(len(versions) == 2, f"expected both model versions to answer, saw {versions}")
    print(f"{len(results)} requests across 4 reloads, 0 failed, versions seen: {len(versions)}")


def metrics():
    st, data, h = req("GET", "/metrics")
    check(st == 200 and h.get("Content-Type", "").startswith("text/plain"), "metrics content type")
    text = data.decode()
    sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})? (-?[0-9.eE+-]+|\+Inf|NaN)$')
    types, seen = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ")
            check(typ in ("counter", "gauge", "histogram"), f"type {typ}")
            types[name] = typ
            continue
        m = sample.match(line)
        check(m, f"not a Prometheus sample line: {line!r}")
        seen.setdefault(m.group(1), []).append((m.group(3) or "", float(m.groups()[-1])))
    for name in ("millrace_requests_total", "millrace_queue_depth", "millrace_model_info"):
        check(name in seen, f"{name} missing")
    for h in ("millrace_request_duration_seconds", "millrace_batch_size"):
        check(types.get(h) == "histogram", f"{h} not a histogram")
        b = [v for _, v in seen[h + "_bucket"]]
        check(b == sorted(b), f"{h} buckets not cumulative")
        check(b[-1] == seen[h + "_count"][0][1], f"{h} +Inf != count")
    print("metrics: %d series, histograms consistent" % sum(len(v) for v in seen.values()))


def replay(d):
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        s = socket.create_connection((HOST, PORT), timeout=5)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(3)
            for _ in range(100):
                if not s.recv(65536):
                    break
        except OSError:
            pass
        s.close()
    st, data, _ = req("GET", "/healthz")
    check(st == 200, "healthz after replay")
    st, data, _ = req("POST", "/v1/predict", json.dumps({"rows": [{"x1": 1, "x2": 1, "plan": "pro", "n": 1}]}))
    check(st == 200, f"predict after replay: {st} {data[:200]}")
    print(f"replayed {len(os.listdir(d))} raw requests; server healthy")


def queue():
    body = json.dumps({"rows": [{"x1": 0.3, "x2": -0.2, "plan": "max", "n": 2}] * 200})
    codes, retry = {}, []
    stop = time.time() + 3.0

    def work():
        conn = http.client.HTTPConnection(HOST, PORT, timeout=10)
        for _ in range(5000):
            if time.time() > stop or codes.get(503, 0) > 5:
                break
            st, data, h = req("POST", "/v1/predict", body, conn=conn)
            codes[st] = codes.get(st, 0) + 1
            if st == 503:
                retry.append(h.get("Retry-After"))

    ts = [threading.Thread(target=work) for _ in range(24)]
    for t in ts: t.start()
    for t in ts: t.join(30)
    check(set(codes) <= {200, 503}, f"codes {codes}")
    check(codes.get(503, 0) > 0, f"no 503 with a queue of 1: {codes}")
    check(all(r == "1" for r in retry), f"Retry-After {retry[:3]}")
    print("queue limit:", codes)


def abandon():
    """Requests whose clients close the socket while the job waits in the
    queue: the server must answer into the void, free the job, and go on."""
    body = json.dumps({"rows": [{"x1": 0.3, "x2": -0.2, "plan": "max", "n": 2}] * 500}).encode()
    head = (f"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    for _ in range(300):
        s = socket.create_connection((HOST, PORT), timeout=5)
        s.sendall(head + body)
        s.close()
    st, data, _ = req("POST", "/v1/predict", json.dumps({"rows": [{"x1": 1, "x2": 1, "plan": "pro", "n": 1}]}))
    check(st == 200, f"predict after abandoned requests: {st} {data[:200]}")
    depth = None
    for _ in range(100):
        st, data, _ = req("GET", "/metrics")
        depth = re.search(rb"^millrace_queue_depth (\d+)$", data, re.M)
        if depth and depth.group(1) == b"0":
            break
        time.sleep(0.05)
    check(depth and depth.group(1) == b"0", f"queue drained: {depth and depth.group(1)}")
    print("300 abandoned requests; server healthy, queue drained")


cmd = sys.argv[2]
{"equal": lambda: equal(*sys.argv[3:5]), "mixed": mixed, "reload": lambda: reload(*sys.argv[3:7]),
 "metrics": metrics, "replay": lambda: replay(sys.argv[3]), "queue": queue, "abandon": abandon}[cmd]()
