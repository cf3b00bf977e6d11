"""Fills a workspace's run store with generated runs for the run browser's
tests and bench (tests/e2e/test_ui.sh, bench/ui):

  ui_gen.py DB N_RUNS [--params P] [--metrics M] [--curves K:STEPS] [--seed S]

The store must exist (any millrace verb that opens the workspace creates
it). Each run gets P params (train.p0 .. train.p{P-1}: ints, floats and a
string), M final metrics (eval/m0 .. eval/m{M-1}), a tag exp=gN (N = id mod
5) and two stage records; the K newest runs also get a curve train/loss of
STEPS points. Written through the schema of docs/formats.md in one
transaction. Prints a JSON summary the tests compare against: the expected
answers of a filter and a sort, computed here independently.
"""
import json, math, random, sqlite3, sys, time

args = sys.argv[1:]
db, n_runs = args[0], int(args[1])
opt = {"--params": "50", "--metrics": "20", "--curves": "3:500", "--seed": "7"}
for i in range(2, len(args), 2):
    opt[args[i]] = args[i + 1]
P, M = int(opt["--params"]), int(opt["--metrics"])
K, STEPS = (int(x) for x in opt["--curves"].split(":"))
rng = random.Random(int(opt["--seed"]))

con = sqlite3.connect(db)
cur = con.cursor()
base = cur.execute("SELECT coalesce(max(id), 0) FROM runs").fetchone()[0]
t0 = 1.79e9
finals = {}
for k in range(n_runs):
    rid = base + k + 1
    params = {}
    for p in range(P):
        if p % 10 == 0:
            params[f"p{p}"] = rng.choice(["adam", "sgd", "lion"])
        elif p % 2 == 0:
            params[f"p{p}"] = rng.randint(1, 255)
        else:
            params[f"p{p}"] = round(rng.uniform(0, 1), 4)
    started = t0 + rid * 60.0
    cur.execute("INSERT INTO runs(id, started, ended, status, argv, cwd, git_commit, params_json, n_executed, name)"
                " VALUES(?, ?, ?, 'ok', 'millrace run', '/w', ?, ?, 2, ?)",
                (rid, started, started + 30 + rid % 17, "%040x" % rid, json.dumps({"train": params}, sort_keys=True),
                 f"run-{rid}" if rid % 7 == 0 else None))
    cur.execute("INSERT INTO run_tags(run_id, key, value) VALUES(?, 'exp', ?)", (rid, f"g{rid % 5}"))
    for si, (stage, op) in enumerate([("prep", "ingest"), ("train", "train")]):
        cur.execute("INSERT INTO stage_runs(run_id, stage, op, key, status, started, wall_s, user_s, sys_s, max_rss_kb,"
                    " bytes_read, bytes_written, outputs_json) VALUES(?, ?, ?, ?, ?, ?, ?, ?, 0, 1000, 0, 0, '{}')",
                    (rid, stage, op, "%032x" % (rid * 2 + si), "cached" if si == 0 and rid % 3 else "executed",
                     started + si * 5, 4.0 + si * 10, 4.0))
    row = []
    for m in range(M):
        v = round(math.sin(rid * 0.37 + m) * 0.5 + 0.5, 6)
        row.append((rid, "eval", f"m{m}", 0, v))
        finals[(rid, m)] = v
    cur.executemany("INSERT INTO metrics(run_id, stage, name, step, value) VALUES(?, ?, ?, ?, ?)", row)
curve_runs = [base + n_runs - i for i in range(min(K, n_runs))]
for rid in curve_runs:
    pts = [(rid, "train", "loss", s, 1.0 / (1 + s * 0.01) + 0.001 * math.sin(s + rid)) for s in range(STEPS)]
    cur.executemany("INSERT INTO metrics(run_id, stage, name, step, value) VALUES(?, ?, ?, ?, ?)", pts)
con.commit()
ids = [base + k + 1 for k in range(n_runs)]
# the expected answers: the filter eval.m0 > 0.9 and tag g1, and the best run by eval.m3
match = [r for r in ids if M > 0 and finals[(r, 0)] > 0.9 and r % 5 == 1]
best = max(ids, key=lambda r: (finals[(r, 3)], r)) if M > 3 else None
print(json.dumps({"runs": n_runs, "first": ids[0], "last": ids[-1], "filter_matches": len(match),
                  "best_m3": best, "best_m3_value": finals[(best, 3)] if best else None, "curve_runs": curve_runs,
                  "steps": STEPS}))
