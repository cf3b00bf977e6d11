# evaluate and check take `features: ${stages.F.transform}`, the directory a
# features stage writes its fitted transform to (features.mrft; they once
# looked for a features.bin nothing writes). Evaluating the raw test part
# through the transform gives the very metrics of evaluating the transformed
# test part; check applies it too; a directory without one is named
# (docs/spec.md, "evaluate" and "check"; test_evaluate_raw covers evaluate's
# predictions).
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws fx)
cd "$ws" || fail "cd"
expect_exit 0 mr init
cat >>millrace.yaml <<'EOF'
  eval_raw:
    op: evaluate
    model: ${stages.model}
    data: ${stages.split.test}
    features: ${stages.features.transform}
    label: churned
  check_raw:
    op: check
    model: ${stages.model}
    data: ${stages.split.test}
    features: ${stages.features.transform}
    properties:
      - {type: consistency}
EOF
expect_exit 0 mr run
assert_file "$ws/out/features/transform/features.mrft" "the features stage wrote features.mrft"
assert_eq "$(cmp -s out/eval/metrics.json out/eval_raw/metrics.json && echo same)" same \
    "raw rows through the transform: the very metrics of the transformed rows"
assert_contains "$(cat out/check_raw/results.json)" '"consistency"' "check ran its property on the transformed rows"

# A directory without a transform says so.
mkdir -p empty && echo x >empty/notes.txt
sed -i 's|features: ${stages.features.transform}|features: empty|' millrace.yaml
expect_exit 1 mr run eval_raw
assert_contains "$T_ERR" "empty: no fitted features transform (MRFT file) in this directory" "a directory without one is named"
t_done
