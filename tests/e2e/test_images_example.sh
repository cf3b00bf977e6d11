#!/usr/bin/env bash
# examples/images in smoke mode (issue 13): Fashion-MNIST PNG files are written, packed with
# ingest files:, a CNN trains on them through millrace.torch.Loader logging loss per step with
# millrace.log_metric, and the test accuracy is recorded; the loss falls; a second run is all
# cache hits; a training-param change re-trains and re-evaluates without re-packing.
. "$(dirname "$0")/lib.sh" "$@"
src=$(cd "$(dirname "$0")/../.." && pwd)/examples/images
pkg=$(dirname "$MR_BIN")/python
[ -f "$pkg/millrace/__init__.py" ] || fail "no Python package at $pkg (python3-dev: scripts/install-deps.sh)"
[ -d /usr/share/datasets/fashion-mnist ] || fail "no Fashion-MNIST (dataset-fashion-mnist: scripts/install-deps.sh)"
export PYTHONPATH=$pkg
ws=$(new_ws images)
cp "$src"/millrace.yaml "$src"/*.py "$ws/" || fail "copy"
cd "$ws" || fail "cd"

expect_exit 0 mr run --smoke --json
assert_eq "$(json 'd["executed"]')" 5 "every stage executes"
assert_eq "$(find data/png/train -name '*.png' | wc -l)" 600 "60 training PNG files per class"
expect_exit 0 mr show 1 --json
assert_eq "$(json 'len([m for m in d["metrics"] if m["name"] == "train.loss"])')" 10 "loss logged at each of 10 steps"
assert_eq "$(json 'sum(m["value"] for m in d["metrics"] if m["name"] == "train.loss" and m["step"] >= 7) < sum(m["value"] for m in d["metrics"] if m["name"] == "train.loss" and m["step"] < 3)')" \
    "true" "the loss falls (last three steps below the first three)"
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"] == "rows_written" and m["stage"] == "pack_train"]')" \
    "600.0" "pack_train packed 600 files"
acc=$(json '[m["value"] for m in d["metrics"] if m["name"] == "test.accuracy"][0]')
assert_eq "$(python3 -c "print(0.1 < $acc <= 1)")" "True" "test accuracy above chance ($acc)"
assert_eq "$(json '[m["value"] for m in d["metrics"] if m["name"] == "test.samples"]')" "200.0" "200 test images"

expect_exit 0 mr run --smoke --json
assert_eq "$(json 'd["cached"]')" 5 "nothing changed: all cache hits"
expect_exit 0 mr run --smoke --json -S train.lr=0.02
assert_eq "$(json '" ".join(s["stage"] + "=" + s["status"] for s in d["stages"])')" \
    "pngs=cached pack_train=cached pack_test=cached train=executed evaluate=executed" \
    "a learning-rate change re-trains and re-evaluates, the PNGs and shards come from the cache"
t_done
