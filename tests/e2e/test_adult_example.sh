#!/usr/bin/env bash
# Real-data tier: examples/adult end to end on the UCI Adult files in
# ../shared/data (present in CI): every stage succeeds, the check stage's
# gates and properties pass, the test AUC is at the level XGBoost reaches on
# this split (about 0.927), and a re-run is entirely cached.
. "$(dirname "$0")/lib.sh" "$@"

repo=$(cd "$(dirname "$0")/../.." && pwd)
shared=${MILLRACE_SHARED:-$repo/../shared}
if [ ! -f "$shared/data/adult/adult.data" ]; then
    echo "real-data tier NOT RUN: $shared/data/adult not found (it is there in CI, under ../shared/data)"
    echo "PASS [$T_NAME] 0 checks (no shared data)"
    exit 0
fi
ws=$(new_ws adult)
expect_exit 0 env MILLRACE_SHARED="$shared" "$repo/examples/adult/run.sh" "$MR_BIN" "$ws"
assert_contains "$T_ERR" "9 executed, 0 cached, 0 failed" "every stage of the adult example succeeds"
cd "$ws" || fail "cd"
expect_exit 0 mr show --json
auc=$(json '[m["value"] for m in d["metrics"] if m["name"]=="test.auc"][0]')
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.92 else 1)" "$auc" || fail "test AUC $auc below 0.92"
pass "test AUC $auc >= 0.92 on the Adult test file"
assert_file out/report/report.html "the report is written"
expect_exit 0 mr run --json -S "shared=$shared/data/adult"
assert_eq "$(json 'd["cached"]')" 9 "a re-run is served from the cache"
t_done
