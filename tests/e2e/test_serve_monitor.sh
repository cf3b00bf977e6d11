#!/usr/bin/env bash
# What a served model tells about its inputs: a bundle packaged with
# reference: (the training split's profile) is served; rows drawn from the
# training data give every input a PSI near 0 on /v1/drift and
# millrace_input_psi; a shifted stream (ages moved up, a plan the training
# never had) crosses the documented threshold (0.25) and the counters of
# out-of-range values, unseen categories, floats for integer columns and
# extra fields count what was sent; --strict answers those requests 422
# naming the field and still answers clean ones 200; a bundle without a
# profile counts extra fields only. Loopback only.
. "$(dirname "$0")/lib.sh" "$@"
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
ws=$(new_ws monitor)
cd "$ws" || fail "cd"
expect_exit 0 mr init .
cat >>millrace.yaml <<'Y'
  package:
    op: package
    model: ${stages.model}
    features: ${stages.features.transform}
    reference: ${stages.split.train}
    name: churn
  package_plain:
    op: package
    model: ${stages.model}
    features: ${stages.features.transform}
    name: churn
Y
expect_exit 0 mr run
expect_exit 0 mr bundle inspect out/package/model.mrb
assert_contains "$T_OUT" "profile" "the bundle has a profile section"

. "$E2E_DIR/serve_lib.sh"
start_server s1.log out/package/model.mrb
CLIENT=$(cat <<'PY'
import csv, json, random, sys, urllib.request, urllib.error
port, mode = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
def post(rows, code=200):
    req = urllib.request.Request(base + "/v1/predict", data=json.dumps({"rows": rows}).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        r = urllib.request.urlopen(req, timeout=30)
        st, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        st, body = e.code, e.read()
    assert st == code, (st, body[:300])
    return json.loads(body)
def get(path):
    return urllib.request.urlopen(base + path, timeout=30).read().decode()
rows = []
for r in csv.DictReader(open("data/customers.csv")):
    rows.append({"customer_id": int(r["customer_id"]), "age": int(r["age"]), "plan": r["plan"],
                 "monthly_spend": float(r["monthly_spend"]), "tenure_months": int(r["tenure_months"]),
                 "support_calls": int(r["support_calls"])})
rng = random.Random(5)
def metric(text, name, col=None):
    for line in text.splitlines():
        if line.startswith(name + ("{column=\"%s\"}" % col if col else "") + " "):
            return float(line.split()[-1])
    return None
if mode == "same":
    for k in range(0, 3000, 25):
        post(rng.sample(rows, 25))
    d = json.loads(get("/v1/drift"))
    assert d["profile"] is True and d["threshold"] == 0.25, d
    cols = {c["name"]: c for c in d["columns"]}
    assert {"age", "plan", "monthly_spend"} <= set(cols), sorted(cols)
    worst = max(c["psi"] for c in cols.values() if c["psi"] is not None)
    assert worst < 0.1, ("training-like traffic drifts", cols)
    assert not any(c["shifted"] for c in cols.values())
    m = get("/metrics")
    assert metric(m, "millrace_input_psi", "age") is not None and metric(m, "millrace_input_psi", "age") < 0.1
    assert metric(m, "millrace_input_unseen_category_total", "plan") == 0
    assert metric(m, "millrace_input_extra_fields_total") == 0
    print("training-like traffic: PSI at most %.4f on %d inputs" % (worst, len(cols)))
elif mode == "shifted":
    for k in range(0, 5000, 25):
        batch = []
        for r in rng.sample(rows, 25):
            r = dict(r, age=r["age"] + 40)
            batch.append(r)
        post(batch)
    post([dict(rows[0], plan="enterprise")])
    post([dict(rows[0], tenure_months=12.5)])
    post([dict(rows[0], bogus=1)])
    d = json.loads(get("/v1/drift"))
    cols = {c["name"]: c for c in d["columns"]}
    assert cols["age"]["shifted"] and cols["age"]["psi"] > 0.25, cols["age"]
    assert cols["plan"]["unseen_category"] == 1, cols["plan"]
    assert cols["tenure_months"]["float_for_int"] == 1, cols["tenure_months"]
    assert cols["age"]["out_of_range"] > 1000, cols["age"]
    assert d["extra_fields"] == 1, d["extra_fields"]
    m = get("/metrics")
    assert metric(m, "millrace_input_psi", "age") > 0.25
    assert metric(m, "millrace_input_unseen_category_total", "plan") == 1
    assert metric(m, "millrace_input_float_for_int_total", "tenure_months") == 1
    assert metric(m, "millrace_input_extra_fields_total") == 1
    print("shifted traffic: age PSI %.3f, counters as sent" % cols["age"]["psi"])
elif mode == "strict":
    e = post([dict(rows[0], plan="enterprise")], 422)
    assert e.get("field") == "plan" and "category the training data did not have" in e["error"], e
    e = post([rows[1], dict(rows[0], bogus=1)], 422)
    assert e.get("field") == "bogus" and e.get("row") == 1, e
    ok = post([rows[1], rows[2]])
    assert len(ok["predictions"]) == 2
    print("strict: lenient inputs are 422 naming the field; clean rows are scored")
elif mode == "plain":
    post([dict(rows[0], bogus=1)])
    d = json.loads(get("/v1/drift"))
    assert d["profile"] is False and d["columns"] == [] and d["extra_fields"] == 1, d
    print("no profile: extra fields are counted, nothing else")
PY
)
run_cmd /usr/bin/python3 -c "$CLIENT" "$PORT" same
assert_eq "$T_RC" 0 "training-like traffic has no drift ($T_OUT$T_ERR)"
run_cmd /usr/bin/python3 -c "$CLIENT" "$PORT" shifted
assert_eq "$T_RC" 0 "a shifted stream crosses the threshold; counters count ($T_OUT$T_ERR)"
kill -TERM "$SPID"
wait "$SPID"

start_server s2.log out/package/model.mrb --strict
run_cmd /usr/bin/python3 -c "$CLIENT" "$PORT" strict
assert_eq "$T_RC" 0 "--strict ($T_OUT$T_ERR)"
kill -TERM "$SPID"
wait "$SPID"

start_server s3.log out/package_plain/model.mrb
run_cmd /usr/bin/python3 -c "$CLIENT" "$PORT" plain
assert_eq "$T_RC" 0 "a bundle without a profile ($T_OUT$T_ERR)"
kill -TERM "$SPID"
wait "$SPID"
for l in s1.log s2.log s3.log; do t_sanitizer_lines "$(cat $l)" && fail "sanitizer report in $l"; done
t_done
