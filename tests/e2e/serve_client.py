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
  serve_client.py PORT unauth PID                   unauthenticated 1 MB bodies: 401 before the body, RSS bounded
  serve_client.py PORT budget PID BUDGET BODY       bodies in flight stay within --max-inflight-bytes
  ($SERVE_TOKEN: the bearer token unauth and budget send)
  serve_client.py PORT idle N                       N idle connections do not starve a real request
  serve_client.py PORT slow                         slow-loris headers and bodies are closed (timeouts 2 s)
  serve_client.py PORT framing                      conflicting Content-Length / Transfer-Encoding: 400/501 + close
  serve_client.py PORT halfclose N                  N half-closing clients (16 at a time) all get their answer
"""
import csv, http.client, json, os, re, select, signal, socket, struct, sys, threading, time

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
    queue or is scored (every other one with a reset, SO_LINGER 0, which
    ends the connection at once even before the handler's second call):
    the server must answer into the void or drop the job, free it, and go
    on."""
    body = json.dumps({"rows": [{"x1": 0.3, "x2": -0.2, "plan": "max", "n": 2}] * 500}).encode()
    head = (f"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    for i in range(300):
        s = socket.create_connection((HOST, PORT), timeout=5)
        s.sendall(head + body)
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
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


GOOD = json.dumps({"rows": [{"x1": 1, "x2": 1, "plan": "pro", "n": 1}]}).encode()


def vm(pid, key):
    """VmRSS / VmHWM of a process in KiB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def connect(timeout=10):
    return socket.create_connection((HOST, PORT), timeout=timeout)


def read_response(s, timeout=10):
    """One response from a raw socket: (status, headers dict, body); status 0
    if the connection closed (or failed) before a whole response came."""
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            b = s.recv(65536)
            if not b:
                return 0, {}, data
            data += b
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        h = {}
        for l in lines[1:]:
            k, _, v = l.partition(":")
            h[k.strip().lower()] = v.strip()
        n = int(h.get("content-length", "0"))
        while len(body) < n:
            b = s.recv(65536)
            if not b:
                return 0, h, body
            body += b
        return status, h, body[:n]
    except OSError:
        return 0, {}, data


def closed_by_server(s, timeout):
    """True if the server closes s (EOF or reset) within timeout seconds."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def count_closed(socks, want, timeout):
    """How many of socks the server closed, waiting up to timeout seconds
    for at least want of them."""
    fds = {s.fileno(): s for s in socks}
    p = select.poll()
    for fd in fds: p.register(fd, select.POLLIN)
    closed, end = 0, time.time() + timeout
    while closed < want and fds and time.time() < end:
        for fd, _ in p.poll(200):
            try:
                gone = not fds[fd].recv(4096, socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                gone = True
            if gone:
                p.unregister(fd)
                del fds[fd]
                closed += 1
    return closed


def until_close(s, timeout):
    """Everything the server sends on s until it closes it: (closed, bytes)."""
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                return True, data
            data += b
    except socket.timeout:
        return False, data
    except OSError:
        return True, data


def post(path="/v1/predict", body=GOOD, extra=b"", timeout=10):
    s = connect(timeout)
    try:
        s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
                  % (path.encode(), len(body), extra) + body)
        return read_response(s, timeout)
    finally:
        s.close()


def unauth(pid):
    """--token-file set: a request without the token is answered 401 as soon
    as its headers are in (the body is never read), and 200 connections each
    sending a 1 MB body, four rounds, leave the server's peak RSS within
    64 MiB of where it started (the 200 read buffers are 16 KiB each)."""
    pid = int(pid)
    s = connect()
    s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
    st, h, _ = read_response(s, 10)  # no body sent: only an answer from the headers can come
    s.close()
    check(st == 401 and h.get("www-authenticate") == "Bearer", f"401 before the body: got {st} {h}")
    body = b"x" * 1000000
    head = b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    hwm0 = vm(pid, "VmHWM")
    answered = 0
    for rnd in range(4):
        socks = [connect() for _ in range(200)]
        codes = []

        def send(s):
            try:
                s.sendall(head + body)
            except OSError:
                pass  # the server answered 401 and closed without reading
            codes.append(read_response(s, 10)[0])

        ts = [threading.Thread(target=send, args=(s,)) for s in socks]
        for t in ts: t.start()
        for t in ts: t.join(60)
        for s in socks: s.close()
        check(all(c in (0, 401) for c in codes), f"round {rnd}: codes {sorted(set(codes))}")
        answered += codes.count(401)
    grew = (vm(pid, "VmHWM") - hwm0) / 1024
    check(grew < 64, f"peak RSS grew by {grew:.0f} MiB for 800 unauthenticated 1 MB bodies (bound 64 MiB)")
    st, _, _ = post(extra=b"Authorization: Bearer %s\r\n" % TOKEN)
    check(st == 200, f"a request with the token after the flood: {st}")
    print(f"unauthenticated: 401 before the body; 800 x 1 MB bodies ({answered} saw their 401): "
          f"peak RSS +{grew:.1f} MiB")


def metric(name):
    st, data, _ = req("GET", "/metrics", headers={"Authorization": "Bearer " + TOKEN.decode()})
    check(st == 200, f"/metrics: {st}")
    m = re.search(rb"^" + re.escape(name.encode()) + rb" (\d+)$", data, re.M)
    check(m, f"{name} missing from /metrics")
    return int(m.group(1))


def budget(pid, limit, size):
    """--max-inflight-bytes LIMIT: 100 clients announce SIZE-byte bodies
    with Expect: 100-continue; exactly LIMIT // SIZE are let in (100
    Continue), the others get 503 + Retry-After before sending a byte. The
    admitted ones send all but the last byte and hold: peak RSS stays within
    LIMIT + 32 MiB, /metrics shows the bytes held, and once they hang up
    the budget is free again."""
    pid, limit, size = int(pid), int(limit), int(size)
    auth = b"Authorization: Bearer %s\r\n" % TOKEN
    head = (b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (auth, size))
    hwm0 = vm(pid, "VmHWM")
    admitted, refused, retry = [], 0, set()
    for _ in range(100):
        s = connect()
        s.sendall(head)
        st, h, _ = read_response(s, 10)
        if st == 100:
            admitted.append(s)
        else:
            check(st == 503, f"expected 100 Continue or 503, got {st}")
            retry.add(h.get("retry-after"))
            refused += 1
            s.close()
    want = limit // size
    check(len(admitted) == want, f"{len(admitted)} bodies admitted, want {want} (= {limit} // {size})")
    check(retry == {"1"}, f"Retry-After on the 503s: {retry}")
    for s in admitted:
        s.sendall(b"x" * (size - 1))
    held = 0
    for _ in range(200):  # the server reads what was sent
        held = metric("millrace_inflight_bytes")
        if held == want * size:
            break
        time.sleep(0.05)
    check(held == want * size, f"millrace_inflight_bytes {held}, want {want * size}")
    grew = (vm(pid, "VmHWM") - hwm0) / 1024
    check(grew < limit / 1048576 + 32, f"peak RSS grew by {grew:.0f} MiB with a budget of {limit / 1048576:.0f} MiB")
    for s in admitted:
        s.close()
    for _ in range(200):
        held = metric("millrace_inflight_bytes")
        if held == 0:
            break
        time.sleep(0.05)
    check(held == 0, f"budget not released after the clients left: {held}")
    st, _, _ = post(extra=auth)
    check(st == 200, f"a request after the budget was released: {st}")
    print(f"budget {limit}: {len(admitted)} bodies of {size} admitted, {refused} refused with 503 before their body; "
          f"peak RSS +{grew:.1f} MiB")


def idle(n):
    """N idle connections (more than the server's 512): a real request is
    still answered, and the server closed the oldest idle ones to keep a
    quarter of its slots for clients that send their headers."""
    n = int(n)
    socks = [connect() for _ in range(n)]
    st, _, _ = post(timeout=10)
    check(st == 200, f"a request behind {n} idle connections: {st or 'no answer in 10 s'}")
    closed = count_closed(socks, n - 384, 10)
    check(closed >= n - 384, f"only {closed} of {n} idle connections were closed (at most 384 may stay)")
    for s in socks: s.close()
    st, _, _ = post()
    check(st == 200, f"predict after the idle flood: {st}")
    print(f"{n} idle connections: a request was answered; the server closed {closed} idle ones")


def slow():
    """Server with --idle-timeout 2 --request-timeout 2. Connections that
    trickle header lines, or a body, one piece every 0.5 s (which a pure
    inactivity timeout never catches) are closed; so is an idle
    keep-alive; a request that pauses 0.5 s but finishes in time is answered."""
    s = connect()
    s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\n")
    t0, cut = time.time(), False
    for i in range(40):  # 20 s: ten times the deadline
        try:
            s.sendall(b"X-Slow-%d: 1\r\n" % i)
        except OSError:
            cut = True
            break
        if closed_by_server(s, 0.5):
            cut = True
            break
    s.close()
    check(cut, "a slow-loris connection sending a header line every 0.5 s was still open after 20 s")
    t_head = time.time() - t0
    s = connect()
    s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
    t0, cut = time.time(), False
    for i in range(40):
        try:
            s.sendall(b" ")
        except OSError:
            cut = True
            break
        if closed_by_server(s, 0.5):
            cut = True
            break
    s.close()
    check(cut, "a body sent one byte every 0.5 s was still being read after 20 s")
    t_body = time.time() - t0
    s = connect()
    check(closed_by_server(s, 20), "an idle connection was still open after 20 s")
    s.close()
    s = connect()
    s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(GOOD))
    time.sleep(0.5)
    s.sendall(GOOD)
    st, _, _ = read_response(s)
    s.close()
    check(st == 200, f"a request that paused 0.5 s: {st}")
    print(f"slow-loris headers closed after {t_head:.1f} s, slow body after {t_body:.1f} s; idle closed; "
          "a request in time answered")


def framing():
    """RFC 9112 section 6: a request whose length could be read two ways
    is refused (400, or 501 for an unknown coding) and its connection
    closed; identical duplicate Content-Lengths are fine. A request
    smuggled in the body of one with conflicting lengths is never run."""
    smuggled = b"GET /v1/model HTTP/1.1\r\nHost: x\r\n\r\n"
    cases = [
        (b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(GOOD), GOOD, 400, b"conflicting Content-Length"),
        (b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(smuggled), smuggled, 400, b"conflicting Content-Length"),
        (b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(GOOD), GOOD, 400, b"both Transfer-Encoding"),
        (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n", 400, b"more than one"),
        (b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n", 501, b"only the chunked"),
        (b"Transfer-Encoding: chunked, gzip\r\n", b"0\r\n\r\n", 400, b"must end with chunked"),
    ]
    for extra, body, code, needle in cases:
        s = connect()
        s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra + b"\r\n" + body)
        closed, data = until_close(s, 10)
        s.close()
        what = f"{extra!r}: got {data[:160]!r}"
        check(closed, f"{extra!r}: connection left open after a framing error")
        check(data.startswith(b"HTTP/1.1 %d " % code) and needle in data, f"{what}, want {code} {needle!r}")
        check(data.count(b"HTTP/1.1 ") == 1, f"{what}: more than one response (a smuggled request ran)")
        check(b"\r\nConnection: close\r\n" in data, f"{what}: no Connection: close")
    st, _, data = post(extra=b"Content-Length: %d\r\n" % len(GOOD))  # the same value twice
    check(st == 200, f"identical duplicate Content-Length: {st} {data[:120]!r}")
    print(f"framing: {len(cases)} ambiguous requests refused and closed; identical duplicates accepted")


def halfclose(n):
    """N requests (16 clients at a time) each sent whole and then
    shutdown(SHUT_WR): every one gets its 200."""
    n = int(n)
    req_bytes = (b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                 % len(GOOD) + GOOD)
    got, lock = [], threading.Lock()

    def work(k):
        for _ in range(k):
            s = connect()
            s.sendall(req_bytes)
            s.shutdown(socket.SHUT_WR)
            st, _, _ = read_response(s)
            s.close()
            with lock:
                got.append(st)

    ts = [threading.Thread(target=work, args=(n // 16 + (i < n % 16),)) for i in range(16)]
    for t in ts: t.start()
    for t in ts: t.join(120)
    ok = got.count(200)
    check(ok == n, f"half-closed clients: {ok} of {n} answered 200 (others: {sorted(set(got) - {200})})")
    print(f"half-close: {ok} of {n} answered")


TOKEN = os.environ.get("SERVE_TOKEN", "").encode()
cmd = sys.argv[2]
{"equal": lambda: equal(*sys.argv[3:5]), "mixed": mixed, "reload": lambda: reload(*sys.argv[3:7]),
 "metrics": metrics, "replay": lambda: replay(sys.argv[3]), "queue": queue, "abandon": abandon,
 "unauth": lambda: unauth(sys.argv[3]), "budget": lambda: budget(*sys.argv[3:6]), "idle": lambda: idle(sys.argv[3]),
 "slow": slow, "framing": framing, "halfclose": lambda: halfclose(sys.argv[3])}[cmd]()
