# Exit codes are the same for every verb: 1 when an input file is missing or
# unreadable (a failure at run time), 2 for a usage error; the error names
# the missing path once.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws exits)
cd "$ws" || fail "cd"
expect_exit 0 mr init
expect_exit 0 mr -q run
B=out/package/model.mrb
mkdir -p out/package
# a bundle to point at: package the scaffold's model
cat >>millrace.yaml <<'YAML'

  package:
    op: package
    model: ${stages.model}
    features: ${stages.features}
    metrics: ${stages.eval}
YAML
expect_exit 0 mr -q run
assert_file "$B" "a bundle to test with"

missing_file() { # VERB... with nope.* as the missing input
    local what=$1
    shift
    expect_exit 1 mr "$@"
    assert_contains "$T_ERR" "$what" "$* : names the missing path"
    local n
    n=$(grep -o "$what" <<<"$T_ERR" | wc -l)
    assert_eq "$n" 1 "$* : names it once"
}
missing_file nope.csv data ingest nope.csv ingested
missing_file nope.csv data head nope.csv
missing_file nope.csv data stats nope.csv
missing_file nope data export nope exported.csv
missing_file nope.csv train nope.csv --label churned -o m.bin
missing_file nope.bin model inspect nope.bin
missing_file nope.bin model predict nope.bin data/customers.csv -o s.csv
missing_file nope.csv model predict out/model/model.bin nope.csv -o s.csv
missing_file nope.mrb bundle inspect nope.mrb
missing_file nope.mrb bundle verify nope.mrb
missing_file nope.mrb bundle export-onnx nope.mrb -o x.onnx
missing_file nope.mrb predict nope.mrb data/customers.csv -o y.csv
missing_file nope.csv predict "$B" nope.csv -o y.csv
missing_file nope.mrb serve nope.mrb --port 0
missing_file nope.json stage show --job nope.json

# usage errors are 2 for every verb
for v in "data ingest" "data head" "train" "model predict" "bundle inspect" "predict" "serve" "bench-serve" "report" "compare"; do
    # shellcheck disable=SC2086
    expect_exit 2 mr $v --no-such-option
    assert_contains "$T_ERR" "no-such-option" "$v: an unknown option is a usage error, named"
done
expect_exit 2 mr train data/customers.csv -o m.bin
assert_contains "$T_ERR" "--label" "train without --label: usage error naming what is missing"
t_done
