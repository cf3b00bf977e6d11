"""Client checks of tests/e2e/test_serve_entity.sh: serving by entity id.

    serve_entity_client.py PORT consistent PAIRS.csv OFFLINE.csv PRED.csv [KEYS [FEATURES]]
        for every (entity, now) row of PAIRS.csv, POST /v1/predict {"rows":
        [{KEY: value, ...}], "as_of": now, "include_features": true}: the
        features serve used equal pit_join's row for the pair (OFFLINE.csv,
        the data export of the pit_join stage), value for value, and the score
        equals `millrace predict` on that row (PRED.csv), bit for bit. KEYS:
        the key columns (default user); FEATURES: name:int|float|str,...
        (default clicks:int,spend:float,plan_plan:str)
    serve_entity_client.py PORT post JSON      prints "STATUS BODY"
    serve_entity_client.py PORT get PATH       prints "STATUS BODY"
"""
import csv
import http.client
import json
import sys

HOST = "127.0.0.1"
PORT = int(sys.argv[1])


def check(ok, msg):
    if not ok:
        print("FAIL:", msg)
        sys.exit(1)


def req(method, path, body=None, conn=None):
    c = conn or http.client.HTTPConnection(HOST, PORT, timeout=20)
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    data = r.read().decode()
    if not conn:
        c.close()
    return r.status, data


def cell(v, kind):
    """A CSV field of the data export as the JSON value serve answers with."""
    if v == "":
        return None
    if kind == "int":
        return int(v)
    if kind == "float":
        return float(v)
    return v


def consistent(pairs_csv, offline_csv, pred_csv, keys="user", features="clicks:int,spend:float,plan_plan:str"):
    keys = keys.split(",")
    kinds = dict(f.split(":") for f in features.split(","))
    pairs = list(csv.DictReader(open(pairs_csv)))
    offline = list(csv.DictReader(open(offline_csv)))
    preds = [float(r["prediction"]) for r in csv.DictReader(open(pred_csv))]
    check(len(pairs) == len(offline) == len(preds), f"{len(pairs)} pairs, {len(offline)} offline rows, {len(preds)} predictions")
    first = next(iter(kinds))
    conn = http.client.HTTPConnection(HOST, PORT, timeout=20)
    bad_features, bad_scores, live, expired = [], [], 0, 0
    for i, (p, o) in enumerate(zip(pairs, offline)):
        check(all(p[k] == o[k] for k in keys) and p["now"] == o["now"], f"pair {i} is not offline row {i}")
        body = json.dumps({"rows": [{k: p[k] for k in keys}], "as_of": p["now"], "include_features": True})
        st, data = req("POST", "/v1/predict", body, conn)
        check(st == 200, f"pair {i}: {st} {data}")
        d = json.loads(data)
        got = d["features"][0]
        want = {f: cell(o[f], k) for f, k in kinds.items()}
        if got != want:
            bad_features.append((i, got, want))
        if d["predictions"][0] != preds[i]:
            bad_scores.append((i, d["predictions"][0], preds[i]))
        if want[first] is None:
            expired += 1
        else:
            live += 1
    check(not bad_features, f"{len(bad_features)} of {len(pairs)} feature vectors differ, first {bad_features[:3]}")
    check(not bad_scores, f"{len(bad_scores)} of {len(pairs)} scores differ from predict, first {bad_scores[:3]}")
    check(live > len(pairs) // 10 and expired > len(pairs) // 10,
          f"both live and missing {first} among the pairs ({live} live, {expired} not)")
    print(f"serve == pit_join on {len(pairs)} (entity, now) pairs ({live} with a live {first}, {expired} without); "
          f"scores == predict")


if __name__ == "__main__":
    what = sys.argv[2]
    if what == "consistent":
        consistent(*sys.argv[3:])
    elif what == "post":
        st, data = req("POST", "/v1/predict", sys.argv[3])
        print(st, data)
    elif what == "get":
        st, data = req("GET", sys.argv[3])
        print(st, data)
    else:
        check(False, f"unknown check {what}")
