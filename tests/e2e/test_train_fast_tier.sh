#!/usr/bin/env bash
# The fast evaluation tier during training: with a validation set, every
# boosting round also reports the evaluate op's fast-tier core metrics
# (fast.auc, fast.logloss; fast.rmse for regression) computed by the metrics
# library; --valid-sample N keeps a stratified subsample of N validation rows.
# On the whole validation set the fast metrics equal the GBDT's own; on a
# subsample they stay close to the full-set value. The train op records them
# in the run store and `millrace train --json` reports the time they cost.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws fast_tier)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random, math
r = random.Random(11)
with open("train.csv", "w") as f, open("valid.csv", "w") as g, open("rtrain.csv", "w") as rf, open("rvalid.csv", "w") as rg:
    for h in (f, g): h.write("x1,x2,x3,label\n")
    for h in (rf, rg): h.write("x1,x2,x3,y\n")
    for i in range(4000):
        x1, x2, x3 = r.gauss(0, 1), r.gauss(0, 1), r.random()
        z = 1.5 * x1 * x2 - x1 + 2 * (x3 > 0.5) - 1
        lab = 1 if r.random() < 1 / (1 + math.exp(-z)) else 0
        yv = round(3 * x1 - 2 * x2 * x3 + r.gauss(0, 0.5))  # integer-valued: exact in float
        (f if i < 3000 else g).write(f"{x1:.6f},{x2:.6f},{x3:.6f},{lab}\n")
        (rf if i < 3000 else rg).write(f"{x1:.6f},{x2:.6f},{x3:.6f},{yv}\n")
PY

# Whole validation set: fast.auc is the GBDT's own valid auc, round by round.
expect_exit 0 mr train train.csv --label label --valid valid.csv --valid-sample 0 -p objective=binary \
    -p num_iterations=15 -p metric=auc,binary_logloss -o full.bin --json
assert_eq "$(json 'd["valid_rows"]')" 1000 "--valid-sample 0 keeps every validation row"
assert_eq "$(json 'len([c for c in d["curve"] if c["metric"]=="fast.auc"])')" 15 "fast.auc is reported every round"
assert_eq "$(json 'len([c for c in d["curve"] if c["metric"]=="fast.logloss"])')" 15 "fast.logloss is reported every round"
assert_eq "$(json 'all(abs(a["valid"]-b["valid"]) <= 1e-9 for a in d["curve"] for b in d["curve"] if a["iteration"]==b["iteration"] and a["metric"]=="auc" and b["metric"]=="fast.auc")')" true \
    "on the same rows fast.auc equals the GBDT's valid auc (1e-9)"
assert_eq "$(json 'all(abs(a["valid"]-b["valid"]) <= 1e-6 for a in d["curve"] for b in d["curve"] if a["iteration"]==b["iteration"] and a["metric"]=="binary_logloss" and b["metric"]=="fast.logloss")')" true \
    "on the same rows fast.logloss equals the GBDT's binary_logloss (1e-6)"
assert_eq "$(json 'd["fast_tier_seconds"] >= 0 and d["seconds"] > 0 and d["fast_tier_seconds"] < d["seconds"]')" true \
    "--json reports fast_tier_seconds and seconds"
full_auc=$(json '[c["valid"] for c in d["curve"] if c["metric"]=="auc"][-1]')

# A stratified subsample of 500 of the 1000 validation rows.
expect_exit 0 mr train train.csv --label label --valid valid.csv --valid-sample 500 -p objective=binary \
    -p num_iterations=15 -p metric=auc -o sub.bin --json
assert_eq "$(json 'd["valid_rows"]')" 500 "--valid-sample 500 keeps 500 validation rows"
assert_eq "$(json 'len([c for c in d["curve"] if c["metric"]=="fast.auc"])')" 15 "fast.auc is reported every round on the subsample"
sub_auc=$(json '[c["valid"] for c in d["curve"] if c["metric"]=="fast.auc"][-1]')
python3 -c "import sys; sys.exit(0 if abs($sub_auc - $full_auc) < 0.05 else 1)" ||
    fail "fast.auc on the subsample ($sub_auc) should be within 0.05 of the full-set AUC ($full_auc)"
pass "fast.auc on the subsample ($sub_auc) is within 0.05 of the full-set AUC ($full_auc)"
assert_eq "$(json '[c["valid"] for c in d["curve"] if c["metric"]=="auc"] == [c["valid"] for c in d["curve"] if c["metric"]=="fast.auc"]')" true \
    "early stopping and the fast tier see the same subsampled rows"
expect_exit 0 mr train train.csv --label label --valid valid.csv --valid-sample 500 -p objective=binary \
    -p num_iterations=15 -p metric=auc -o sub2.bin --json
assert_eq "$(json '[c["valid"] for c in d["curve"] if c["metric"]=="fast.auc"][-1]')" "$sub_auc" "the subsample is seeded: the same run gives the same curve"

# Regression: fast.rmse equals the GBDT's rmse on the same rows.
expect_exit 0 mr train rtrain.csv --label y --valid rvalid.csv -p objective=regression -p num_iterations=10 \
    -p metric=rmse -o reg.bin --json
assert_eq "$(json 'all(abs(a["valid"]-b["valid"]) <= 1e-6 * max(1, a["valid"]) for a in d["curve"] for b in d["curve"] if a["iteration"]==b["iteration"] and a["metric"]=="rmse" and b["metric"]=="fast.rmse") and len([c for c in d["curve"] if c["metric"]=="fast.rmse"]) == 10')" true \
    "regression: fast.rmse equals the GBDT's rmse every round"

expect_exit 2 mr train train.csv --label label --valid valid.csv --valid-sample -3 -o x.bin
assert_contains "$T_ERR" "valid-sample" "a negative --valid-sample is a usage error naming the flag"

# The train op: valid_sample, fast.<metric> curves in the run store.
cat >millrace.yaml <<'YAML'
stages:
  model:
    op: train
    train: train.csv
    valid: valid.csv
    label: label
    valid_sample: 500
    params: {objective: binary, num_iterations: 12, metric: auc}
YAML
expect_exit 0 mr run --json
expect_exit 0 mr show --json
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"]=="fast.auc"])')" 12 "the train op records fast.auc every round"
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"]=="fast.logloss"])')" 12 "the train op records fast.logloss every round"
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"]=="fast_tier_seconds"])')" 1 "the train op records fast_tier_seconds"
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"]=="valid_rows"][0]')" 500.0 "the train op trains against 500 validation rows"
t_done
