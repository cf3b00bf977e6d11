#!/usr/bin/env bash
# examples/recsys end to end (docs/featurestore.md): on generated ratings
# always, and on the MovieLens ratings of ../shared/data when the folder is
# there (the real-data tier; it is in CI). Every stage succeeds; the model
# beats chance on the time-split test part (generated: AUC >= 0.85, where
# the signal is strong; MovieLens: >= 0.68); the features the served model
# used for (user, movie) are the two stores' vectors for that user and that
# movie; a re-run is entirely cached; and the training set never holds a
# statistic computed from its own rating (the views are stamped one second
# after each rating's second).
. "$(dirname "$0")/lib.sh" "$@"
repo=$(cd "$(dirname "$0")/../.." && pwd)
shared=${MILLRACE_SHARED:-$repo/../shared}

check_example() { # WORKDIR MIN_AUC
    local ws=$1 min=$2
    assert_contains "$T_OUT" "10 executed, 0 cached, 0 failed" "every stage of the recsys example succeeds"
    cd "$ws" || fail "cd"
    expect_exit 0 mr show --json
    auc=$(json '[m["value"] for m in d["metrics"] if m["name"]=="test.auc"][0]')
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$auc" "$min" ||
        fail "test AUC $auc below $min"
    pass "test AUC $auc >= $min"
    # the answer's features: the user's vector and the movie's, as the stores hold them now
    expect_exit 0 mr features get online_users 1
    user=$(json 'd["features"]')
    expect_exit 0 mr features get online_movies 50
    movie=$(json 'd["features"]')
    T_OUT=$(cat answer.json)
    assert_eq "$(json 'len(d["predictions"])')" 2 "two pairs scored"
    assert_eq "$(json '{k: d["features"][1][k] for k in ("user_ratings", "user_mean", "user_like_rate")}')" "$user" \
        "the served user features are the user store's"
    assert_eq "$(json '{k: d["features"][1][k] for k in ("movie_ratings", "movie_mean", "movie_like_rate")}')" "$movie" \
        "the served movie features are the movie store's"
    # no rating sees its own second: the user's count in a training row is the user's ratings strictly before it
    expect_exit 0 mr data export out/training_set training.csv
    /usr/bin/python3 - training.csv <<'PY' || fail "a training row holds a statistic of its own rating or a later one"
import csv, sys
from collections import Counter
rows = list(csv.DictReader(open(sys.argv[1])))
per_second = Counter((r["user"], r["ts"]) for r in rows)
# the user's ratings strictly before each second
order = sorted({(r["user"], r["ts"]) for r in rows}, key=lambda x: (x[0], x[1]))
count, last_user = 0, None
before = {}
for u, ts in order:
    if u != last_user:
        count, last_user = 0, u
    before[(u, ts)] = count
    count += per_second[(u, ts)]
bad = [r for r in rows if int(r["user_ratings"] or 0) != before[(r["user"], r["ts"])]]
if bad:
    print(f"{len(bad)} rows, first {bad[:2]}")
    sys.exit(1)
print(f"{len(rows)} rows: each user's count is their ratings strictly before the row's second")
PY
    pass "no rating sees its own second or a later one"
    expect_exit 0 mr run --json
    assert_eq "$(json 'd["cached"]')" 10 "a re-run is served from the cache"
}

ws=$(new_ws recsys-gen)
expect_exit 0 env MILLRACE_RECSYS_GENERATE=1 "$repo/examples/recsys/run.sh" "$MR_BIN" "$ws"
T_OUT="$T_OUT$T_ERR"
assert_contains "$T_OUT" "generated ratings" "generated when asked"
check_example "$ws" 0.85

if [ -f "$shared/data/ctr_recsys/movielens-latest-small/ratings.csv" ]; then
    ws=$(new_ws recsys-movielens)
    expect_exit 0 env MILLRACE_SHARED="$shared" "$repo/examples/recsys/run.sh" "$MR_BIN" "$ws"
    T_OUT="$T_OUT$T_ERR"
    assert_contains "$T_OUT" "the MovieLens ratings of" "the real ratings"
    check_example "$ws" 0.68
else
    echo "real-data tier NOT RUN: $shared/data/ctr_recsys not found (it is there in CI, under ../shared/data)"
fi
t_done
