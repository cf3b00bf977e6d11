"""Drives `millrace serve models:/NAME@ALIAS` while the alias moves, for
tests/e2e/test_registry.sh:

  registry_client.py PORT MILLRACE NAME ALIAS V1:BUNDLE_VERSION V2:BUNDLE_VERSION

Six keep-alive clients send single-row /v1/predict requests for about five
seconds; meanwhile the alias is moved to V2, back to V1 and to V2 again with
`millrace model alias`. Passes when every request got a 200, the served model
version (the response's model_version) became each target's bundle version
within 3 s of each move, and the last one serves at the end.
"""
import http.client, json, subprocess, sys, threading, time

PORT, MR, NAME, ALIAS = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
TARGETS = [a.split(":") for a in sys.argv[5:7]]  # [[version, bundle_version], ...]
BODY = json.dumps({"rows": [{"x1": 0.3, "x2": -0.2, "plan": "max", "n": 2}]})

stop = threading.Event()
lock = threading.Lock()
codes, failures, latest = {}, [], {"v": None}


def work():
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    while not stop.is_set():
        try:
            conn.request("POST", "/v1/predict", body=BODY, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
        except Exception as e:  # a lost connection is a failed request
            with lock:
                failures.append(repr(e))
            conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
            continue
        with lock:
            codes[r.status] = codes.get(r.status, 0) + 1
            if r.status == 200:
                latest["v"] = json.loads(data)["model_version"]


def wait_served(bundle_version, what):
    t0 = time.time()
    while time.time() - t0 < 3.0:
        with lock:
            if latest["v"] == bundle_version:
                return time.time() - t0
        time.sleep(0.02)
    sys.exit(f"FAIL: {what}: still serving {latest['v']} 3 s after the move, not {bundle_version}")


threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads:
    t.start()
try:
    wait_served(TARGETS[0][1], "before any move")
    lags = []
    for step, (version, bundle_version) in enumerate([TARGETS[1], TARGETS[0], TARGETS[1]]):
        time.sleep(0.8)
        subprocess.run([MR, "model", "alias", NAME, ALIAS, version], check=True, capture_output=True)
        lags.append(wait_served(bundle_version, f"move {step + 1} to version {version}"))
    time.sleep(0.8)
finally:
    stop.set()
    for t in threads:
        t.join()
n = sum(codes.values())
if failures or set(codes) != {200} or n < 100:
    sys.exit(f"FAIL: {n} answers {codes}, {len(failures)} failed requests {failures[:3]}")
print(f"{n} requests, all 200, across 3 alias moves; served the new version {max(lags):.2f} s after a move at most")
