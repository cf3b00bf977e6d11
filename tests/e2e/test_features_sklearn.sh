#!/usr/bin/env bash
# scikit-learn oracle for feature transforms: tests/tools/features_oracle.py
# generates a seeded train/test CSV pair, runs the mr_feattool helper (fit on
# train, save + reload the MRFT artifact, apply to test, batch checked against
# the single-row path) and compares every value with SimpleImputer,
# StandardScaler, MinMaxScaler, KBinsDiscretizer(quantile), OneHotEncoder
# (max_categories / handle_unknown) and OrdinalEncoder to 1e-9.
# Needs python3 with scikit-learn, numpy and pandas (Debian: python3-sklearn
# python3-pandas). This script installs nothing: without them the oracle tier
# is skipped (passes with a note).
. "$(dirname "$0")/lib.sh" "$@"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(dirname "$MR_BIN")
TOOL="$BUILD/tests/mr_feattool"
[ -x "$TOOL" ] || fail "mr_feattool not built at $TOOL"

# The first python3 on PATH decides; a pyenv/venv shim without scikit-learn
# falls back to the system interpreter, where the Debian packages live.
PY=""
for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sklearn, numpy, pandas' >/dev/null 2>&1; then
        PY=$cand
        break
    fi
done
if [ -z "$PY" ]; then
    echo "SKIP [$T_NAME] python3 cannot import sklearn/numpy/pandas: the scikit-learn oracle tier did not run"
    echo "     (install python3-sklearn python3-pandas to run it)"
    exit 0
fi

run_cmd "$PY" "$SRC/tests/tools/features_oracle.py" "$TOOL" "$T_ROOT"
assert_eq "$T_RC" 0 "mr_feattool agrees with scikit-learn ($PY)"
assert_contains "$T_OUT" "comparisons against scikit-learn agree" "oracle ran every case"
printf '%s\n' "$T_OUT" | tail -1

# The saved artifact reloads, applies identically, and lists its metadata.
run_cmd "$TOOL" apply "$T_ROOT/onehot.mrft" "$T_ROOT/test.csv"
assert_eq "$T_RC" 0 "apply from the saved artifact"
first=$T_OUT
run_cmd "$TOOL" apply "$T_ROOT/onehot.mrft" "$T_ROOT/test.csv"
assert_eq "$T_OUT" "$first" "applying twice gives the same bytes"
run_cmd "$TOOL" meta "$T_ROOT/ordinal.mrft"
assert_contains "$T_OUT" "city,city,1,13" "ordinal output is marked categorical with 12 codes + unseen"
head -c 40 "$T_ROOT/onehot.mrft" >"$T_ROOT/trunc.mrft"
run_cmd "$TOOL" apply "$T_ROOT/trunc.mrft" "$T_ROOT/test.csv"
assert_ne "$T_RC" 0 "a truncated artifact is rejected"
assert_contains "$T_ERR" "features artifact:" "the error names the artifact"
t_done
