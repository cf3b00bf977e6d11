"""HTTP client for tests/e2e/test_serve_protocols.sh: the MLflow scoring
protocol (/invocations, /ping, /health, /version) and the Open Inference
Protocol (/v2/...) against `millrace serve`, with Debian's python3-requests
(run by /usr/bin/python3). Every connection goes to 127.0.0.1; every loop is
bounded.

  serve_protocols_client.py PORT equal TEST.csv PRED.csv MODEL   every MLflow form, CSV and OIP per-column
                                                                   == `millrace predict`, bit for bit
  serve_protocols_client.py PORT matrix TEST_X.csv PRED.csv MODEL OIP [N, n_inputs] matrices (flat, nested)
  serve_protocols_client.py PORT errors MODEL                     malformed requests: 4xx in each protocol's shape
  serve_protocols_client.py PORT meta MODEL                       /ping /health /version /v2 metadata and health
  serve_protocols_client.py PORT metrics                          per-endpoint counters in /metrics
  serve_protocols_client.py PORT token MODEL TOKEN                401 in each protocol's shape, 200 with it
"""
import csv, json, re, struct, sys, threading

import requests

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
JSON = {"Content-Type": "application/json"}
TIMEOUT = 20


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)


def bits(x):
    """The IEEE-754 bits of a number as printed (None for null)."""
    return None if x is None else struct.pack("<d", float(x))


def numbers_text(body):
    """A JSON answer with every number kept as the text the server printed."""
    return json.loads(body, parse_float=str, parse_int=str)


def post(session, path, body, headers=None, raw=None):
    data = raw if raw is not None else json.dumps(body)
    r = session.post(BASE + path, data=data, headers=headers or JSON, timeout=TIMEOUT)
    return r


# ---- the rows --------------------------------------------------------------------

FIELDS = ("x1", "x2", "plan", "n")  # the fixture bundle's inputs, in schema order


def typed(r):
    """A test.csv row as typed values (x1 blank: None)."""
    return {"x1": float(r["x1"]) if r["x1"] != "" else None, "x2": float(r["x2"]), "plan": r["plan"], "n": int(r["n"])}


def load(test_csv, pred_csv):
    with open(test_csv, newline="") as f:
        lines = f.read().splitlines(keepends=True)
    rows = [typed(r) for r in csv.DictReader(lines)]
    want = [row["prediction"] for row in csv.DictReader(open(pred_csv, newline=""))]
    check(len(rows) == len(want) and rows, f"{len(rows)} rows, {len(want)} predictions")
    return lines, rows, want


def schema_order(session, model):
    r = session.get(f"{BASE}/v2/models/{model}", timeout=TIMEOUT)
    check(r.status_code == 200, f"model metadata: {r.status_code} {r.text[:200]}")
    return [t["name"] for t in r.json()["inputs"]]


# ---- the forms of each protocol, written from its documented examples -----------------

def mlflow_forms(chunk, lines, order):
    """(name, Content-Type, body) for one chunk of rows: every form /invocations takes."""
    recs_sparse = [{k: v for k, v in r.items() if v is not None} for r in chunk]  # a missing x1: key left out
    yield "dataframe_split", JSON, json.dumps({"dataframe_split": {
        "columns": list(FIELDS), "data": [[r[k] for k in FIELDS] for r in chunk]}})
    yield "dataframe_split+index", JSON, json.dumps({"dataframe_split": {
        "index": list(range(len(chunk))), "columns": ["plan", "n", "x2", "x1"],
        "data": [[r["plan"], r["n"], r["x2"], r["x1"]] for r in chunk]}})
    yield "dataframe_split, schema order", JSON, json.dumps({"dataframe_split": {"data": [[r[k] for k in order] for r in chunk]}})
    yield "dataframe_records", JSON, json.dumps({"dataframe_records": recs_sparse})
    yield "instances (records)", JSON, json.dumps({"instances": chunk})
    yield "instances (lists)", JSON, json.dumps({"instances": [[r[k] for k in order] for r in chunk]})
    yield "inputs (columns)", JSON, json.dumps({"inputs": {k: [r[k] for r in chunk] for k in FIELDS}})
    yield "inputs (lists)", JSON, json.dumps({"inputs": [[r[k] for k in order] for r in chunk]})
    yield "inputs (records)", JSON, json.dumps({"inputs": recs_sparse, "params": {"ignored": True}})
    yield "csv", {"Content-Type": "text/csv"}, "".join(lines)
    yield "csv; charset=utf-8", {"Content-Type": "text/csv; charset=utf-8"}, "".join(lines)


def oip_column(name, dtype, values, nested):
    return {"name": name, "shape": [len(values), 1] if nested else [len(values)], "datatype": dtype,
            "data": [[v] for v in values] if nested else values}


def oip_forms(chunk, model, version):
    cols = {k: [r[k] for r in chunk] for k in FIELDS}
    dtypes = {"x1": "FP64", "x2": "FP32", "plan": "BYTES", "n": "INT64"}
    for nested in (False, True):
        body = {"id": f"req-{nested}", "inputs": [oip_column(k, dtypes[k], cols[k], nested) for k in FIELDS]}
        path = f"/v2/models/{model}/versions/{version}/infer" if nested else f"/v2/models/{model}/infer"
        yield "oip columns" + (" [N,1], versioned path" if nested else " [N]"), path, body


def equal(test_csv, pred_csv, model):
    lines, rows, want = load(test_csv, pred_csv)
    header, body_lines = lines[0], lines[1:]
    s = requests.Session()
    order = schema_order(s, model)
    check(order == list(FIELDS), f"schema order {order}")
    version = s.get(f"{BASE}/v2/models/{model}", timeout=TIMEOUT).json()["versions"][0]
    step, n_threads = 100, 4
    got = {}  # form -> [printed number per row]
    native = [None] * len(rows)
    errors = []
    lock = threading.Lock()

    def work(k):
        sess = requests.Session()
        for start in range(k * step, len(rows), n_threads * step):
            chunk, stop = rows[start:start + step], min(start + step, len(rows))
            r = post(sess, "/v1/predict", {"rows": chunk})
            if r.status_code != 200:
                errors.append(("/v1/predict", r.status_code, r.text[:300]))
                return
            native[start:stop] = numbers_text(r.text)["predictions"]
            for name, headers, body in mlflow_forms(chunk, [header] + body_lines[start:stop], order):
                r = post(sess, "/invocations", None, headers, raw=body)
                if r.status_code != 200 or r.headers.get("Content-Type") != "application/json":
                    errors.append((name, r.status_code, r.text[:300]))
                    return
                p = numbers_text(r.text)
                if set(p) != {"predictions"} or len(p["predictions"]) != len(chunk):
                    errors.append((name, "shape", r.text[:300]))
                    return
                with lock:
                    got.setdefault(name, [None] * len(rows))[start:stop] = p["predictions"]
            for name, path, body in oip_forms(chunk, model, version):
                r = post(sess, path, body)
                if r.status_code != 200:
                    errors.append((name, r.status_code, r.text[:300]))
                    return
                p = numbers_text(r.text)
                out = p["outputs"]
                if (p["model_name"] != model or p["model_version"] != version or p["id"] != body["id"]
                        or len(out) != 1 or out[0]["name"] != "prediction" or out[0]["datatype"] != "FP64"
                        or out[0]["shape"] != [str(len(chunk))] or len(out[0]["data"]) != len(chunk)):
                    errors.append((name, "shape", r.text[:300]))
                    return
                with lock:
                    got.setdefault(name, [None] * len(rows))[start:stop] = out[0]["data"]

    ts = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in ts: t.start()
    for t in ts: t.join(120)
    check(not errors, f"errors: {errors[:3]}")
    bad = [i for i in range(len(rows)) if bits(native[i]) != bits(want[i])]
    check(not bad, f"/v1/predict != predict on {len(bad)} rows, first {bad[:3]}")
    check(len(got) == 13, f"forms answered: {sorted(got)}")
    for name, values in sorted(got.items()):
        diff = [i for i in range(len(rows)) if values[i] != native[i]]
        check(not diff, f"{name}: {len(diff)} rows print other numbers than /v1/predict, first {diff[:3]}: "
                        f"{[(values[i], native[i]) for i in diff[:3]]}")
        diff = [i for i in range(len(rows)) if bits(values[i]) != bits(want[i])]
        check(not diff, f"{name}: {len(diff)} rows differ from `millrace predict`")
    print(f"{len(got)} protocol forms == /v1/predict (the same printed numbers) == `millrace predict` (the same "
          f"bits) on {len(rows)} rows, 4 concurrent clients")


def matrix(test_x_csv, pred_csv, model):
    rows = list(csv.DictReader(open(test_x_csv, newline="")))
    want = [row["prediction"] for row in csv.DictReader(open(pred_csv, newline=""))]
    s = requests.Session()
    order = schema_order(s, model)
    check(len(rows) == len(want) and set(order) <= set(rows[0]), f"{len(order)} inputs, columns {list(rows[0])[:5]}")
    value = lambda v: None if v.lower() == "nan" else float(v)
    got = {"flat": [], "nested": [], "mlflow lists": []}
    for start in range(0, len(rows), 128):
        m = [[value(r[k]) for k in order] for r in rows[start:start + 128]]
        shape = [len(m), len(order)]
        for form, data in (("flat", [v for row in m for v in row]), ("nested", m)):
            r = post(s, f"/v2/models/{model}/infer",
                     {"inputs": [{"name": "input", "shape": shape, "datatype": "FP64", "data": data}]})
            check(r.status_code == 200, f"matrix {form}: {r.status_code} {r.text[:300]}")
            out = numbers_text(r.text)["outputs"][0]
            check(out["shape"] == [str(len(m))], f"matrix {form}: shape {out['shape']}")
            got[form] += out["data"]
        r = post(s, "/invocations", {"inputs": m})
        check(r.status_code == 200, f"instances lists: {r.status_code} {r.text[:300]}")
        got["mlflow lists"] += numbers_text(r.text)["predictions"]
    for form, values in got.items():
        diff = [i for i in range(len(rows)) if bits(values[i]) != bits(want[i])]
        check(not diff, f"{form}: {len(diff)} rows differ from `millrace predict`, first {diff[:3]}")
    check(got["flat"] == got["nested"] == got["mlflow lists"], "the forms print the same numbers")
    print(f"OIP [N, {len(order)}] matrices (flat and nested) and MLflow lists == `millrace predict` on {len(rows)} rows")


# ---- errors -----------------------------------------------------------------------

def mlflow_error(r, status, code, needle):
    ok = r.status_code == status and r.headers.get("Content-Type") == "application/json"
    try:
        e = r.json()
    except ValueError:
        return False
    return ok and set(e) == {"error_code", "message"} and e["error_code"] == code and needle in e["message"]


def oip_error(r, status, needle):
    try:
        e = r.json()
    except ValueError:
        return False
    return r.status_code == status and set(e) == {"error"} and needle in e["error"]


def errors(model):
    s = requests.Session()
    good = {"x1": 0.5, "x2": -1.0, "plan": "pro", "n": 3}
    col = lambda name, dtype, data, shape=None: {"name": name, "datatype": dtype, "data": data,
                                                 "shape": shape or [len(data)]}
    cols = [col("x1", "FP64", [0.5]), col("x2", "FP64", [-1.0]), col("plan", "BYTES", ["pro"]), col("n", "INT64", [3])]
    infer = f"/v2/models/{model}/infer"
    mlflow = [  # (what, method, headers, body, status, error_code, needle)
        ("bad JSON", "POST", JSON, '{"dataframe_split": {"columns": [', 400, "BAD_REQUEST", "malformed JSON"),
        ("no form", "POST", JSON, json.dumps({"rows": [good]}), 400, "BAD_REQUEST", "exactly one of"),
        ("two forms", "POST", JSON, json.dumps({"instances": [good], "inputs": [good]}), 400, "BAD_REQUEST", "exactly one of"),
        ("a list", "POST", JSON, json.dumps([good]), 400, "BAD_REQUEST", "JSON object"),
        ("split without data", "POST", JSON, json.dumps({"dataframe_split": {"columns": ["x1"]}}), 400, "BAD_REQUEST", "\"data\""),
        ("split extra key", "POST", JSON, json.dumps({"dataframe_split": {"data": [], "shape": [1]}}), 400, "BAD_REQUEST", "\"shape\""),
        ("split wrong width", "POST", JSON, json.dumps({"dataframe_split": {"columns": ["x1", "x2"], "data": [[1.0]]}}),
         400, "BAD_REQUEST", "row 0"),
        ("split bad index", "POST", JSON, json.dumps({"dataframe_split": {"columns": ["x1"], "data": [[1.0]], "index": [0, 1]}}),
         400, "BAD_REQUEST", "index"),
        ("records not a list", "POST", JSON, json.dumps({"dataframe_records": good}), 400, "BAD_REQUEST", "list of records"),
        ("lists of the wrong width", "POST", JSON, json.dumps({"instances": [[0.5, -1.0, "pro"]]}), 400, "BAD_REQUEST",
         "has 3 values; the model takes 4"),
        ("ragged columns", "POST", JSON, json.dumps({"inputs": {"x1": [1.0, 2.0], "x2": [1.0]}}), 400, "BAD_REQUEST",
         "same length"),
        ("a missing input", "POST", JSON, json.dumps({"dataframe_split": {"columns": ["x1", "plan", "n"], "data": [[0.5, "pro", 3]]}}),
         400, "INVALID_PARAMETER_VALUE", "'x2' is missing"),
        ("an input no record has", "POST", JSON, json.dumps({"dataframe_records": [{"x1": 1.0, "plan": "pro", "n": 1}]}),
         400, "INVALID_PARAMETER_VALUE", "'x2' is missing from every record"),
        ("a value of the wrong type", "POST", JSON, json.dumps({"instances": [dict(good, x2="high")]}), 400,
         "INVALID_PARAMETER_VALUE", "expected a number"),
        ("CSV without the header's width", "POST", {"Content-Type": "text/csv"}, "x1,x2,plan,n\n0.5,-1,pro\n", 400,
         "BAD_REQUEST", "CSV body, line 2"),
        ("CSV bad quote", "POST", {"Content-Type": "text/csv"}, 'x1,x2,plan,n\n0.5,-1,"pro,3\n', 400, "BAD_REQUEST", "CSV body"),
        ("CSV wrong value", "POST", {"Content-Type": "text/csv"}, "x1,x2,plan,n\n0.5,oops,pro,3\n", 400,
         "INVALID_PARAMETER_VALUE", "row 0: column 'x2': expected a number, got \"oops\""),
        ("empty CSV", "POST", {"Content-Type": "text/csv"}, "", 400, "BAD_REQUEST", "header"),
        ("form content type", "POST", {"Content-Type": "application/x-www-form-urlencoded"}, "a=1", 415, "BAD_REQUEST",
         "application/json or text/csv"),
        ("latin-1", "POST", {"Content-Type": "application/json; charset=latin-1"}, "{}", 415, "BAD_REQUEST", "UTF-8"),
        ("unknown parameter", "POST", {"Content-Type": "application/json; format=pandas-split"}, "{}", 415, "BAD_REQUEST",
         "parameter"),
        ("GET /invocations", "GET", {}, None, 405, "BAD_REQUEST", "POST"),
        ("POST /ping", "POST", JSON, "{}", 405, "BAD_REQUEST", "GET"),
        ("too large", "POST", JSON, '{"instances": [' + "0," * 100000 + "0]}", 413, "REQUEST_LIMIT_EXCEEDED", "too large"),
        ("too many rows", "POST", JSON, json.dumps({"instances": [good] * 600}), 413, "REQUEST_LIMIT_EXCEEDED", "too many rows"),
    ]
    for what, method, headers, body, status, code, needle in mlflow:
        path = "/ping" if what == "POST /ping" else "/invocations"
        r = s.request(method, BASE + path, data=body, headers=headers, timeout=TIMEOUT)
        check(mlflow_error(r, status, code, needle), f"MLflow {what}: {r.status_code} {r.text[:300]}")
        if status == 413:
            s = requests.Session()  # the server may close after answering from the headers
    oip = [  # (what, path, method, body, status, needle)
        ("bad JSON", infer, "POST", '{"inputs": [', 400, "malformed JSON"),
        ("no inputs", infer, "POST", json.dumps({"id": "1"}), 400, "\"inputs\""),
        ("empty inputs", infer, "POST", json.dumps({"inputs": []}), 400, "\"inputs\""),
        ("id not a string", infer, "POST", json.dumps({"id": 42, "inputs": cols}), 400, "\"id\""),
        ("missing datatype", infer, "POST", json.dumps({"inputs": [{"name": "x1", "shape": [1], "data": [1.0]}]}), 400, "datatype"),
        ("missing shape", infer, "POST", json.dumps({"inputs": [{"name": "x1", "datatype": "FP64", "data": [1.0]}]}), 400, "shape"),
        ("missing data", infer, "POST", json.dumps({"inputs": [{"name": "x1", "datatype": "FP64", "shape": [1]}]}), 400, "data"),
        ("unknown datatype", infer, "POST", json.dumps({"inputs": [col("x1", "FLOAT", [1.0])] + cols[1:]}), 400,
         "unknown datatype 'FLOAT'"),
        ("shape and data disagree", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", [1.0, 2.0], [1])] + cols[1:]}),
         400, "2 values where its shape holds 1"),
        ("a column of two dimensions", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", [1.0, 2.0], [1, 2])] + cols[1:]}),
         400, "a column is [N] or [N, 1]"),
        ("nesting against the shape", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", [[[1.0]]], [1, 1])] + cols[1:]}),
         400, "nested data"),
        ("rows that differ", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", [1.0, 2.0])] + cols[1:]}), 400,
         "different numbers of rows"),
        ("a string as FP64", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", ["1.5"])] + cols[1:]}), 400,
         "datatype FP64, but value 0 is a string"),
        ("a real as INT64", infer, "POST", json.dumps({"inputs": cols[:3] + [col("n", "INT64", [1.5])]}), 400,
         "datatype INT64, but value 0 is 1.5"),
        ("out of INT8's range", infer, "POST", json.dumps({"inputs": cols[:3] + [col("n", "INT8", [300])]}), 400,
         "datatype INT8"),
        ("BYTES for a number", infer, "POST", json.dumps({"inputs": [col("x1", "BYTES", ["a"])] + cols[1:]}), 400,
         "expected a number"),
        ("an unknown input", infer, "POST", json.dumps({"inputs": cols + [col("x9", "FP64", [1.0])]}), 400,
         "unknown input 'x9'"),
        ("a missing input", infer, "POST", json.dumps({"inputs": cols[:3]}), 400, "'n' is missing"),
        ("a matrix of the wrong width", infer, "POST",
         json.dumps({"inputs": [{"name": "input", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, 3]}]}), 400,
         "unknown input 'input'"),
        ("an input twice", infer, "POST", json.dumps({"inputs": cols + cols[:1]}), 400, "given twice"),
        ("an unknown output", infer, "POST", json.dumps({"inputs": cols, "outputs": [{"name": "proba"}]}), 400,
         "unknown output 'proba'"),
        ("too many rows", infer, "POST", json.dumps({"inputs": [col("x1", "FP64", [0.5] * 600)]}), 413, "too many rows"),
        ("unknown model", "/v2/models/nope/infer", "POST", json.dumps({"inputs": cols}), 404, "unknown model 'nope'"),
        ("unknown model metadata", "/v2/models/nope", "GET", None, 404, "unknown model"),
        ("unknown model ready", "/v2/models/nope/ready", "GET", None, 404, "unknown model"),
        ("unknown version", f"/v2/models/{model}/versions/7/infer", "POST", json.dumps({"inputs": cols}), 404,
         "no version '7'"),
        ("GET infer", infer, "GET", None, 405, "POST"),
        ("POST live", "/v2/health/live", "POST", "{}", 405, "GET"),
        ("unknown v2 path", f"/v2/models/{model}/explain", "POST", "{}", 404, "no such endpoint"),
    ]
    for what, path, method, body, status, needle in oip:
        r = s.request(method, BASE + path, data=body, headers=JSON, timeout=TIMEOUT)
        check(oip_error(r, status, needle), f"OIP {what}: {r.status_code} {r.text[:300]}")
    # the server is still well after all of them
    r = post(s, infer, {"inputs": cols, "outputs": [{"name": "prediction"}]})
    check(r.status_code == 200 and len(r.json()["outputs"]) == 1, f"after the errors: {r.status_code} {r.text[:200]}")
    print(f"{len(mlflow)} malformed MLflow requests and {len(oip)} OIP ones: each its protocol's error and status")


def meta(model):
    s = requests.Session()
    for path in ("/ping", "/health"):
        r = s.get(BASE + path, timeout=TIMEOUT)
        check(r.status_code == 200 and r.text == "\n", f"{path}: {r.status_code} {r.text!r}")
    r = s.get(BASE + "/version", timeout=TIMEOUT)
    check(r.status_code == 200 and re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+.*", r.text), f"/version: {r.text!r}")
    version = r.text
    check(s.get(BASE + "/v2/health/live", timeout=TIMEOUT).json() == {"live": True}, "live")
    check(s.get(BASE + "/v2/health/ready", timeout=TIMEOUT).json() == {"ready": True}, "ready")
    check(s.get(BASE + "/v2", timeout=TIMEOUT).json() == {"name": "millrace", "version": version, "extensions": []}, "/v2")
    m = s.get(f"{BASE}/v2/models/{model}", timeout=TIMEOUT).json()
    v1 = s.get(BASE + "/v1/model", timeout=TIMEOUT).json()
    check(m["name"] == model and m["versions"] == [v1["version"]] and m["platform"] == "millrace", f"model metadata {m}")
    check([i["name"] for i in m["inputs"]] == [i["name"] for i in v1["manifest"]["inputs"]], "inputs in schema order")
    check(all(i["shape"] == [-1] and i["datatype"] in ("FP64", "BYTES", "INT64", "BOOL") for i in m["inputs"]), "input tensors")
    check(m["outputs"] == [{"name": o, "datatype": "FP64", "shape": [-1]} for o in v1["manifest"]["outputs"]], "outputs")
    check(s.get(f"{BASE}/v2/models/{model}/versions/{v1['version']}", timeout=TIMEOUT).json() == m, "versioned metadata")
    check(s.get(f"{BASE}/v2/models/{model}/ready", timeout=TIMEOUT).json() == {"name": model, "ready": True}, "model ready")
    print(f"MLflow /ping /health /version and OIP health and metadata (model '{model}', version {v1['version']})")


def metrics():
    text = requests.get(BASE + "/metrics", timeout=TIMEOUT).text
    seen = dict(re.findall(r'^millrace_endpoint_requests_total\{endpoint="([^"]+)"\} ([0-9]+)$', text, re.M))
    for ep in ("/v1/predict", "/invocations", "/ping", "/version", "/v2", "/v2/health/live", "/v2/health/ready",
               "/v2/models/{model}", "/v2/models/{model}/ready", "/v2/models/{model}/infer", "other"):
        check(ep in seen and int(seen[ep]) > 0, f"millrace_endpoint_requests_total{{endpoint=\"{ep}\"}}: {seen.get(ep)}")
    check(re.search(r'^millrace_requests_total\{code="415"\} [1-9]', text, re.M), "415s counted")
    print("metrics: requests counted per endpoint:", ", ".join(f"{k} {v}" for k, v in sorted(seen.items())))


def token(model, tok):
    s = requests.Session()
    body = json.dumps({"instances": [{"x1": 0.5, "x2": -1.0, "plan": "pro", "n": 3}]})
    r = s.post(BASE + "/invocations", data=body, headers=JSON, timeout=TIMEOUT)
    check(mlflow_error(r, 401, "UNAUTHENTICATED", "bearer token") and r.headers.get("WWW-Authenticate") == "Bearer",
          f"/invocations without the token: {r.status_code} {r.text}")
    for path in (f"/v2/models/{model}/infer", "/v2/health/live", f"/v2/models/{model}"):
        r = s.request("POST" if path.endswith("infer") else "GET", BASE + path, data="{}", headers=JSON, timeout=TIMEOUT)
        check(oip_error(r, 401, "bearer token"), f"{path} without the token: {r.status_code} {r.text}")
    r = s.get(f"{BASE}/v2/models/nope", headers={"Authorization": "Bearer wrong"}, timeout=TIMEOUT)
    check(r.status_code == 401, f"a wrong token is a 401 before the model's name is looked at: {r.status_code}")
    auth = dict(JSON, Authorization="Bearer " + tok)
    r = s.post(BASE + "/invocations", data=body, headers=auth, timeout=TIMEOUT)
    check(r.status_code == 200 and len(r.json()["predictions"]) == 1, f"with the token: {r.status_code} {r.text}")
    r = s.get(BASE + "/ping", headers=auth, timeout=TIMEOUT)
    check(r.status_code == 200, f"/ping with the token: {r.status_code}")
    print("bearer token: 401 in each protocol's error shape without it, 200 with it")


cmd = sys.argv[2]
if cmd == "equal":
    equal(sys.argv[3], sys.argv[4], sys.argv[5])
elif cmd == "matrix":
    matrix(sys.argv[3], sys.argv[4], sys.argv[5])
elif cmd == "errors":
    errors(sys.argv[3])
elif cmd == "meta":
    meta(sys.argv[3])
elif cmd == "metrics":
    metrics()
elif cmd == "token":
    token(sys.argv[3], sys.argv[4])
else:
    check(False, f"unknown command {cmd}")
