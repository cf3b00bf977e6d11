#!/usr/bin/env bash
# Every metric and curve of src/ml against scikit-learn on the same seeded
# predictions (ties, weights, probabilities of 0 and 1, multiclass argmax
# ties, zero targets), to 1e-9, through the mr_metrictool helper; plus the
# tool-level hostile inputs (NaN score, empty file, one class, bad label).
# The oracle tier needs python3 with numpy and scikit-learn (Debian
# python3-sklearn); without them it says so plainly and passes.
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
TOOL="$(dirname "$MR_BIN")/tests/mr_metrictool"
[ -x "$TOOL" ] || fail "mr_metrictool not built at $TOOL"

# hostile inputs: clear errors, never a crash
printf '0,0.2\n1,nan\n' >"$T_ROOT/nan.csv"
expect_exit 1 "$TOOL" binary "$T_ROOT/nan.csv"
assert_contains "$T_ERR" "row 2: score is NaN" "NaN score names the row"
: >"$T_ROOT/empty.csv"
expect_exit 1 "$TOOL" binary "$T_ROOT/empty.csv"
assert_contains "$T_ERR" "empty" "empty input is an error"
printf '1,0.2\n1,0.7\n' >"$T_ROOT/one.csv"
expect_exit 1 "$TOOL" binary "$T_ROOT/one.csv"
assert_contains "$T_ERR" "ROC-AUC is undefined: only one class present" "single-class AUC is a clear error"
printf '0,0.2\n2,0.7\n' >"$T_ROOT/lab.csv"
expect_exit 1 "$TOOL" binary "$T_ROOT/lab.csv"
assert_contains "$T_ERR" "row 2: binary label must be 0 or 1, got 2" "label outside {0,1} names the row"
printf '0,0.2,0.8\n3,0.7,0.3\n' >"$T_ROOT/mc.csv"
expect_exit 1 "$TOOL" multiclass "$T_ROOT/mc.csv" 2
assert_contains "$T_ERR" "class label must be an integer in [0, 2), got 3" "multiclass label outside the classes"

PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import sklearn, numpy' 2>/dev/null; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP [$T_NAME] the scikit-learn oracle tier did NOT run: no python3 with numpy + sklearn" \
         "(install python3-sklearn: add it to scripts/install-deps.sh)"
    t_done
    exit 0
fi
mkdir -p "$T_ROOT/oracle"
run_cmd "$PY" "$SRC/tests/e2e/metrics/sklearn_oracle.py" "$TOOL" "$T_ROOT/oracle"
[ "$T_RC" = 0 ] || fail "sklearn oracle: $(tail -5 <<<"$T_OUT$T_ERR")"
assert_contains "$T_OUT" "values agree within 1e-09" "every metric agrees with scikit-learn to 1e-9"
echo "$T_OUT" | tail -1
t_done
