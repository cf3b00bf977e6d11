# Spec errors exit 2 and print file:line:col, what was wrong, and a hint.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws spec)
cd "$ws" || fail "cd"
spec() { cat >millrace.yaml; }

# Unknown key in a stage: location + "did you mean".
spec <<'YAML'
params:
  train: {lr: 0.5}
stages:
  generate:
    op: exec
    cmd: "echo x > g.txt"
    outz: [g.txt]
YAML
for verb in run status dag; do
    expect_exit 2 mr $verb
    assert_contains "$T_ERR" "millrace.yaml:7:5:" "$verb: unknown key: file:line:col"
    assert_contains "$T_ERR" "unknown key 'outz'" "$verb: unknown key named"
    assert_contains "$T_ERR" "did you mean 'outs'?" "$verb: unknown key: did-you-mean hint"
done
assert_no_file g.txt "nothing ran"

# Unknown op.
spec <<'YAML'
stages:
  generate:
    op: exce
    cmd: "true"
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:3:9:" "unknown op: file:line:col of the op value"
assert_contains "$T_ERR" "unknown op 'exce'" "unknown op named"
assert_contains "$T_ERR" "did you mean 'exec'?" "unknown op: hint"

# Cycle: the message prints it.
spec <<'YAML'
stages:
  one:
    op: exec
    cmd: "cat three.txt > one.txt"
    deps: [three.txt]
    outs: [one.txt]
  two:
    op: exec
    cmd: "cat one.txt > two.txt"
    deps: [one.txt]
    outs: [two.txt]
  three:
    op: exec
    cmd: "cat two.txt > three.txt"
    deps: [two.txt]
    outs: [three.txt]
  free:
    op: exec
    cmd: "echo free > free.txt"
    outs: [free.txt]
YAML
for verb in run dag status; do
    expect_exit 2 mr $verb
    assert_match "$T_ERR" "millrace\.yaml:[0-9]+:[0-9]+: .*cycle" "$verb: cycle error with file:line:col"
    assert_match "$T_ERR" "(one|two|three) <- (one|two|three) <- (one|two|three) <- (one|two|three)" "$verb: the cycle is printed"
    assert_not_contains "$T_ERR" "free" "$verb: the cycle does not list the stage outside it"
done
assert_no_file free.txt "a spec with a cycle runs nothing"

# Missing ${stages.x} reference (with and without a close name).
spec <<'YAML'
stages:
  generate:
    op: exec
    cmd: "echo x > g.txt"
    outs: [g.txt]
  use:
    op: exec
    cmd: "cat ${stages.generat} > u.txt"
    outs: [u.txt]
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:8:10:" "missing reference: file:line:col"
assert_contains "$T_ERR" "unknown stage 'generat'" "missing reference: names the stage"
assert_contains "$T_ERR" "did you mean" "missing reference: hint"
assert_contains "$T_ERR" "generate" "missing reference: hint names the close stage"
sed -i 's/stages.generat}/stages.zzz}/' millrace.yaml
expect_exit 2 mr run
assert_contains "$T_ERR" "unknown stage 'zzz'" "missing reference (no close name): named"

# Unknown param in -S, and in ${params.x}.
spec <<'YAML'
params:
  train: {lr: 0.5, rounds: 10}
stages:
  fit:
    op: exec
    cmd: "echo ${params.train.lr} > fit.txt"
    outs: [fit.txt]
YAML
expect_exit 2 mr run -S train.lrr=0.1
assert_contains "$T_ERR" "train.lrr" "-S unknown param: named"
assert_contains "$T_ERR" "did you mean 'train.lr'?" "-S unknown param: hint"
expect_exit 2 mr params -S train.lrr=0.1
assert_contains "$T_ERR" "did you mean 'train.lr'?" "params -S unknown param: hint"
expect_exit 2 mr run -S notakeyvalue
assert_contains "$T_ERR" "notakeyvalue" "-S without '=': usage error naming it"
expect_exit 0 mr params -S train.lr=0.25 --json
assert_eq "$(json 'd["train"]["lr"]')" "0.25" "params -S: typed override applies"
expect_exit 0 mr params -S +train.extra=3 --json
assert_eq "$(json 'd["train"]["extra"]')" "3" "params -S +key adds a new param"
sed -i 's/params.train.lr}/params.train.lrr}/' millrace.yaml
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:6:" "unknown \${params.x}: file:line"
assert_contains "$T_ERR" "did you mean 'params.train.lr'?" "unknown \${params.x}: hint"

# Bad type, and invalid YAML.
spec <<'YAML'
stages:
  fit:
    op: exec
    cmd: [1, 2]
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:4:" "bad type: file:line"
assert_contains "$T_ERR" "expected a string or a list of strings" "bad type: what was expected"
spec <<'YAML'
stages:
  fit: {op: exec, cmd: "true"
YAML
expect_exit 2 mr run
assert_match "$T_ERR" "millrace\.yaml:[0-9]+:[0-9]+: invalid YAML" "invalid YAML: file:line:col"

# Mistakes an op finds in its own definition are reported at load, before
# any stage runs: a prep stage ahead of the mistake never executes.
prep_stage='  prep:
    op: exec
    cmd: "printf '"'"'x,y\n1,0\n2,1\n'"'"' > data.csv"
    outs: [data.csv]'
spec <<YAML
stages:
$prep_stage
  model:
    op: train
    train: \${stages.prep}
    label: y
    params:
      objective: binary
      num_leafs: 31
YAML
for verb in run status dag params; do
    expect_exit 2 mr $verb
    assert_contains "$T_ERR" "millrace.yaml:12:7: stage 'model': unknown gbdt parameter 'num_leafs'" "$verb: a train param typo at its line:col"
    assert_contains "$T_ERR" "did you mean 'num_leaves'?" "$verb: the hint names the canonical parameter, not an alias"
done
assert_no_file data.csv "a spec mistake in a later stage runs no stage"
assert_eq "$(ls .millrace/logs 2>/dev/null | wc -l)" 0 "no run was started"
spec <<YAML
stages:
$prep_stage
  model:
    op: train
    train: \${stages.prep}
    label: y
    params: {objective: binary, num_leaves: many, learning_rate: 0.1}
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:10:45: stage 'model': parameter 'num_leaves': expected an integer, got \"many\"" "a param of the wrong type: line:col, expected, got"
spec <<YAML
stages:
$prep_stage
  model:
    op: train
    train: \${stages.prep}
    label: y
    params: {objective: binary, bagging_fraction: 1.5}
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:10:51: stage 'model': parameter 'bagging_fraction': expected a number in (0, 1], got \"1.5\"" "a param out of range"
spec <<YAML
stages:
$prep_stage
  model:
    op: train
    train: \${stages.prep}
    label: y
    model: forest
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:10:12: stage 'model': unknown model 'forest' (expected gbdt or linear)" "an unknown model kind"
# An output name that the referenced stage does not have: the error lists its outputs.
spec <<YAML
stages:
$prep_stage
  split:
    op: split
    input: \${stages.prep}
    parts: {train: 0.8, test: 0.2}
  model:
    op: train
    train: \${stages.split.trian}
    label: y
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:12:12: stage 'model': \${stages.split.trian}: stage 'split' (op split) has no output 'trian'" "unknown output name at its line:col"
assert_contains "$T_ERR" "did you mean '\${stages.split.train}'? its outputs: train, test" "the hint lists the outputs"
assert_no_file data.csv "an unknown output name runs no stage"

# Unknown top-level key, no spec at all.
spec <<'YAML'
stagez:
  fit: {op: exec, cmd: "true"}
YAML
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace.yaml:1:1:" "unknown top-level key: file:line:col"
assert_contains "$T_ERR" "did you mean 'stages'?" "unknown top-level key: hint"
empty=$(new_ws empty)
cd "$empty" || fail "cd"
expect_exit 2 mr run
assert_contains "$T_ERR" "millrace init" "no millrace.yaml: hint to run init"

t_done
